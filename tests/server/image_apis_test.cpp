// OpenAI's images API and A1111's API on a real server with the demo image model (the openai npm
// client drives the first too: openai_client/images.test.mjs).
#include <gtest/gtest.h>

#include <thread>

#include "formats/image_file.h"
#include "server/base64.h"
#include "test_server.h"

namespace rf::server::testing {
namespace {

Image decoded(const json& base64) {
  const auto bytes = base64_decode(base64.get<std::string>());
  EXPECT_TRUE(bytes.has_value());
  return decode_image(*bytes, "a served image");
}

std::vector<std::uint8_t> png_of(int width, int height, int channels, std::uint8_t alpha_left = 255) {
  Image image{width, height, channels, std::vector<std::uint8_t>(static_cast<std::size_t>(width) * height * channels)};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c) {
        const std::size_t at = (static_cast<std::size_t>(y) * width + x) * channels + c;
        image.pixels[at] = c == 3 ? (x < width / 2 ? alpha_left : 255) : static_cast<std::uint8_t>(40 + x + 2 * y + 30 * c);
      }
  return encode_png(image);
}

std::string bytes(const std::vector<std::uint8_t>& data) { return {data.begin(), data.end()}; }

json with(json body, const json& change) {
  body.update(change);
  return body;
}

class ImageApis : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(image_service()); }
  static void TearDownTestSuite() { delete server_; }
  static httplib::Result post(const std::string& path, const json& body) {
    return server_->client().Post(path, body.dump(), "application/json");
  }
  static void expect_bad(const std::string& path, const json& body, const std::string& param) {
    auto res = post(path, body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << body.dump() << ": " << res->body;
    EXPECT_EQ(json::parse(res->body)["error"]["param"], param) << body.dump() << ": " << res->body;
  }
  static TestServer* server_;
};
TestServer* ImageApis::server_ = nullptr;

TEST_F(ImageApis, OpenAiGenerationsGiveNImagesOfTheSize) {
  auto res = post("/v1/images/generations", {{"prompt", "a red apple"}, {"n", 2}, {"size", "64x64"}, {"steps", 4}, {"seed", 3}});
  ASSERT_EQ(res->status, 200) << res->body;
  const json body = json::parse(res->body);
  EXPECT_TRUE(body["created"].is_number_integer());
  ASSERT_EQ(body["data"].size(), 2u);
  for (const auto& item : body["data"]) {
    const Image image = decoded(item["b64_json"]);
    EXPECT_EQ(image.width, 64);
    EXPECT_EQ(image.height, 64);
  }
  EXPECT_NE(body["data"][0]["b64_json"], body["data"][1]["b64_json"]) << "image i has seed + i";
}

// OpenAI's route and rbee's give one image for one set of parameters.
TEST_F(ImageApis, OpenAiAndRbeeAgree) {
  const json openai = json::parse(
      post("/v1/images/generations", {{"prompt", "a pear"}, {"size", "64x64"}, {"steps", 5}, {"seed", 77}})->body);
  const json job = json::parse(post("/v1/jobs", {{"operation", "image_generation"}, {"hive_id", "h"}, {"model", "sd-demo"},
                                                 {"prompt", "a pear"}, {"width", 64}, {"height", 64}, {"steps", 5},
                                                 {"seed", 77}})->body);
  const auto events = sse_events(server_->client().Get(job["sse_url"].get<std::string>())->body);
  ASSERT_EQ(events.back().first, "complete");
  EXPECT_EQ(json::parse(events.back().second)["image"], openai["data"][0]["b64_json"]);
}

TEST_F(ImageApis, OpenAiRefusesWhatItCannotDo) {
  const json ok = {{"prompt", "x"}, {"size", "64x64"}, {"steps", 2}};
  expect_bad("/v1/images/generations", with(ok, {{"response_format", "url"}}), "response_format");
  expect_bad("/v1/images/generations", with(ok, {{"size", "64x65"}}), "size");
  expect_bad("/v1/images/generations", with(ok, {{"size", "big"}}), "size");
  expect_bad("/v1/images/generations", with(ok, {{"n", 9}}), "n");
  expect_bad("/v1/images/generations", with(ok, {{"quality", "hd"}}), "quality");
  expect_bad("/v1/images/generations", json{{"size", "64x64"}}, "prompt");
  auto other = post("/v1/images/generations", with(ok, {{"model", "dall-e-3"}}));
  EXPECT_EQ(other->status, 404);
}

