// Request bodies of the image routes (OpenAI's images, A1111's txt2img and img2img, rbee's image
// jobs), sent over HTTP to a server in this process that serves the sd15 fixture on the CPU, with
// the fixture's folder as its LoRA folder. The first byte picks the route; the rest is the body. A
// 5xx answer (an exception the routes did not expect) is a finding. Sizes, steps and counts are
// capped so that a run spends its time on the fields, not on making images; the values past the
// caps are the unit tests' (image_bad_input_test).
#include <array>
#include <cstdio>
#include <memory>

#include "engine/image_worker.h"
#include "fuzz_support.h"
#include "http_harness.h"
#include "server/image_service.h"

namespace {

using nlohmann::json;

constexpr std::array<const char*, 4> kRoutes = {"/v1/images/generations", "/sdapi/v1/txt2img", "/sdapi/v1/img2img",
                                                "/v1/jobs"};

rf::fuzz::InProcessServer& server() {
  static rf::fuzz::InProcessServer instance([](rf::server::HttpServer& http) {
    const std::string path = ROCMFORGE_FUZZ_SD_MODEL "/diffusers";
    auto worker = std::make_unique<rf::ImageWorker>(
        rf::stable_diffusion::Checkpoint::open(path, {.clip_vocab = ROCMFORGE_CLIP_VOCAB}),
        rf::ImageWorkerOptions{.device = "cpu", .threads = 1, .max_queued = 4, .model_name = "sd15"});
    // The fixture's folder is the LoRA folder: its lora.safetensors is one; its checkpoints are not.
    http.set_image_model(
        std::make_shared<rf::server::ImageService>(std::move(worker), "sd15", path, ROCMFORGE_FUZZ_SD_MODEL));
  });
  return instance;
}

// A number field above `most` becomes `most`; an absent one is given `most` where `fill`.
void cap(json& body, const char* key, int most, bool fill) {
  const auto it = body.find(key);
  if (it == body.end()) {
    if (fill) body[key] = most;
  } else if (it->is_number() && it->get<double>() > most) {
    *it = most;
  }
}

// A body with its images small, its steps few and one image at a time (where it is a JSON object),
// filling in only the fields the route takes: OpenAI's size, A1111's and the generation job's sides.
std::string capped(std::string_view text, const std::string& route) {
  json body = json::parse(text, nullptr, false);
  if (!body.is_object()) return std::string(text);
  const bool openai = route == kRoutes[0];
  const bool sides = route.starts_with("/sdapi/") || body.value("operation", json()) == "image_generation";
  for (const char* side : {"width", "height"}) cap(body, side, 64, sides);
  cap(body, "steps", 2, true);
  for (const char* count : {"n", "batch_size", "n_iter"}) cap(body, count, 1, false);
  const auto size = body.find("size");
  int w = 0, h = 0;
  if (size != body.end() && size->is_string() && std::sscanf(size->get<std::string>().c_str(), "%dx%d", &w, &h) == 2 &&
      (w > 64 || h > 64)) {
    *size = "64x64";
  } else if (size == body.end() && openai) {
    body["size"] = "64x64";
  }
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto& served = server();
  if (size == 0) return -1;
  const std::string route = kRoutes[data[0] % kRoutes.size()];
  rf::fuzz::post_expecting_an_answer(served, route, capped(rf::fuzz::as_text(data + 1, size - 1), route));
  const auto& metrics = served.http.context().image_model()->worker().metrics();
  rf::fuzz::wait_until_idle(route, [&] { return metrics.running + metrics.waiting > 0; }, std::chrono::seconds(30));
  return 0;
}
