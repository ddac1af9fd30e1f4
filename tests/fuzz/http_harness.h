#pragma once
// What the fuzz targets of the HTTP routes share: a server in the process, a POST whose 5xx answer
// (an exception the routes did not expect) or missing answer is a finding, and a wait for the
// work a request left behind (a job runs after its answer).
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include "server/http_server.h"

namespace rf::fuzz {

// `serve(http)` gives it its model before it listens.
struct InProcessServer {
  server::HttpServer http{server::ServerOptions{.port = 0, .threads = 8}};
  int port = http.bind();
  std::thread listener;

  template <typename Serve>
  explicit InProcessServer(Serve serve) {
    spdlog::set_level(spdlog::level::off);  // every refused request would be logged
    serve(http);
    listener = std::thread([this] { http.listen(); });
  }
  ~InProcessServer() {  // at exit: a joinable thread's destruction would terminate
    http.stop();
    listener.join();
  }
};

inline void post_expecting_an_answer(const InProcessServer& server, const std::string& route, const std::string& body) {
  httplib::Client client("127.0.0.1", server.port);
  client.set_read_timeout(60);
  const auto res = client.Post(route, body, "application/json");
  if (!res) {
    fmt::print(stderr, "{}: no answer ({})\n", route, httplib::to_string(res.error()));
    std::abort();
  }
  if (res->status >= 500) {
    fmt::print(stderr, "{}: {} {}\n", route, res->status, res->body);
    std::abort();
  }
}

// Waiting until nothing runs keeps one input's work out of the next, and the engine still when
// libFuzzer exits: the statics destroyed at exit include some its thread uses.
template <typename Busy>
void wait_until_idle(const std::string& route, Busy busy, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (busy()) {
    if (std::chrono::steady_clock::now() > deadline) {
      fmt::print(stderr, "{}: still busy {} s after the answer\n", route, limit.count());
      std::abort();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace rf::fuzz
