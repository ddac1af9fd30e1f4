// Bad input: each refused with an rf::Error that names the file or folder, and what is wrong.
#include <filesystem>

#include "checkpoint_fixture.h"
#include "formats/test_helpers.h"

namespace rf::stable_diffusion {
namespace {

namespace fs = std::filesystem;

class SdCheckpointErrors : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = fixture::scratch_dir(); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A copy of `arch`'s single file with each tensor renamed (or, with an empty name, dropped) by `rename`.
  std::string altered_file(const std::string& arch, const std::string& name,
                           const std::function<std::string(const TensorView&)>& rename) const {
    const SafetensorsFile file(fixture::single_file(arch));
    fixture::write_tensors(path(name), TensorSet(file), rename);
    return path(name);
  }

  std::string folder_copy(const std::string& arch) const {
    const auto copy = dir_ / arch;
    fs::copy(fixture::folder(arch), copy, fs::copy_options::recursive);
    return copy.string();
  }

  fs::path dir_;
};

Checkpoint open(const std::string& path, OpenOptions options = fixture::options()) {
  return Checkpoint::open(path, options);
}

constexpr const char* kPickle =
    "is a PyTorch pickle checkpoint; loading one can run arbitrary code, so rocmforge never unpickles";

TEST_F(SdCheckpointErrors, PicklesAreNeverOpened) {
  for (const auto* name : {"model.ckpt", "model.pt", "model.pth", "pytorch_model.bin", "MODEL.CKPT"}) {
    test::write_text(path(name), "anything");
    EXPECT_RF_ERROR(open(path(name)), path(name), kPickle, "Convert it to .safetensors");
  }
  // torch.save's zip archive and a bare pickle, whatever their name says.
  test::write_text(path("zip.safetensors"), std::string("PK\3\4rest of a zip archive"));
  EXPECT_RF_ERROR(open(path("zip.safetensors")), path("zip.safetensors"), kPickle);
  test::write_bytes(path("pickle.safetensors"), {0x80, 0x02, 0x7d, 0x71, 0x00});
  EXPECT_RF_ERROR(open(path("pickle.safetensors")), path("pickle.safetensors"), kPickle);
  // A diffusers folder whose part has only pytorch_model.bin weights.
  const auto copy = folder_copy("sd15");
  fs::rename(fs::path(copy) / "unet" / "diffusion_pytorch_model.safetensors",
             fs::path(copy) / "unet" / "diffusion_pytorch_model.bin");
  EXPECT_RF_ERROR(open(copy), copy + "/unet/diffusion_pytorch_model.bin", kPickle);
}

TEST_F(SdCheckpointErrors, GgufIsNotSupportedYet) {
  test::write_text(path("sd.gguf"), "GGUF...");
  EXPECT_RF_ERROR(open(path("sd.gguf")), path("sd.gguf"), "GGUF Stable Diffusion files are not supported yet");
  test::write_text(path("sd.safetensors"), "GGUF\3\0\0\0");
  EXPECT_RF_ERROR(open(path("sd.safetensors")), path("sd.safetensors"),
                  "GGUF Stable Diffusion files are not supported yet");
}

TEST_F(SdCheckpointErrors, MissingPaths) {
  EXPECT_RF_ERROR(open(path("nothing")), path("nothing"), "no such file or folder");
  fs::create_directories(path("empty"));
  EXPECT_RF_ERROR(open(path("empty")), path("empty"), "is not a diffusers pipeline folder (no model_index.json)");
  auto options = fixture::options();
  options.vae = path("no-vae.safetensors");
  EXPECT_RF_ERROR(open(fixture::folder("sd15"), options), options.vae, "no such VAE file or folder");
}

TEST_F(SdCheckpointErrors, FolderWithoutAPart) {
  const auto copy = folder_copy("sdxl");
  fs::remove_all(fs::path(copy) / "unet");
  EXPECT_RF_ERROR(open(copy), copy, "has no unet/ folder, which the pipeline needs");
  fs::copy(fixture::folder("sdxl") + "/unet", fs::path(copy) / "unet", fs::copy_options::recursive);
  fs::remove(fs::path(copy) / "text_encoder_2" / "model.safetensors");
  EXPECT_RF_ERROR(open(copy), copy + "/text_encoder_2", "has no weights");
}

TEST_F(SdCheckpointErrors, FolderConfigsOutsideWhatRocmforgeRuns) {
  const auto copy = folder_copy("sd15");
  const auto edit = [&](const std::string& file, const char* key, const nlohmann::json& value) {
    auto j = fixture::read_json(copy + "/" + file);
    j[key] = value;
    std::ofstream(copy + "/" + file) << j.dump();
  };
  edit("unet/config.json", "class_embed_type", "timestep");
  EXPECT_RF_ERROR(open(copy), copy + "/unet/config.json",
                  "\"class_embed_type\" is \"timestep\"; rocmforge runs only null");
  edit("unet/config.json", "class_embed_type", nullptr);
  edit("unet/config.json", "up_block_types", {"CrossAttnUpBlock2D", "UpBlock2D"});
  EXPECT_RF_ERROR(open(copy), copy + "/unet/config.json", "up block 1 (UpBlock2D) does not mirror down block 0");
  edit("unet/config.json", "up_block_types", {"UpBlock2D", "CrossAttnUpBlock2D"});
  edit("text_encoder/config.json", "hidden_act", "relu");
  EXPECT_RF_ERROR(open(copy), copy + "/text_encoder/config.json", "\"hidden_act\" is relu");
  edit("text_encoder/config.json", "hidden_act", "quick_gelu");
  edit("model_index.json", "_class_name", "StableDiffusion3Pipeline");
  EXPECT_RF_ERROR(open(copy), copy + "/model_index.json", "pipeline StableDiffusion3Pipeline is of an architecture");
}

// A number no double holds used to escape as nlohmann's out_of_range; one no float holds was cast
// to float unchecked (undefined behaviour). Both are errors naming the file (issue #29).
TEST_F(SdCheckpointErrors, NumbersBeyondTheirTypes) {
  const auto copy = folder_copy("sd15");
  const std::string vae = copy + "/vae/config.json";
  auto j = fixture::read_json(vae);
  j["scaling_factor"] = 1e300;
  std::ofstream(vae) << j.dump();
  EXPECT_RF_ERROR(open(copy), vae, "\"scaling_factor\" is 1e+300, beyond a 32-bit float's range");
  std::string text = j.dump();
  text.replace(text.find("1e+300"), 6, "1e400");
  std::ofstream(vae) << text;
  EXPECT_RF_ERROR(open(copy), vae, "the file is not valid JSON: [json.exception.out_of_range.406]");
}

// The folder's shapes must agree with its configs: a head count that does not divide the width
// fails before any tensor is read.
TEST_F(SdCheckpointErrors, InconsistentConfig) {
  const auto copy = folder_copy("sd15");
  auto j = fixture::read_json(copy + "/unet/config.json");
  j["attention_head_dim"] = 3;
  std::ofstream(copy + "/unet/config.json") << j.dump();
  EXPECT_RF_ERROR(open(copy), copy, "the UNet's level 0 is 8 wide, which 3 attention heads do not divide");
}

TEST_F(SdCheckpointErrors, SingleFileMissingATensor) {
  const auto cut = altered_file("sd15", "cut.safetensors", [](const TensorView& v) {
    return v.name == "model.diffusion_model.output_blocks.3.1.proj_in.weight" ? std::string() : v.name;
  });
  EXPECT_RF_ERROR(open(cut), cut,
                  "the UNet has no tensor model.diffusion_model.output_blocks.3.1.proj_in.weight "
                  "(up_blocks.1.attentions.0.proj_in.weight in diffusers' naming)");
  const auto no_vae = altered_file("sd15", "no-vae.safetensors", [](const TensorView& v) {
    return v.name.starts_with("first_stage_model.") ? std::string() : v.name;
  });
  EXPECT_RF_ERROR(open(no_vae), no_vae, "holds no VAE (first_stage_model.*); give one with --vae");
}

// A copy of sd15's single file with `name`'s two outer dimensions swapped: the same bytes, another shape.
std::string with_swapped_shape(const std::string& path, const std::string& name) {
  const SafetensorsFile stored(fixture::single_file("sd15"));
  std::vector<SafetensorsTensor> tensors;
  for (auto [n, t] : stored.tensors()) {
    if (n == name) std::swap(t.shape[0], t.shape[1]);
    tensors.push_back(t);
  }
  write_safetensors(path, tensors);
  return path;
}

TEST_F(SdCheckpointErrors, SingleFileWithAWrongShape) {
  // With the config inferred from the shapes: a tensor the inference does not read.
  const auto skip =
      with_swapped_shape(path("skip.safetensors"), "model.diffusion_model.input_blocks.4.0.skip_connection.weight");
  EXPECT_RF_ERROR(
      open(skip), skip,
      "tensor model.diffusion_model.input_blocks.4.0.skip_connection.weight (the UNet's "
      "down_blocks.1.resnets.0.conv_shortcut.weight) has shape [8, 16, 1, 1], but the config implies [16, 8, 1, 1]");
  // With the folder's config: any tensor.
  const auto conv_out = with_swapped_shape(path("conv_out.safetensors"), "first_stage_model.decoder.conv_out.weight");
  EXPECT_RF_ERROR(open(conv_out, fixture::options(fixture::folder("sd15"))), conv_out,
                  "tensor first_stage_model.decoder.conv_out.weight (the VAE's decoder.conv_out.weight) has shape "
                  "[8, 3, 3, 3], but the config implies [3, 8, 3, 3]");
}

TEST_F(SdCheckpointErrors, TruncatedFile) {
  const auto bytes = test::read_bytes(fixture::single_file("sd15"));
  test::write_bytes(path("cut.safetensors"),
                    {bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bytes.size() / 2)});
  EXPECT_RF_ERROR(open(path("cut.safetensors")), path("cut.safetensors"), "past the end of the data section",
                  "truncated or corrupt");
}

