// The image worker on the GPU: a job that runs out of device memory fails alone and the worker goes
// on serving; the memory a job's activations held goes back to the device once the worker is idle.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "backend/gpu/runtime/vendor.h"
#include "engine/image_worker.h"
#include "backend/gpu/gpu_test.h"

namespace rf {
namespace {

namespace sd = stable_diffusion;

class GpuImageWorker : public gpu::test::GpuTest {
 protected:
  static ImageEvent last_event(ImageJob& job) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (std::chrono::steady_clock::now() < deadline) {
      for (ImageEvent& e : job.take(std::chrono::milliseconds(100))) {
        if (e.kind == ImageEvent::Kind::complete || e.kind == ImageEvent::Kind::failed) return std::move(e);
      }
    }
    ADD_FAILURE() << "the job did not end within 2 minutes";
    return {};
  }
  static ImageJobRequest request(ImageWorker& worker, int side, int batch) {
    ImageJobRequest r;
    r.options.prompt = "a red apple";
    r.options.width = r.options.height = side;
    r.options.batch = batch;
    r.options.sampler.steps = 2;
    r.options = worker.resolve(r.options);
    return r;
  }
  static std::size_t free_bytes() {
    std::size_t free = 0, total = 0;
    EXPECT_EQ(gpuMemGetInfo(&free, &total), gpuSuccess);
    return free;
  }
};

TEST_F(GpuImageWorker, AJobOutOfMemoryFailsAloneAndIdleMemoryGoesBack) {
  sd::OpenOptions open;
  open.clip_vocab = std::string(ROCMFORGE_SOURCE_DIR) + "/models/clip";
  ImageWorker worker(sd::Checkpoint::open(std::string(ROCMFORGE_FIXTURES) + "/sd/models/sd15/diffusers", open),
                     {.device = "auto", .threads = 2, .max_queued = 4, .model_name = "sd15"});
  ASSERT_EQ(last_event(*worker.submit(request(worker, 64, 1))).kind, ImageEvent::Kind::complete);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // idle: activations given back
  const std::size_t idle = free_bytes();

  // A big job holds its activations while it runs, and gives them back a second after.
  ASSERT_EQ(last_event(*worker.submit(request(worker, 512, 4))).kind, ImageEvent::Kind::complete);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const double kept_mib = (static_cast<double>(idle) - static_cast<double>(free_bytes())) / (1 << 20);
  fmt::print("  device memory kept after an idle second: {:.1f} MiB  tolerance 64 MiB\n", kept_mib);
  EXPECT_LE(kept_mib, 64.0);

  // Every byte but 32 MiB taken: the 2048x2048 batch of 8 cannot have its activations.
  std::vector<void*> hog;
  for (std::size_t chunk = std::size_t{1} << 30; chunk >= (std::size_t{1} << 20); chunk /= 2) {
    void* p = nullptr;
    while (free_bytes() > chunk + (32u << 20) && gpuMalloc(&p, chunk) == gpuSuccess) hog.push_back(p);
    (void)gpuGetLastError();
  }
  const ImageEvent failed = last_event(*worker.submit(request(worker, 2048, 8)));
  EXPECT_EQ(failed.kind, ImageEvent::Kind::failed);
  EXPECT_FALSE(failed.cancelled);
  fmt::print("  the job out of memory: {}\n", failed.message);
  for (void* p : hog) ASSERT_EQ(gpuFree(p), gpuSuccess);
  EXPECT_EQ(worker.metrics().ended(ImageOperation::generation, JobOutcome::failed), 1u);
  // And the worker goes on.
  const ImageEvent next = last_event(*worker.submit(request(worker, 64, 1)));
  EXPECT_EQ(next.kind, ImageEvent::Kind::complete) << next.message;
}

}  // namespace
}  // namespace rf
