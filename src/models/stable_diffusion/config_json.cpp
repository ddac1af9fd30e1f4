#include "models/stable_diffusion/config_json.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "formats/json_file.h"
#include "util/error.h"
#include "util/numeric_fit.h"

namespace rf::stable_diffusion {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// One config's fields, each checked for its type; errors name the file and the field.
class JsonFields {
 public:
  JsonFields(json doc, std::string source) : doc_(std::move(doc)), source_(std::move(source)) {
    if (!doc_.is_object()) fail("{}: is not a JSON object", source_);
  }

  static JsonFields read(const std::string& path) { return {read_json_file(path), path}; }

  const std::string& source() const { return source_; }

  // Null where the field is absent or null, which diffusers reads as its default.
  const json* find(const char* key) const {
    const auto it = doc_.find(key);
    return it == doc_.end() || it->is_null() ? nullptr : &*it;
  }

  int integer(const char* key, std::optional<int> fallback = {}) const {
    const json* v = present(key, fallback.has_value());
    return v ? as_int(*v, key) : *fallback;
  }

  double number(const char* key, double fallback) const {
    const json* v = find(key);
    if (v && !v->is_number()) fail("{}: \"{}\" is {}, expected a number", source_, key, v->dump());
    return v ? v->get<double>() : fallback;
  }

  float float_number(const char* key, float fallback) const {
    const double x = number(key, fallback);
    if (!fits_in<float>(x)) fail("{}: \"{}\" is {}, beyond a 32-bit float's range", source_, key, x);
    return static_cast<float>(x);
  }

  bool boolean(const char* key, bool fallback) const {
    const json* v = find(key);
    if (v && !v->is_boolean()) fail("{}: \"{}\" is {}, expected true or false", source_, key, v->dump());
    return v ? v->get<bool>() : fallback;
  }

  std::string string(const char* key, std::optional<std::string> fallback = {}) const {
    const json* v = present(key, fallback.has_value());
    if (v && !v->is_string()) fail("{}: \"{}\" is {}, expected a string", source_, key, v->dump());
    return v ? v->get<std::string>() : *fallback;
  }

  // The field's name parsed by `parse` (schedule.h's parse_*), whose error is put in context.
  template <typename Parse>
  auto choice(const char* key, const char* fallback, Parse parse) const {
    const auto name = string(key, fallback);
    try {
      return parse(name);
    } catch (const Error& e) {
      fail("{}: \"{}\": {}", source_, key, e.what());
    }
  }

  // A list of integers (required), or, where `levels` is given, one integer for every level too:
  // diffusers takes both for its per-block fields.
  std::vector<int> integers(const char* key, std::optional<std::size_t> levels = {},
                            std::optional<int> fallback = {}) const {
    const json* v = present(key, fallback.has_value());
    if (!v) return std::vector<int>(*levels, *fallback);
    if (v->is_number_integer() && levels) return std::vector<int>(*levels, as_int(*v, key));
    if (!v->is_array()) fail("{}: \"{}\" is {}, expected a list of integers", source_, key, v->dump());
    std::vector<int> values;
    for (const auto& item : *v) values.push_back(as_int(item, key));
    if (levels && values.size() != *levels) {
      fail("{}: \"{}\" has {} entries for {} levels", source_, key, values.size(), *levels);
    }
    return values;
  }

  std::vector<std::string> strings(const char* key) const {
    const json* v = present(key, false);
    if (!v->is_array()) fail("{}: \"{}\" is {}, expected a list of names", source_, key, v->dump());
    std::vector<std::string> values;
    for (const auto& item : *v) {
      if (!item.is_string()) fail("{}: \"{}\" holds {}, expected names", source_, key, item.dump());
      values.push_back(item.get<std::string>());
    }
    return values;
  }

  // The field, where set, must be `value`: another changes the network in a way rocmforge does not run.
  void expect(const char* key, const json& value) const {
    const json* v = find(key);
    if (v && *v != value) fail("{}: \"{}\" is {}; rocmforge runs only {}", source_, key, v->dump(), value.dump());
  }

 private:
  const json* present(const char* key, bool optional) const {
    const json* v = find(key);
    if (!v && !optional) fail("{}: has no \"{}\"", source_, key);
    return v;
  }

  int as_int(const json& v, const char* key) const {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > (1 << 30)) {
      fail("{}: \"{}\" holds {}, expected a non-negative integer", source_, key, v.dump());
    }
    return v.get<int>();
  }

  json doc_;
  std::string source_;
};

