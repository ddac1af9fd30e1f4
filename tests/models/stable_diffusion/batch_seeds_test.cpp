// A batch's seeds on the tiny SD 1.5 model (64x48, 3 steps, the CPU backend): per image (A1111's
// seed + i) each image is the one batch 1 makes at its seed; shared, the batch is one generator's
// draws, as before per-image seeds and as a diffusers script passing one generator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/image_backend.h"
#include "models/stable_diffusion/checkpoint_fixture.h"
#include "models/stable_diffusion/pipeline.h"
#include "util/thread_pool.h"

namespace rf::stable_diffusion {
namespace {

constexpr std::uint64_t kSeed = 5;
constexpr int kBatch = 3;

class BatchNoise : public ::testing::TestWithParam<std::tuple<SamplerKind, Rng>> {
 protected:
  BatchNoise()
      : checkpoint_(Checkpoint::open(fixture::folder("sd15"), fixture::options())),
        pipeline_({checkpoint_.config(), checkpoint_.unet(), checkpoint_.vae(), checkpoint_.text_encoder(), nullptr,
                   checkpoint_.tokenizer()},
                  backend_) {}

  GenerationOptions options(int batch, std::uint64_t seed, BatchSeeds seeds) const {
    GenerationOptions o;
    o.prompt = "a lighthouse";
    o.negative_prompt = "fog";
    o.width = 64;
    o.height = 48;
    o.batch = batch;
    o.sampler.kind = std::get<0>(GetParam());
    o.sampler.steps = 3;
    o.seed = seed;
    o.rng = std::get<1>(GetParam());
    o.batch_seeds = seeds;
    return o;
  }
  static std::span<const float> image(const Images& images, int i) {
    const std::size_t size = images.pixels.size() / images.batch;
    return std::span(images.pixels).subspan(i * size, size);
  }
  // Prints how far image a is from b (values that differ, the largest difference) and says whether
  // they are equal, value for value.
  static bool same(const std::string& what, std::span<const float> a, std::span<const float> b) {
    std::size_t differ = 0;
    double largest = 0;
    for (std::size_t k = 0; k < a.size(); ++k) {
      differ += a[k] != b[k];
      largest = std::max(largest, static_cast<double>(std::abs(a[k] - b[k])));
    }
    std::printf("[ compare  ] %s: %zu of %zu values differ, by up to %.3g\n", what.c_str(), differ, a.size(), largest);
    return a.size() == b.size() && differ == 0;
  }
  bool ancestral() const { return std::get<0>(GetParam()) == SamplerKind::euler_ancestral; }

  Checkpoint checkpoint_;
  ThreadPool pool_{2};
  cpu::CpuImageBackend backend_{pool_};
  Pipeline pipeline_;
};

// The property A1111's infotexts rely on: any image of a batch, remade alone at its own seed.
TEST_P(BatchNoise, PerImageEachImageIsBatchOneAtSeedPlusI) {
  const Images batch = pipeline_.generate(options(kBatch, kSeed, BatchSeeds::per_image));
  for (int i = 0; i < kBatch; ++i) {
    const Images alone = pipeline_.generate(options(1, kSeed + i, BatchSeeds::per_image));
    EXPECT_TRUE(same("batch image " + std::to_string(i + 1) + " vs batch 1 at seed " + std::to_string(kSeed + i),
                     image(batch, i), alone.pixels));
  }
}

// Shared: the initial latents are one draw of the whole batch's size and the steps' noise comes from
// the same generator, as rocmforge made batches before per-image seeds.
TEST_P(BatchNoise, SharedIsOneGeneratorDrawnForTheWholeBatch) {
  const GenerationOptions o = options(kBatch, kSeed, BatchSeeds::shared);
  const std::unique_ptr<NoiseSource> generator = make_generator(o.rng, o.seed);
  std::vector<float> noise(static_cast<std::size_t>(kBatch) * 4 * (48 / 8) * (64 / 8));
  generator->randn(noise);
  EXPECT_TRUE(same("shared batch vs one generator's draws", pipeline_.generate(o).pixels,
                   pipeline_.generate(o, noise, *generator).pixels));
}

// The two modes differ where they should. Image 1's latents are the start of the shared draw, and
// so is its step noise with the CUDA generator (element i of any draw comes from Philox stream i);
// torch's CPU generator instead goes on from the end of the whole batch's draw, so an ancestral
// sampler sets image 1 apart there. Images 2 and 3 differ from the start.
TEST_P(BatchNoise, SharedDiffersFromPerImageButForImageOne) {
  const Images shared = pipeline_.generate(options(kBatch, kSeed, BatchSeeds::shared));
  const Images per_image = pipeline_.generate(options(kBatch, kSeed, BatchSeeds::per_image));
  const bool cpu_step_noise = ancestral() && std::get<1>(GetParam()) == Rng::torch_cpu;
  EXPECT_EQ(same("image 1, shared vs per image", image(shared, 0), image(per_image, 0)), !cpu_step_noise);
  for (int i = 1; i < kBatch; ++i) {
    EXPECT_FALSE(same("image " + std::to_string(i + 1) + ", shared vs per image", image(shared, i), image(per_image, i)));
  }
}

INSTANTIATE_TEST_SUITE_P(Samplers, BatchNoise,
                         ::testing::Combine(::testing::Values(SamplerKind::euler, SamplerKind::euler_ancestral),
                                            ::testing::Values(Rng::torch_cpu, Rng::torch_cuda)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == SamplerKind::euler ? "euler" : "euler_a") +
                                  (std::get<1>(info.param) == Rng::torch_cpu ? "_cpu" : "_cuda");
                         });

}  // namespace
}  // namespace rf::stable_diffusion
