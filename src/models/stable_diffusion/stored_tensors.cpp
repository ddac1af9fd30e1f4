#include "models/stable_diffusion/stored_tensors.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <utility>

#include "util/error.h"
#include "util/mapped_file.h"

namespace rf::stable_diffusion {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void refuse_pickle(const std::string& path) {
  fail(
      "{}: is a PyTorch pickle checkpoint; loading one can run arbitrary code, so rocmforge never unpickles. "
      "Convert it to .safetensors (A1111's or ComfyUI's \"save as safetensors\", or diffusers' "
      "scripts/convert_original_stable_diffusion_to_diffusers.py --to_safetensors) and load that",
      path);
}

[[noreturn]] void refuse_gguf(const std::string& path) {
  fail("{}: GGUF Stable Diffusion files are not supported yet; load a .safetensors single file or a diffusers folder",
       path);
}

std::string lower_extension(const std::string& path) {
  auto extension = fs::path(path).extension().string();
  std::ranges::transform(extension, extension.begin(), [](unsigned char c) { return std::tolower(c); });
  return extension;
}

// The names older and newer writers give a tensor, the current name first.
std::vector<std::string> other_names(const std::string& name) {
  std::vector<std::string> names{name};
  constexpr std::string_view kTextModel = "text_model.";
  if (name.starts_with(kTextModel)) names.push_back(name.substr(kTextModel.size()));
  constexpr std::pair<std::string_view, std::string_view> kLegacyAttention[] = {
      {"attentions.0.to_q.", "attentions.0.query."},
      {"attentions.0.to_k.", "attentions.0.key."},
      {"attentions.0.to_v.", "attentions.0.value."},
      {"attentions.0.to_out.0.", "attentions.0.proj_attn."}};
  for (const auto& [current, legacy] : kLegacyAttention) {
    if (const auto at = name.find(current); at != std::string::npos && name.find("mid_block.") < at) {
      names.push_back(std::string(name).replace(at, current.size(), legacy));
    }
  }
  return names;
}

// The shape the file stores a tensor of `shape` in, as `stored` describes it.
std::vector<std::uint64_t> stored_shape(std::vector<std::uint64_t> shape, const StoredAs& stored) {
  if (stored.transposed) std::ranges::reverse(shape);
  shape[0] *= static_cast<std::uint64_t>(stored.parts);
  return shape;
}

// Whether `view` holds a tensor of `shape`; a Linear's [out, in] weight may be stored as the
// equivalent 1x1 convolution's [out, in, 1, 1] (the LDM VAE's attention).
bool shape_matches(const TensorView& view, const std::vector<std::uint64_t>& shape) {
  const auto dims = view.dims();
  if (std::ranges::equal(dims, shape)) return true;
  return shape.size() == 2 && dims.size() == 4 && dims[0] == shape[0] && dims[1] == shape[1] && dims[2] == 1 &&
         dims[3] == 1;
}

// A copy of the 2-D `view` transposed, kept in `owned`.
const void* transposed(const TensorView& view, OwnedTensors& owned) {
  const auto element = dtype_info(view.dtype).block_bytes;  // safetensors types have one element per block
  const auto rows = view.shape[0], cols = view.shape[1];
  auto& out = owned.emplace_back(view.bytes);
  const auto* in = static_cast<const std::uint8_t*>(view.data);
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t c = 0; c < cols; ++c) {
      std::memcpy(&out[(c * rows + r) * element], &in[(r * cols + c) * element], element);
    }
  }
  return out.data();
}

[[noreturn]] void missing(const StoredTensors& stored, const std::string& name, const Parameter& p,
                          const std::string& part) {
  if (const auto dtype = stored.skipped_dtype(name)) {
    fail("{}: tensor {} (the {}'s {}) has dtype {}, which rocmforge does not read", stored.source(), name, part, p.name,
         *dtype);
  }
  const auto diffusers = name == p.name ? std::string() : fmt::format(" ({} in diffusers' naming)", p.name);
  fail("{}: the {} has no tensor {}{}", stored.source(), part, name, diffusers);
}

