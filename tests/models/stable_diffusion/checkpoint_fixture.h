#pragma once
// The tiny SD checkpoints of tests/fixtures/sd/models (tools/fixtures/make_sd_model_fixtures.py's
// docstring describes them): each architecture as a diffusers folder and as the single file
// diffusers' own scripts made from it. Helpers open them, compare tensor sets, list the fields two
// configs differ in, and write altered copies into a scratch folder.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "formats/safetensors.h"
#include "models/stable_diffusion/checkpoint.h"
#include "util/error.h"

namespace rf::stable_diffusion::fixture {

inline const char* const kArchitectures[] = {"sd15", "sd2", "sdxl", "sd15_inpaint"};

inline std::string model_dir(const std::string& arch) { return std::string(ROCMFORGE_FIXTURES) + "/sd/models/" + arch; }
inline std::string folder(const std::string& arch) { return model_dir(arch) + "/diffusers"; }
inline std::string single_file(const std::string& arch) { return model_dir(arch) + "/checkpoint.safetensors"; }

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("missing fixture {}", path);
  return nlohmann::json::parse(in);
}

// The fixtures leave CLIP's vocabulary out: it is the one rocmforge ships.
inline OpenOptions options(std::string config = {}) {
  OpenOptions o;
  o.config = std::move(config);
  o.clip_vocab = std::string(ROCMFORGE_SOURCE_DIR) + "/models/clip";
  return o;
}

// Every tensor of `expected` is in `actual` with the same dtype, shape and bytes, and `actual` has
// no others. Prints the count; any difference fails (the tolerance is zero bytes).
inline void expect_same_tensors(const std::string& what, const TensorSet& actual, const TensorSet& expected) {
  std::size_t differing = 0;
  std::uint64_t bytes = 0;
  for (const auto& e : expected) {
    const auto* a = actual.find(e.name);
    const bool same = a && a->dtype == e.dtype && a->shape == e.shape && a->bytes == e.bytes &&
                      (e.bytes == 0 || std::memcmp(a->data, e.data, e.bytes) == 0);
    if (!same) {
      ++differing;
      ADD_FAILURE() << what << ": " << e.name << (a ? " differs" : " is missing");
    }
    bytes += e.bytes;
  }
  fmt::print("  {:<48} {:4} tensors, {:8} bytes: {} differ (tolerance 0)\n", what, expected.size(), bytes, differing);
  EXPECT_EQ(actual.size(), expected.size()) << what;
}

using Fields = std::vector<std::pair<std::string, std::string>>;

// A struct's field as its name and its value in text.
#define RF_FIELD(object, field) std::pair<std::string, std::string>(#field, fmt::format("{}", (object).field))

inline void add_fields(Fields& out, const std::string& prefix, std::initializer_list<Fields::value_type> fields) {
  for (const auto& [name, value] : fields) out.emplace_back(prefix + "." + name, value);
}

