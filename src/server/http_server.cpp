#include "server/http_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <string_view>

#include <fmt/format.h>

#include "server/access_log.h"
#include "server/routes.h"
#include "util/error.h"

namespace rf::server {

namespace {

// Requests are counted per route, ids left out.
std::string route_of(const std::string& path) {
  if (path.starts_with("/v1/jobs/")) return path.ends_with("/stream") ? "/v1/jobs/{id}/stream" : "/v1/jobs/{id}";
  if (path.starts_with("/v1/models/")) return "/v1/models/{id}";
  // Trivially destructible: httplib's workers log the last requests while the process exits, when
  // a vector of strings here could already be destroyed (the server_routes fuzz target found it).
  static constexpr std::array<std::string_view, 15> known = {
      "/health", "/ready", "/metrics", "/v1/models", "/v1/completions", "/v1/chat/completions", "/v1/jobs",
      "/v1/images/generations", "/v1/images/edits", "/sdapi/v1/txt2img", "/sdapi/v1/img2img", "/sdapi/v1/samplers",
      "/sdapi/v1/schedulers", "/sdapi/v1/sd-models", "/sdapi/v1/progress"};
  return std::ranges::find(known, path) != known.end() ? path : "other";
}

// Compares in time independent of where the strings differ.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() != b.size();
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

}  // namespace

HttpServer::HttpServer(ServerOptions options) : options_(std::move(options)) {
  // A client that disconnects must not kill the process when the next token is written.
  std::signal(SIGPIPE, SIG_IGN);
  const int threads = options_.threads;
  http_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_.set_payload_max_length(options_.max_body_bytes);
  http_.set_keep_alive_max_count(1000);
  http_.set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    // Inherited by every accepted connection: each streamed token leaves at once, not when Nagle allows.
    const int on = 1;
    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    listen_socket_ = sock;  // kept to raise httplib's backlog of 5 once bound
  });
  http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    access_log::begin();
    bool handled = false;
    allow_origin(req, res, handled);  // first: a preflight carries no API key
    if (!handled) check_api_key(req, res, handled);
    return handled ? httplib::Server::HandlerResponse::Handled : httplib::Server::HandlerResponse::Unhandled;
  });
  http_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler's own error
    switch (res.status) {
      case 404: return send_error(res, 404, fmt::format("no route for {} {}", req.method, req.path));
      case 413: return send_error(res, 413, fmt::format("the request body is larger than {} bytes", options_.max_body_bytes));
      default: return send_error(res, res.status, fmt::format("HTTP {}", res.status));
    }
  });
  // Every response, the error handler's too, passes here before its first byte is written: a client
  // that has its answer finds it counted (the logger runs only after the body is sent).
  http_.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    context_.counters.count(route_of(req.path), res.status);
  });
  http_.set_logger([](const httplib::Request& req, const httplib::Response& res) { access_log::end(req, res); });
  add_status_routes(http_, context_);
  add_openai_routes(http_, context_);
  add_llama_server_routes(http_, context_);
  add_job_routes(http_, context_);
  add_image_routes(http_, context_);
  add_a1111_routes(http_, context_);
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::check_api_key(const httplib::Request& req, httplib::Response& res, bool& handled) const {
  if (options_.api_key.empty() || req.path == "/health") return;
  if (same_secret(req.get_header_value("Authorization"), "Bearer " + options_.api_key)) return;
  res.set_header("WWW-Authenticate", "Bearer");
  send_error(res, 401, "a valid API key is required: send 'Authorization: Bearer KEY'", "", "invalid_api_key");
  handled = true;
}

void HttpServer::allow_origin(const httplib::Request& req, httplib::Response& res, bool& handled) const {
  const auto& allowed = options_.cors_origins;
  const std::string origin = req.get_header_value("Origin");
  const bool any = std::ranges::find(allowed, "*") != allowed.end();
  if (origin.empty() || (!any && std::ranges::find(allowed, origin) == allowed.end())) return;
  res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
  if (!any) res.set_header("Vary", "Origin");
  if (req.method != "OPTIONS" || !req.has_header("Access-Control-Request-Method")) return;
  res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
  const std::string headers = req.get_header_value("Access-Control-Request-Headers");
  res.set_header("Access-Control-Allow-Headers", headers.empty() ? "Authorization, Content-Type" : headers);
  res.set_header("Access-Control-Max-Age", "86400");
  res.status = 204;
  handled = true;
}

int HttpServer::bind() {
  const int port = options_.port == 0 ? http_.bind_to_any_port(options_.host)
                                      : (http_.bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port < 0) fail("cannot listen on {}:{} (in use, or not an address of this machine)", options_.host, options_.port);
  // Hundreds of clients may connect at once: a longer queue than httplib's 5 spares them SYN retries.
  ::listen(listen_socket_, 1024);
  return port;
}

void HttpServer::listen() { http_.listen_after_bind(); }

void HttpServer::stop() {
  context_.begin_stopping();
  // httplib's stop() does nothing until listen() runs; a listening socket that is shut down fails
  // every accept(), so listen() returns however the two race.
  if (const int sock = listen_socket_.exchange(-1); sock >= 0) ::shutdown(sock, SHUT_RDWR);
  http_.stop();
}

}  // namespace rf::server
