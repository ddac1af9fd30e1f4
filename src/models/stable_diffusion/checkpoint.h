#pragma once
// A Stable Diffusion checkpoint as the forwards read it, whatever is on disk: a diffusers pipeline
// folder (config_json.h) or an original single .safetensors file (single_file.h), with an optional
// separate VAE. Each part's tensors are presented under diffusers' and transformers' names
// (parameters.h lists them), every one checked against the shape its config implies, so the
// forwards can trust the set; the views point into the files' memory maps, which stay open as long
// as the Checkpoint lives (only OpenCLIP's transposed text_projection is copied).
//
// Pickles (.ckpt, .pt, .pth, .bin) are refused, never unpickled; so are GGUF files (not yet).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "formats/tensor.h"
#include "models/stable_diffusion/config.h"
#include "tokenizer/clip_tokenizer.h"

namespace rf::stable_diffusion {

class CheckpointFiles;

struct OpenOptions {
  // A separate VAE: a file in the original or diffusers' naming, or a diffusers folder; empty: the checkpoint's.
  std::string vae;
  // A diffusers pipeline folder whose configs replace the checkpoint's own (a single file's shapes),
  // as diffusers' from_single_file(config=...).
  std::string config;
  std::optional<Prediction> prediction;  // overrides the scheduler's prediction type
  std::string clip_vocab;                // a folder with CLIP's vocab.json and merges.txt, for checkpoints without them
};

enum class CheckpointLayout { diffusers_folder, single_file };

// Whether `path` is a Stable Diffusion checkpoint rather than another model: a folder with a
// model_index.json, or a .safetensors file holding an original UNet (model.diffusion_model.*).
bool is_stable_diffusion(const std::string& path);

// One part's tensors, for `rocmforge info`.
struct PartSummary {
  std::string name;    // "unet", "vae", "text_encoder", "text_encoder_2" (the diffusers folder names)
  std::string source;  // the file or folder its tensors come from
  std::size_t tensors = 0;
  std::uint64_t parameters = 0;
  std::uint64_t bytes = 0;
  std::map<DType, std::uint64_t> dtype_bytes;  // stored bytes by type
};

struct CheckpointSummary {
  std::string source;
  CheckpointLayout layout = CheckpointLayout::diffusers_folder;
  Architecture architecture = Architecture::sd1;
  std::vector<PartSummary> parts;
  // Tensors of the files that no part reads: EMA copies, CLIP position_ids, SD 2.x's last resblock.
  std::size_t unused_tensors = 0;
};

class Checkpoint {
 public:
  // A diffusers pipeline folder or a single .safetensors file; throws rf::Error naming what is
  // wrong (a missing part or tensor, a shape, an unknown architecture, a pickle).
  static Checkpoint open(const std::string& path, const OpenOptions& options = {});
  ~Checkpoint();
  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;

  const PipelineConfig& config() const { return config_; }
  const TensorSet& unet() const { return unet_; }
  const TensorSet& vae() const { return vae_; }
  const TensorSet& text_encoder() const { return text_encoder_; }
  const TensorSet* text_encoder_2() const { return text_encoder_2_ ? &*text_encoder_2_ : nullptr; }  // SDXL only
  // SDXL's two tokenizers share the vocabulary; their padding is in the ClipTextConfigs.
  const ClipTokenizer& tokenizer() const { return *tokenizer_; }
  const std::string& source() const { return source_; }
  const CheckpointSummary& summary() const { return summary_; }

 private:
  Checkpoint();

  std::string source_;
  PipelineConfig config_;
  std::unique_ptr<CheckpointFiles> files_;  // the maps and copies the views point into
  TensorSet unet_, vae_, text_encoder_;
  std::optional<TensorSet> text_encoder_2_;
  std::unique_ptr<ClipTokenizer> tokenizer_;
  CheckpointSummary summary_;
};

}  // namespace rf::stable_diffusion
