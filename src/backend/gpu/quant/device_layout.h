#pragma once
// How weight rows are laid out in device memory (host code). Most types keep GGML's layout. Q8_0 and
// Q4_0 rows are split: all the row's quants first, then all its f16 block scales. The row keeps its
// length in bytes, so row r still starts at r * row_bytes, but a block's quants become one aligned
// 16- or 32-byte run: GGML's 34- and 18-byte blocks allow only 2-byte loads (dequantize.cuh).
#include <cstdint>
#include <vector>

#include "backend/gpu/runtime/device_buffer.h"
#include "formats/weight_matrix.h"

namespace rf::gpu {

// The bytes of `host` (rows of GGML blocks, in host memory) laid out as above, still on the host.
std::vector<std::uint8_t> to_device_layout(const WeightMatrix& host);

// A copy of `host` in device memory, laid out as above: in an allocation of its own, or at `device`
// (host.bytes() of device memory).
DeviceBuffer<std::uint8_t> upload_weights(const WeightMatrix& host);
void upload_weights(const WeightMatrix& host, std::uint8_t* device);

}  // namespace rf::gpu
