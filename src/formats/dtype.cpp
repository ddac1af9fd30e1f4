#include "formats/dtype.h"

namespace rf {

namespace {
// GGML type ids (ggml.h, enum ggml_type).
constexpr std::uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ8_0 = 8, kGgmlQ4_K = 12, kGgmlQ6_K = 14,
                        kGgmlI32 = 26, kGgmlI64 = 27, kGgmlF64 = 28, kGgmlBF16 = 30;
}  // namespace

std::optional<DType> dtype_from_ggml(std::uint32_t ggml_type) {
  switch (ggml_type) {
    case kGgmlF32: return DType::F32;
    case kGgmlF16: return DType::F16;
    case kGgmlBF16: return DType::BF16;
    case kGgmlQ8_0: return DType::Q8_0;
    case kGgmlQ4_0: return DType::Q4_0;
    case kGgmlQ4_K: return DType::Q4_K;
    case kGgmlQ6_K: return DType::Q6_K;
    default: return std::nullopt;
  }
}

std::uint32_t dtype_to_ggml(DType t) {
  switch (t) {
    case DType::F32: return kGgmlF32;
    case DType::F16: return kGgmlF16;
    case DType::BF16: return kGgmlBF16;
    case DType::Q8_0: return kGgmlQ8_0;
    case DType::Q4_0: return kGgmlQ4_0;
    case DType::Q4_K: return kGgmlQ4_K;
    case DType::Q6_K: return kGgmlQ6_K;
    case DType::F64: return kGgmlF64;
    case DType::I32: return kGgmlI32;
    case DType::I64: return kGgmlI64;
  }
  return kGgmlF32;
}

std::string_view ggml_type_name(std::uint32_t ggml_type) {
  static constexpr std::string_view names[] = {
      "f32",  "f16",  "q4_0", "q4_1", "q4_2", "q4_3", "q5_0", "q5_1",    "q8_0",    "q8_1",   "q2_k",
      "q3_k", "q4_k", "q5_k", "q6_k", "q8_k", "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s",
      "iq2_s", "iq4_xs", "i8", "i16", "i32", "i64", "f64", "iq1_m", "bf16",
  };
  if (ggml_type < std::size(names)) return names[ggml_type];
  return "unknown";
}

}  // namespace rf
