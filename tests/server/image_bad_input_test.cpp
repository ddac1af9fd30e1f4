// Every invalid image job is a 400 naming its field, before anything reaches the worker; LoRAs are
// looked up only inside --lora-dir.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "formats/image_file.h"
#include "server/base64.h"
#include "test_server.h"

namespace rf::server::testing {
namespace {

namespace fs = std::filesystem;

std::string png_base64(int width, int height) {
  return base64_encode(encode_png(Image{width, height, 3, std::vector<std::uint8_t>(width * height * 3, 128)}));
}
std::string mask_base64(int width, int height) {
  return base64_encode(encode_png(Image{width, height, 1, std::vector<std::uint8_t>(width * height, 255)}));
}

json job(const std::string& operation) {
  json body = {{"operation", operation}, {"hive_id", "h"}, {"model", "sd-demo"}, {"prompt", "a red apple"}, {"steps", 4}};
  if (operation == "image_generation") body.update({{"width", 64}, {"height", 64}});  // the demo model's size
  if (operation == "image_transform") body["input_image"] = png_base64(64, 64);
  if (operation == "image_inpaint") {
    body["init_image"] = png_base64(64, 64);
    body["mask_image"] = mask_base64(64, 64);
  }
  return body;
}

struct BadField {
  std::string operation;
  json change;  // merged into a valid job; null values remove the field
  std::string param;
};

std::string describe(const BadField& c) { return c.operation + " " + c.change.dump(); }

class ImageBadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(image_service()); }
  static void TearDownTestSuite() { delete server_; }
  static TestServer* server_;
};
TestServer* ImageBadInput::server_ = nullptr;

