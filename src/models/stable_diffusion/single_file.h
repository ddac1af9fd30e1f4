#pragma once
// Original single-file checkpoints (what A1111 and ComfyUI load): where each part sits, and the
// pipeline's config read from the tensors' shapes when no diffusers folder supplies one.
//
//   SD 1.x   model.diffusion_model.* (LDM UNet), first_stage_model.* (LDM VAE),
//            cond_stage_model.transformer.text_model.* (OpenAI CLIP-L in transformers' naming)
//   SD 2.x   cond_stage_model.model.* (OpenCLIP ViT-H, one resblock more than is run)
//   SDXL     conditioner.embedders.0.transformer.text_model.* (CLIP-L),
//            conditioner.embedders.1.model.* (OpenCLIP bigG with its text_projection),
//            model.diffusion_model.label_emb.* (the size and pooled-text embedding)
//
// Shapes tell the widths, depths and levels, not the attention heads (the projections are [C, C]
// however C is split). The published models' rule fills them in: SD 1.x has 8 heads at every level
// (num_heads 8 in its LDM config); SD 2.x and SDXL have heads of width 64 (num_head_channels 64),
// so channels / 64 heads; the CLIP text encoders have heads of width 64 too; at least 1 head. What
// no shape tells either comes from the published configs of the architecture: the scheduler
// (scaled_linear betas 0.00085..0.012 over 1000 steps, "leading" spacing, steps_offset 1;
// epsilon, except SD 2.x, which diffusers takes to be the v-prediction 768 model, and files
// marked by ComfyUI's empty `v_pred` tensor), norm groups 32 (or, where 32 does not divide every
// width, as in tiny test models, the most groups that do), the VAE's scaling factor (0.18215;
// SDXL 0.13025, whose VAE also needs fp32: force_upcast), SD 2.x's upcast attention, the
// tokenizers' padding (<|endoftext|> for OpenAI CLIP, "!" for OpenCLIP) and the sample sizes.
#include <string>

#include "models/stable_diffusion/config.h"
#include "models/stable_diffusion/expected_tensors.h"
#include "models/stable_diffusion/stored_tensors.h"

namespace rf::stable_diffusion {

struct SingleFileLayout {
  Architecture architecture = Architecture::sd1;
  std::string unet = "model.diffusion_model.";
  std::string vae = "first_stage_model.";
  std::string text_encoder;
  ClipNaming text_encoder_naming = ClipNaming::transformers;
  std::string text_encoder_2;  // SDXL's OpenCLIP encoder; empty for SD 1.x and 2.x
  bool has_vae = true;         // some files leave the VAE out, to be given with --vae
  bool v_prediction = false;   // ComfyUI's empty `v_pred` tensor
};

// The parts' prefixes, from the text encoders' (and fails for files of other architectures).
SingleFileLayout single_file_layout(const StoredTensors& file);

// Where a VAE file (--vae) keeps its tensors: encoder.* / decoder.* in the original or in
// diffusers' naming, with or without first_stage_model.
PartSource vae_file_source(StoredTensors& file);

// The pipeline's config from the file's shapes, and the architecture's published defaults.
PipelineConfig infer_config(const StoredTensors& file, const SingleFileLayout& layout);
// A VAE's widths, depth and blocks from its tensors; everything else from `base`.
VaeConfig infer_vae_config(const StoredTensors& file, const std::string& prefix, Naming naming, VaeConfig base);

}  // namespace rf::stable_diffusion
