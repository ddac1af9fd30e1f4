// The ways published diffusers folders store their weights, made from the sd15 fixture folder in
// scratch: each must load to exactly the tensors of the original folder.
#include <filesystem>

#include "checkpoint_fixture.h"

namespace rf::stable_diffusion {
namespace {

namespace fs = std::filesystem;
using fixture::expect_same_tensors;

class SdFolderLayouts : public ::testing::Test {
 protected:
  void SetUp() override {
    copy_ = fixture::scratch_dir() / "sd15";
    fs::copy(fixture::folder("sd15"), copy_, fs::copy_options::recursive);
  }

  // Rewrites `part`'s weights as `file` with each tensor renamed by `rename` (empty: dropped).
  void rewrite(const std::string& part, const std::string& file,
               const std::function<std::string(const TensorView&)>& rename) {
    const auto original = fixture::folder("sd15") + "/" + part + "/" + weights_name(part);
    fs::remove(copy_ / part / weights_name(part));
    const SafetensorsFile stored(original);
    fixture::write_tensors((copy_ / part / file).string(), TensorSet(stored), rename);
  }

  static std::string weights_name(const std::string& part) {
    return part.starts_with("text_encoder") ? "model.safetensors" : "diffusion_pytorch_model.safetensors";
  }

  void expect_as_original() const {
    const auto copy = Checkpoint::open(copy_.string(), fixture::options());
    const auto original = Checkpoint::open(fixture::folder("sd15"), fixture::options());
    expect_same_tensors("unet", copy.unet(), original.unet());
    expect_same_tensors("vae", copy.vae(), original.vae());
    expect_same_tensors("text_encoder", copy.text_encoder(), original.text_encoder());
  }

  fs::path copy_;
};

std::string same_name(const TensorView& v) { return v.name; }

// transformers >= 5.6 saves CLIPTextModel without the "text_model." prefix.
TEST_F(SdFolderLayouts, TextEncoderWithoutTextModelPrefix) {
  rewrite("text_encoder", "model.safetensors", [](const TensorView& v) {
    return v.name.starts_with("text_model.") ? v.name.substr(std::string("text_model.").size()) : v.name;
  });
  expect_as_original();
}

// diffusers before 0.14 (many published SD 1.5 folders) named the VAE's attention query, key,
// value and proj_attn.
TEST_F(SdFolderLayouts, VaeWithLegacyAttentionNames) {
  rewrite("vae", "diffusion_pytorch_model.safetensors", [](const TensorView& v) {
    std::string name = v.name;
    for (const auto& [now, before] :
         {std::pair{".to_q.", ".query."}, {".to_k.", ".key."}, {".to_v.", ".value."}, {".to_out.0.", ".proj_attn."}}) {
      if (const auto at = name.find(now); at != std::string::npos) name.replace(at, std::string(now).size(), before);
    }
    return name;
  });
  expect_as_original();
}

TEST_F(SdFolderLayouts, ShardedWithIndex) {
  const auto shard = [](int i) { return fmt::format("diffusion_pytorch_model-0000{}-of-00002.safetensors", i); };
  nlohmann::json weight_map;
  int n = 0;
  const auto split = [&](int which) {
    return [&, which](const TensorView& v) {
      if (which == 1) weight_map[v.name] = shard(n++ % 2 + 1);
      return weight_map[v.name] == shard(which) ? v.name : std::string();
    };
  };
  rewrite("unet", shard(1), split(1));
  const SafetensorsFile stored(fixture::folder("sd15") + "/unet/diffusion_pytorch_model.safetensors");
  fixture::write_tensors((copy_ / "unet" / shard(2)).string(), TensorSet(stored), split(2));
  std::ofstream((copy_ / "unet" / "diffusion_pytorch_model.safetensors.index.json").string())
      << nlohmann::json{{"weight_map", weight_map}}.dump();
  expect_as_original();
}

// The fp16 variant is read when it is all there is, and passed over for the full-precision file.
TEST_F(SdFolderLayouts, Fp16Variant) {
  rewrite("unet", "diffusion_pytorch_model.fp16.safetensors", same_name);
  expect_as_original();
  // A broken fp16 file beside the full one is never opened.
  fs::copy(fixture::folder("sd15") + "/unet/diffusion_pytorch_model.safetensors", copy_ / "unet");
  std::ofstream((copy_ / "unet" / "diffusion_pytorch_model.fp16.safetensors").string()) << "not safetensors";
  expect_as_original();
}

// Older transformers saved CLIP's position_ids (int64), which no forward reads.
TEST_F(SdFolderLayouts, Int64PositionIdsAreLeftOut) {
  const SafetensorsFile stored(fixture::folder("sd15") + "/text_encoder/model.safetensors");
  auto tensors = fixture::raw_tensors(TensorSet(stored));
  const std::vector<std::int64_t> ids(77);
  tensors.push_back({"text_model.embeddings.position_ids", "I64", {1, 77}, ids.data(), ids.size() * sizeof ids[0]});
  fixture::write_raw((copy_ / "text_encoder" / "model.safetensors").string(), tensors);
  expect_as_original();
  EXPECT_EQ(Checkpoint::open(copy_.string(), fixture::options()).summary().unused_tensors, 1u);
}

}  // namespace
}  // namespace rf::stable_diffusion