TEST_F(ImageBadInput, EachBadFieldIsA400NamingIt) {
  const std::string garbage = base64_encode(std::vector<std::uint8_t>{'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'g'});
  const std::vector<BadField> cases = {
      {"image_generation", {{"prompt", nullptr}}, "prompt"},
      {"image_generation", {{"prompt", 5}}, "prompt"},
      {"image_generation", {{"hive_id", nullptr}}, "hive_id"},
      {"image_generation", {{"model", nullptr}}, "model"},
      {"image_generation", {{"operation", "image_upscale"}}, "operation"},
      {"image_generation", {{"steps", 0}}, "steps"},
      {"image_generation", {{"steps", 151}}, "steps"},
      {"image_generation", {{"steps", 2.5}}, "steps"},
      {"image_generation", {{"guidance_scale", -0.5}}, "guidance_scale"},
      {"image_generation", {{"guidance_scale", 30.5}}, "guidance_scale"},
      {"image_generation", {{"seed", -1}}, "seed"},
      {"image_generation", {{"seed", "7"}}, "seed"},
      {"image_generation", {{"width", 60}}, "width"},
      {"image_generation", {{"width", 2056}}, "width"},
      {"image_generation", {{"height", 100}}, "height"},
      {"image_generation", {{"height", 56}}, "height"},
      {"image_generation", {{"negative_prompt", true}}, "negative_prompt"},
      {"image_generation", {{"worker_id", 3}}, "worker_id"},
      {"image_generation", {{"sampler", "euler"}}, "sampler"},
      {"image_generation", {{"loras", "x"}}, "loras"},
      {"image_generation", {{"loras", {{{"path", "x"}, {"strength", 11}}}}}, "loras[0].strength"},
      {"image_generation", {{"loras", {{{"strength", 1}}}}}, "loras[0].path"},
      {"image_generation", {{"loras", {{{"path", "x"}, {"weight", 1}}}}}, "loras[0].weight"},
      {"image_generation", {{"loras", {{{"path", "x"}}}}}, "loras[0].path"},  // no --lora-dir
      {"image_generation", {{"input_image", png_base64(64, 64)}}, "input_image"},
      {"image_transform", {{"width", 64}}, "width"},
      {"image_transform", {{"input_image", nullptr}}, "input_image"},
      {"image_transform", {{"input_image", "!!!not base64"}}, "input_image"},
      {"image_transform", {{"input_image", "aGVsbG8"}}, "input_image"},  // unpadded
      {"image_transform", {{"input_image", garbage}}, "input_image"},
      {"image_transform", {{"input_image", png_base64(64, 60)}}, "input_image"},
      {"image_transform", {{"strength", 1.5}}, "strength"},
      {"image_transform", {{"strength", -0.1}}, "strength"},
      {"image_inpaint", {{"mask_image", nullptr}}, "mask_image"},
      {"image_inpaint", {{"init_image", nullptr}}, "init_image"},
      {"image_inpaint", {{"mask_image", mask_base64(64, 72)}}, "mask_image"},
      {"image_inpaint", {{"mask_image", garbage}}, "mask_image"},
      {"image_inpaint", {{"input_image", png_base64(64, 64)}}, "input_image"},
  };
  const auto jobs_before = server_->image_model().worker().metrics().images.load();
  for (const BadField& c : cases) {
    json body = job(c.operation);
    body.merge_patch(c.change);
    auto res = server_->client().Post("/v1/jobs", body.dump(), "application/json");
    ASSERT_TRUE(res) << describe(c);
    EXPECT_EQ(res->status, 400) << describe(c) << ": " << res->body;
    const json error = json::parse(res->body)["error"];
    EXPECT_EQ(error["param"], c.param) << describe(c) << ": " << res->body;
    EXPECT_TRUE(error["message"].get<std::string>().find(c.param.substr(0, c.param.find('['))) != std::string::npos)
        << res->body;
  }
  EXPECT_EQ(server_->image_model().worker().metrics().images.load(), jobs_before) << "no bad job reached the worker";
  EXPECT_EQ(server_->image_model().worker().metrics().waiting.load(), 0);
}

TEST_F(ImageBadInput, AnotherModelIsA404AndBadJsonA400) {
  json body = job("image_generation");
  body["model"] = "sdxl-base";
  auto res = server_->client().Post("/v1/jobs", body.dump(), "application/json");
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(json::parse(res->body)["error"]["param"], "model");
  EXPECT_EQ(server_->client().Post("/v1/jobs", "{not json", "application/json")->status, 400);
  EXPECT_EQ(server_->client().Post("/v1/jobs", "[1, 2]", "application/json")->status, 400);
}

TEST_F(ImageBadInput, ABodyPastTheLimitIsA413) {
  TestServer small(image_service(), ServerOptions{.max_body_bytes = 4096});
  json body = job("image_transform");
  body["input_image"] = std::string(8192, 'A');
  EXPECT_EQ(small.client().Post("/v1/jobs", body.dump(), "application/json")->status, 413);
}

TEST_F(ImageBadInput, AFullQueueIsA429WithRetryAfter) {
  TestServer busy(image_service({}, kDemoImageModel, 1));
  json body = job("image_generation");
  body["steps"] = 150;
  std::vector<std::string> ids;
  int refused = 0;
  for (int i = 0; i < 4; ++i) {
    auto res = busy.client().Post("/v1/jobs", body.dump(), "application/json");
    if (res->status == 429) {
      ++refused;
      EXPECT_EQ(res->get_header_value("Retry-After"), "1");
    } else {
      ids.push_back(json::parse(res->body)["job_id"]);
    }
  }
  EXPECT_GE(refused, 2) << "one runs, one waits, the rest are refused";
  for (const auto& id : ids) EXPECT_EQ(busy.client().Delete("/v1/jobs/" + id)->status, 200) << id;
}

// The tiny SD 1.5 fixture, whose LoRA the folder holds, with links in and out of the folder.
class ImageLoras : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::path(ROCMFORGE_SCRATCH) / "server" / "loras";
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "styles");
    const std::string sd15 = std::string(ROCMFORGE_FIXTURES) + "/sd/models/sd15";
    fs::copy_file(sd15 + "/lora.safetensors", dir_ / "styles" / "detail.safetensors");
    fs::copy_file(sd15 + "/diffusers/unet/diffusion_pytorch_model.safetensors", dir_ / "unet.safetensors");
    fs::create_symlink(sd15 + "/lora.safetensors", dir_ / "outside.safetensors");
    fs::create_symlink(dir_ / "styles" / "detail.safetensors", dir_ / "inside.safetensors");
    server_ = new TestServer(image_service(dir_, sd15 + "/diffusers"));
  }
  static void TearDownTestSuite() { delete server_; }

  static httplib::Result post_lora(const std::string& path) {
    json body = job("image_generation");
    body["model"] = "diffusers";
    body["loras"] = {{{"path", path}, {"strength", 0.5}}};
    return server_->client().Post("/v1/jobs", body.dump(), "application/json");
  }
  static fs::path dir_;
  static TestServer* server_;
};
fs::path ImageLoras::dir_;
TestServer* ImageLoras::server_ = nullptr;

TEST_F(ImageLoras, NamesResolveInsideTheFolderOnly) {
  for (const std::string ok : {"styles/detail", "styles/detail.safetensors", "inside"}) {
    auto res = post_lora(ok);
    EXPECT_EQ(res->status, 200) << ok << ": " << res->body;
    if (res->status == 200) server_->client().Delete("/v1/jobs/" + json::parse(res->body)["job_id"].get<std::string>());
  }
  const std::string absolute = (dir_ / "styles" / "detail.safetensors").string();
  for (const std::string& bad : {absolute, std::string("../loras/styles/detail"), std::string("styles/../inside"),
                                std::string("outside"), std::string("missing"), std::string("unet"), std::string("styles"),
                                std::string("")}) {
    auto res = post_lora(bad);
    EXPECT_EQ(res->status, 400) << bad << ": " << res->body;
    EXPECT_EQ(json::parse(res->body)["error"]["param"], "loras[0].path") << bad;
    EXPECT_EQ(res->body.find(dir_.string()), std::string::npos) << "the folder's place stays private: " << res->body;
  }
}

}  // namespace
}  // namespace rf::server::testing
