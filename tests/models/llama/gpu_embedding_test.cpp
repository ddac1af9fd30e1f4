// Embeddings on the GPU backend against transformers (tests/engine/embedding_reference.h), in
// prompt chunks and in one step. Skipped without a device.
#include "backend/gpu/runtime/devices.h"
#include "engine/backend_select.h"
#include "engine/embedding_reference.h"

namespace rf::embedding_reference {
namespace {

class EmbeddingGpu : public EmbeddingReferenceTest {
 protected:
  void SetUp() override {
    static const gpu::DeviceScan scan = gpu::scan_devices();
    if (scan.devices.empty()) GTEST_SKIP() << scan.why_none;
  }
  // The f16 KV cache and the tensor-core prefill's f16 rounding of q and the softmax weights
  // (gpu_hf_reference_test's 5e-3 of the largest logit on the f32 fixtures) move a unit vector's
  // components by about 2^-11 of the hidden state each layer; 3e-3 holds them. A wrong pooling
  // row, norm or position moves them by O(0.1).
  static constexpr double kTolerance = 3e-3;
};

TEST_F(EmbeddingGpu, MatchesTransformersInChunks) {
  load(built_backends().back(), 8);
  expect_matches_reference(kTolerance);
}

TEST_F(EmbeddingGpu, MatchesTransformersInOneStep) {
  load(built_backends().back(), 512);
  expect_matches_reference(kTolerance);
}

}  // namespace
}  // namespace rf::embedding_reference
