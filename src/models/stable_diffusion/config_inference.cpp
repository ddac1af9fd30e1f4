// A single file's config from its shapes (single_file.h says what shapes cannot tell, and how
// that is filled in).
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "models/stable_diffusion/single_file.h"
#include "util/error.h"

namespace rf::stable_diffusion {

namespace {

// The shapes of the tensors below one prefix of a file; errors name the file and the tensor.
class Shapes {
 public:
  Shapes(const StoredTensors& file, std::string prefix) : file_(file), prefix_(std::move(prefix)) {}

  const std::string& source() const { return file_.source(); }
  bool has(const std::string& name) const { return file_.find(prefix_, name) != nullptr; }

  const TensorView& at(const std::string& name) const {
    if (const auto* view = file_.find(prefix_, name)) return *view;
    fail("{}: has no tensor {}{}", file_.source(), prefix_, name);
  }

  int dim(const std::string& name, int d) const {
    const auto& view = at(name);
    if (d >= view.n_dims || view.shape[d] > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
      fail("{}: tensor {} has shape {}, expected {} dimensions or more", file_.source(), view.name, view.shape_string(),
           d + 1);
    }
    return static_cast<int>(view.shape[d]);
  }

  // How many of name(0), name(1), ... the file holds, counting from 0 until one is missing.
  template <typename Name>
  int count(Name name) const {
    int n = 0;
    while (has(name(n))) ++n;
    return n;
  }

