#include "models/stable_diffusion/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "formats/safetensors.h"
#include "models/stable_diffusion/config_json.h"
#include "models/stable_diffusion/expected_tensors.h"
#include "models/stable_diffusion/single_file.h"
#include "models/stable_diffusion/stored_tensors.h"
#include "util/error.h"

namespace rf::stable_diffusion {

// The open files the parts' views point into, and the tensors that had to be copied.
class CheckpointFiles {
 public:
  StoredTensors& keep(std::unique_ptr<StoredTensors> stored) {
    stored_.push_back(std::move(stored));
    return *stored_.back();
  }
  const std::vector<std::unique_ptr<StoredTensors>>& stored() const { return stored_; }
  OwnedTensors& owned() { return owned_; }

 private:
  std::vector<std::unique_ptr<StoredTensors>> stored_;
  OwnedTensors owned_;
};

namespace {

namespace fs = std::filesystem;

// Where each part's tensors are, once the config is known.
struct Plan {
  Plan(PipelineConfig c, CheckpointLayout l) : config(std::move(c)), layout(l) {}
  PipelineConfig config;
  CheckpointLayout layout;
  std::optional<PartSource> unet, vae, text_encoder, text_encoder_2;
  ClipNaming text_encoder_naming = ClipNaming::transformers;
  std::vector<fs::path> vocab;  // folders that may hold CLIP's vocab.json and merges.txt, in order
};

Plan plan_folder(const std::string& path, const OpenOptions& options, CheckpointFiles& files) {
  Plan plan(read_pipeline_config(options.config.empty() ? path : options.config), CheckpointLayout::diffusers_folder);
  const fs::path dir(path);
  const auto part = [&](const char* name) {
    return PartSource{files.keep(StoredTensors::folder((dir / name).string())), "", Naming::diffusers};
  };
  plan.unet.emplace(part("unet"));
  if (options.vae.empty()) plan.vae.emplace(part("vae"));
  plan.text_encoder.emplace(part("text_encoder"));
  if (plan.config.text_encoder_2) plan.text_encoder_2.emplace(part("text_encoder_2"));
  plan.vocab = {dir / "tokenizer"};
  return plan;
}

Plan plan_single_file(const std::string& path, const OpenOptions& options, CheckpointFiles& files) {
  auto& file = files.keep(StoredTensors::file(path));
  const auto layout = single_file_layout(file);
  Plan plan(options.config.empty() ? infer_config(file, layout) : read_pipeline_config(options.config),
            CheckpointLayout::single_file);
  if (plan.config.architecture != layout.architecture) {
    fail("{}: is an {} checkpoint, but the configs of {} are {}'s", path, architecture_name(layout.architecture),
         options.config, architecture_name(plan.config.architecture));
  }
  // ComfyUI marks v-prediction files; the mark is the file's own, so it outranks a generic config.
  if (layout.v_prediction) plan.config.scheduler.prediction = Prediction::v;
  plan.unet.emplace(PartSource{file, layout.unet, Naming::original});
  if (options.vae.empty()) {
    if (!layout.has_vae) fail("{}: holds no VAE ({}*); give one with --vae", path, layout.vae);
    plan.vae.emplace(PartSource{file, layout.vae, Naming::original});
  }
  plan.text_encoder.emplace(PartSource{file, layout.text_encoder, Naming::original});
  plan.text_encoder_naming = layout.text_encoder_naming;
  if (!layout.text_encoder_2.empty()) {
    plan.text_encoder_2.emplace(PartSource{file, layout.text_encoder_2, Naming::original});
  }
  return plan;
}

// A VAE given apart (--vae): a diffusers VAE folder (or a whole pipeline's), or a file in either naming.
void plan_vae(const std::string& path, Plan& plan, CheckpointFiles& files) {
  if (!fs::exists(path)) fail("{}: no such VAE file or folder", path);
  if (!fs::is_directory(path)) {
    auto source = vae_file_source(files.keep(StoredTensors::file(path)));
    plan.config.vae = infer_vae_config(source.stored, source.prefix, source.naming, plan.config.vae);
    plan.vae.emplace(source);
    return;
  }
  auto dir = fs::path(path);
  if (fs::exists(dir / "model_index.json")) dir /= "vae";
  if (!fs::exists(dir / "config.json")) fail("{}: has no config.json: not a diffusers VAE folder", dir.string());
  plan.config.vae = read_vae_config((dir / "config.json").string(), plan.config.vae);
  plan.vae.emplace(PartSource{files.keep(StoredTensors::folder(dir.string())), "", Naming::diffusers});
}

// The first folder with vocab.json and merges.txt: the checkpoint's tokenizer/, the config
// folder's, then OpenOptions::clip_vocab.
std::string vocab_folder(std::vector<fs::path> candidates, const OpenOptions& options, const std::string& source) {
  if (!options.config.empty()) candidates.push_back(fs::path(options.config) / "tokenizer");
  if (!options.clip_vocab.empty()) candidates.emplace_back(options.clip_vocab);
  for (const auto& folder : candidates) {
    if (fs::exists(folder / "vocab.json") && fs::exists(folder / "merges.txt")) return folder.string();
  }
  fail("{}: comes without CLIP's vocab.json and merges.txt{}; give a folder with them (rocmforge ships models/clip)",
       source, options.clip_vocab.empty() ? "" : ", nor has " + options.clip_vocab);
}

PartSummary summarize(std::string name, const PartSource& from, const TensorSet& tensors) {
  PartSummary part;
  part.name = std::move(name);
  part.source = from.stored.source();
  part.tensors = tensors.size();
  for (const auto& view : tensors) {
    part.parameters += view.elements();
    part.bytes += view.bytes;
    part.dtype_bytes[view.dtype] += view.bytes;
  }
  return part;
}

}  // namespace

bool is_stable_diffusion(const std::string& path) {
  if (fs::is_directory(path)) return fs::exists(fs::path(path) / "model_index.json");
  if (!path.ends_with(".safetensors") || !fs::is_regular_file(path)) return false;
  const SafetensorsFile file(path, OtherDTypes::skip);
  return std::ranges::any_of(file.tensors(), [](const auto& t) { return t.first.starts_with("model.diffusion_model."); });
}

Checkpoint::Checkpoint() : files_(std::make_unique<CheckpointFiles>()) {}
Checkpoint::~Checkpoint() = default;
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;

Checkpoint Checkpoint::open(const std::string& path, const OpenOptions& options) {
  if (!fs::exists(path)) fail("{}: no such file or folder", path);
  Checkpoint c;
  c.source_ = path;
  auto plan =
      fs::is_directory(path) ? plan_folder(path, options, *c.files_) : plan_single_file(path, options, *c.files_);
  if (!options.vae.empty()) plan_vae(options.vae, plan, *c.files_);
  if (options.prediction) plan.config.scheduler.prediction = *options.prediction;
  check_config(plan.config, path);

  auto& owned = c.files_->owned();
  const auto& config = plan.config;
  c.unet_ = collect_part(unet_parameters(config.unet), *plan.unet, "UNet", owned);
  c.vae_ = collect_part(vae_parameters(config.vae), *plan.vae, "VAE", owned);
  c.text_encoder_ = collect_part(clip_parameters(config.text_encoder, plan.text_encoder_naming), *plan.text_encoder,
                                 "text encoder", owned);
  c.summary_.source = path;
  c.summary_.layout = plan.layout;
  c.summary_.architecture = config.architecture;
  c.summary_.parts = {summarize("unet", *plan.unet, c.unet_), summarize("vae", *plan.vae, c.vae_),
                      summarize("text_encoder", *plan.text_encoder, c.text_encoder_)};
  if (plan.text_encoder_2) {
    c.text_encoder_2_ = collect_part(clip_parameters(*config.text_encoder_2, ClipNaming::open_clip),
                                     *plan.text_encoder_2, "second text encoder", owned);
    c.summary_.parts.push_back(summarize("text_encoder_2", *plan.text_encoder_2, *c.text_encoder_2_));
  }
  for (const auto& stored : c.files_->stored()) c.summary_.unused_tensors += stored->unused();
  c.tokenizer_ = std::make_unique<ClipTokenizer>(ClipTokenizer::from_folder(vocab_folder(plan.vocab, options, path)));
  c.config_ = std::move(plan.config);
  return c;
}

}  // namespace rf::stable_diffusion
