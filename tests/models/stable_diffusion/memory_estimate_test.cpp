// The dry run's memory estimate on the tiny SD 1.5 model: its weights against a count made here from
// the checkpoint's tensors, its activations against the tensors a VAE decode must hold at once.
#include "models/stable_diffusion/memory_estimate.h"

#include <gtest/gtest.h>

#include "models/stable_diffusion/checkpoint_fixture.h"

namespace rf::stable_diffusion {
namespace {

class MemoryEstimateTest : public ::testing::Test {
 protected:
  MemoryEstimateTest() : checkpoint_(Checkpoint::open(fixture::folder("sd15"), fixture::options())) {}
  MemoryEstimate estimate(int width, int height, int batch) const {
    GenerationOptions o;
    o.width = width;
    o.height = height;
    o.batch = batch;
    o.sampler.steps = 2;
    return estimate_memory({checkpoint_.config(), checkpoint_.unet(), checkpoint_.vae(), checkpoint_.text_encoder(),
                            nullptr, checkpoint_.tokenizer()},
                           o);
  }
  Checkpoint checkpoint_;
};

TEST_F(MemoryEstimateTest, WeightsAreTheTensorsAsTheGpuKeepsThem) {
  // The fixture is f16: matrices and convolutions stay 16-bit, 1-D parameters become fp32.
  std::size_t expected = 0;
  for (const TensorSet* part : {&checkpoint_.unet(), &checkpoint_.vae(), &checkpoint_.text_encoder()}) {
    for (const TensorView& view : *part) {
      if (is_auxiliary(view.dtype)) continue;  // position ids
      expected += view.elements() * (view.n_dims == 1 ? sizeof(float) : sizeof(std::uint16_t));
    }
  }
  EXPECT_EQ(estimate(64, 64, 1).weights, expected);
}

TEST_F(MemoryEstimateTest, ActivationsHoldAtLeastTheVaesLastConvolution) {
  for (const auto& [width, height, batch] : {std::tuple{64, 64, 1}, std::tuple{128, 96, 1}, std::tuple{128, 96, 3}}) {
    const MemoryEstimate m = estimate(width, height, batch);
    // The decoder's last convolution reads its first level's channels and writes RGB, both at full size.
    const std::size_t pixels = static_cast<std::size_t>(width) * height;
    const std::size_t last_conv = (checkpoint_.config().vae.block_out_channels.front() + 3) * pixels * sizeof(float);
    std::printf("%dx%d batch %d: activations %zu bytes, the last convolution's %zu\n", width, height, batch,
                m.activations, last_conv);
    EXPECT_GE(m.activations, last_conv);
    // One image at a time through the VAE: a batch adds no more than the UNet's share.
    EXPECT_LT(m.activations, 64 * last_conv);
  }
  EXPECT_GT(estimate(128, 96, 1).activations, estimate(64, 64, 1).activations);
}

}  // namespace
}  // namespace rf::stable_diffusion