TensorView part_view(const Parameter& p, const PartSource& from, const std::string& part, OwnedTensors& owned) {
  const auto stored = from.naming == Naming::original ? p.original : StoredAs{p.name};
  const TensorView* view = from.stored.find(from.prefix, stored.name);
  if (!view) missing(from.stored, from.prefix + stored.name, p, part);
  if (is_auxiliary(view->dtype)) {  // read from the file, but no weight: the kernels take floats
    std::string dtype(dtype_name(view->dtype));
    std::ranges::transform(dtype, dtype.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    fail("{}: tensor {} (the {}'s {}) has dtype {}, which rocmforge does not read", from.stored.source(), view->name,
         part, p.name, dtype);
  }
  from.stored.mark_used(view->name);
  const auto expected = stored_shape(p.shape, stored);
  if (!shape_matches(*view, expected)) {
    fail("{}: tensor {} (the {}'s {}) has shape {}, but the config implies [{}]", from.stored.source(), view->name,
         part, p.name, view->shape_string(), fmt::join(expected, ", "));
  }
  const auto source = fmt::format("{} ({})", from.stored.source(), part);
  const auto bytes = view->bytes / static_cast<std::uint64_t>(stored.parts);
  const auto* data =
      stored.transposed ? transposed(*view, owned) : static_cast<const std::uint8_t*>(view->data) + bytes * stored.part;
  return make_tensor_view(source, p.name, view->dtype, p.shape, bytes, data);
}

}  // namespace

void check_safetensors_file(const std::string& path) {
  const auto extension = lower_extension(path);
  if (extension == ".ckpt" || extension == ".pt" || extension == ".pth" || extension == ".bin") refuse_pickle(path);
  if (extension == ".gguf") refuse_gguf(path);
  const MappedFile file(path);
  if (file.size() < 4) return;  // the safetensors reader says what is wrong
  const auto magic = file.bytes(0, 4, "magic");
  if (std::ranges::equal(magic, std::string_view("GGUF"))) refuse_gguf(path);
  // torch.save writes a zip archive (PK\3\4); older files are a bare pickle (protocol 2+: 0x80).
  if (std::ranges::equal(magic, std::string_view("PK\3\4")) || magic[0] == 0x80) refuse_pickle(path);
}

StoredTensors::StoredTensors(std::string source, std::vector<const SafetensorsFile*> files)
    : source_(std::move(source)), files_(std::move(files)), tensors_(source_) {
  for (const auto* file : files_) {
    for (const auto& view : TensorSet(*file)) tensors_.add(view);
  }
}

std::unique_ptr<StoredTensors> StoredTensors::file(const std::string& path) {
  check_safetensors_file(path);
  auto file = std::make_unique<SafetensorsFile>(path, OtherDTypes::skip);
  std::unique_ptr<StoredTensors> stored(new StoredTensors(path, {file.get()}));
  stored->file_ = std::move(file);
  return stored;
}

std::unique_ptr<StoredTensors> StoredTensors::folder(const std::string& path) {
  if (!fs::is_directory(path)) fail("{}: no such folder", path);
  // Full precision first: diffusers loads the fp16 variant only when asked to.
  for (const std::string variant : {"", ".fp16"}) {
    for (const std::string stem : {"diffusion_pytorch_model", "model"}) {
      const SafetensorsNames names{stem + variant + ".safetensors", stem + ".safetensors.index" + variant + ".json"};
      if (!fs::exists(fs::path(path) / names.single) && !fs::exists(fs::path(path) / names.index)) continue;
      auto set = std::make_unique<SafetensorsSet>(path, names, OtherDTypes::skip);
      std::vector<const SafetensorsFile*> files;
      for (const auto& file : set->files()) files.push_back(file.get());
      std::ranges::sort(files, {}, &SafetensorsFile::path);  // shards in the order of their names
      std::unique_ptr<StoredTensors> stored(new StoredTensors(path, std::move(files)));
      stored->set_ = std::move(set);
      return stored;
    }
  }
  for (const auto& entry : fs::directory_iterator(path)) {
    if (lower_extension(entry.path().string()) == ".bin") refuse_pickle(entry.path().string());
  }
  fail(
      "{}: has no weights: expected diffusion_pytorch_model.safetensors or model.safetensors (or their .fp16 "
      "variants, or a sharded *.safetensors.index.json)",
      path);
}

const TensorView* StoredTensors::find(const std::string& prefix, const std::string& name) const {
  for (const auto& candidate : other_names(name)) {
    if (const auto* view = tensors_.find(prefix + candidate)) return view;
  }
  return nullptr;
}

std::optional<std::string> StoredTensors::skipped_dtype(const std::string& name) const {
  for (const auto* file : files_) {
    if (const auto it = file->skipped().find(name); it != file->skipped().end()) return it->second;
  }
  return std::nullopt;
}

std::size_t StoredTensors::unused() const {
  std::size_t n = 0;
  for (const auto& view : tensors_) n += used_.contains(view.name) ? 0 : 1;
  for (const auto* file : files_) n += file->skipped().size();
  return n;
}

TensorSet collect_part(const std::vector<Parameter>& parameters, const PartSource& from, const std::string& part,
                       OwnedTensors& owned) {
  TensorSet set(fmt::format("{} ({})", from.stored.source(), part));
  for (const auto& p : parameters) set.add(part_view(p, from, part, owned));
  return set;
}

}  // namespace rf::stable_diffusion