// UNet2DConditionModel fields whose other values make a network UnetConfig cannot describe.
void expect_plain_unet(const JsonFields& f) {
  static const std::pair<const char*, json> fixed[] = {
      {"act_fn", "silu"},
      {"mid_block_type", "UNetMidBlock2DCrossAttn"},
      {"time_embedding_type", "positional"},
      {"time_embedding_dim", nullptr},
      {"time_embedding_act_fn", nullptr},
      {"timestep_post_act", nullptr},
      {"time_cond_proj_dim", nullptr},  // LCM's guidance embedding
      {"class_embed_type", nullptr},
      {"num_class_embeds", nullptr},
      {"encoder_hid_dim", nullptr},
      {"encoder_hid_dim_type", nullptr},
      {"resnet_time_scale_shift", "default"},
      {"resnet_skip_time_act", false},
      {"resnet_out_scale_factor", 1.0},
      {"mid_block_scale_factor", 1},
      {"downsample_padding", 1},
      {"conv_in_kernel", 3},
      {"conv_out_kernel", 3},
      {"center_input_sample", false},
      {"dual_cross_attention", false},
      {"only_cross_attention", false},
      {"cross_attention_norm", nullptr},
      {"attention_type", "default"},
      {"reverse_transformer_layers_per_block", nullptr},
  };
  for (const auto& [key, value] : fixed) f.expect(key, value);
}

// Whether a down block type carries attention; fails for types other than SD's two.
bool cross_attention_block(const JsonFields& f, const std::string& type, const char* with, const char* without) {
  if (type == with) return true;
  if (type == without) return false;
  fail("{}: has block type {}; rocmforge runs {} and {}", f.source(), type, with, without);
}

void read_unet_levels(const JsonFields& f, UnetConfig& c) {
  const auto widths = f.integers("block_out_channels");
  const auto down = f.strings("down_block_types");
  const auto up = f.strings("up_block_types");
  const auto levels = widths.size();
  if (down.size() != levels || up.size() != levels) {
    fail("{}: has {} widths, {} down blocks and {} up blocks", f.source(), levels, down.size(), up.size());
  }
  // diffusers' historic naming: without num_attention_heads, attention_head_dim is the head count.
  const auto heads =
      f.integers(f.find("num_attention_heads") ? "num_attention_heads" : "attention_head_dim", levels, 8);
  const auto depths = f.integers("transformer_layers_per_block", levels, 1);
  const auto layers = f.integers("layers_per_block", levels, 2);
  if (std::ranges::count(layers, layers[0]) != static_cast<std::ptrdiff_t>(levels)) {
    fail("{}: \"layers_per_block\" differs between levels; rocmforge reads UNets with one count for all", f.source());
  }
  for (std::size_t i = 0; i < levels; ++i) {
    const bool attention = cross_attention_block(f, down[i], "CrossAttnDownBlock2D", "DownBlock2D");
    if (attention != cross_attention_block(f, up[levels - 1 - i], "CrossAttnUpBlock2D", "UpBlock2D")) {
      fail("{}: up block {} ({}) does not mirror down block {} ({})", f.source(), levels - 1 - i, up[levels - 1 - i], i,
           down[i]);
    }
    c.levels.push_back({widths[i], attention, depths[i], heads[i]});
  }
  c.layers_per_block = layers[0];
  c.mid_transformer_depth = depths.back();  // the mid block is as deep and has as many heads as the last level
  c.mid_heads = heads.back();
}

UnetConfig read_unet_config(const JsonFields& f) {
  expect_plain_unet(f);
  UnetConfig c;
  read_unet_levels(f, c);
  c.in_channels = f.integer("in_channels", 4);
  c.out_channels = f.integer("out_channels", 4);
  c.cross_attention_dim = f.integer("cross_attention_dim", 1280);
  c.linear_projection = f.boolean("use_linear_projection", false);
  c.upcast_attention = f.boolean("upcast_attention", false);
  c.norm_groups = f.integer("norm_num_groups", 32);
  c.norm_eps = f.float_number("norm_eps", 1e-5);
  c.flip_sin_to_cos = f.boolean("flip_sin_to_cos", true);
  c.freq_shift = f.float_number("freq_shift", 0);
  c.sample_size = f.integer("sample_size", c.sample_size);
  if (f.find("addition_embed_type")) {
    f.expect("addition_embed_type", "text_time");
    c.text_time_embedding = true;
    c.addition_time_embed_dim = f.integer("addition_time_embed_dim");
    c.addition_embed_input_dim = f.integer("projection_class_embeddings_input_dim");
  }
  return c;
}

