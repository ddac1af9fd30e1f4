#include "backend/gpu/quant/device_layout.h"

#include <cstring>
#include <vector>

#include "backend/cpu/block_formats.h"

namespace rf::gpu {

namespace {

template <class Block>
void split_rows(const WeightMatrix& host, std::uint8_t* out) {
  constexpr std::size_t kQuantBytes = sizeof(Block::qs);
  const std::size_t blocks = host.cols / dtype_info(host.dtype).block_elems;
  const std::size_t bytes_per_row = row_bytes(host.dtype, host.cols);
  for (std::size_t r = 0; r < host.rows; ++r) {
    const auto* in = reinterpret_cast<const Block*>(static_cast<const std::uint8_t*>(host.data) + r * bytes_per_row);
    std::uint8_t* quants = out + r * bytes_per_row;
    std::uint8_t* scales = quants + blocks * kQuantBytes;
    for (std::size_t b = 0; b < blocks; ++b) {
      std::memcpy(quants + b * kQuantBytes, in[b].qs, kQuantBytes);
      std::memcpy(scales + b * sizeof(in[b].d), &in[b].d, sizeof(in[b].d));
    }
  }
}

bool is_split(DType type) { return type == DType::Q8_0 || type == DType::Q4_0; }

}  // namespace

std::vector<std::uint8_t> to_device_layout(const WeightMatrix& host) {
  const auto* bytes = static_cast<const std::uint8_t*>(host.data);
  std::vector<std::uint8_t> out(bytes, bytes + host.bytes());
  if (host.dtype == DType::Q8_0) split_rows<cpu::BlockQ8_0>(host, out.data());
  if (host.dtype == DType::Q4_0) split_rows<cpu::BlockQ4_0>(host, out.data());
  return out;
}

DeviceBuffer<std::uint8_t> upload_weights(const WeightMatrix& host) {
  DeviceBuffer<std::uint8_t> device(host.bytes());
  upload_weights(host, device.data());
  return device;
}

void upload_weights(const WeightMatrix& host, std::uint8_t* device) {
  const std::size_t bytes = host.bytes();
  if (bytes == 0) return;
  if (is_split(host.dtype)) {
    const std::vector<std::uint8_t> laid_out = to_device_layout(host);
    RF_GPU_CHECK(gpuMemcpy(device, laid_out.data(), bytes, gpuMemcpyHostToDevice));
  } else {
    RF_GPU_CHECK(gpuMemcpy(device, host.data, bytes, gpuMemcpyHostToDevice));
  }
}

}  // namespace rf::gpu
