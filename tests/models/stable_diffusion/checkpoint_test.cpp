// Opening the tiny checkpoints both ways: each architecture's diffusers folder and the single file
// diffusers' own conversion scripts made from it (an independent reference for the name maps) give
// byte-identical tensors under the same names, whether the file's config is inferred from its
// shapes or read from the folder (OpenOptions::config); with the folder's, the configs are equal.
// A VAE given apart replaces the checkpoint's, in either naming.
#include "models/stable_diffusion/checkpoint.h"

#include "checkpoint_fixture.h"

namespace rf::stable_diffusion {
namespace {

using fixture::expect_same_tensors;

void expect_same_parts(const std::string& arch, const Checkpoint& file, const Checkpoint& folder) {
  expect_same_tensors(arch + " unet", file.unet(), folder.unet());
  expect_same_tensors(arch + " vae", file.vae(), folder.vae());
  expect_same_tensors(arch + " text_encoder", file.text_encoder(), folder.text_encoder());
  ASSERT_EQ(file.text_encoder_2() != nullptr, folder.text_encoder_2() != nullptr) << arch;
  if (folder.text_encoder_2()) {
    expect_same_tensors(arch + " text_encoder_2", *file.text_encoder_2(), *folder.text_encoder_2());
  }
}

TEST(SdCheckpoint, SingleFileMatchesItsFolderTensorForTensor) {
  for (const auto* arch : fixture::kArchitectures) {
    SCOPED_TRACE(arch);
    const auto folder = Checkpoint::open(fixture::folder(arch), fixture::options());
    const auto file = Checkpoint::open(fixture::single_file(arch), fixture::options(fixture::folder(arch)));
    expect_same_parts(arch, file, folder);
    // The shapes inferred from the file lay out the same tensors.
    expect_same_parts(std::string(arch) + " (inferred config)",
                      Checkpoint::open(fixture::single_file(arch), fixture::options()), folder);
    EXPECT_TRUE(file.config() == folder.config())
        << fmt::format("{}", fmt::join(fixture::differences(file.config(), folder.config()), "\n"));
    EXPECT_EQ(file.summary().layout, CheckpointLayout::single_file);
    EXPECT_EQ(folder.summary().layout, CheckpointLayout::diffusers_folder);
  }
}

// SD 2.x's file holds one text encoder resblock more than diffusers runs (reference.json says how
// many it holds and uses): the text encoder leaves it out, and it is all the file holds unread.
TEST(SdCheckpoint, SingleFileUnusedTensors) {
  for (const auto* arch : fixture::kArchitectures) {
    SCOPED_TRACE(arch);
    const auto reference = fixture::read_json(fixture::model_dir(arch) + "/reference.json")["single_file"];
    const auto file = Checkpoint::open(fixture::single_file(arch), fixture::options());
    const int resblocks = reference["text_encoder_resblocks"], used = reference["text_encoder_layers_used"];
    EXPECT_EQ(file.config().text_encoder.layers, used);
    constexpr std::size_t kTensorsPerResblock = 12;  // ln_1, in_proj, out_proj, ln_2, c_fc, c_proj: weight and bias
    EXPECT_EQ(file.summary().unused_tensors, static_cast<std::size_t>(resblocks - used) * kTensorsPerResblock);
    for (const auto& view : file.text_encoder()) {
      EXPECT_EQ(view.name.find(fmt::format("layers.{}.", used)), std::string::npos) << view.name;
    }
  }
}

TEST(SdCheckpoint, SummaryCountsEachPart) {
  const auto ckpt = Checkpoint::open(fixture::folder("sdxl"), fixture::options());
  const auto& summary = ckpt.summary();
  EXPECT_EQ(summary.architecture, Architecture::sdxl);
  EXPECT_EQ(summary.unused_tensors, 0u);
  const TensorSet* sets[] = {&ckpt.unet(), &ckpt.vae(), &ckpt.text_encoder(), ckpt.text_encoder_2()};
  ASSERT_EQ(summary.parts.size(), std::size(sets));
  for (std::size_t i = 0; i < summary.parts.size(); ++i) {
    const auto& part = summary.parts[i];
    SCOPED_TRACE(part.name);
    EXPECT_EQ(part.source, fixture::folder("sdxl") + "/" + part.name);
    std::uint64_t parameters = 0, bytes = 0;
    for (const auto& view : *sets[i]) parameters += view.elements(), bytes += view.bytes;
    EXPECT_EQ(part.tensors, sets[i]->size());
    EXPECT_EQ(part.parameters, parameters);
    EXPECT_EQ(part.bytes, bytes);
    EXPECT_EQ(part.dtype_bytes, (std::map<DType, std::uint64_t>{{DType::F16, bytes}}));  // the fixtures are float16
  }
}

// OpenCLIP's text_projection is stored [hidden, projection]; the view is transformers' [projection, hidden].
TEST(SdCheckpoint, OpenClipProjectionIsTransposed) {
  const SafetensorsFile raw(fixture::single_file("sdxl"));
  const auto& stored = raw.tensors().at("conditioner.embedders.1.model.text_projection");
  const auto ckpt = Checkpoint::open(fixture::single_file("sdxl"), fixture::options());
  const auto& view = ckpt.text_encoder_2()->at("text_projection.weight");
  ASSERT_EQ(view.n_dims, 2);
  const auto rows = view.shape[0], cols = view.shape[1];
  ASSERT_EQ(stored.shape, (std::vector<std::uint64_t>{cols, rows}));
  const auto* a = static_cast<const std::uint16_t*>(view.data);
  const auto* b = static_cast<const std::uint16_t*>(stored.data);
  std::size_t wrong = 0;
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t c = 0; c < cols; ++c) wrong += a[r * cols + c] != b[c * rows + r];
  }
  EXPECT_EQ(wrong, 0u);
}

