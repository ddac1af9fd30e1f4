#include "models/stable_diffusion/single_file.h"

#include "util/error.h"

namespace rf::stable_diffusion {

namespace {

constexpr const char* kUnetProbe = "model.diffusion_model.input_blocks.0.0.weight";

// Files of architectures this loader does not read, told apart by the tensors diffusers' single-file
// loader looks for (with or without model.diffusion_model.), so the message can say what they are.
void refuse_other_architectures(const StoredTensors& file) {
  const auto has = [&](const char* name) {
    return file.find("", name) != nullptr || file.find("model.diffusion_model.", name) != nullptr;
  };
  if (has("edm_mean")) fail("{}: is a Playground v2.5 (EDM) checkpoint, which rocmforge does not run", file.source());
  if (has("joint_blocks.0.context_block.adaLN_modulation.1.bias")) {
    fail("{}: is a Stable Diffusion 3 checkpoint, which rocmforge does not run (SD 1.x, 2.x and XL only)",
         file.source());
  }
  if (has("double_blocks.0.img_attn.norm.key_norm.scale")) {
    fail("{}: is a FLUX checkpoint, which rocmforge does not run (SD 1.x, 2.x and XL only)", file.source());
  }
  if (file.find("", "conv_in.weight") && file.find("", "down_blocks.0.resnets.0.conv1.weight")) {
    fail("{}: is one part of a diffusers pipeline; open the pipeline's folder", file.source());
  }
  for (const auto& view : file.tensors()) {
    if (view.name.starts_with("lora_unet_") || view.name.starts_with("lora_te")) {
      fail("{}: is a LoRA, not a checkpoint", file.source());
    }
  }
  if (!file.find("", kUnetProbe)) {
    fail("{}: is not a Stable Diffusion 1.x, 2.x or XL checkpoint (unknown architecture: no {})", file.source(),
         kUnetProbe);
  }
}

}  // namespace

SingleFileLayout single_file_layout(const StoredTensors& file) {
  refuse_other_architectures(file);
  const auto has = [&](const std::string& prefix, const char* name) { return file.find(prefix, name) != nullptr; };
  SingleFileLayout layout;
  layout.has_vae = has(layout.vae, "encoder.conv_in.weight");
  layout.v_prediction = has("", "v_pred");
  if (has("conditioner.embedders.1.model.", "token_embedding.weight")) {
    layout.architecture = Architecture::sdxl;
    layout.text_encoder = "conditioner.embedders.0.transformer.";
    layout.text_encoder_2 = "conditioner.embedders.1.model.";
  } else if (has("conditioner.embedders.0.model.", "token_embedding.weight")) {
    fail("{}: is an SDXL refiner (one OpenCLIP text encoder), which rocmforge does not run", file.source());
  } else if (has("cond_stage_model.model.", "token_embedding.weight")) {
    layout.architecture = Architecture::sd2;
    layout.text_encoder = "cond_stage_model.model.";
    layout.text_encoder_naming = ClipNaming::open_clip;
  } else if (has("cond_stage_model.transformer.", "text_model.embeddings.token_embedding.weight")) {
    layout.architecture = Architecture::sd1;
    layout.text_encoder = "cond_stage_model.transformer.";
  } else {
    fail(
        "{}: has a UNet but no text encoder this loader knows: cond_stage_model.transformer.* (SD 1.x), "
        "cond_stage_model.model.* (SD 2.x) or conditioner.embedders.* (SDXL)",
        file.source());
  }
  return layout;
}

PartSource vae_file_source(StoredTensors& file) {
  for (const std::string prefix : {"", "first_stage_model."}) {
    if (file.find(prefix, "encoder.down.0.block.0.conv1.weight")) return {file, prefix, Naming::original};
    if (file.find(prefix, "encoder.down_blocks.0.resnets.0.conv1.weight")) return {file, prefix, Naming::diffusers};
  }
  fail(
      "{}: is not a VAE: it has neither encoder.down.0.block.0.conv1.weight (the original naming) nor "
      "encoder.down_blocks.0.resnets.0.conv1.weight (diffusers')",
      file.source());
}

}  // namespace rf::stable_diffusion
