#pragma once
// Errors as the OpenAI API reports them: an HTTP status with
// {"error": {"message", "type", "param", "code"}}. Handlers throw ApiError; the server turns it
// (and any rf::Error, a bad request) into that body.
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace rf::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string param = {}, std::string code = {})
      : std::runtime_error(message), status(status), param(std::move(param)), code(std::move(code)) {}

  int status;
  std::string param;  // the request field at fault, if one is
  std::string code;   // OpenAI's machine-readable code, e.g. "model_not_found"
};

// The OpenAI-shaped body for an error with this status.
nlohmann::json error_body(int status, const std::string& message, const std::string& param = {},
                          const std::string& code = {});

}  // namespace rf::server
