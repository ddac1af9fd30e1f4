#pragma once
// Block encoders behind quantize_row: each encodes `blocks` consecutive blocks from x.
#include <cstddef>

#include "backend/cpu/block_formats.h"

namespace rf::cpu {

void encode_q8_0(const float* x, BlockQ8_0* out, std::size_t blocks);
void encode_q4_0(const float* x, BlockQ4_0* out, std::size_t blocks);
void encode_q4_k(const float* x, BlockQ4_K* out, std::size_t blocks);
void encode_q6_k(const float* x, BlockQ6_K* out, std::size_t blocks);
void encode_q4_1(const float* x, BlockQ4_1* out, std::size_t blocks);
void encode_q5_0(const float* x, BlockQ5_0* out, std::size_t blocks);
void encode_q5_1(const float* x, BlockQ5_1* out, std::size_t blocks);
void encode_q2_k(const float* x, BlockQ2_K* out, std::size_t blocks);
void encode_q3_k(const float* x, BlockQ3_K* out, std::size_t blocks);
void encode_q5_k(const float* x, BlockQ5_K* out, std::size_t blocks);
void encode_iq4_nl(const float* x, BlockIQ4_NL* out, std::size_t blocks);
void encode_iq4_xs(const float* x, BlockIQ4_XS* out, std::size_t blocks);

}  // namespace rf::cpu
