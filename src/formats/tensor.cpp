#include "formats/tensor.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <functional>

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "util/error.h"
#include "util/half.h"

namespace rf {

std::uint64_t TensorView::elements() const {
  std::uint64_t n = 1;
  for (const auto d : dims()) n *= d;  // the readers checked that the byte count does not overflow
  return n;
}

std::string TensorView::shape_string() const { return fmt::format("[{}]", fmt::join(dims(), ", ")); }

std::vector<float> to_f32(const std::string& source, const TensorView& view) {
  const std::size_t n = view.elements();
  std::vector<float> values(n);
  const auto* halves = static_cast<const std::uint16_t*>(view.data);
  switch (view.dtype) {
    case DType::F32: std::copy_n(static_cast<const float*>(view.data), n, values.begin()); break;
    case DType::F16: std::transform(halves, halves + n, values.begin(), f16_to_f32); break;
    case DType::BF16: std::transform(halves, halves + n, values.begin(), bf16_to_f32); break;
    case DType::F64: std::copy_n(static_cast<const double*>(view.data), n, values.begin()); break;
    default: fail("{}: tensor {} is {}; expected f32, f16, bf16 or f64", source, view.name, dtype_name(view.dtype));
  }
  return values;
}

void from_f32(DType type, std::span<const float> values, void* out) {
  auto* halves = static_cast<std::uint16_t*>(out);
  switch (type) {
    case DType::F32: std::ranges::copy(values, static_cast<float*>(out)); break;
    case DType::F16: std::ranges::transform(values, halves, f32_to_f16); break;
    case DType::BF16: std::ranges::transform(values, halves, f32_to_bf16); break;
    default: fail("from_f32: {} is not f32, f16 or bf16", dtype_name(type));
  }
}

TensorView make_tensor_view(const std::string& source, std::string name, DType dtype,
                            std::span<const std::uint64_t> shape, std::uint64_t bytes, const void* data) {
  if (shape.size() > kMaxTensorDims) {
    fail("{}: tensor {} has {} dimensions [{}]; rocmforge reads tensors of at most {}", source, name, shape.size(),
         fmt::join(shape, ", "), kMaxTensorDims);
  }
  TensorView view{std::move(name), dtype, static_cast<int>(shape.size()), {}, bytes, data};
  std::ranges::copy(shape, view.shape.begin());
  return view;
}

TensorSet::TensorSet(std::string source) : source_(std::move(source)) {}

TensorSet::TensorSet(const GgufFile& gguf) : source_(gguf.path()) {
  for (const auto& t : gguf.tensors()) {
    // GGUF lists dims innermost first.
    const std::vector<std::uint64_t> shape(t.dims.rbegin(), t.dims.rend());
    add(make_tensor_view(source_, t.name, t.dtype, shape, t.size_bytes, t.data));
  }
}

TensorSet::TensorSet(const SafetensorsFile& file) : source_(file.path()) {
  std::vector<const SafetensorsTensor*> tensors;
  for (const auto& [name, t] : file.tensors()) tensors.push_back(&t);
  // The header is a JSON object, whose order the parser does not keep: file order is data order.
  std::ranges::stable_sort(tensors, std::less<>(), [](const SafetensorsTensor* t) { return t->data; });
  for (const auto* t : tensors) add(make_tensor_view(source_, t->name, t->dtype, t->shape, t->size_bytes, t->data));
}

TensorSet::TensorSet(const SafetensorsSet& set) : source_(set.folder()) {
  std::vector<const SafetensorsFile*> files;
  for (const auto& file : set.files()) files.push_back(file.get());
  // Shards are numbered in their names (model-00001-of-00003.safetensors, ...).
  std::ranges::sort(files, {}, &SafetensorsFile::path);
  for (const auto* file : files) {
    for (const auto& view : TensorSet(*file)) add(view);
  }
}

void TensorSet::add(TensorView view) {
  if (!index_.try_emplace(view.name, views_.size()).second) fail("{}: tensor {} appears twice", source_, view.name);
  views_.push_back(std::move(view));
}

const TensorView* TensorSet::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &views_[it->second];
}

const TensorView& TensorSet::at(const std::string& name) const {
  if (const auto* view = find(name)) return *view;
  fail("{}: tensor {} not found", source_, name);
}

}  // namespace rf
