// A CUDA injection library that records when each kernel ran on the GPU, graph nodes included, through
// CUPTI's activity API, for tools/kernel_timeline.py to say what each kernel costs in place: with
// programmatic dependent launch a kernel's own duration overlaps its neighbours', so the time a step
// spends on it is the gap between its end and the end of the kernel before (no nsys on the device
// machines: its target binary cannot import its own trace).
//
//   CUDA_INJECTION64_PATH=build/cuda/libkernel_trace.so ROCMFORGE_KERNEL_TRACE=trace.csv rocmforge bench ...
//
// writes one line a kernel, when the program exits: start and end (ns, the GPU's clock), device,
// stream, grid and block sizes, and the demangled name.
#include <cupti.h>
#include <cxxabi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct KernelRecord {
  std::uint64_t start, end;
  std::uint32_t device, stream;
  std::int64_t grid, block;
  std::string name;
};

std::mutex records_mutex;
std::vector<KernelRecord> records;

void check(CUptiResult result, const char* what) {
  if (result == CUPTI_SUCCESS) return;
  const char* message = nullptr;
  cuptiGetResultString(result, &message);
  std::fprintf(stderr, "kernel_trace: %s: %s\n", what, message ? message : "unknown CUPTI error");
}

std::string demangle(const char* name) {
  if (!name) return "?";
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> plain(abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && plain ? plain.get() : name;
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  constexpr std::size_t kBytes = std::size_t{8} << 20;
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, kBytes));
  *size = *buffer ? kBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream, std::uint8_t* buffer, std::size_t,
                               std::size_t valid) {
  std::size_t dropped = 0;
  check(cuptiActivityGetNumDroppedRecords(context, stream, &dropped), "count dropped records");
  if (dropped > 0) std::fprintf(stderr, "kernel_trace: %zu records dropped: the timeline has holes\n", dropped);
  CUpti_Activity* record = nullptr;
  {
    const std::lock_guard lock(records_mutex);
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      records.push_back({k->start, k->end, k->deviceId, k->streamId,
                         static_cast<std::int64_t>(k->gridX) * k->gridY * k->gridZ,
                         static_cast<std::int64_t>(k->blockX) * k->blockY * k->blockZ, demangle(k->name)});
    }
  }
  std::free(buffer);
}

void write_trace() {
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush");
  const char* path = std::getenv("ROCMFORGE_KERNEL_TRACE");
  std::FILE* out = path ? std::fopen(path, "w") : stderr;
  if (!out) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", path);
    return;
  }
  const std::lock_guard lock(records_mutex);
  std::fprintf(out, "start_ns,end_ns,device,stream,grid,block,name\n");
  for (const KernelRecord& r : records) {
    std::string name = r.name;
    for (char& c : name) c = c == '"' ? '\'' : c;
    std::fprintf(out, "%llu,%llu,%u,%u,%lld,%lld,\"%s\"\n", static_cast<unsigned long long>(r.start),
                 static_cast<unsigned long long>(r.end), r.device, r.stream, static_cast<long long>(r.grid),
                 static_cast<long long>(r.block), name.c_str());
  }
  if (out != stderr) std::fclose(out);
  std::fprintf(stderr, "kernel_trace: %zu kernels\n", records.size());
}

}  // namespace

// Called by the CUDA driver when it loads this library (CUDA_INJECTION64_PATH), before any work runs.
extern "C" int InitializeInjection() {
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "register callbacks");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable kernel records");
  std::atexit(write_trace);
  return 1;
}
