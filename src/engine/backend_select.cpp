#include "engine/backend_select.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include <fmt/format.h>

#include "backend/cpu/image_backend.h"
#include "backend/cpu/rank_sum.h"
#include "engine/tensor_parallel.h"
#include "models/llama/cpu_forward.h"
#include "models/llama/tensor_split.h"
#include "models/llama/weights.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

#if defined(ROCMFORGE_GPU_BACKEND)
#include "backend/gpu/image/image_backend.h"
#include "backend/gpu/collective/communicator.h"
#include "backend/gpu/runtime/devices.h"
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
          .max_context = shape.max_context,
          .max_batch_tokens = shape.max_batch_tokens,
          .batch_invariant = shape.batch_invariant};
}

// Fails naming what the model needs and what is free, before a byte is uploaded: otherwise the
// load would run out of memory part way, after minutes of copying, naming one buffer.
void require_room(int device, const ModelConfig& config, std::size_t weight_bytes,
                  const llama::GpuForwardOptions& options) {
  const MemoryFootprint need = llama::GpuForward::footprint(config, weight_bytes, options);
  const gpu::MemoryUse use = gpu::memory_use(device);
  if (need.total() <= use.room()) return;
  const std::string within = use.bound < use.total ? fmt::format(" (--gpu-memory allows {}, {} of it in use)",
                                                                  gpu::gib(use.bound), gpu::gib(use.held))
                                                    : "";
  fail("{}:{}: the model needs {} of GPU memory (weights {}, KV cache {} for {} tokens, activations {} for {} "
       "tokens a step), and {} of the device's {} are free{}; lower --kv-size, --ctx-size or --batch-size, or use a "
       "smaller quantization",
       kGpuDevice, device, gpu::gib(need.total()), gpu::gib(need.weights), gpu::gib(need.kv_cache),
       static_cast<long long>(options.kv_blocks) * options.block_size, gpu::gib(need.activations),
       options.max_batch_tokens, gpu::gib(use.free), gpu::gib(use.total), within);
}

// The ranks' GPUs: --devices, else tensor_parallel of them from the one --device picks.
std::vector<int> rank_devices(int first, const BackendShape& shape) {
  std::vector<int> devices = shape.devices;
  if (devices.empty()) {
    for (int r = 0; r < shape.tensor_parallel; ++r) devices.push_back(first + r);
  }
  if (static_cast<int>(devices.size()) != shape.tensor_parallel) {
    fail("--tensor-parallel {} needs as many --devices, got {}", shape.tensor_parallel, devices.size());
  }
  const int count = static_cast<int>(gpu::scan_devices().devices.size());
  for (int d : devices) {
    if (d >= count) fail("tensor parallelism over GPU {}: this machine has {} {} device{}", d, count, kGpuDevice, count == 1 ? "" : "s");
  }
  return devices;
}

// One rank per GPU, joined by the vendor's collectives (NCCL, RCCL).
std::unique_ptr<ForwardPass> make_gpu_tensor_parallel(int first, const Checkpoint& checkpoint, const BackendShape& shape,
                                                      const ProgressFn& progress) {
  if (const std::optional<std::string> why = llama::gpu_unsupported(checkpoint.config())) {
    fail("{}: tensor parallelism runs on GPUs only", *why);
  }
  const std::vector<int> devices = rank_devices(first, shape);
  auto group = std::make_shared<std::vector<std::unique_ptr<gpu::Communicator>>>(gpu::Communicator::local_group(devices));
  TensorParallelForward::Backend backend;
  backend.make = [=](int rank, const ModelConfig& config, const LlamaWeights& weights) {
    llama::GpuForwardOptions options = gpu_options(shape);
    options.device = devices[rank];
    options.communicator = (*group)[rank].get();
    if (rank == 0) options.load_progress = progress;  // rank 0's bytes stand for every rank's
    require_room(options.device, config, llama::matrix_bytes(weights, config), options);
    return std::make_unique<llama::GpuForward>(config, weights, options);
  };
  backend.copies_weights = true;
  backend.samples_on_device = true;
  backend.abort = [group] {
    for (auto& communicator : *group) communicator->abort();
  };
  return std::make_unique<TensorParallelForward>(checkpoint.config(), checkpoint.weights(), shape.tensor_parallel,
                                                 std::move(backend));
}
#endif

