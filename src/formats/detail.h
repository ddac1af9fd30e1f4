#pragma once
// Internals shared by the GGUF and safetensors readers and writers; not part of the public API.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "formats/dtype.h"
#include "formats/gguf.h"
#include "util/error.h"

namespace rf::detail {

static_assert(std::endian::native == std::endian::little,
              "the readers copy little-endian fields straight from the map");

constexpr std::string_view kGgufMagic = "GGUF";
constexpr std::uint64_t kGgufDefaultAlignment = 32;
constexpr std::size_t kGgufMaxDims = 4;
constexpr std::string_view kGgufAlignmentKey = "general.alignment";

std::string_view gguf_type_name(GgufType type);

// Bytes of a GGUF tensor, after checking its shape: 1 to 4 nonzero dims whose product does not
// overflow, innermost dim a multiple of the block size. Errors start with `context`.
std::uint64_t gguf_tensor_bytes(const std::string& context, const std::vector<std::uint64_t>& dims, DType dtype);

// `alignment` is a nonzero power of two and `value` a file offset, so this cannot overflow.
constexpr std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

// Fails if two tensors share bytes. Tensor is any struct with name, data (in `file`) and size_bytes.
template <typename Tensor>
void check_no_overlap(const std::string& path, const std::uint8_t* file, std::vector<const Tensor*> tensors) {
  std::erase_if(tensors, [](const Tensor* t) { return t->size_bytes == 0; });  // empty tensors own no bytes
  const auto begin = [file](const Tensor* t) {
    return static_cast<std::uint64_t>(static_cast<const std::uint8_t*>(t->data) - file);
  };
  std::ranges::sort(tensors, {}, begin);
  // Sorted by start, any overlap shows up between neighbours.
  for (std::size_t i = 1; i < tensors.size(); ++i) {
    const Tensor& a = *tensors[i - 1];
    const Tensor& b = *tensors[i];
    if (begin(&b) < begin(&a) + a.size_bytes) {
      fail("{}: the data of tensors {} (file bytes {}..{}) and {} (from byte {}) overlap", path, a.name, begin(&a),
           begin(&a) + a.size_bytes, b.name, begin(&b));
    }
  }
}

}  // namespace rf::detail
