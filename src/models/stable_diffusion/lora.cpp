#include "models/stable_diffusion/lora.h"

#include <algorithm>
#include <map>
#include <ranges>
#include <set>

#include "formats/safetensors.h"
#include "models/stable_diffusion/expected_tensors.h"
#include "util/error.h"

namespace rf::stable_diffusion {

namespace {

// "down_blocks.0.attentions.0.proj_in.weight" -> "down_blocks_0_attentions_0_proj_in", kohya's spelling.
std::string kohya_module(std::string name) {
  if (name.ends_with(".weight")) name.resize(name.size() - 7);
  std::ranges::replace(name, '.', '_');
  return name;
}

// One part's matrices by their kohya module names (diffusers' and, where given, the original's).
struct Part {
  std::string prefix;  // "lora_unet_", "lora_te_", ...
  const TensorSet* tensors;
  std::map<std::string, std::string> modules;  // kohya module -> canonical tensor name
  std::map<std::string, std::vector<float>> deltas;
};

Part make_part(std::string prefix, const TensorSet& tensors, const std::vector<Parameter>& parameters) {
  Part part{std::move(prefix), &tensors, {}, {}};
  for (const Parameter& p : parameters) {
    if (!p.name.ends_with(".weight") || p.shape.size() < 2) continue;
    part.modules[kohya_module(p.name)] = p.name;
    if (!p.original.name.empty()) part.modules[kohya_module(p.original.name)] = p.name;
  }
  return part;
}

// scale * up @ down, as W's [out][in * kernel * kernel] values.
std::vector<float> delta(const TensorView& up, const TensorView& down, double scale, const std::string& source) {
  const std::size_t rank = up.shape[1], out = up.shape[0], in = down.elements() / rank;
  if (down.shape[0] != rank || up.elements() != out * rank) {
    fail("{}: {} and {} do not multiply (ranks {} and {})", source, up.name, down.name, up.shape[1], down.shape[0]);
  }
  const std::vector<float> u = to_f32(source, up), d = to_f32(source, down);
  std::vector<float> w(out * in, 0.0f);
  for (std::size_t o = 0; o < out; ++o)
    for (std::size_t r = 0; r < rank; ++r) {
      const float a = static_cast<float>(scale) * u[o * rank + r];
      for (std::size_t i = 0; i < in; ++i) w[o * in + i] += a * d[r * in + i];
    }
  return w;
}

void add_lora(std::vector<Part>& parts, const LoraFile& use) {
  const SafetensorsFile file(use.path);
  const TensorSet tensors(file);
  std::set<std::string> modules;
  for (const TensorView& t : tensors) {
    const std::size_t dot = t.name.find('.');
    const std::string what = dot == std::string::npos ? "" : t.name.substr(dot + 1);
    if (what != "lora_up.weight" && what != "lora_down.weight" && what != "alpha") {
      fail("{}: tensor {} is not a LoRA's (lora_up/lora_down/alpha): LoCon, LoHa, LoKr and DoRA files are not "
           "supported", use.path, t.name);
    }
    modules.insert(t.name.substr(0, dot));
  }
  for (const std::string& module : modules) {
    const auto part = std::ranges::find_if(parts, [&](const Part& p) { return module.starts_with(p.prefix); });
    const auto found = part == parts.end() ? std::map<std::string, std::string>::const_iterator{}
                                           : part->modules.find(module.substr(part->prefix.size()));
    if (part == parts.end() || found == part->modules.end()) {
      fail("{}: module {} is not in this model: a LoRA for another architecture?", use.path, module);
    }
    const TensorView& up = tensors.at(module + ".lora_up.weight");
    const TensorView& down = tensors.at(module + ".lora_down.weight");
    const double rank = static_cast<double>(down.shape[0]);
    const TensorView* alpha = tensors.find(module + ".alpha");
    const double a = alpha ? to_f32(use.path, *alpha)[0] : rank;  // kohya: no alpha means alpha = rank
    std::vector<float> d = delta(up, down, use.strength * a / rank, use.path);
    const TensorView& w = part->tensors->at(found->second);
    if (d.size() != w.elements()) {
      fail("{}: module {} changes {} values, {} has {}", use.path, module, d.size(), found->second, w.elements());
    }
    auto [it, fresh] = part->deltas.try_emplace(found->second, std::move(d));
    if (!fresh) std::ranges::transform(it->second, d, it->second.begin(), std::plus<>());
  }
}

}  // namespace

LoraSet::LoraSet(const PipelineConfig& config, const TensorSet& unet, const TensorSet& text_encoder,
                 const TensorSet* text_encoder_2, const std::vector<LoraFile>& loras)
    : unet_(unet.source()), text_encoder_(text_encoder.source()) {
  std::vector<Part> parts;
  parts.push_back(make_part("lora_unet_", unet, unet_parameters(config.unet)));
  const auto te = clip_parameters(config.text_encoder, ClipNaming::transformers);
  if (text_encoder_2 && config.text_encoder_2) {
    parts.push_back(make_part("lora_te1_", text_encoder, te));
    parts.push_back(make_part("lora_te2_", *text_encoder_2, clip_parameters(*config.text_encoder_2, ClipNaming::open_clip)));
  } else {
    parts.push_back(make_part("lora_te_", text_encoder, te));
  }
  for (const LoraFile& use : loras) add_lora(parts, use);

  const auto overlay = [&](const Part& part, TensorSet& out) {
    for (TensorView view : *part.tensors) {
      if (const auto d = part.deltas.find(view.name); d != part.deltas.end()) {
        std::vector<float> w = to_f32(view.name, view);
        std::ranges::transform(w, d->second, w.begin(), std::plus<>());
        // Back in the stored type, as A1111 and ComfyUI keep a merged model: a GPU's products stay on
        // its tensor cores, and the copy costs what the matrix does.
        std::vector<std::uint8_t>& bytes = merged_weights_.emplace_back(view.bytes);
        from_f32(view.dtype, w, bytes.data());
        view.data = bytes.data();
        ++merged_;
      }
      out.add(view);
    }
  };
  overlay(parts[0], unet_);
  overlay(parts[1], text_encoder_);
  if (parts.size() == 3) {
    text_encoder_2_ = TensorSet(text_encoder_2->source());
    overlay(parts[2], text_encoder_2_);
  }
}

LoraSet::~LoraSet() = default;

}  // namespace rf::stable_diffusion
