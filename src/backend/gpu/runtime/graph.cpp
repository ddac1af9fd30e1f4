#include "backend/gpu/runtime/graph.h"

#if defined(__HIP_CPU_RT__)
#include "util/error.h"
#endif

namespace rf::gpu {

#if defined(__HIP_CPU_RT__)

CapturedGraph::CapturedGraph(gpuStream_t, const std::function<void()>&) {
  throw Error("graph capture: HIP-CPU has no graphs (check kGraphCapture and launch eagerly)");
}
CapturedGraph::~CapturedGraph() = default;
void CapturedGraph::launch(gpuStream_t) const {}

#else

CapturedGraph::CapturedGraph(gpuStream_t stream, const std::function<void()>& launches) {
  // Thread-local: another thread's unrelated runtime calls neither join nor break the capture.
  RF_GPU_CHECK(gpuStreamBeginCapture(stream, gpuStreamCaptureModeThreadLocal));
  gpuGraph_t graph = nullptr;
  try {
    launches();
  } catch (...) {
    // End the capture so the stream is usable again; the partial graph is worthless.
    if (gpuStreamEndCapture(stream, &graph) == gpuSuccess && graph) (void)gpuGraphDestroy(graph);
    (void)gpuGetLastError();
    throw;
  }
  RF_GPU_CHECK(gpuStreamEndCapture(stream, &graph));
  const gpuError_t status = gpuGraphInstantiateWithFlags(&exec_, graph, 0);
  (void)gpuGraphDestroy(graph);
  RF_GPU_CHECK(status);
}

CapturedGraph::~CapturedGraph() {
  if (exec_) (void)gpuGraphExecDestroy(exec_);
}

void CapturedGraph::launch(gpuStream_t stream) const { RF_GPU_CHECK(gpuGraphLaunch(exec_, stream)); }

#endif

}  // namespace rf::gpu