// Every entry of a VAE's block list must be `type`, one per level.
void expect_blocks(const JsonFields& f, const char* key, const std::string& type, std::size_t levels) {
  if (!f.find(key)) return;
  const auto blocks = f.strings(key);
  if (blocks.size() != levels || std::ranges::count(blocks, type) != static_cast<std::ptrdiff_t>(levels)) {
    fail("{}: \"{}\" must be {} {} blocks, one per level", f.source(), key, levels, type);
  }
}

VaeConfig read_vae(const JsonFields& f, VaeConfig c) {
  f.expect("act_fn", "silu");
  f.expect("latents_mean", nullptr);
  f.expect("latents_std", nullptr);
  if (f.find("block_out_channels")) c.block_out_channels = f.integers("block_out_channels");
  expect_blocks(f, "down_block_types", "DownEncoderBlock2D", c.block_out_channels.size());
  expect_blocks(f, "up_block_types", "UpDecoderBlock2D", c.block_out_channels.size());
  c.in_channels = f.integer("in_channels", c.in_channels);
  c.out_channels = f.integer("out_channels", c.out_channels);
  c.latent_channels = f.integer("latent_channels", c.latent_channels);
  c.layers_per_block = f.integer("layers_per_block", c.layers_per_block);
  c.norm_groups = f.integer("norm_num_groups", c.norm_groups);
  c.mid_attention = f.boolean("mid_block_add_attention", c.mid_attention);
  c.quant_conv = f.boolean("use_quant_conv", c.quant_conv);
  if (f.boolean("use_post_quant_conv", c.quant_conv) != c.quant_conv) {
    fail("{}: use_quant_conv and use_post_quant_conv differ; rocmforge runs VAEs with both or neither", f.source());
  }
  c.scaling_factor = f.float_number("scaling_factor", c.scaling_factor);
  c.shift_factor = f.float_number("shift_factor", c.shift_factor);
  c.force_upcast = f.boolean("force_upcast", c.force_upcast);
  c.sample_size = f.integer("sample_size", c.sample_size);
  return c;
}

// AutoencoderKL's own defaults, for the fields a pipeline's vae/config.json leaves out.
VaeConfig autoencoder_kl_defaults() {
  VaeConfig c;
  c.block_out_channels = {64};
  c.layers_per_block = 1;
  c.force_upcast = true;
  c.sample_size = 32;
  return c;
}

// CLIPTextConfig's defaults where a field is absent.
ClipTextConfig read_clip_config(const JsonFields& f, bool projection, ClipPadding padding) {
  ClipTextConfig c;
  c.vocab_size = f.integer("vocab_size", 49408);
  c.hidden = f.integer("hidden_size", 512);
  c.layers = f.integer("num_hidden_layers", 12);
  c.heads = f.integer("num_attention_heads", 8);
  c.intermediate = f.integer("intermediate_size", 2048);
  c.max_positions = f.integer("max_position_embeddings", 77);
  c.layer_norm_eps = f.float_number("layer_norm_eps", 1e-5);
  const auto activation = f.string("hidden_act", "quick_gelu");
  if (activation != "quick_gelu" && activation != "gelu") {
    fail("{}: \"hidden_act\" is {}; rocmforge runs quick_gelu and gelu", f.source(), activation);
  }
  c.quick_gelu = activation == "quick_gelu";
  c.projection_dim = projection ? f.integer("projection_dim", 512) : 0;
  // Configs written before transformers 4.31 say eos_token_id 2, for which transformers pools at
  // the highest id in the prompt: in CLIP's vocabulary, the first <|endoftext|> (the last id).
  const int eos = f.integer("eos_token_id", 49407);
  c.eos_token = eos == 2 ? c.vocab_size - 1 : eos;
  c.padding = padding;
  return c;
}

// tokenizer_config.json's pad_token (a string, or an AddedToken object with its "content");
// CLIPTokenizer pads with <|endoftext|> where the file or the field is absent.
ClipPadding read_padding(const std::string& path) {
  if (!fs::exists(path)) return ClipPadding::EndOfText;
  const auto f = JsonFields::read(path);
  const json* pad = f.find("pad_token");
  if (pad && pad->is_object() && pad->contains("content")) pad = &(*pad)["content"];
  if (!pad || *pad == "<|endoftext|>") return ClipPadding::EndOfText;
  if (*pad == "!") return ClipPadding::Zero;
  fail("{}: pad_token is {}; rocmforge pads with <|endoftext|> or \"!\"", path, pad->dump());
}

// A text encoder part of model_index.json: with text_projection or without.
bool with_projection(const JsonFields& index, const char* part) {
  const auto& entry = *index.find(part);
  const auto type = entry[1].get<std::string>();
  if (type == "CLIPTextModel") return false;
  if (type == "CLIPTextModelWithProjection") return true;
  fail("{}: {} is a {}; rocmforge runs CLIPTextModel and CLIPTextModelWithProjection", index.source(), part, type);
}

