#pragma once
// Which backend runs a model: the CPU, or this build's GPU backend (CUDA or HIP) where there is a
// device. The one place that knows which backends the build has.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/image_backend.h"
#include "model/checkpoint.h"
#include "model/forward_pass.h"
#include "util/memory_bound.h"
#include "util/progress_meter.h"

namespace rf {

class ThreadPool;

struct BackendShape {
  int block_size;
  int kv_blocks;
  int max_context;  // the longest sequence (the context size): LongRoPE picks its factors by it
  int max_batch_tokens;
  // A token's logits never depend on what it is batched with, so that greedy requests served together
  // get exactly what they get alone. The CPU backend always works so; the GPU backend then gives up its
  // faster batched kernels (gpu::GpuForwardOptions::batch_invariant).
  bool batch_invariant = false;
  // Ranks of tensor parallelism (engine/tensor_parallel.h): GPUs, one rank each, or on the CPU a share
  // of the threads each (the split's reference, not faster). 1: the whole model on one device.
  int tensor_parallel = 1;
  // The GPUs of the ranks, by index; empty: tensor_parallel GPUs from the --device's index (0).
  std::vector<int> devices = {};
};

// A --device value: its kind (auto, cpu, cuda or rocm) and, for "cuda:N" or "rocm:N", the GPU's index.
struct DeviceChoice {
  std::string kind;
  std::optional<int> index;
};
// Throws rf::Error naming the value where it is none of those.
DeviceChoice parse_device(const std::string& device);

// device "auto": the first GPU when the build has a GPU backend and it finds a device, else the CPU
// (with a one-line notice on stderr when a GPU build found none); "cpu"; "cuda" or "rocm": that
// backend's first GPU, "cuda:N" or "rocm:N" its GPU N, failing when the build lacks it or it finds no
// such device. The checkpoint and pool must outlive it. The CPU reads the weights in (the pages of
// a mapped file) and the GPU uploads them, both before returning, telling `progress` the bytes.
std::unique_ptr<ForwardPass> make_forward_pass(const std::string& device, const Checkpoint& checkpoint,
                                               ThreadPool& pool, const BackendShape& shape,
                                               const ProgressFn& progress = {});

// A --devices value, "0,1,2,3": GPU indexes, distinct. Throws rf::Error naming the value otherwise.
std::vector<int> parse_device_list(const std::string& devices);

// The GPU a --device value picks (by the rules above), or nullopt for the CPU.
std::optional<int> resolve_gpu(const std::string& device);

// --gpu-memory: what rocmforge's buffers may take of each GPU from now on; models that do not fit
// within it fail at load, and a request that would pass it fails alone. The CPU ignores it, saying so.
void bound_gpu_memory(const MemoryBound& bound);

// Stable Diffusion's operations on the --device asked for (same rules); the pool must outlive it.
std::unique_ptr<ImageBackend> make_image_backend(const std::string& device, ThreadPool& pool);

// The GPU backend's collectives library for tensor parallelism ("NCCL 2.28.9"), or why there is none;
// empty in a CPU-only build.
std::string describe_collectives();

// "cpu", then "cuda" or "rocm" in a GPU build.
std::vector<std::string> built_backends();

// One line per device of the build's GPU backend ("cuda:0 NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB"),
// or one saying why there is none; nothing in a CPU-only build.
std::vector<std::string> describe_gpu_devices();

// What the model takes on the GPU backend (KV cache in f16), on each GPU where tensor_parallel splits
// it; nullopt in a CPU-only build.
std::optional<MemoryFootprint> gpu_footprint(const Checkpoint& checkpoint, const BackendShape& shape);

}  // namespace rf
