#pragma once
// rocmforge's HTTP server: OpenAI's API, rbee's jobs, A1111's API (an image model), health,
// readiness and metrics on one port. It answers from the moment it is bound (health says 503 until
// set_model() or set_image_model()), checks the API key
// on every route but /health, caps request bodies, and answers every error in OpenAI's shape.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <httplib.h>

#include "server/server_context.h"

namespace rf::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
  std::string api_key = {};  // empty: no authentication
  // Origins whose web pages may call the API from a browser (CORS); "*": any. Empty: none, as a
  // browser then keeps pages of other origins from reading the answers.
  std::vector<std::string> cors_origins = {};
  std::size_t max_body_bytes = 8 << 20;
  int threads = 64;  // connections served at once (streams hold theirs until they end)
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();

  int bind();     // the port it is bound to; throws rf::Error if it cannot bind
  void listen();  // serves until stop()
  void stop();    // from any thread
  void set_model(std::shared_ptr<ModelService> model) { context_.set_model(std::move(model)); }
  void set_image_model(std::shared_ptr<ImageService> model) { context_.set_image_model(std::move(model)); }
  ServerContext& context() { return context_; }

 private:
  void check_api_key(const httplib::Request& req, httplib::Response& res, bool& handled) const;
  // Adds the CORS headers an allowed origin's request gets, and answers its preflight (handled).
  void allow_origin(const httplib::Request& req, httplib::Response& res, bool& handled) const;

  ServerOptions options_;
  ServerContext context_;
  httplib::Server http_;
  std::atomic<int> listen_socket_{-1};
};

}  // namespace rf::server
