#pragma once
// How weight rows are laid out in device memory (host code). Most types keep GGML's layout. Q8_0 and
// Q4_0 rows are split: all the row's quants first, then all its f16 block scales; Q6_K's likewise into
// runs of one field each; Q4_K's and Q5_K's blocks are rearranged in place. The row keeps its length in
// bytes, so row r still starts at r * row_bytes, but each 32-column unit's quants become one aligned
// 16-byte run whose codes line up with x's for integer dot products: GGML's 34- and 18-byte blocks
// allow only 2-byte loads (dequantize.cuh says what each decoder reads).
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
