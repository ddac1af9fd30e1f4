// Request bodies of the LLM server's routes (OpenAI's, rbee's jobs, llama-server's tokenizer), sent
// over HTTP to a server in this process that serves a small fixture model (Llama 3 shaped, with its
// chat template). The first byte picks the route; the rest is the body. A 5xx answer (an exception
// the routes did not expect) is a finding. Token counts are capped at a few so that a run spends its
// time on parsing, not on generating.
#include <array>
#include <memory>

#include "engine/model_runner.h"
#include "fuzz_support.h"
#include "http_harness.h"
#include "server/model_service.h"

namespace {

using nlohmann::json;

constexpr std::array<const char*, 7> kRoutes = {"/v1/completions", "/v1/chat/completions", "/v1/responses",
                                                "/v1/embeddings",  "/v1/jobs",             "/tokenize",
                                                "/detokenize"};

rf::fuzz::InProcessServer& server() {
  static rf::fuzz::InProcessServer instance([](rf::server::HttpServer& http) {
    auto runner = std::make_unique<rf::ModelRunner>(
        ROCMFORGE_FUZZ_SERVED_MODEL, rf::RunnerOptions{.threads = 1, .ctx_size = 256, .max_batch_tokens = 256});
    http.set_model(std::make_shared<rf::server::ModelService>(std::move(runner), "llama3",
                                                                 rf::SchedulerOptions{.max_running = 8, .max_queued = 32}));
  });
  return instance;
}

// A body with its token counts and choice counts kept small (where it is a JSON object).
std::string capped(std::string_view body) {
  json value = json::parse(body, nullptr, false);
  if (!value.is_object()) return std::string(body);
  bool counted = false;
  for (const char* key : {"max_tokens", "max_completion_tokens", "max_output_tokens", "n_predict"}) {
    const auto it = value.find(key);
    if (it == value.end()) continue;
    counted = true;
    if (it->is_number() && it->get<double>() > 4) *it = 4;
  }
  if (!counted) value["max_tokens"] = 4;
  if (const auto n = value.find("n"); n != value.end() && n->is_number() && n->get<double>() > 2) *n = 2;
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto& served = server();
  if (size == 0) return -1;
  const std::string route = kRoutes[data[0] % kRoutes.size()];
  rf::fuzz::post_expecting_an_answer(served, route, capped(rf::fuzz::as_text(data + 1, size - 1)));
  const auto& metrics = served.http.context().model()->scheduler().metrics();
  rf::fuzz::wait_until_idle(route, [&] { return metrics.running + metrics.waiting > 0; }, std::chrono::seconds(10));
  return 0;
}
