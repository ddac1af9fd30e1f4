#pragma once
// Storage types of weight tensors, shared by the loaders and the kernels.
// Quantized types are stored in blocks along a row (the inner dimension), laid out as in GGML.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rf {

// F64, I32 and I64 are never weights: safetensors checkpoints carry a few integer tensors (e.g.
// CLIP's position_ids in Stable Diffusion files) and test fixtures float64 references; they are
// read, listed and refused where a weight is expected.
// Weight types first: F64 stays the first of the others (backend/cpu/kernel_table.h counts on it).
enum class DType : std::uint8_t {
  F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS, F64, I32, I64
};

struct DTypeInfo {
  std::string_view name;
  std::size_t block_elems;  // elements per block (1 for plain types)
  std::size_t block_bytes;  // bytes per block
};

constexpr DTypeInfo dtype_info(DType t) {
  switch (t) {
    case DType::F32: return {"f32", 1, 4};
    case DType::F16: return {"f16", 1, 2};
    case DType::BF16: return {"bf16", 1, 2};
    case DType::Q8_0: return {"q8_0", 32, 34};    // f16 scale + 32 x int8
    case DType::Q4_0: return {"q4_0", 32, 18};    // f16 scale + 16 bytes of nibbles
    case DType::Q4_K: return {"q4_k", 256, 144};  // f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles
    case DType::Q6_K: return {"q6_k", 256, 210};  // 128 bytes low nibbles, 64 bytes high bits, 16 int8 scales, f16 d
    case DType::Q4_1: return {"q4_1", 32, 20};    // f16 d, f16 min + 16 bytes of nibbles
    case DType::Q5_0: return {"q5_0", 32, 22};    // f16 d, 4 bytes of 5th bits, 16 bytes of nibbles
    case DType::Q5_1: return {"q5_1", 32, 24};    // f16 d, f16 min, 4 bytes of 5th bits, 16 bytes of nibbles
    case DType::Q2_K: return {"q2_k", 256, 84};   // 16 bytes of 4-bit scales/mins, 64 bytes of 2-bit codes, f16 d, dmin
    case DType::Q3_K: return {"q3_k", 256, 110};  // 32 bytes of 3rd bits, 64 bytes of 2-bit codes, 12 of scales, f16 d
    case DType::Q5_K: return {"q5_k", 256, 176};  // as q4_k, plus 32 bytes of 5th bits before the nibbles
    case DType::IQ4_NL: return {"iq4_nl", 32, 18};  // f16 d + 16 bytes of nibbles indexing a 16-value table
    case DType::IQ4_XS: return {"iq4_xs", 256, 136};  // f16 d, 6-bit sub-block scales (2 + 4 bytes), 128 of nibbles
    case DType::F64: return {"f64", 1, 8};
    case DType::I32: return {"i32", 1, 4};
    case DType::I64: return {"i64", 1, 8};
  }
  return {"?", 1, 1};
}

constexpr std::string_view dtype_name(DType t) { return dtype_info(t).name; }

// Every type a weight may have, in the order messages list them: plain, then GGML's 32-element
// blocks, then its 256-element super-blocks, each from the most bits per weight to the fewest.
inline constexpr DType kWeightDTypes[] = {DType::F32,  DType::F16,  DType::BF16,   DType::Q8_0, DType::Q5_0,
                                          DType::Q5_1, DType::Q4_0, DType::Q4_1,   DType::IQ4_NL, DType::Q6_K,
                                          DType::Q5_K, DType::Q4_K, DType::Q3_K,   DType::Q2_K, DType::IQ4_XS};
constexpr bool is_quantized(DType t) { return dtype_info(t).block_elems > 1; }
// The types a weight may not have.
constexpr bool is_auxiliary(DType t) { return t == DType::F64 || t == DType::I32 || t == DType::I64; }

// Bytes of one row of `cols` elements; the caller must have checked cols % block_elems == 0.
constexpr std::size_t row_bytes(DType t, std::size_t cols) {
  const auto info = dtype_info(t);
  return cols / info.block_elems * info.block_bytes;
}

// kWeightDTypes' names, comma-separated: "f32, f16, ...".
std::string weight_dtype_names();

// GGML's numeric type ids, as stored in GGUF tensor infos.
std::optional<DType> dtype_from_ggml(std::uint32_t ggml_type);
std::uint32_t dtype_to_ggml(DType t);
// Name of a GGML type id for error messages, including types we do not support ("iq2_xxs", ...).
std::string_view ggml_type_name(std::uint32_t ggml_type);

}  // namespace rf
