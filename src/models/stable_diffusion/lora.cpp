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

// scale * up @ down, as W's [out][in * kernel * kernel] values (read_modules checked the shapes).
std::vector<float> delta(const TensorView& up, const TensorView& down, double scale, const std::string& source) {
  const std::size_t rank = up.shape[1], out = up.shape[0], in = down.elements() / rank;
  const std::vector<float> u = to_f32(source, up), d = to_f32(source, down);
  std::vector<float> w(out * in, 0.0f);
  for (std::size_t o = 0; o < out; ++o)
    for (std::size_t r = 0; r < rank; ++r) {
      const float a = static_cast<float>(scale) * u[o * rank + r];
      for (std::size_t i = 0; i < in; ++i) w[o * in + i] += a * d[r * in + i];
    }
  return w;
}

// A module a LoRA file changes, found in the model and checked to fit it.
struct Module {
  Part* part;
  std::string target;  // the canonical name of the matrix it changes
  const TensorView* up;
  const TensorView* down;
  double scale;  // strength * alpha / rank
};

std::vector<Module> read_modules(std::vector<Part>& parts, const TensorSet& tensors, const LoraFile& use) {
  std::set<std::string> names;
  for (const TensorView& t : tensors) {
    const std::size_t dot = t.name.find('.');
    const std::string what = dot == std::string::npos ? "" : t.name.substr(dot + 1);
    if (what != "lora_up.weight" && what != "lora_down.weight" && what != "alpha") {
      fail("{}: tensor {} is not a LoRA's (lora_up/lora_down/alpha): LoCon, LoHa, LoKr and DoRA files are not "
           "supported", use.path, t.name);
    }
    names.insert(t.name.substr(0, dot));
  }
  if (names.empty()) fail("{}: no LoRA modules in the file", use.path);
  std::vector<Module> modules;
  for (const std::string& name : names) {
    const auto part = std::ranges::find_if(parts, [&](const Part& p) { return name.starts_with(p.prefix); });
    const auto found = part == parts.end() ? std::map<std::string, std::string>::const_iterator{}
                                           : part->modules.find(name.substr(part->prefix.size()));
    if (part == parts.end() || found == part->modules.end()) {
      fail("{}: module {} is not in this model: a LoRA for another architecture?", use.path, name);
    }
    const TensorView* up = tensors.find(name + ".lora_up.weight");
    const TensorView* down = tensors.find(name + ".lora_down.weight");
    if (!up || !down) fail("{}: module {} lacks its {}", use.path, name, up ? "lora_down.weight" : "lora_up.weight");
    if (up->n_dims < 2 || down->n_dims < 2 || up->shape[1] != down->shape[0] || down->shape[0] == 0 ||
        up->elements() != up->shape[0] * up->shape[1]) {
      fail("{}: {} {} and {} {} do not multiply", use.path, up->name, up->shape_string(), down->name, down->shape_string());
    }
    const TensorView& w = part->tensors->at(found->second);
    if (up->shape[0] * (down->elements() / down->shape[0]) != w.elements()) {
      fail("{}: module {} changes {} x {} values, {} has {}", use.path, name, up->shape[0],
           down->elements() / down->shape[0], found->second, w.elements());
    }
    const double rank = static_cast<double>(down->shape[0]);
    const TensorView* alpha = tensors.find(name + ".alpha");
    if (alpha && alpha->elements() != 1) fail("{}: {} has {} values, not one", use.path, alpha->name, alpha->elements());
    const double a = alpha ? to_f32(use.path, *alpha)[0] : rank;  // kohya: no alpha means alpha = rank
    modules.push_back({&*part, found->second, up, down, use.strength * a / rank});
  }
  return modules;
}

// The model's parts a LoRA may change, each with its kohya prefix.
std::vector<Part> model_parts(const PipelineConfig& config, const TensorSet& unet, const TensorSet& text_encoder,
                              const TensorSet* text_encoder_2) {
  std::vector<Part> parts;
  parts.push_back(make_part("lora_unet_", unet, unet_parameters(config.unet)));
  const auto te = clip_parameters(config.text_encoder, ClipNaming::transformers);
  if (text_encoder_2 && config.text_encoder_2) {
    parts.push_back(make_part("lora_te1_", text_encoder, te));
    parts.push_back(make_part("lora_te2_", *text_encoder_2, clip_parameters(*config.text_encoder_2, ClipNaming::open_clip)));
  } else {
    parts.push_back(make_part("lora_te_", text_encoder, te));
  }
  return parts;
}

void add_lora(std::vector<Part>& parts, const LoraFile& use) {
  const SafetensorsFile file(use.path);
  const TensorSet tensors(file);
  for (const Module& m : read_modules(parts, tensors, use)) {
    std::vector<float> d = delta(*m.up, *m.down, m.scale, use.path);
    auto [it, fresh] = m.part->deltas.try_emplace(m.target, std::move(d));
    if (!fresh) std::ranges::transform(it->second, d, it->second.begin(), std::plus<>());
  }
}

}  // namespace

void LoraSet::check(const PipelineConfig& config, const TensorSet& unet, const TensorSet& text_encoder,
                    const TensorSet* text_encoder_2, const LoraFile& lora) {
  std::vector<Part> parts = model_parts(config, unet, text_encoder, text_encoder_2);
  const SafetensorsFile file(lora.path);
  read_modules(parts, TensorSet(file), lora);
}

LoraSet::LoraSet(const PipelineConfig& config, const TensorSet& unet, const TensorSet& text_encoder,
                 const TensorSet* text_encoder_2, const std::vector<LoraFile>& loras)
    : unet_(unet.source()), text_encoder_(text_encoder.source()) {
  std::vector<Part> parts = model_parts(config, unet, text_encoder, text_encoder_2);
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