TEST_F(ImageApis, OpenAiEditsRepaintTheMaskAndKeepTheSize) {
  const ImageMetrics& m = server_->image_model().worker().metrics();
  const auto transforms = m.ended(ImageOperation::transform, JobOutcome::completed);
  const auto inpaints = m.ended(ImageOperation::inpaint, JobOutcome::completed);
  httplib::MultipartFormDataItems form = {{"image", bytes(png_of(96, 64, 3)), "in.png", "image/png"},
                                          {"prompt", "a pear", "", ""},
                                          {"steps", "4", "", ""},
                                          {"seed", "2", "", ""}};
  auto res = server_->client().Post("/v1/images/edits", form);
  ASSERT_EQ(res->status, 200) << res->body;
  const Image image = decoded(json::parse(res->body)["data"][0]["b64_json"]);
  EXPECT_EQ(image.width, 96);
  EXPECT_EQ(image.height, 64);
  EXPECT_EQ(m.ended(ImageOperation::transform, JobOutcome::completed), transforms + 1) << "an opaque image, no mask";
  // An image whose left half is transparent: that half is repainted, as DALL-E 2 reads it.
  form[0].content = bytes(png_of(96, 64, 4, 0));
  ASSERT_EQ(server_->client().Post("/v1/images/edits", form)->status, 200);
  EXPECT_EQ(m.ended(ImageOperation::inpaint, JobOutcome::completed), inpaints + 1);
  // A mask with transparency, of the image's size.
  form[0].content = bytes(png_of(96, 64, 3));
  form.push_back({"mask", bytes(png_of(96, 64, 4, 0)), "mask.png", "image/png"});
  ASSERT_EQ(server_->client().Post("/v1/images/edits", form)->status, 200);
  EXPECT_EQ(m.ended(ImageOperation::inpaint, JobOutcome::completed), inpaints + 2);
  form.pop_back();
  // A gray mask of another size is named.
  form.push_back({"mask", bytes(png_of(64, 64, 1)), "mask.png", "image/png"});
  res = server_->client().Post("/v1/images/edits", form);
  EXPECT_EQ(res->status, 400) << res->body;
  EXPECT_EQ(json::parse(res->body)["error"]["param"], "mask");
  // No image at all.
  res = server_->client().Post("/v1/images/edits", httplib::MultipartFormDataItems{{"prompt", "x", "", ""}});
  EXPECT_EQ(json::parse(res->body)["error"]["param"], "image");
}

TEST_F(ImageApis, A1111Txt2ImgSeedsABatchAsA1111Does) {
  auto res = post("/sdapi/v1/txt2img", {{"prompt", "a red apple"}, {"negative_prompt", "blurry"}, {"steps", 4},
                                        {"width", 64}, {"height", 64}, {"seed", 100}, {"batch_size", 2}, {"n_iter", 2},
                                        {"sampler_name", "DPM++ 2M Karras"}, {"cfg_scale", 6},
                                        // A1111's own defaults, which do nothing here.
                                        {"enable_hr", false}, {"hr_scale", 2}, {"restore_faces", false},
                                        {"override_settings", json::object()}, {"send_images", true}, {"save_images", false}});
  ASSERT_EQ(res->status, 200) << res->body;
  const json body = json::parse(res->body);
  ASSERT_EQ(body["images"].size(), 4u);
  EXPECT_EQ(decoded(body["images"][0]).width, 64);
  const json info = json::parse(body["info"].get<std::string>());
  EXPECT_EQ(info["seed"], 100);
  EXPECT_EQ(info["all_seeds"], (json{100, 101, 102, 103}));
  EXPECT_EQ(info["sampler_name"], "DPM++ 2M");
  ASSERT_EQ(info["infotexts"].size(), 4u);
  const std::string infotext = info["infotexts"][1];
  EXPECT_NE(infotext.find("Negative prompt: blurry"), std::string::npos) << infotext;
  EXPECT_NE(infotext.find("Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 6.0, Seed: 101"), std::string::npos) << infotext;
  EXPECT_EQ(body["parameters"]["prompt"], "a red apple");
}

