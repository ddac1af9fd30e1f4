// LoraSet::check, the image worker's test of a LoRA before it queues a job, refuses what the merge
// would refuse (the merge itself is held to diffusers in tiny_models.h).
#include <gtest/gtest.h>

#include "models/stable_diffusion/checkpoint_fixture.h"
#include "models/stable_diffusion/lora.h"
#include "formats/test_helpers.h"

namespace rf::stable_diffusion {
namespace {

class LoraCheck : public ::testing::Test {
 protected:
  void check(const Checkpoint& c, const std::string& path) {
    LoraSet::check(c.config(), c.unet(), c.text_encoder(), c.text_encoder_2(), {path, 1.0});
  }
  const std::string lora_ = fixture::model_dir("sd15") + "/lora.safetensors";
  const Checkpoint sd15_ = Checkpoint::open(fixture::folder("sd15"), fixture::options());
};

TEST_F(LoraCheck, AcceptsALoraOfTheModel) { EXPECT_NO_THROW(check(sd15_, lora_)); }

TEST_F(LoraCheck, RefusesALoraOfAnotherArchitecture) {
  const Checkpoint sdxl = Checkpoint::open(fixture::folder("sdxl"), fixture::options());
  EXPECT_RF_ERROR(check(sdxl, lora_), lora_, "is not in this model");
}

TEST_F(LoraCheck, RefusesAFileThatIsNotALora) {
  const std::string unet = fixture::folder("sd15") + "/unet/diffusion_pytorch_model.safetensors";
  EXPECT_RF_ERROR(check(sd15_, unet), unet, "is not a LoRA's");
}

TEST_F(LoraCheck, RefusesMissingHalvesAndShapesThatDoNotFit) {
  const SafetensorsFile file(lora_);
  const TensorSet tensors(file);
  const std::string dir = fixture::scratch_dir().string();
  // The first module's up matrix left out.
  std::string dropped;
  fixture::write_tensors(dir + "/half.safetensors", tensors, [&](const TensorView& v) {
    if (dropped.empty() && v.name.ends_with(".lora_up.weight")) dropped = v.name;
    return v.name == dropped ? std::string() : v.name;
  });
  EXPECT_RF_ERROR(check(sd15_, dir + "/half.safetensors"), dir + "/half.safetensors", "lacks its lora_up.weight");
  // One module's down matrix given to another of another shape.
  std::vector<fixture::RawTensor> raw = fixture::raw_tensors(tensors);
  auto first = std::ranges::find_if(raw, [](const auto& t) { return t.name.ends_with(".lora_down.weight"); });
  auto other = std::ranges::find_if(raw, [&](const auto& t) {
    return t.name.ends_with(".lora_down.weight") && t.shape != first->shape;
  });
  ASSERT_NE(other, raw.end()) << "the fixture's LoRA has modules of one shape only";
  std::swap(first->data, other->data);
  std::swap(first->shape, other->shape);
  std::swap(first->bytes, other->bytes);
  fixture::write_raw(dir + "/swapped.safetensors", raw);
  EXPECT_RF_ERROR(check(sd15_, dir + "/swapped.safetensors"), dir + "/swapped.safetensors", "changes");
}

}  // namespace
}  // namespace rf::stable_diffusion
