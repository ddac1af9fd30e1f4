// rocmforge image with the tiny SD checkpoints: the PNG it writes, its A1111 parameters, and the
// messages for bad input.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli/cli_run.h"
#include "formats/image_file.h"
#include "models/stable_diffusion/generation_parameters.h"

namespace {

using namespace rf::test::cli;

const std::string kSd = std::string(ROCMFORGE_FIXTURES) + "/sd/models/";

TEST(ImageCommand, WritesAPngWithA1111Parameters) {
  const fs::path out = scratch_file("image-sd15.png");
  fs::remove(out);
  const CliRun r = run("image -m " + kSd + "sd15/diffusers -p \"a red (apple:1.2)\" -n blurry --steps 3 --seed 7 "
                       "--sampler dpmpp_2m --schedule karras -W 64 -H 48 --device cpu -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3/3 steps"), std::string::npos) << r.output;
  const rf::Image image = rf::read_image(out.string());
  EXPECT_EQ(image.width, 64);
  EXPECT_EQ(image.height, 48);

  const auto texts = rf::read_png_texts(out.string());
  ASSERT_EQ(texts.size(), 1u);
  EXPECT_EQ(texts[0].key, "parameters");
  const auto info = rf::stable_diffusion::parse_infotext(texts[0].text);
  EXPECT_EQ(info.prompt, "a red (apple:1.2)");
  EXPECT_EQ(info.negative_prompt, "blurry");
  const auto field = [&](const char* key) { return info.find(key) ? *info.find(key) : std::string("(none)"); };
  EXPECT_EQ(field("Steps"), "3");
  EXPECT_EQ(field("Sampler"), "DPM++ 2M");
  EXPECT_EQ(field("Schedule type"), "Karras");
  EXPECT_EQ(field("Seed"), "7");
  EXPECT_EQ(field("Size"), "64x48");
  EXPECT_EQ(field("RNG"), "CPU");
}