// Ranks on the CPU, each with a share of the threads, adding up their partial sums on the host.
std::unique_ptr<ForwardPass> make_cpu_tensor_parallel(const Checkpoint& checkpoint, ThreadPool& pool,
                                                      const BackendShape& shape) {
  const int world = shape.tensor_parallel;
  auto sum = std::make_shared<cpu::RankSum>(world);
  auto pools = std::make_shared<std::vector<std::unique_ptr<ThreadPool>>>(world);
  TensorParallelForward::Backend backend;
  const int threads = std::max(1, pool.size() / world);
  backend.make = [=](int rank, const ModelConfig& config, const LlamaWeights& weights) {
    ThreadPool& rank_pool = *((*pools)[rank] = std::make_unique<ThreadPool>(threads));
    auto pass = std::make_unique<llama::CpuForward>(config, weights, rank_pool, shape.block_size, shape.kv_blocks,
                                                    shape.max_context);
    pass->set_rank_sum([sum, rank](std::span<float> values) { sum->sum(rank, values); });
    return pass;
  };
  backend.abort = [sum] { sum->abort(); };
  return std::make_unique<TensorParallelForward>(checkpoint.config(), checkpoint.weights(), world, std::move(backend));
}

// The CPU reads weights where they lie (a file's mapping): their pages come in now, not during
// the first request.
void read_in_weights(const Checkpoint& checkpoint, const ProgressFn& progress) {
  const std::uint64_t total = llama::matrix_bytes(checkpoint.weights(), checkpoint.config());
  std::uint64_t done = 0;
  llama::for_each_matrix(checkpoint.weights(), checkpoint.config(), [&](const WeightMatrix& m) {
    read_in(m.data, m.bytes());
    done += m.bytes();
    if (progress) progress(done, total);
  });
}

std::string_view display_name(const std::string& device) { return device == "cuda" ? "CUDA" : "ROCm"; }

bool gpu_memory_bounded = false;  // a run on the CPU says that --gpu-memory bounds nothing there

}  // namespace

DeviceChoice parse_device(const std::string& device) {
  const std::size_t colon = device.find(':');
  DeviceChoice choice{device.substr(0, colon), std::nullopt};
  const bool known = choice.kind == "auto" || choice.kind == "cpu" || choice.kind == "cuda" || choice.kind == "rocm";
  if (!known || (colon != std::string::npos && choice.kind != "cuda" && choice.kind != "rocm")) {
    fail("unknown device '{}' (use auto, cpu, cuda, rocm, or cuda:N / rocm:N for GPU N)", device);
  }
  if (colon != std::string::npos) {
    const std::string index = device.substr(colon + 1);
    int value = -1;
    const auto [end, error] = std::from_chars(index.data(), index.data() + index.size(), value);
    if (index.empty() || error != std::errc() || end != index.data() + index.size() || value < 0) {
      fail("device '{}': the GPU index after ':' must be a number from 0", device);
    }
    choice.index = value;
  }
  return choice;
}

std::vector<int> parse_device_list(const std::string& devices) {
  std::vector<int> list;
  std::size_t begin = 0;
  while (begin <= devices.size()) {
    const std::size_t comma = std::min(devices.find(',', begin), devices.size());
    int value = -1;
    const auto [end, error] = std::from_chars(devices.data() + begin, devices.data() + comma, value);
    if (comma == begin || error != std::errc() || end != devices.data() + comma || value < 0) {
      fail("--devices '{}': give GPU indexes from 0, separated by commas (0,1)", devices);
    }
    if (std::find(list.begin(), list.end(), value) != list.end()) fail("--devices '{}': GPU {} twice", devices, value);
    list.push_back(value);
    begin = comma + 1;
  }
  return list;
}

