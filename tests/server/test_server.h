#pragma once
// A real rocmforge server on 127.0.0.1 (a free port) in this process, serving the demo model,
// with helpers to talk to it over HTTP and read its server-sent events.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/model_runner.h"
#include "server/http_server.h"
#include "server/model_service.h"

namespace rf::server::testing {

using nlohmann::json;

inline const std::string kDemoModel = std::string(ROCMFORGE_SOURCE_DIR) + "/models/kjv-llama";

inline std::unique_ptr<ModelService> demo_service(const SchedulerOptions& scheduler = {}, int kv_cache_tokens = 16384) {
  auto runner = std::make_unique<ModelRunner>(
      kDemoModel, RunnerOptions{.threads = 2, .ctx_size = 512, .kv_cache_tokens = kv_cache_tokens, .max_batch_tokens = 512});
  return std::make_unique<ModelService>(std::move(runner), "kjv-llama", scheduler);
}

class TestServer {
 public:
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
