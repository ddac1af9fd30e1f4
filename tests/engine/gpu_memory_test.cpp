// A model that does not fit the GPU fails at load, before anything is uploaded, naming what it needs
// and what the device has free (issue #29): not an allocation failure part way through the upload.
#include <gtest/gtest.h>

#include <string>

#include "backend/gpu/runtime/devices.h"
#include "engine/backend_select.h"
#include "engine/model_runner.h"
#include "util/error.h"

namespace rf {
namespace {

TEST(GpuMemory, AModelThatDoesNotFitFailsAtLoadSayingWhy) {
  if (gpu::scan_devices().devices.empty()) GTEST_SKIP() << "no GPU";
  const std::string model = std::string(ROCMFORGE_FIXTURES) + "/models/llama3/model.q4_k_m.gguf";
  // 2^30 positions of KV cache: 1 TiB for this small model (2 layers of 2 KV heads of 64 in f16).
  const RunnerOptions options{.threads = 1, .ctx_size = 64, .kv_cache_tokens = 1 << 30, .device = "auto"};
  try {
    ModelRunner runner(model, options);
    FAIL() << "the model loaded with a 1 TiB KV cache";
  } catch (const Error& e) {
    const std::string what = e.what();
    std::printf("[  message ] %s\n", what.c_str());
    EXPECT_NE(what.find("the model needs"), std::string::npos) << what;
    EXPECT_NE(what.find("KV cache 1024.00 GiB for 1073741824 tokens"), std::string::npos) << what;
    EXPECT_NE(what.find("are free; lower --kv-size"), std::string::npos) << what;
  }
  // The same model with a KV cache that fits loads on the same device.
  const ModelRunner fits(model, RunnerOptions{.threads = 1, .ctx_size = 64, .device = "auto"});
  EXPECT_NE(fits.backend().device_name().find("cpu"), 0u) << fits.backend().device_name();
}

// Under --gpu-memory, a model that fits the device but not the bound fails at load naming the bound.
TEST(GpuMemory, AModelPastTheBoundFailsAtLoadNamingIt) {
  if (gpu::scan_devices().devices.empty()) GTEST_SKIP() << "no GPU";
  const std::string model = std::string(ROCMFORGE_FIXTURES) + "/models/llama3/model.q4_k_m.gguf";
  const RunnerOptions options{.threads = 1, .ctx_size = 64, .device = "auto"};
  bound_gpu_memory({.bytes = std::uint64_t{1} << 20});
  try {
    ModelRunner runner(model, options);
    ADD_FAILURE() << "the model loaded within 1 MiB";
  } catch (const Error& e) {
    const std::string what = e.what();
    std::printf("[  message ] %s\n", what.c_str());
    EXPECT_NE(what.find("the model needs"), std::string::npos) << what;
    EXPECT_NE(what.find("(--gpu-memory allows 0.00 GiB"), std::string::npos) << what;
  }
  bound_gpu_memory({});
  const ModelRunner fits(model, options);
  EXPECT_NE(fits.backend().device_name().find("cpu"), 0u) << fits.backend().device_name();
}

}  // namespace
}  // namespace rf
