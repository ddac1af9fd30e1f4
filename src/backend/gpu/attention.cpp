// launch_attention: the plan, and the scratch its split partials need. ops.h's launch has no context
// object to hold that scratch, so it is one buffer per stream, kept here and grown when a plan needs more.
#include <map>
#include <mutex>

#include "backend/gpu/attention_kernels.h"
#include "backend/gpu/device_buffer.h"

namespace rf::gpu {

namespace {

// At least `bytes` of device memory for work queued on `stream`. A buffer is regrown only after the
// stream's queued work is done with it. Streams are told apart by handle alone: two devices' null
// streams would share a buffer.
void* stream_workspace(gpuStream_t stream, std::size_t bytes) {
  static std::mutex mutex;
  // Never destroyed: freeing device memory after the runtime has shut down at exit is an error.
  static auto* buffers = new std::map<gpuStream_t, DeviceBuffer<std::uint8_t>>;
  const std::lock_guard lock(mutex);
  DeviceBuffer<std::uint8_t>& buffer = (*buffers)[stream];
  if (buffer.size() < bytes) {
    RF_GPU_CHECK(gpuStreamSynchronize(stream));
    buffer = DeviceBuffer<std::uint8_t>(bytes);
  }
  return buffer.data();
}

}  // namespace

void launch_attention(const float* q, KvCacheLayer cache, const AttentionBatch& batch, HeadShape shape, float scale,
                      float* out, gpuStream_t stream) {
  const AttentionPlan plan = plan_attention(batch, shape);
  const std::size_t bytes = attention_workspace_bytes(plan, batch, shape);
  void* workspace = bytes > 0 ? stream_workspace(stream, bytes) : nullptr;
  clear_attention_workspace(plan, batch, shape, workspace, stream);
  launch_attention_planned(plan, q, cache, batch, shape, scale, out, workspace, stream);
}

}  // namespace rf::gpu