 private:
  const StoredTensors& file_;
  std::string prefix_;
};

// GroupNorm's 32 groups as published, or where 32 does not divide every width (tiny test models),
// the most groups that do.
int norm_groups(const std::vector<int>& widths) {
  int common = 0;
  for (const int w : widths) common = std::gcd(common, w);
  int groups = 32;
  while (groups > 1 && common % groups != 0) --groups;
  return groups;
}

int unet_heads(Architecture architecture, int channels) {
  return architecture == Architecture::sd1 ? 8 : std::max(1, channels / 64);
}

// In latents: 512 px for SD 1.x, 768 for SD 2.x's v models (512 for its epsilon base), 1024 for SDXL.
int published_sample_size(Architecture architecture, Prediction prediction) {
  if (architecture == Architecture::sdxl) return 128;
  return architecture == Architecture::sd2 && prediction == Prediction::v ? 96 : 64;
}

int transformer_depth(const Shapes& s, const std::string& block) {
  return s.count([&](int k) { return fmt::format("{}.transformer_blocks.{}.norm1.weight", block, k); });
}

// The levels from LDM's input blocks: ResNets (.0.in_layers), each maybe followed by a spatial
// transformer (.1), up to the downsampler (.0.op) that closes a level; the last level has none.
void infer_unet_levels(const Shapes& s, Architecture architecture, UnetConfig& c) {
  for (int block = 1;; ++block) {
    UnetLevel level;
    int resnets = 0;
    for (; s.has(fmt::format("input_blocks.{}.0.in_layers.2.weight", block)); ++block, ++resnets) {
      level.channels = s.dim(fmt::format("input_blocks.{}.0.in_layers.2.weight", block), 0);
      const auto attention = fmt::format("input_blocks.{}.1", block);
      level.attention = s.has(attention + ".proj_in.weight");
      if (level.attention) level.transformer_depth = transformer_depth(s, attention);
    }
    if (resnets == 0) fail("{}: the UNet has no ResNet at input_blocks.{}", s.source(), block);
    if (c.levels.empty()) c.layers_per_block = resnets;
    if (resnets != c.layers_per_block) {
      fail("{}: the UNet's levels have {} and {} ResNets; rocmforge reads UNets with one count for all", s.source(),
           c.layers_per_block, resnets);
    }
    level.heads = unet_heads(architecture, level.channels);
    c.levels.push_back(level);
    if (!s.has(fmt::format("input_blocks.{}.0.op.weight", block))) return;
  }
}

UnetConfig infer_unet(const Shapes& s, const PipelineConfig& pipeline) {
  UnetConfig c;
  c.in_channels = s.dim("input_blocks.0.0.weight", 1);
  c.out_channels = s.dim("out.2.weight", 0);
  infer_unet_levels(s, pipeline.architecture, c);
  std::vector<int> widths;
  for (const auto& level : c.levels) widths.push_back(level.channels);
  c.norm_groups = norm_groups(widths);
  c.mid_transformer_depth = transformer_depth(s, "middle_block.1");
  c.mid_heads = unet_heads(pipeline.architecture, c.levels.back().channels);
  c.cross_attention_dim = s.dim("middle_block.1.transformer_blocks.0.attn2.to_k.weight", 1);
  c.linear_projection = s.at("middle_block.1.proj_in.weight").n_dims == 2;
  c.upcast_attention = pipeline.architecture == Architecture::sd2;
  if (s.has("label_emb.0.0.weight")) {
    // SDXL's add_embedding reads the pooled text embedding and six size ids, each as sinusoids.
    c.text_time_embedding = true;
    c.addition_embed_input_dim = s.dim("label_emb.0.0.weight", 1);
    const int pooled = pipeline.text_encoder_2 ? pipeline.text_encoder_2->projection_dim : 0;
    c.addition_time_embed_dim = (c.addition_embed_input_dim - pooled) / 6;
  }
  c.sample_size = published_sample_size(pipeline.architecture, pipeline.scheduler.prediction);
  return c;
}

ClipTextConfig infer_clip(const Shapes& s, ClipNaming naming) {
  const bool open_clip = naming == ClipNaming::open_clip;
  const std::string token = open_clip ? "token_embedding.weight" : "text_model.embeddings.token_embedding.weight";
  ClipTextConfig c;
  c.vocab_size = s.dim(token, 0);
  c.hidden = s.dim(token, 1);
  c.max_positions = s.dim(open_clip ? "positional_embedding" : "text_model.embeddings.position_embedding.weight", 0);
  c.layers = s.count([&](int i) {
    return open_clip ? fmt::format("transformer.resblocks.{}.ln_1.weight", i)
                     : fmt::format("text_model.encoder.layers.{}.layer_norm1.weight", i);
  });
  c.intermediate =
      s.dim(open_clip ? "transformer.resblocks.0.mlp.c_fc.weight" : "text_model.encoder.layers.0.mlp.fc1.weight", 0);
  c.heads = std::max(1, c.hidden / 64);
  c.quick_gelu = !open_clip;
  c.padding = open_clip ? ClipPadding::Zero : ClipPadding::EndOfText;
  return c;
}

SchedulerConfig published_scheduler(Prediction prediction) {
  SchedulerConfig c;
  c.train_timesteps = 1000;
  c.beta_schedule = BetaSchedule::scaled_linear;
  c.beta_start = 0.00085;
  c.beta_end = 0.012;
  c.prediction = prediction;
  c.spacing = Spacing::leading;
  c.steps_offset = 1;
  c.set_alpha_to_one = false;
  return c;
}

VaeConfig published_vae(Architecture architecture, int unet_sample_size) {
  VaeConfig c;
  c.scaling_factor = architecture == Architecture::sdxl ? 0.13025f : 0.18215f;
  c.force_upcast = architecture == Architecture::sdxl;
  c.sample_size = unet_sample_size * 8;
  return c;
}

}  // namespace

VaeConfig infer_vae_config(const StoredTensors& file, const std::string& prefix, Naming naming, VaeConfig c) {
  const Shapes s(file, prefix);
  const bool original = naming == Naming::original;
  const auto conv1 = [&](int level, int block) {
    return original ? fmt::format("encoder.down.{}.block.{}.conv1.weight", level, block)
                    : fmt::format("encoder.down_blocks.{}.resnets.{}.conv1.weight", level, block);
  };
  const int levels = s.count([&](int i) { return conv1(i, 0); });
  if (levels == 0) fail("{}: has no VAE encoder (no tensor {}{})", file.source(), prefix, conv1(0, 0));
  c.block_out_channels.clear();
  for (int i = 0; i < levels; ++i) c.block_out_channels.push_back(s.dim(conv1(i, 0), 0));
  c.layers_per_block = s.count([&](int j) { return conv1(0, j); });
  c.norm_groups = norm_groups(c.block_out_channels);
  c.in_channels = s.dim("encoder.conv_in.weight", 1);
  c.latent_channels = s.dim("decoder.conv_in.weight", 1);
  c.out_channels = s.dim("decoder.conv_out.weight", 0);
  c.mid_attention =
      s.has(original ? "encoder.mid.attn_1.norm.weight" : "encoder.mid_block.attentions.0.group_norm.weight");
  c.quant_conv = s.has("quant_conv.weight");
  return c;
}

PipelineConfig infer_config(const StoredTensors& file, const SingleFileLayout& layout) {
  PipelineConfig c;
  c.architecture = layout.architecture;
  c.text_encoder = infer_clip(Shapes(file, layout.text_encoder), layout.text_encoder_naming);
  if (c.architecture == Architecture::sd2) {
    // SD 2.x conditions on the penultimate resblock's output: diffusers drops the last resblock.
    if (c.text_encoder.layers < 2) {
      fail("{}: SD 2.x's text encoder has {} resblocks, expected at least 2", file.source(), c.text_encoder.layers);
    }
    --c.text_encoder.layers;
  }
  if (!layout.text_encoder_2.empty()) {
    const Shapes s(file, layout.text_encoder_2);
    c.text_encoder_2 = infer_clip(s, ClipNaming::open_clip);
    c.text_encoder_2->projection_dim = s.dim("text_projection", 1);  // stored [hidden, projection]
  }
  c.scheduler = published_scheduler(layout.v_prediction || c.architecture == Architecture::sd2 ? Prediction::v
                                                                                               : Prediction::epsilon);
  c.unet = infer_unet(Shapes(file, layout.unet), c);
  c.vae = published_vae(c.architecture, c.unet.sample_size);
  if (layout.has_vae) c.vae = infer_vae_config(file, layout.vae, Naming::original, c.vae);
  c.force_zeros_for_empty_prompt = c.architecture == Architecture::sdxl;
  return c;
}

}  // namespace rf::stable_diffusion