TEST_F(SdCheckpointErrors, UnknownArchitectures) {
  const auto vae_only = altered_file("sd15", "vae.safetensors", [](const TensorView& v) {
    return v.name.starts_with("first_stage_model.") ? v.name : std::string();
  });
  EXPECT_RF_ERROR(open(vae_only), vae_only,
                  "is not a Stable Diffusion 1.x, 2.x or XL checkpoint (unknown architecture");
  const std::vector<std::uint8_t> bias(8);
  fixture::write_raw(
      path("sd3.safetensors"),
      {{"model.diffusion_model.joint_blocks.0.context_block.adaLN_modulation.1.bias", "F32", {2}, bias.data(), 8}});
  EXPECT_RF_ERROR(open(path("sd3.safetensors")), path("sd3.safetensors"), "is a Stable Diffusion 3 checkpoint");
  const auto no_text = altered_file("sd15", "no-text.safetensors", [](const TensorView& v) {
    return v.name.starts_with("cond_stage_model.") ? std::string() : v.name;
  });
  EXPECT_RF_ERROR(open(no_text), no_text, "has a UNet but no text encoder this loader knows");
  const auto lora = fixture::model_dir("sd15") + "/lora.safetensors";
  EXPECT_RF_ERROR(open(lora), lora, "is a LoRA, not a checkpoint");
  const auto part = fixture::folder("sd15") + "/unet/diffusion_pytorch_model.safetensors";
  EXPECT_RF_ERROR(open(part), part, "is one part of a diffusers pipeline; open the pipeline's folder");
  EXPECT_RF_ERROR(open(fixture::single_file("sd15"), fixture::options(fixture::folder("sdxl"))),
                  fixture::single_file("sd15"), "is an SD 1.x checkpoint, but the configs of", "are SDXL's");
}