TEST(ImageCommand, Dpmpp2sAncestralWritesA1111sName) {
  const fs::path out = scratch_file("image-dpmpp-2s-a.png");
  fs::remove(out);
  const CliRun r = run("image -m " + kSd + "sd15/diffusers -p x --sampler dpmpp_2s_a --steps 3 -W 64 -H 48 --device cpu -o " +
                       out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3/3 steps"), std::string::npos) << r.output;
  const auto texts = rf::read_png_texts(out.string());
  ASSERT_EQ(texts.size(), 1u);
  const auto info = rf::stable_diffusion::parse_infotext(texts[0].text);
  ASSERT_NE(info.find("Sampler"), nullptr) << texts[0].text;
  EXPECT_EQ(*info.find("Sampler"), "DPM++ 2S a");
}

TEST(ImageCommand, TheSameSeedGivesTheSameImageFromFolderAndSingleFile) {
  const std::string args = "-p \"a lighthouse\" --steps 2 --seed 3 -W 64 -H 48 --device cpu --sampler euler_a -o ";
  const fs::path a = scratch_file("image-folder.png"), b = scratch_file("image-single.png");
  ASSERT_EQ(run("image -m " + kSd + "sd15/diffusers " + args + a.string()).exit_code, 0);
  const CliRun single = run("image -m " + kSd + "sd15/checkpoint.safetensors --config " + kSd + "sd15/diffusers " + args +
                            b.string());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_EQ(rf::read_image(a.string()).pixels, rf::read_image(b.string()).pixels);
}

// A batch of 3 at seed 5 writes out-1.png to out-3.png naming seeds 5, 6 and 7 (A1111's per-image
// seeds, the default), and each is pixel for pixel the image batch 1 makes at its seed.
TEST(ImageCommand, EachImageOfABatchNamesAndRemakesItsOwnSeed) {
  const auto seed_of = [](const fs::path& png) {
    const auto info = rf::stable_diffusion::parse_infotext(rf::read_png_texts(png.string()).at(0).text);
    return info.find("Seed") ? *info.find("Seed") : std::string("(none)");
  };
  for (const auto& [sampler, rng] : {std::pair{"euler", "cpu"}, std::pair{"euler_a", "cpu"}, std::pair{"euler_a", "cuda"}}) {
    const std::string options = fmt::format("--sampler {} --rng {}", sampler, rng);
    const std::string args = "image -m " + kSd + "sd15/diffusers -p \"a lighthouse\" --steps 2 -W 64 -H 48 --device cpu " +
                             options + " -o ";
    const std::string name = fmt::format("batch-seeds-{}-{}", sampler, rng);
    const CliRun batch = run(args + scratch_file(name + ".png").string() + " --batch 3 --seed 5");
    ASSERT_EQ(batch.exit_code, 0) << batch.output;
    for (int i = 0; i < 3; ++i) {
      const fs::path in_batch = scratch_file(fmt::format("{}-{}.png", name, i + 1));
      const fs::path alone = scratch_file(fmt::format("{}-alone-{}.png", name, 5 + i));
      ASSERT_EQ(run(args + alone.string() + " --seed " + std::to_string(5 + i)).exit_code, 0);
      const bool same = rf::read_image(in_batch.string()).pixels == rf::read_image(alone.string()).pixels;
      std::printf("[ compare  ] %s: %s (Seed %s) vs batch 1 at seed %d (Seed %s): %s\n", options.c_str(),
                  in_batch.filename().c_str(), seed_of(in_batch).c_str(), 5 + i, seed_of(alone).c_str(),
                  same ? "same pixels" : "pixels differ");
      EXPECT_TRUE(same) << options << " image " << i + 1;
      EXPECT_EQ(seed_of(in_batch), std::to_string(5 + i)) << options;
    }
  }
}

// --batch-seeds shared: one generator for the whole batch, so every image names the batch's seed, and
// the images after the first are not those of seeds 6 and 7.
TEST(ImageCommand, ASharedBatchNamesTheBatchSeed) {
  const std::string args = "image -m " + kSd + "sd15/diffusers -p \"a lighthouse\" --steps 2 -W 64 -H 48 --device cpu "
                           "--sampler euler --batch 3 --seed 5 -o ";
  const fs::path shared = scratch_file("batch-shared.png"), per_image = scratch_file("batch-per-image.png");
  ASSERT_EQ(run(args + shared.string() + " --batch-seeds shared").exit_code, 0);
  ASSERT_EQ(run(args + per_image.string() + " --batch-seeds per-image").exit_code, 0);
  for (int i = 1; i <= 3; ++i) {
    const fs::path a = scratch_file(fmt::format("batch-shared-{}.png", i));
    const fs::path b = scratch_file(fmt::format("batch-per-image-{}.png", i));
    const auto info = rf::stable_diffusion::parse_infotext(rf::read_png_texts(a.string()).at(0).text);
    ASSERT_NE(info.find("Seed"), nullptr);
    EXPECT_EQ(*info.find("Seed"), "5");
    const bool same = rf::read_image(a.string()).pixels == rf::read_image(b.string()).pixels;
    std::printf("[ compare  ] image %d, shared (Seed %s) vs per image: %s\n", i, info.find("Seed")->c_str(),
                same ? "same pixels" : "pixels differ");
    // Image 1's latents are the start of the shared draw; euler draws nothing more.
    EXPECT_EQ(same, i == 1) << i;
  }
}

// A 64x48 init image made by the tiny model, and a mask repainting its right half.
void write_init_and_mask(const fs::path& image, const fs::path& mask) {
  ASSERT_EQ(run("image -m " + kSd + "sd15/diffusers -p apple --steps 2 --seed 1 -W 64 -H 48 --device cpu -o " +
                image.string()).exit_code, 0);
  rf::Image m{64, 48, 1, std::vector<std::uint8_t>(64 * 48)};
  for (int y = 0; y < 48; ++y)
    for (int x = 32; x < 64; ++x) m.pixels[y * 64 + x] = 255;
  rf::write_png(mask.string(), m);
}

TEST(ImageCommand, InpaintsWithAnInpaintingModelAndWritesTheStrength) {
  const fs::path init = scratch_file("inpaint-init.png"), mask = scratch_file("inpaint-mask.png");
  write_init_and_mask(init, mask);
  const fs::path out = scratch_file("inpaint-out.png");
  const CliRun r = run("image -m " + kSd + "sd15_inpaint/diffusers -p \"a red door\" --steps 4 --seed 5 --device cpu "
                       "--init-img " + init.string() + " --mask " + mask.string() + " --strength 1 -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(rf::read_image(out.string()).width, 64);
  const auto info = rf::stable_diffusion::parse_infotext(rf::read_png_texts(out.string()).at(0).text);
  ASSERT_NE(info.find("Denoising strength"), nullptr);
  EXPECT_EQ(*info.find("Denoising strength"), "1.0");
}

TEST(ImageCommand, BadInitImagesFailCleanly) {
  const fs::path init = scratch_file("bad-init.png"), mask = scratch_file("bad-mask.png");
  write_init_and_mask(init, mask);
  const std::string base = "image -m " + kSd + "sd15/diffusers -p x --device cpu -o " + scratch_file("bad2.png").string();
  expect_clean_failure(base + " --mask " + mask.string(), "--mask needs --init-img");
  expect_clean_failure(base + " --init-img " + init.string() + " -W 128", "differs from the init image's 64x48");
  expect_clean_failure(base + " --init-img " + init.string() + " --strength 0.04", "runs none of the 20 steps");
  rf::write_png(mask.string(), rf::Image{32, 32, 1, std::vector<std::uint8_t>(32 * 32)});
  expect_clean_failure(base + " --init-img " + init.string() + " --mask " + mask.string(), "must be the same size");
  expect_clean_failure(base + " --init-img /no/such.png", "/no/such.png");
}

TEST(ImageCommand, AppliesLorasAndNamesThemInTheParameters) {
  const std::string args = "image -m " + kSd + "sd15/diffusers -p apple --steps 2 --seed 4 -W 64 -H 48 --device cpu -o ";
  const fs::path plain = scratch_file("lora-none.png"), half = scratch_file("lora-half.png");
  ASSERT_EQ(run(args + plain.string()).exit_code, 0);
  const CliRun r = run(args + half.string() + " --lora " + kSd + "sd15/lora.safetensors:0.5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(rf::read_image(plain.string()).pixels, rf::read_image(half.string()).pixels);
  const auto info = rf::stable_diffusion::parse_infotext(rf::read_png_texts(half.string()).at(0).text);
  EXPECT_NE(info.prompt.find("<lora:lora:0.5>"), std::string::npos) << info.prompt;
  // A LoRA for another architecture names the module this one lacks.
  expect_clean_failure("image -m " + kSd + "sdxl/diffusers -p x --device cpu --lora " + kSd + "sd15/lora.safetensors",
                       "is not in this model");
}

TEST(ImageCommand, InfoDescribesAStableDiffusionCheckpoint) {
  for (const std::string& model : {kSd + "sdxl/diffusers", kSd + "sdxl/checkpoint.safetensors"}) {
    const CliRun r = run("info -m " + model);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("architecture: SDXL, epsilon prediction; UNet 4 input channels, widths 8/16/16"),
              std::string::npos) << r.output;
    EXPECT_NE(r.output.find("text_encoder_2"), std::string::npos) << r.output;
  }
  EXPECT_NE(run("info -m " + kSd + "sd15_inpaint/diffusers").output.find("9 input channels (inpainting)"), std::string::npos);
  // The memory estimate (its figures: tests/models/stable_diffusion/memory_estimate_test.cpp) at the
  // native size and at one asked for; options that size nothing of this model are refused.
  EXPECT_NE(run("info -m " + kSd + "sd15/diffusers").output.find("GPU memory at 64x64, batch 1: at least"),
            std::string::npos);
  EXPECT_NE(run("info -m " + kSd + "sd15/diffusers -W 128 -H 96 --batch 2").output.find("at 128x96, batch 2: at least"),
            std::string::npos);
  expect_clean_failure("info -m " + kSd + "sd15/diffusers -W 60", "width 60 is not a positive multiple of 8");
  expect_clean_failure("info -m " + kSd + "sd15/diffusers --ctx-size 64", "--ctx-size sizes a language model's");
  expect_clean_failure("info -m " + kModels + "llama3/model.gguf -W 64",
                       "-W, -H and --batch size a Stable Diffusion checkpoint's memory estimate");
}

TEST(ImageCommand, BadInputFailsCleanly) {
  const std::string model = "image -m " + kSd + "sd15/diffusers -p x -o " + scratch_file("bad.png").string();
  expect_clean_failure(model + " --device cpu -W 60", "width 60 is not a positive multiple of 8");
  expect_clean_failure(model + " --device cpu --sampler nope", "unknown sampler 'nope'");
  expect_clean_failure(model + " --device cpu --sampler nope", "dpmpp_2m_sde, dpmpp_2s_a, ddim");
  expect_clean_failure(model + " --device cpu --schedule nope", "nope");
  expect_clean_failure(model + " --device cpu --rng gpu", "--rng gpu");
  expect_clean_failure(model + " --device cpu --batch-seeds each", "--batch-seeds each");
  expect_clean_failure(model + " --device warp", "unknown device 'warp'");
  expect_clean_failure("image -m /no/such/model -p x", "/no/such/model");
  const fs::path pickle = scratch_file("model.ckpt");
  std::ofstream(pickle) << "PK\3\4 not really";
  expect_clean_failure("image -m " + pickle.string() + " -p x", "pickle");
  expect_clean_failure("image -m " + kSd + "sd15_inpaint/diffusers -p x --device cpu", "inpainting model");
}

// Without -m, image runs $ROCMFORGE_IMAGE_MODEL (else models/sd-demo) and names it when it is missing.
TEST(ImageCommand, WithoutModelRunsTheDefaultImageModel) {
  const fs::path out = scratch_file("image-default.png");
  fs::remove(out);
  ::setenv("ROCMFORGE_IMAGE_MODEL", (kSd + "sd15/diffusers").c_str(), 1);
  const CliRun r = run("image -p apple --steps 1 --seed 1 --device cpu -o " + out.string());
  ::setenv("ROCMFORGE_IMAGE_MODEL", "/no/such/sd-demo", 1);
  const CliRun missing = run("image -p apple --device cpu -o " + out.string() + "-x");
  ::unsetenv("ROCMFORGE_IMAGE_MODEL");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(out)) << r.output;
  EXPECT_NE(r.output.find("sd15/diffusers"), std::string::npos) << r.output;
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("default image model /no/such/sd-demo does not exist"), std::string::npos)
      << missing.output;
  EXPECT_NE(run("image --help").output.find("models/sd-demo"), std::string::npos);
}

}  // namespace