TEST_F(ImageApis, A1111RefusesWhatItCannotDo) {
  const json ok = {{"prompt", "x"}, {"steps", 2}, {"width", 64}, {"height", 64}};
  expect_bad("/sdapi/v1/txt2img", with(ok, {{"enable_hr", true}}), "enable_hr");
  expect_bad("/sdapi/v1/txt2img", with(ok, {{"restore_faces", true}}), "restore_faces");
  expect_bad("/sdapi/v1/txt2img", with(ok, {{"alwayson_scripts", {{"controlnet", json::object()}}}}), "alwayson_scripts");
  expect_bad("/sdapi/v1/txt2img", with(ok, {{"sampler_name", "Nope"}}), "sampler_name");
  expect_bad("/sdapi/v1/txt2img", with(ok, {{"scheduler", "Polyexponential"}}), "scheduler");
  expect_bad("/sdapi/v1/txt2img", with(ok, {{"wat", 1}}), "wat");
  expect_bad("/sdapi/v1/txt2img", with(ok, {{"batch_size", 4}, {"n_iter", 3}}), "n_iter");
  expect_bad("/sdapi/v1/txt2img", with(ok, {{"prompt", "an apple <lora:detail:0.5>"}}), "prompt");  // no --lora-dir
  for (const auto& [prompt, says] : {std::pair{"an apple <lora:detail:0.5:1>", "separate text-encoder and UNet"},
                                     std::pair{"an apple <lora:detail:strong>", "must be a number"}}) {
    auto res = post("/sdapi/v1/txt2img", with(ok, {{"prompt", prompt}}));
    EXPECT_EQ(res->status, 400);
    EXPECT_NE(res->body.find(says), std::string::npos) << res->body;
  }
  expect_bad("/sdapi/v1/txt2img", with(ok, {{"init_images", json::array()}}), "init_images");
  expect_bad("/sdapi/v1/img2img", ok, "init_images");
}

TEST_F(ImageApis, A1111Img2ImgInpaintsWithAMask) {
  const auto image = png_of(64, 64, 3), mask = png_of(64, 64, 1);
  auto res = post("/sdapi/v1/img2img", {{"prompt", "a pear"}, {"steps", 4}, {"seed", 1},
                                        {"init_images", {"data:image/png;base64," + base64_encode(image)}},
                                        {"mask", base64_encode(mask)}, {"denoising_strength", 0.5},
                                        {"inpainting_mask_invert", 1}, {"mask_blur", 4}, {"inpainting_fill", 1}});
  ASSERT_EQ(res->status, 200) << res->body;
  const json body = json::parse(res->body);
  EXPECT_EQ(decoded(body["images"][0]).width, 64);
  EXPECT_EQ(json::parse(body["info"].get<std::string>())["denoising_strength"], 0.5);
}

TEST_F(ImageApis, A1111ListsAndProgress) {
  const json samplers = json::parse(server_->client().Get("/sdapi/v1/samplers")->body);
  EXPECT_EQ(samplers.size(), 9u);
  EXPECT_NE(std::ranges::find_if(samplers, [](const json& s) { return s["name"] == "Euler a"; }), samplers.end());
  const json schedulers = json::parse(server_->client().Get("/sdapi/v1/schedulers")->body);
  EXPECT_EQ(schedulers[1]["label"], "Karras");
  const json models = json::parse(server_->client().Get("/sdapi/v1/sd-models")->body);
  EXPECT_EQ(models[0]["model_name"], "sd-demo");

  const json idle = json::parse(server_->client().Get("/sdapi/v1/progress")->body);
  EXPECT_EQ(idle["progress"], 0.0);
  EXPECT_TRUE(idle["current_image"].is_null());
  std::thread run([] { post("/sdapi/v1/txt2img", {{"prompt", "x"}, {"steps", 60}, {"width", 64}, {"height", 64}}); });
  json seen;
  EXPECT_TRUE(wait_for([&] {
    seen = json::parse(server_->client().Get("/sdapi/v1/progress")->body);
    return seen["state"]["sampling_step"].get<int>() >= 6 && !seen["current_image"].is_null();
  }));
  EXPECT_EQ(seen["state"]["sampling_steps"], 60);
  EXPECT_GT(seen["progress"].get<double>(), 0.0);
  EXPECT_GT(decoded(seen["current_image"]).width, 0);
  run.join();
}

}  // namespace
}  // namespace rf::server::testing
