#pragma once
// A real rocmforge server on 127.0.0.1 (a free port) in this process, serving the demo model,
// with helpers to talk to it over HTTP and read its server-sent events.
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/image_worker.h"
#include "engine/model_runner.h"
#include "server/http_server.h"
#include "server/image_service.h"
#include "server/model_service.h"

namespace rf::server::testing {

using nlohmann::json;

inline const std::string kDemoModel = std::string(ROCMFORGE_SOURCE_DIR) + "/models/kjv-llama";

inline std::unique_ptr<ModelService> demo_service(const SchedulerOptions& scheduler = {}, int kv_cache_tokens = 16384) {
  auto runner = std::make_unique<ModelRunner>(
      kDemoModel, RunnerOptions{.threads = 2, .ctx_size = 512, .kv_cache_tokens = kv_cache_tokens, .max_batch_tokens = 512});
  return std::make_unique<ModelService>(std::move(runner), "kjv-llama", scheduler);
}

inline const std::string kDemoImageModel = std::string(ROCMFORGE_SOURCE_DIR) + "/models/sd-demo";

// An image model on the CPU: the demo model unless `path` names another checkpoint.
inline std::shared_ptr<ImageService> image_service(std::optional<std::filesystem::path> lora_dir = {},
                                                   const std::string& path = kDemoImageModel, int max_queued = 16) {
  stable_diffusion::OpenOptions open;
  open.clip_vocab = std::string(ROCMFORGE_SOURCE_DIR) + "/models/clip";
  ImageWorkerOptions options{.device = "cpu", .threads = 2, .max_queued = max_queued,
                             .model_name = std::filesystem::path(path).stem().string()};
  auto worker = std::make_unique<ImageWorker>(stable_diffusion::Checkpoint::open(path, open), options);
  return std::make_shared<ImageService>(std::move(worker), std::filesystem::path(path).filename().string(), path, lora_dir);
}

class TestServer {
 public:
  explicit TestServer(std::shared_ptr<ImageService> service, ServerOptions options = {}) : server_(with_free_port(options)) {
    port_ = server_.bind();
    server_.set_image_model(std::move(service));
    listener_ = std::thread([this] { server_.listen(); });
  }
  // `service` null: the server answers while "loading" until set_model().
  explicit TestServer(std::unique_ptr<ModelService> service, ServerOptions options = {}) : server_(with_free_port(options)) {
    port_ = server_.bind();
    if (service) server_.set_model(std::move(service));
    listener_ = std::thread([this] { server_.listen(); });
  }
  ~TestServer() {
    server_.stop();
    listener_.join();
  }

  int port() const { return port_; }
  HttpServer& server() { return server_; }
  ModelService& model() { return *server_.context().model(); }
  ImageService& image_model() { return *server_.context().image_model(); }
  httplib::Client client(const std::string& api_key = {}) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60);
    if (!api_key.empty()) c.set_bearer_token_auth(api_key.c_str());
    return c;
  }

 private:
  static ServerOptions with_free_port(ServerOptions o) {
    o.port = 0;
    return o;
  }

  HttpServer server_;
  int port_ = 0;
  std::thread listener_;
};

// The data of each `data: ...` frame of an event stream, in order.
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const std::size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

// Each frame of an event stream with its event name ("" where it has none) and its data.
inline std::vector<std::pair<std::string, std::string>> sse_events(const std::string& body) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t pos = 0;
  while (pos < body.size()) {
    const std::size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string name, data;
    for (std::size_t line = pos; line < end;) {
      const std::size_t stop = std::min(body.find('\n', line), end);
      const std::string text = body.substr(line, stop - line);
      if (text.starts_with("event: ")) name = text.substr(7);
      if (text.starts_with("data: ")) data = text.substr(6);
      line = stop + 1;
    }
    out.emplace_back(name, data);
    pos = end + 2;
  }
  return out;
}

template <class Condition>
bool wait_for(Condition condition, std::chrono::seconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// Nothing queued, nothing running, no KV block held.
inline bool wait_until_idle(ModelService& model) {
  const auto& m = model.scheduler().metrics();
  return wait_for([&] { return m.running == 0 && m.waiting == 0 && m.kv_blocks_used == 0; });
}

}  // namespace rf::server::testing
