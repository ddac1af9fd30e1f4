// launch_attention: the plan, and scratch for its split partials, kept per context and grown when a
// plan needs more (the decoder instead sizes its workspace once for every plan it may make).
#include <map>
#include <mutex>

#include "backend/gpu/runtime/device_buffer.h"
#include "backend/gpu/support/kernels.h"

namespace rf::gpu::test {

namespace {

// At least `bytes` of device memory for work queued on ctx's stream; regrown only after that work is
// done with it. Never destroyed: freeing device memory after the runtime has shut down is an error.
void* context_workspace(const DeviceContext& ctx, std::size_t bytes) {
  static std::mutex mutex;
  static auto* buffers = new std::map<const DeviceContext*, DeviceBuffer<std::uint8_t>>;
  const std::lock_guard lock(mutex);
  DeviceBuffer<std::uint8_t>& buffer = (*buffers)[&ctx];
  if (buffer.size() < bytes) {
    ctx.synchronize();
    buffer = DeviceBuffer<std::uint8_t>(bytes);
  }
  return buffer.data();
}

}  // namespace

void launch_attention(const float* q, KvCacheLayer cache, const AttentionBatch& batch, HeadShape shape, float scale,
                      float* out, const DeviceContext& ctx) {
  const AttentionPlan plan = plan_attention(ctx, batch, shape);
  const std::size_t bytes = attention_workspace_bytes(plan, batch, shape);
  void* workspace = bytes > 0 ? context_workspace(ctx, bytes) : nullptr;
  clear_attention_workspace(plan, batch, shape, workspace, ctx);
  launch_attention_planned(plan, q, cache, batch, shape, scale, out, workspace, ctx);
}

}  // namespace rf::gpu::test
