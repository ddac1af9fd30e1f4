#pragma once
// Every tensor of a checkpoint by name, whatever the format: a GGUF file, one safetensors file or a
// folder of them (sharded with its index). Model loaders (models/llama/weights.h) read what they
// need from a TensorSet; `rocmforge info --tensors` lists it.
//
// Layout: both formats store a tensor contiguously, row-major. The innermost dimension (the last
// of `shape`) is a row of row_bytes() bytes; the other dimensions step over whole rows. Quantized
// types store a row as shape[n_dims - 1] / block_elems blocks of block_bytes each (dtype_info), so
// the innermost dimension is always a multiple of the block size.
#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "formats/dtype.h"

namespace rf {

class GgufFile;
class SafetensorsFile;
class SafetensorsSet;

// GGUF's limit; safetensors allows more, and such tensors are refused naming them.
constexpr int kMaxTensorDims = 4;

// A view of one stored tensor; `data` points into a file's memory map (or a checkpoint's memory),
// which must outlive the view.
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  int n_dims = 0;                                     // 0 for a scalar
  std::array<std::uint64_t, kMaxTensorDims> shape{};  // outermost first; entries past n_dims are 0
  std::uint64_t bytes = 0;
  const void* data = nullptr;

  std::span<const std::uint64_t> dims() const { return {shape.data(), static_cast<std::size_t>(n_dims)}; }
  std::uint64_t elements() const;  // 1 for a scalar
  std::uint64_t row_elements() const { return n_dims == 0 ? 1 : shape[n_dims - 1]; }
  std::size_t row_bytes() const { return rf::row_bytes(dtype, row_elements()); }
  std::string shape_string() const;  // "[448, 256]", as in error messages
};

// A view of a tensor whose `shape` is outermost first; fails, naming `source` and the tensor, if it
// has more than kMaxTensorDims dimensions.
TensorView make_tensor_view(const std::string& source, std::string name, DType dtype,
                            std::span<const std::uint64_t> shape, std::uint64_t bytes, const void* data);

// The values of a tensor of a floating type (f32, f16, bf16, f64) as fp32; fails naming `source`, the
// tensor and its type otherwise.
std::vector<float> to_f32(const std::string& source, const TensorView& view);

// Writes `values` into `out` as `type`: f32, or f16/bf16 rounded to nearest even; fails for any other type.
void from_f32(DType type, std::span<const float> values, void* out);

// Named views in file order (GGUF: as the header lists them; safetensors: by position in the file,
// shards in the order of their file names). It views the files without owning them.
class TensorSet {
 public:
  // An empty set; errors name `source` (a file, a folder, a synthetic model).
  explicit TensorSet(std::string source = {});
  explicit TensorSet(const GgufFile& gguf);
  explicit TensorSet(const SafetensorsFile& file);
  explicit TensorSet(const SafetensorsSet& set);

  // Fails, naming the source, if a tensor of that name is already there.
  void add(TensorView view);

  const std::string& source() const { return source_; }
  std::size_t size() const { return views_.size(); }
  bool empty() const { return views_.empty(); }
  auto begin() const { return views_.begin(); }
  auto end() const { return views_.end(); }

  const TensorView* find(const std::string& name) const;  // null when absent
  const TensorView& at(const std::string& name) const;    // fails naming the source and the tensor

 private:
  std::string source_;
  std::vector<TensorView> views_;
  std::map<std::string, std::size_t> index_;
};

}  // namespace rf
