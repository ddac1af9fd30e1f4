#include "server/routes.h"

#include <spdlog/spdlog.h>

#include "server/api_error.h"
#include "util/error.h"

namespace rf::server {

void send_json(httplib::Response& res, const nlohmann::json& body, int status) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param,
                const std::string& code) {
  // Busy or loading: tell the client when to come back.
  if (status == 429 || status == 503) res.set_header("Retry-After", "1");
  send_json(res, error_body(status, message, param, code), status);
}

httplib::Server::Handler guarded(std::function<void(const httplib::Request&, httplib::Response&)> handler) {
  return [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    try {
      handler(req, res);
    } catch (const ApiError& e) {
      send_error(res, e.status, e.what(), e.param, e.code);
    } catch (const Error& e) {
      send_error(res, 400, e.what());
    } catch (const std::exception& e) {
      spdlog::error("{} {}: {}", req.method, req.path, e.what());
      send_error(res, 500, std::string("internal error: ") + e.what());
    }
  };
}

}  // namespace rf::server
