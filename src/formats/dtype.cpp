#include "formats/dtype.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

namespace rf {

namespace {
// GGML type ids (ggml.h, enum ggml_type).
constexpr std::uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ4_1 = 3, kGgmlQ5_0 = 6, kGgmlQ5_1 = 7,
                        kGgmlQ8_0 = 8, kGgmlQ2_K = 10, kGgmlQ3_K = 11, kGgmlQ4_K = 12, kGgmlQ5_K = 13, kGgmlQ6_K = 14,
                        kGgmlIQ4_NL = 20, kGgmlIQ4_XS = 23, kGgmlI32 = 26, kGgmlI64 = 27, kGgmlF64 = 28, kGgmlBF16 = 30;
}  // namespace

std::string weight_dtype_names() {
  std::vector<std::string_view> names;
  for (DType t : kWeightDTypes) names.push_back(dtype_name(t));
  return fmt::format("{}", fmt::join(names, ", "));
}

std::optional<DType> dtype_from_ggml(std::uint32_t ggml_type) {
  switch (ggml_type) {
    case kGgmlF32: return DType::F32;
    case kGgmlF16: return DType::F16;
    case kGgmlBF16: return DType::BF16;
    case kGgmlQ8_0: return DType::Q8_0;
    case kGgmlQ4_0: return DType::Q4_0;
    case kGgmlQ4_K: return DType::Q4_K;
    case kGgmlQ6_K: return DType::Q6_K;
    case kGgmlQ4_1: return DType::Q4_1;
    case kGgmlQ5_0: return DType::Q5_0;
    case kGgmlQ5_1: return DType::Q5_1;
    case kGgmlQ2_K: return DType::Q2_K;
    case kGgmlQ3_K: return DType::Q3_K;
    case kGgmlQ5_K: return DType::Q5_K;
    case kGgmlIQ4_NL: return DType::IQ4_NL;
    case kGgmlIQ4_XS: return DType::IQ4_XS;
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
    case DType::Q4_1: return kGgmlQ4_1;
    case DType::Q5_0: return kGgmlQ5_0;
    case DType::Q5_1: return kGgmlQ5_1;
    case DType::Q2_K: return kGgmlQ2_K;
    case DType::Q3_K: return kGgmlQ3_K;
    case DType::Q5_K: return kGgmlQ5_K;
    case DType::IQ4_NL: return kGgmlIQ4_NL;
    case DType::IQ4_XS: return kGgmlIQ4_XS;
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
