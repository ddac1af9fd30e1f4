// The access log: one line per request in the server's log, with the generation's tokens and the
// time to its first token for requests that generate; probes only at debug level.
#include <chrono>
#include <regex>
#include <thread>

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "test_server.h"

namespace rf::server::testing {
namespace {

class AccessLog : public ::testing::Test {
 protected:
  void SetUp() override {
    sink_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
    sink_->set_pattern("%l %v");
    previous_ = spdlog::default_logger();
    auto logger = std::make_shared<spdlog::logger>("access-log-test", sink_);
    logger->set_level(spdlog::level::info);
    spdlog::set_default_logger(logger);
  }
  void TearDown() override { spdlog::set_default_logger(previous_); }

  // The log lines that name `path`, once there are `count` (the server logs a request after its
  // answer has left, so the client may be ahead of the line); what there is after 10 s.
  std::vector<std::string> wait_for_lines(const std::string& path, std::size_t count) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    auto found = lines_about(path);
    while (found.size() < count && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      found = lines_about(path);
    }
    return found;
  }
  std::vector<std::string> lines_about(const std::string& path) const {
    std::vector<std::string> found;
    for (auto line : sink_->last_formatted()) {
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
      if (line.find(" " + path + " ") != std::string::npos) found.push_back(line);
    }
    return found;
  }

  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST_F(AccessLog, OneLinePerRequestWithItsTokens) {
  TestServer server(demo_service());
  const json body = {{"prompt", "In the beginning"}, {"max_tokens", 5}, {"temperature", 0}, {"n", 2}};
  auto res = server.client().Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  const json reply = json::parse(res->body);
  const auto prompt = reply["usage"]["prompt_tokens"].get<int>(), completion = reply["usage"]["completion_tokens"].get<int>();
  auto streamed = server.client().Post("/v1/chat/completions",
                                       R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": true})",
                                       "application/json");
  ASSERT_TRUE(streamed);
  ASSERT_TRUE(server.client().Get("/health"));
  ASSERT_TRUE(server.client().Get("/v1/nothing"));

  const auto completions = wait_for_lines("/v1/completions", 1);
  ASSERT_EQ(completions.size(), 1u);
  // Both choices' tokens, each with the prompt it ran (usage counts the prompt once).
  const std::regex completions_line("info POST /v1/completions 200 [0-9.]+ s, 2 generations, " + std::to_string(2 * prompt) +
                                    " prompt \\+ " + std::to_string(completion) +
                                    " completion tokens, first token after [0-9.]+ s");
  EXPECT_TRUE(std::regex_match(completions[0], completions_line)) << completions[0];
  const auto chat = wait_for_lines("/v1/chat/completions", 1);
  ASSERT_EQ(chat.size(), 1u);
  EXPECT_TRUE(std::regex_match(chat[0], std::regex("info POST /v1/chat/completions 200 [0-9.]+ s, [0-9]+ prompt \\+ 3 "
                                                   "completion tokens, first token after [0-9.]+ s")))
      << chat[0];
  const auto missing = wait_for_lines("/v1/nothing", 1);  // after /health's turn to be logged
  EXPECT_TRUE(lines_about("/health").empty()) << "probes are logged at debug level only";
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_TRUE(std::regex_match(missing[0], std::regex("info GET /v1/nothing 404 [0-9.]+ s"))) << missing[0];
}

}  // namespace
}  // namespace rf::server::testing
