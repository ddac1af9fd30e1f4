#pragma once
// The kernels behind probe.h's measurements (plain C++, for probe.cpp).
#include <cstddef>
#include <cstdint>

#include "backend/gpu/runtime/device_context.h"
#include "backend/gpu/runtime/vendor.h"

namespace rf::gpu {

// Reads n floats (n a multiple of 4, data 16-byte aligned) and writes one partial sum per block to
// partial: every load feeds a result, so none is dropped.
void launch_read_all(const float* data, std::size_t n, float* partial, unsigned blocks, const DeviceContext& ctx);

// Values in [-1, 1) from a hash of the index, as fp32 or as bf16 bits: products run on data as varied
// as real weights (on zeros or constants they can run faster than real data will).
void launch_fill_random(float* out, std::size_t n, const DeviceContext& ctx);
void launch_fill_random_bf16(std::uint16_t* out, std::size_t n, const DeviceContext& ctx);

}  // namespace rf::gpu
