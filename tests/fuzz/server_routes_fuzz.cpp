// Request bodies of the LLM server's routes (OpenAI's, rbee's jobs, llama-server's tokenizer), sent
// over HTTP to a server in this process that serves a small fixture model (Llama 3 shaped, with its
// chat template). The first byte picks the route; the rest is the body. A 5xx answer (an exception
// the routes did not expect) is a finding. Token counts are capped at a few so that a run spends its
// time on parsing, not on generating.
#include <array>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include "engine/model_runner.h"
#include "fuzz_support.h"
#include "server/http_server.h"
#include "server/model_service.h"

namespace {

using nlohmann::json;

constexpr std::array<const char*, 7> kRoutes = {"/v1/completions", "/v1/chat/completions", "/v1/responses",
                                                "/v1/embeddings",  "/v1/jobs",             "/tokenize",
                                                "/detokenize"};

struct Server {
  rf::server::HttpServer http{rf::server::ServerOptions{.port = 0, .threads = 8}};
  int port = http.bind();
  std::thread listener;

  Server() {
    spdlog::set_level(spdlog::level::off);  // every refused request would be logged
    auto runner = std::make_unique<rf::ModelRunner>(
        ROCMFORGE_FUZZ_SERVED_MODEL, rf::RunnerOptions{.threads = 1, .ctx_size = 256, .max_batch_tokens = 256});
    http.set_model(std::make_shared<rf::server::ModelService>(std::move(runner), "llama3",
                                                                 rf::SchedulerOptions{.max_running = 8, .max_queued = 32}));
    listener = std::thread([this] { http.listen(); });
  }
  ~Server() {  // at exit: a joinable thread's destruction would terminate
    http.stop();
    listener.join();
  }
};

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
  static Server server;
  if (size == 0) return -1;
  const char* route = kRoutes[data[0] % kRoutes.size()];
  httplib::Client client("127.0.0.1", server.port);
  client.set_read_timeout(30);
  const auto res = client.Post(route, capped(rf::fuzz::as_text(data + 1, size - 1)), "application/json");
  if (!res) {
    fmt::print(stderr, "{}: no answer ({})\n", route, httplib::to_string(res.error()));
    std::abort();
  }
  if (res->status >= 500) {
    fmt::print(stderr, "{}: {} {}\n", route, res->status, res->body);
    std::abort();
  }
  // A job (/v1/jobs) generates after its answer. Waiting for the engine to be idle keeps one input's
  // work out of the next, and keeps the engine still when libFuzzer exits: the statics destroyed at
  // exit include some the engine thread uses.
  const auto& metrics = server.http.context().model()->scheduler().metrics();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (metrics.running + metrics.waiting > 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      fmt::print(stderr, "{}: the engine is still busy 10 s after the answer\n", route);
      std::abort();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return 0;
}
