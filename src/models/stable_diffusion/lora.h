#pragma once
// kohya/A1111 LoRA files applied to a checkpoint's parts: each module's W' = W + strength * (alpha /
// rank) * up @ down, merged in fp32 into a copy of that matrix alone, kept in its stored type, so a
// request with LoRAs costs the touched matrices, not another model. Modules are named as kohya names them: lora_unet_ with
// diffusers' module path (SD 1.x/2.x) or the original LDM/SGM one (SDXL), lora_te_ (lora_te1_ and
// lora_te2_ for SDXL's two encoders) with transformers' path, '.' written '_'.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "formats/tensor.h"
#include "models/stable_diffusion/config.h"

namespace rf::stable_diffusion {

struct LoraFile {
  std::string path;  // a .safetensors file
  double strength = 1.0;
};

class LoraSet {
 public:
  // The parts (their canonical views) with every LoRA merged in; fails naming the file for a module
  // the model does not have, a shape that does not fit, or a kind of network other than LoRA.
  LoraSet(const PipelineConfig& config, const TensorSet& unet, const TensorSet& text_encoder,
          const TensorSet* text_encoder_2, const std::vector<LoraFile>& loras);
  ~LoraSet();
  // Fails as the constructor would for `lora` (not a LoRA, a module the model lacks, a shape that
  // does not fit) without merging anything: a cheap check before a job is queued.
  static void check(const PipelineConfig& config, const TensorSet& unet, const TensorSet& text_encoder,
                    const TensorSet* text_encoder_2, const LoraFile& lora);

  const TensorSet& unet() const { return unet_; }
  const TensorSet& text_encoder() const { return text_encoder_; }
  const TensorSet* text_encoder_2() const { return text_encoder_2_.empty() ? nullptr : &text_encoder_2_; }
  int merged_modules() const { return merged_; }

 private:
  TensorSet unet_, text_encoder_, text_encoder_2_;
  std::vector<std::vector<std::uint8_t>> merged_weights_;  // what the replaced views point into
  int merged_ = 0;
};

}  // namespace rf::stable_diffusion
