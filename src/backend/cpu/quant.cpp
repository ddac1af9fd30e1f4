#include "backend/cpu/quant.h"

#include "backend/cpu/encode.h"
#include "backend/cpu/kernel_table.h"
#include "formats/tensor.h"
#include "util/error.h"

namespace rf::cpu {

namespace {

void check_row_length(DType type, std::size_t n) {
  const std::size_t block = dtype_info(type).block_elems;
  if (n % block != 0) {
    fail("a {} row of {} elements is not a whole number of {}-element blocks", dtype_name(type), n, block);
  }
}

std::size_t index(DType type) { return static_cast<std::size_t>(type); }

}  // namespace

void dequantize_row(DType type, const void* src, float* dst, std::size_t n) {
  check_row_length(type, n);
  kernels().dequantize[index(type)](src, dst, n);
}

float dot_row(DType type, const void* row, const float* x, std::size_t n) {
  check_row_length(type, n);
  return kernels().dot[index(type)](row, x, n);
}

void quantize_row(DType type, const float* src, void* dst, std::size_t n) {
  check_row_length(type, n);
  const std::size_t blocks = n / dtype_info(type).block_elems;
  switch (type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: from_f32(type, {src, n}, dst); return;
    case DType::Q8_0: encode_q8_0(src, static_cast<BlockQ8_0*>(dst), blocks); return;
    case DType::Q4_0: encode_q4_0(src, static_cast<BlockQ4_0*>(dst), blocks); return;
    case DType::Q4_K: encode_q4_k(src, static_cast<BlockQ4_K*>(dst), blocks); return;
    case DType::Q6_K: encode_q6_k(src, static_cast<BlockQ6_K*>(dst), blocks); return;
    case DType::Q4_1: encode_q4_1(src, static_cast<BlockQ4_1*>(dst), blocks); return;
    case DType::Q5_0: encode_q5_0(src, static_cast<BlockQ5_0*>(dst), blocks); return;
    case DType::Q5_1: encode_q5_1(src, static_cast<BlockQ5_1*>(dst), blocks); return;
    case DType::Q2_K: encode_q2_k(src, static_cast<BlockQ2_K*>(dst), blocks); return;
    case DType::Q3_K: encode_q3_k(src, static_cast<BlockQ3_K*>(dst), blocks); return;
    case DType::Q5_K: encode_q5_k(src, static_cast<BlockQ5_K*>(dst), blocks); return;
    case DType::IQ4_NL: encode_iq4_nl(src, static_cast<BlockIQ4_NL*>(dst), blocks); return;
    case DType::IQ4_XS: encode_iq4_xs(src, static_cast<BlockIQ4_XS*>(dst), blocks); return;
    case DType::F64:
    case DType::I32:
    case DType::I64: break;
  }
  fail("quantize_row: unknown dtype {}", index(type));
}

}  // namespace rf::cpu