// Every field of a PipelineConfig by name, as text: what two configs differ in can be listed.
inline Fields fields(const PipelineConfig& c) {
  Fields out;
  const auto add = [&](std::string name, const auto& value) {
    out.emplace_back(std::move(name), fmt::format("{}", value));
  };
  add("architecture", architecture_name(c.architecture));
  const auto& u = c.unet;
  for (std::size_t i = 0; i < u.levels.size(); ++i) {
    const auto& l = u.levels[i];
    add_fields(out, fmt::format("unet.levels[{}]", i),
               {RF_FIELD(l, channels), RF_FIELD(l, attention), RF_FIELD(l, transformer_depth), RF_FIELD(l, heads)});
  }
  add("unet.levels", u.levels.size());
  add_fields(
      out, "unet",
      {RF_FIELD(u, in_channels), RF_FIELD(u, out_channels), RF_FIELD(u, layers_per_block),
       RF_FIELD(u, mid_transformer_depth), RF_FIELD(u, mid_heads), RF_FIELD(u, cross_attention_dim),
       RF_FIELD(u, linear_projection), RF_FIELD(u, upcast_attention), RF_FIELD(u, norm_groups), RF_FIELD(u, norm_eps),
       RF_FIELD(u, flip_sin_to_cos), RF_FIELD(u, freq_shift), RF_FIELD(u, text_time_embedding),
       RF_FIELD(u, addition_time_embed_dim), RF_FIELD(u, addition_embed_input_dim), RF_FIELD(u, sample_size)});
  const auto& v = c.vae;
  add_fields(out, "vae",
             {RF_FIELD(v, in_channels), RF_FIELD(v, out_channels), RF_FIELD(v, latent_channels),
              RF_FIELD(v, block_out_channels), RF_FIELD(v, layers_per_block), RF_FIELD(v, norm_groups),
              RF_FIELD(v, mid_attention), RF_FIELD(v, quant_conv), RF_FIELD(v, scaling_factor),
              RF_FIELD(v, shift_factor), RF_FIELD(v, force_upcast), RF_FIELD(v, sample_size)});
  const auto text = [&](const std::string& prefix, const ClipTextConfig& t) {
    add_fields(out, prefix,
               {RF_FIELD(t, vocab_size), RF_FIELD(t, hidden), RF_FIELD(t, layers), RF_FIELD(t, heads),
                RF_FIELD(t, intermediate), RF_FIELD(t, max_positions), RF_FIELD(t, layer_norm_eps),
                RF_FIELD(t, quick_gelu), RF_FIELD(t, projection_dim), RF_FIELD(t, eos_token)});
    add(prefix + ".padding", t.padding == ClipPadding::Zero ? "zero" : "eos");
  };
  text("text_encoder", c.text_encoder);
  add("text_encoder_2", c.text_encoder_2.has_value());
  if (c.text_encoder_2) text("text_encoder_2", *c.text_encoder_2);
  const auto& s = c.scheduler;
  const auto optional = [](const auto& o) {
    return o ? fmt::format("{}", static_cast<int>(*o)) : std::string("unset");
  };
  add_fields(out, "scheduler",
             {RF_FIELD(s, train_timesteps), RF_FIELD(s, beta_start), RF_FIELD(s, beta_end), RF_FIELD(s, steps_offset)});
  add("scheduler.beta_schedule", static_cast<int>(s.beta_schedule));
  add("scheduler.prediction", static_cast<int>(s.prediction));
  add("scheduler.spacing", optional(s.spacing));
  add("scheduler.set_alpha_to_one", optional(s.set_alpha_to_one));
  add("force_zeros_for_empty_prompt", c.force_zeros_for_empty_prompt);
  return out;
}

#undef RF_FIELD

// The fields `a` and `b` differ in, "name: a vs b", in fields() order.
inline std::vector<std::string> differences(const PipelineConfig& a, const PipelineConfig& b) {
  const auto fa = fields(a), fb = fields(b);
  std::vector<std::string> out;
  for (const auto& [name, value] : fa) {
    const auto it = std::ranges::find(fb, name, &std::pair<std::string, std::string>::first);
    const auto other = it == fb.end() ? std::string("(absent)") : it->second;
    if (other != value) out.push_back(fmt::format("{}: {} vs {}", name, value, other));
  }
  return out;
}

// A scratch folder of the test's own, fresh for each run.
inline std::filesystem::path scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto dir = std::filesystem::path(ROCMFORGE_SCRATCH) / "stable_diffusion" /
                   (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Writes the views `keep` accepts, renamed by it (an empty name drops the tensor), to `path`.
inline void write_tensors(const std::string& path, const TensorSet& tensors,
                          const std::function<std::string(const TensorView&)>& keep) {
  std::vector<SafetensorsTensor> out;
  for (const auto& view : tensors) {
    auto name = keep(view);
    if (name.empty()) continue;
    out.push_back({std::move(name), view.dtype, {view.dims().begin(), view.dims().end()}, view.data, view.bytes});
  }
  write_safetensors(path, out);
}

// A tensor to write as it is, of any dtype safetensors names ("I64", "F64", ...): files carry
// such tensors, which write_safetensors does not write.
struct RawTensor {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  const void* data;
  std::uint64_t bytes;
};

inline std::vector<RawTensor> raw_tensors(const TensorSet& tensors) {
  std::vector<RawTensor> out;
  for (const auto& v : tensors) {
    auto dtype = std::string(dtype_name(v.dtype));
    std::ranges::transform(dtype, dtype.begin(), [](unsigned char c) { return std::toupper(c); });
    out.push_back({v.name, dtype, {v.dims().begin(), v.dims().end()}, v.data, v.bytes});
  }
  return out;
}

inline void write_raw(const std::string& path, const std::vector<RawTensor>& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  const auto text = header.dump();
  const std::uint64_t length = text.size();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&length), sizeof length)
      .write(text.data(), static_cast<std::streamsize>(length));
  for (const auto& t : tensors) out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(t.bytes));
  if (!out) fail("{}: cannot write", path);
}

}  // namespace rf::stable_diffusion::fixture
