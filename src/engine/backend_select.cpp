#include "engine/backend_select.h"

#include <cstdio>

#include <fmt/format.h>

#include "models/llama/cpu_forward.h"
#include "util/error.h"

#if defined(ROCMFORGE_GPU_BACKEND)
#include "backend/gpu/gpu_device.h"
#include "models/llama/gpu_forward.h"
#endif

namespace rf {

namespace {

#if defined(ROCMFORGE_GPU_BACKEND)
// What users call the build's GPU backend: --device cuda or --device rocm.
constexpr std::string_view kGpuDevice = std::string_view(ROCMFORGE_GPU_BACKEND) == "hip" ? "rocm" : "cuda";

llama::GpuForwardOptions gpu_options(const BackendShape& shape) {
  return {.block_size = shape.block_size,
          .kv_blocks = shape.kv_blocks,
          .max_batch_tokens = shape.max_batch_tokens,
          .batch_invariant = shape.batch_invariant};
}
#endif

std::string_view display_name(const std::string& device) { return device == "cuda" ? "CUDA" : "ROCm"; }

}  // namespace

std::unique_ptr<ForwardPass> make_forward_pass(const std::string& device, const Checkpoint& checkpoint,
                                               ThreadPool& pool, const BackendShape& shape) {
  if (device != "auto" && device != "cpu" && device != "cuda" && device != "rocm") {
    fail("unknown device '{}' (use auto, cpu, cuda or rocm)", device);
  }
#if defined(ROCMFORGE_GPU_BACKEND)
  if (device == "auto" || device == kGpuDevice) {
    const gpu::DeviceScan scan = gpu::scan_devices();
    if (!scan.devices.empty()) {
      return std::make_unique<llama::GpuForward>(checkpoint.config(), checkpoint.weights(), gpu_options(shape));
    }
    if (device != "auto") fail("--device {}: this build has the {} backend, but {}", device, display_name(device), scan.why_none);
    fmt::print(stderr, "rocmforge: {}; running on the CPU\n", scan.why_none);
  }
#endif
  if (device == "cuda" || device == "rocm") {
    fail("--device {}: this build of rocmforge has no {} backend (build the '{}' preset)", device,
         display_name(device), device);
  }
  return std::make_unique<llama::CpuForward>(checkpoint.config(), checkpoint.weights(), pool, shape.block_size,
                                             shape.kv_blocks);
}

std::vector<std::string> built_backends() {
#if defined(ROCMFORGE_GPU_BACKEND)
  return {"cpu", std::string(kGpuDevice)};
#else
  return {"cpu"};
#endif
}

std::vector<std::string> describe_gpu_devices() {
  std::vector<std::string> lines;
#if defined(ROCMFORGE_GPU_BACKEND)
  const gpu::DeviceScan scan = gpu::scan_devices();
  if (scan.devices.empty()) lines.push_back(fmt::format("no GPU device found ({})", scan.why_none));
  for (const auto& d : scan.devices) {
    lines.push_back(fmt::format("{}:{} {}, {}, {:.1f} GiB, {} multiprocessors of {}-lane warps", kGpuDevice, d.index,
                                d.name, d.arch, d.total_memory / double(1u << 30), d.multiprocessors, d.warp_size));
  }
#endif
  return lines;
}

std::optional<MemoryFootprint> gpu_footprint(const Checkpoint& checkpoint, const BackendShape& shape) {
#if defined(ROCMFORGE_GPU_BACKEND)
  return llama::GpuForward::footprint(checkpoint.config(), checkpoint.weight_bytes(), gpu_options(shape));
#else
  (void)checkpoint;
  (void)shape;
  return std::nullopt;
#endif
}

}  // namespace rf