std::optional<int> resolve_gpu(const std::string& device) {
  const DeviceChoice choice = parse_device(device);
#if defined(ROCMFORGE_GPU_BACKEND)
  if (choice.kind == "auto" || choice.kind == kGpuDevice) {
    const gpu::DeviceScan scan = gpu::scan_devices();
    const int count = static_cast<int>(scan.devices.size());
    if (choice.index && count > 0 && *choice.index >= count) {
      fail("--device {}: this machine has {} {} device{}", device, count, display_name(choice.kind), count == 1 ? "" : "s");
    }
    if (count > 0) return choice.index.value_or(0);
    if (choice.kind != "auto") {
      fail("--device {}: this build has the {} backend, but {}", device, display_name(choice.kind), scan.why_none);
    }
    fmt::print(stderr, "rocmforge: {}; running on the CPU\n", scan.why_none);
  }
#endif
  if (choice.kind == "cuda" || choice.kind == "rocm") {
    fail("--device {}: this build of rocmforge has no {} backend (build the '{}' preset)", device,
         display_name(choice.kind), choice.kind);
  }
  if (gpu_memory_bounded) fmt::print(stderr, "rocmforge: --gpu-memory bounds GPU memory; this runs on the CPU\n");
  return std::nullopt;
}

void bound_gpu_memory(const MemoryBound& bound) {
  gpu_memory_bounded = bound.bounds_anything();
#if defined(ROCMFORGE_GPU_BACKEND)
  gpu::set_memory_bound(bound);
#endif
}

std::unique_ptr<ForwardPass> make_forward_pass(const std::string& device, const Checkpoint& checkpoint,
                                               ThreadPool& pool, const BackendShape& shape,
                                               const ProgressFn& progress) {
#if defined(ROCMFORGE_GPU_BACKEND)
  if (const std::optional<int> gpu = resolve_gpu(device)) {
    if (shape.tensor_parallel > 1) return make_gpu_tensor_parallel(*gpu, checkpoint, shape, progress);
    llama::GpuForwardOptions options = gpu_options(shape);
    options.device = shape.devices.empty() ? *gpu : rank_devices(*gpu, shape)[0];
    options.load_progress = progress;
    const std::optional<std::string> why = llama::gpu_unsupported(checkpoint.config());
    // Asked for the GPU, the model fails there naming why; left to choose, it runs on the CPU.
    if (!why || parse_device(device).kind != "auto") {
      require_room(*gpu, checkpoint.config(), checkpoint.weight_bytes(), options);
      return std::make_unique<llama::GpuForward>(checkpoint.config(), checkpoint.weights(), options);
    }
    fmt::print(stderr, "rocmforge: {}; running on the CPU\n", *why);
  }
#else
  (void)resolve_gpu(device);
#endif
  if (!shape.devices.empty()) fail("--devices picks GPUs, and this runs on the CPU");
  if (shape.tensor_parallel > 1) return make_cpu_tensor_parallel(checkpoint, pool, shape);
  read_in_weights(checkpoint, progress);
  return std::make_unique<llama::CpuForward>(checkpoint.config(), checkpoint.weights(), pool, shape.block_size,
                                             shape.kv_blocks, shape.max_context);
}

std::unique_ptr<ImageBackend> make_image_backend(const std::string& device, ThreadPool& pool) {
#if defined(ROCMFORGE_GPU_BACKEND)
  if (const std::optional<int> gpu = resolve_gpu(device)) return gpu::make_image_backend(*gpu);
#else
  (void)resolve_gpu(device);
#endif
  return std::make_unique<cpu::CpuImageBackend>(pool);
}

std::vector<std::string> built_backends() {
#if defined(ROCMFORGE_GPU_BACKEND)
  return {"cpu", std::string(kGpuDevice)};
#else
  return {"cpu"};
#endif
}

std::string describe_collectives() {
#if defined(ROCMFORGE_GPU_BACKEND)
  const std::string library = gpu::collectives_library();
  return library.empty() ? "none in this build (no RCCL found): one GPU at a time"
                         : library + ": --tensor-parallel over this machine's GPUs";
#else
  return "";
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
  const int world = shape.tensor_parallel;
  if (world > 1) {
    const ModelConfig& c = checkpoint.config();
    llama::check_split(c, checkpoint.weights(), world);
    return llama::GpuForward::footprint(llama::rank_config(c, 0, world),
                                        llama::rank_matrix_bytes(c, checkpoint.weights(), world), gpu_options(shape));
  }
  return llama::GpuForward::footprint(checkpoint.config(), checkpoint.weight_bytes(), gpu_options(shape));
#else
  (void)checkpoint;
  (void)shape;
  return std::nullopt;
#endif
}

}  // namespace rf
