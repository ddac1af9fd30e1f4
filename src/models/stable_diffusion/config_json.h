#pragma once
// The configs of a diffusers pipeline folder, read with diffusers' and transformers' meanings and
// defaults: model_index.json (the pipeline class, which parts there are, force_zeros_for_empty_prompt),
// unet/, vae/, text_encoder[_2]/ config.json, scheduler/scheduler_config.json and
// tokenizer[_2]/tokenizer_config.json (the pad token). Fields whose other values change a network
// in ways config.h cannot say (block types, activations, class or LCM embeddings) are refused,
// naming the file and the field, rather than ignored.
#include <nlohmann/json.hpp>
#include <string>

#include "models/stable_diffusion/config.h"

namespace rf::stable_diffusion {

// Fails naming the folder where it is not an SD 1.x, 2.x or XL pipeline with every part it needs.
PipelineConfig read_pipeline_config(const std::string& folder);

// An AutoencoderKL config.json; the fields it leaves out keep `base`'s values (a VAE given apart
// from its pipeline keeps the pipeline's scaling factor unless its config says otherwise).
VaeConfig read_vae_config(const std::string& path, const VaeConfig& base);

// The fields of scheduler_config.json the samplers read; errors name `source`. Refuses
// trained_betas and rescale_betas_zero_snr, which change the training schedule itself.
SchedulerConfig scheduler_config_from_json(const nlohmann::json& config, const std::string& source);

}  // namespace rf::stable_diffusion
