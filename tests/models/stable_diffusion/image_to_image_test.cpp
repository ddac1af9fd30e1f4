// Image to image and inpainting with an ordinary (4-channel) UNet, on the tiny SD 1.5 model: the
// properties that pin them down (diffusers' own inpainting-UNet runs are tiny_models.h's).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/image_backend.h"
#include "models/stable_diffusion/checkpoint_fixture.h"
#include "models/stable_diffusion/pipeline.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace rf::stable_diffusion {
namespace {

class ImageToImage : public ::testing::Test {
 protected:
  ImageToImage() : checkpoint_(Checkpoint::open(fixture::folder("sd15"), fixture::options())) {}

  Pipeline pipeline() {
    return Pipeline({checkpoint_.config(), checkpoint_.unet(), checkpoint_.vae(), checkpoint_.text_encoder(), nullptr,
                     checkpoint_.tokenizer()},
                    backend_);
  }
  // A smooth 64x48 picture.
  static Images picture() {
    Images image{1, 64, 48, std::vector<float>(64 * 48 * 3)};
    for (std::size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = 0.5f + 0.4f * std::sin(0.05f * i);
    return image;
  }
  static GenerationOptions options(std::vector<float> mask, double strength, std::uint64_t seed) {
    GenerationOptions o;
    o.prompt = "a lighthouse";
    o.sampler.kind = SamplerKind::euler_ancestral;
    o.sampler.steps = 8;
    o.seed = seed;
    o.init = InitImage{picture(), std::move(mask), strength};
    return o;
  }

  Checkpoint checkpoint_;
  ThreadPool pool_{2};
  cpu::CpuImageBackend backend_{pool_};
};

TEST_F(ImageToImage, StrengthSetsTheStepsThatRun) {
  const Pipeline p = pipeline();
  for (const auto& [strength, expected] : {std::pair{0.5, 4}, std::pair{0.3, 2}, std::pair{1.0, 8}}) {
    int last = 0, total = 0;
    p.generate(options({}, strength, 1), [&](const StepState& state) {
      last = state.step;
      total = state.steps;
      return true;
    });
    EXPECT_EQ(total, expected) << strength;
    EXPECT_EQ(last, expected) << strength;
  }
  EXPECT_THROW(p.generate(options({}, 0.1, 1)), Error);  // int(8 * 0.1) = 0 steps
}

TEST_F(ImageToImage, AMaskThatKeepsEverythingGivesTheImageWhateverTheSeed) {
  const Pipeline p = pipeline();
  const std::vector<float> keep(64 * 48, 0.0f);
  EXPECT_EQ(p.generate(options(keep, 0.75, 1)).pixels, p.generate(options(keep, 0.75, 2)).pixels);
  EXPECT_NE(p.generate(options({}, 0.75, 1)).pixels, p.generate(options({}, 0.75, 2)).pixels);
}

TEST_F(ImageToImage, AMaskThatRepaintsEverythingIsImageToImage) {
  const Pipeline p = pipeline();
  const std::vector<float> repaint(64 * 48, 1.0f);
  EXPECT_EQ(p.generate(options(repaint, 0.5, 3)).pixels, p.generate(options({}, 0.5, 3)).pixels);
}

// A negative prompt of more 77-token windows than the prompt pads the prompt (A1111's way), and the
// reverse: either order gives an image.
TEST_F(ImageToImage, PromptsOfDifferentLengthsShareABatch) {
  const Pipeline p = pipeline();
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += "castle, river, ";
  for (const bool long_negative : {true, false}) {
    GenerationOptions o;
    o.prompt = long_negative ? "a lighthouse" : long_text;
    o.negative_prompt = long_negative ? long_text : "blurry";
    o.width = 64;
    o.height = 48;
    o.sampler.steps = 2;
    EXPECT_EQ(p.generate(o).pixels.size(), 64u * 48 * 3);
  }
}

TEST_F(ImageToImage, RefusesWhatDoesNotFit) {
  const Pipeline p = pipeline();
  GenerationOptions o = options(std::vector<float>(10), 0.5, 1);
  EXPECT_THROW(p.generate(o), Error);  // the mask's size
  o = options({}, 0.5, 1);
  o.width = 128;
  EXPECT_THROW(p.generate(o), Error);  // a size other than the image's
  o = options({}, 1.5, 1);
  EXPECT_THROW(p.generate(o), Error);  // strength past 1
}

}  // namespace
}  // namespace rf::stable_diffusion
