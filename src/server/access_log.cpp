#include "server/access_log.h"

#include <chrono>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace rf::server::access_log {

namespace {

using Clock = std::chrono::steady_clock;

struct Record {
  Clock::time_point start = Clock::now();
  std::optional<Clock::time_point> first_token;
  std::size_t prompt_tokens = 0;
  std::size_t completion_tokens = 0;
  std::size_t generations = 0;
};

thread_local Record current;

double seconds_since(Clock::time_point start, Clock::time_point end) { return std::chrono::duration<double>(end - start).count(); }

}  // namespace

void begin() { current = Record{}; }

void token() {
  if (!current.first_token) current.first_token = Clock::now();
}

void usage(std::size_t prompt_tokens, std::size_t completion_tokens) {
  current.prompt_tokens += prompt_tokens;
  current.completion_tokens += completion_tokens;
  ++current.generations;
}

void end(const httplib::Request& req, const httplib::Response& res) {
  const auto now = Clock::now();
  std::string line = fmt::format("{} {} {} {:.3f} s", req.method, req.path, res.status, seconds_since(current.start, now));
  if (current.generations > 0) {
    if (current.generations > 1) line += fmt::format(", {} generations", current.generations);
    line += fmt::format(", {} prompt + {} completion tokens", current.prompt_tokens, current.completion_tokens);
    if (current.first_token) line += fmt::format(", first token after {:.3f} s", seconds_since(current.start, *current.first_token));
  }
  const bool probe = req.path == "/health" || req.path == "/metrics";
  spdlog::log(probe ? spdlog::level::debug : spdlog::level::info, "{}", line);
  current = Record{};
}

}  // namespace rf::server::access_log