// The bundled demo model (no -m, no $ROCMFORGE_IMAGE_MODEL): "a red apple" at seed 0 against
// diffusers' image of the same settings, the top-left 64x64 cell of its samples.png (prompts by row,
// seeds by column; tools/train_demo_sd_model.py made both on the GPU, in fp32). 45 dB as the tiny
// models' fp32 images; measured 60.5 dB.
TEST(ImageCommand, TheDemoModelMakesDiffusersImage) {
  const std::string demo = std::string(ROCMFORGE_SOURCE_DIR) + "/models/sd-demo";
  const fs::path out = scratch_file("image-demo.png");
  fs::remove(out);
  const CliRun r = run("image -p \"a red apple\" --seed 0 --sampler euler --rng cpu --steps 20 --cfg 7.5 --device cpu -o " +
                       out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("models/sd-demo"), std::string::npos) << r.output;
  const rf::Image image = rf::read_image(out.string()), grid = rf::read_image(demo + "/samples.png");
  ASSERT_EQ(image.width, 64);
  ASSERT_EQ(image.height, 64);
  double squares = 0;
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 64 * 3; ++x) {
      const double d = image.pixels[y * 64 * 3 + x] - grid.pixels[y * grid.width * 3 + x];
      squares += d * d;
    }
  const double db = 10 * std::log10(255.0 * 255.0 / std::max(squares / (64 * 64 * 3), 1e-12));
  std::printf("[  psnr    ] demo \"a red apple\" seed 0: %.1f dB (at least 45)\n", db);
  EXPECT_GE(db, 45.0);
}