// Whether model_index.json names an SDXL pipeline; fails for other pipelines.
bool sdxl_pipeline(const JsonFields& index) {
  const auto pipeline = index.string("_class_name");
  static const std::pair<std::string_view, bool> known[] = {
      {"StableDiffusionPipeline", false},         {"StableDiffusionImg2ImgPipeline", false},
      {"StableDiffusionInpaintPipeline", false},  {"StableDiffusionXLPipeline", true},
      {"StableDiffusionXLImg2ImgPipeline", true}, {"StableDiffusionXLInpaintPipeline", true}};
  for (const auto& [name, sdxl] : known) {
    if (name == pipeline) return sdxl;
  }
  fail("{}: pipeline {} is of an architecture rocmforge does not run (SD 1.x, 2.x and XL pipelines only)",
       index.source(), pipeline);
}

// Every part the pipeline needs is listed ([library, class]) and has its folder.
void check_parts(const JsonFields& index, const fs::path& folder, bool sdxl) {
  std::vector<const char*> parts = {"unet", "vae", "text_encoder", "tokenizer", "scheduler"};
  if (sdxl) parts.insert(parts.end(), {"text_encoder_2", "tokenizer_2"});
  for (const auto* part : parts) {
    const json* entry = index.find(part);
    if (!entry || !entry->is_array() || entry->size() != 2 || !(*entry)[1].is_string()) {
      fail("{}: lists no {}, which the pipeline needs", index.source(), part);
    }
    if (!fs::is_directory(folder / part)) {
      fail("{}: has no {}/ folder, which the pipeline needs", folder.string(), part);
    }
  }
}

ClipTextConfig read_text_encoder(const JsonFields& index, const fs::path& folder, const char* part,
                                 const char* tokenizer) {
  return read_clip_config(JsonFields::read((folder / part / "config.json").string()), with_projection(index, part),
                          read_padding((folder / tokenizer / "tokenizer_config.json").string()));
}

SchedulerConfig read_scheduler(const JsonFields& f) {
  f.expect("trained_betas", nullptr);
  f.expect("rescale_betas_zero_snr", false);
  SchedulerConfig c;
  c.train_timesteps = f.integer("num_train_timesteps", c.train_timesteps);
  c.beta_schedule = f.choice("beta_schedule", "linear", parse_beta_schedule);
  c.beta_start = f.number("beta_start", c.beta_start);
  c.beta_end = f.number("beta_end", c.beta_end);
  c.prediction = f.choice("prediction_type", "epsilon", parse_prediction);
  if (f.find("timestep_spacing")) c.spacing = f.choice("timestep_spacing", "", parse_spacing);
  c.steps_offset = f.integer("steps_offset", 0);
  if (f.find("set_alpha_to_one")) c.set_alpha_to_one = f.boolean("set_alpha_to_one", false);
  return c;
}

}  // namespace

PipelineConfig read_pipeline_config(const std::string& folder) {
  const fs::path dir(folder);
  if (!fs::exists(dir / "model_index.json")) {
    fail("{}: is not a diffusers pipeline folder (no model_index.json)", folder);
  }
  const auto index = JsonFields::read((dir / "model_index.json").string());
  const bool sdxl = sdxl_pipeline(index);
  check_parts(index, dir, sdxl);
  PipelineConfig c;
  c.unet = read_unet_config(JsonFields::read((dir / "unet" / "config.json").string()));
  c.vae = read_vae_config((dir / "vae" / "config.json").string(), autoencoder_kl_defaults());
  c.text_encoder = read_text_encoder(index, dir, "text_encoder", "tokenizer");
  if (sdxl) c.text_encoder_2 = read_text_encoder(index, dir, "text_encoder_2", "tokenizer_2");
  // The pipeline class is the same for SD 1.x and 2.x: OpenCLIP's gelu encoder tells 2.x.
  c.architecture = sdxl ? Architecture::sdxl : c.text_encoder.quick_gelu ? Architecture::sd1 : Architecture::sd2;
  c.scheduler = read_scheduler(JsonFields::read((dir / "scheduler" / "scheduler_config.json").string()));
  c.force_zeros_for_empty_prompt = index.boolean("force_zeros_for_empty_prompt", sdxl);
  return c;
}

VaeConfig read_vae_config(const std::string& path, const VaeConfig& base) {
  return read_vae(JsonFields::read(path), base);
}

SchedulerConfig scheduler_config_from_json(const nlohmann::json& config, const std::string& source) {
  return read_scheduler(JsonFields(config, source));
}

}  // namespace rf::stable_diffusion