// The checkpoint moves without moving the maps its views point into.
TEST(SdCheckpoint, ViewsSurviveAMove) {
  auto first = Checkpoint::open(fixture::single_file("sdxl"), fixture::options());
  const auto* data = first.text_encoder_2()->at("text_projection.weight").data;
  const auto moved = std::move(first);
  EXPECT_EQ(moved.text_encoder_2()->at("text_projection.weight").data, data);
}

// A VAE given apart: sd15 with SDXL's VAE, as the SDXL single file's first_stage_model.* without
// the prefix (how VAE files such as vae-ft-mse-840000 are named), as SDXL's diffusers VAE file, and
// as its diffusers folder. Only the folder's config.json changes the scaling factor and upcasting.
TEST(SdCheckpoint, SeparateVaeInEitherNaming) {
  const auto dir = fixture::scratch_dir();
  const auto original = (dir / "vae-original.safetensors").string();
  const SafetensorsFile sdxl_file(fixture::single_file("sdxl"));
  fixture::write_tensors(original, TensorSet(sdxl_file), [](const TensorView& v) {
    const std::string prefix = "first_stage_model.";
    return v.name.starts_with(prefix) ? v.name.substr(prefix.size()) : std::string();
  });
  const auto sdxl = Checkpoint::open(fixture::folder("sdxl"), fixture::options());
  const std::string vaes[] = {original, fixture::folder("sdxl") + "/vae/diffusion_pytorch_model.safetensors",
                              fixture::folder("sdxl") + "/vae"};
  for (const auto& vae : vaes) {
    SCOPED_TRACE(vae);
    for (const auto& base : {fixture::folder("sd15"), fixture::single_file("sd15")}) {
      const auto sd15 = Checkpoint::open(base, fixture::options());
      auto options = fixture::options();
      options.vae = vae;
      const auto ckpt = Checkpoint::open(base, options);
      expect_same_tensors("sd15 + SDXL's vae", ckpt.vae(), sdxl.vae());
      const auto& vae_config = (vae == vaes[2] ? sdxl : sd15).config().vae;
      EXPECT_EQ(ckpt.config().vae.scaling_factor, vae_config.scaling_factor);
      EXPECT_EQ(ckpt.config().vae.force_upcast, vae_config.force_upcast);
      EXPECT_EQ(ckpt.config().vae.block_out_channels, sdxl.config().vae.block_out_channels);
      expect_same_tensors("sd15 unet beside it", ckpt.unet(), sd15.unet());
    }
  }
}

TEST(SdCheckpoint, PredictionOverride) {
  auto options = fixture::options();
  options.prediction = Prediction::epsilon;
  EXPECT_EQ(Checkpoint::open(fixture::single_file("sd2"), options).config().scheduler.prediction, Prediction::epsilon);
  options.prediction = Prediction::v;
  EXPECT_EQ(Checkpoint::open(fixture::folder("sd15"), options).config().scheduler.prediction, Prediction::v);
}

// ComfyUI marks v-prediction files with an empty v_pred tensor.
TEST(SdCheckpoint, ComfyUiVPredMark) {
  const auto path = (fixture::scratch_dir() / "vpred.safetensors").string();
  const SafetensorsFile file(fixture::single_file("sd15"));
  std::vector<SafetensorsTensor> tensors;
  for (const auto& [name, t] : file.tensors()) tensors.push_back(t);
  tensors.push_back({"v_pred", DType::F32, {0}, nullptr, 0});
  write_safetensors(path, tensors);
  EXPECT_EQ(Checkpoint::open(fixture::single_file("sd15"), fixture::options()).config().scheduler.prediction,
            Prediction::epsilon);
  EXPECT_EQ(Checkpoint::open(path, fixture::options()).config().scheduler.prediction, Prediction::v);
  EXPECT_EQ(Checkpoint::open(path, fixture::options(fixture::folder("sd15"))).config().scheduler.prediction,
            Prediction::v);
}

}  // namespace
}  // namespace rf::stable_diffusion
