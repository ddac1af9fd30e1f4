#include "server/api_error.h"

namespace rf::server {

namespace {
std::string error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

nlohmann::json or_null(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }
}  // namespace

nlohmann::json error_body(int status, const std::string& message, const std::string& param, const std::string& code) {
  return {{"error", {{"message", message}, {"type", error_type(status)}, {"param", or_null(param)}, {"code", or_null(code)}}}};
}

}  // namespace rf::server