// A tensor a part reads, stored in a type rocmforge does not read.
TEST_F(SdCheckpointErrors, NeededTensorOfAnotherDType) {
  const SafetensorsFile stored(fixture::single_file("sd15"));
  auto tensors = fixture::raw_tensors(TensorSet(stored));
  const std::vector<double> conv_out_bias(4);
  for (auto& t : tensors) {
    if (t.name == "model.diffusion_model.out.2.bias") t = {t.name, "F64", {4}, conv_out_bias.data(), 32};
  }
  fixture::write_raw(path("f64.safetensors"), tensors);
  EXPECT_RF_ERROR(open(path("f64.safetensors")), path("f64.safetensors"),
                  "tensor model.diffusion_model.out.2.bias (the UNet's conv_out.bias) has dtype F64, which rocmforge "
                  "does not read");
}

TEST_F(SdCheckpointErrors, VaeThatIsNone) {
  auto options = fixture::options();
  options.vae = fixture::single_file("sd15");  // a whole checkpoint has first_stage_model.*: taken as the VAE
  EXPECT_NO_THROW(open(fixture::folder("sd15"), options));
  options.vae = fixture::folder("sd15") + "/unet/diffusion_pytorch_model.safetensors";
  EXPECT_RF_ERROR(open(fixture::folder("sd15"), options), options.vae, "is not a VAE");
  options.vae = fixture::folder("sd15") + "/unet";
  EXPECT_RF_ERROR(open(fixture::folder("sd15"), options), options.vae + "/config.json", "\"down_block_types\" must be");
}

TEST_F(SdCheckpointErrors, NoClipVocabulary) {
  OpenOptions options;
  EXPECT_RF_ERROR(open(fixture::folder("sd15"), options), fixture::folder("sd15"),
                  "comes without CLIP's vocab.json and merges.txt");
  options.clip_vocab = path("");
  EXPECT_RF_ERROR(open(fixture::single_file("sd15"), options), fixture::single_file("sd15"), "nor has");
}

}  // namespace
}  // namespace rf::stable_diffusion
