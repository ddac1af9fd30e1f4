// rbee's job contract, cancellation by DELETE and by disconnecting, and /metrics.
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "test_server.h"

namespace rf::server::testing {
namespace {

class Jobs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(demo_service()); }
  static void TearDownTestSuite() { delete server_; }
  static json create(const json& body) {
    auto res = server_->client().Post("/v1/jobs", body.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
    return res ? json::parse(res->body) : json{};
  }
  static TestServer* server_;
};
TestServer* Jobs::server_ = nullptr;

TEST_F(Jobs, AJobStreamsStartedTokensAndDone) {
  const json job = create({{"operation", "infer"}, {"hive_id", "hive-1"}, {"model", "kjv-llama"}, {"prompt", "In the beginning"},
                           {"max_tokens", 12}, {"temperature", 0}, {"top_p", 1.0}, {"top_k", 0}, {"stream", true}});
  const std::string id = job["job_id"];
  EXPECT_EQ(job["sse_url"], "/v1/jobs/" + id + "/stream");
  auto res = server_->client().Get(job["sse_url"].get<std::string>());
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  const auto frames = sse_data(res->body);
  ASSERT_GE(frames.size(), 4u);
  EXPECT_EQ(json::parse(frames.front())["type"], "started");
  EXPECT_EQ(json::parse(frames.front())["job_id"], id);
  EXPECT_EQ(frames.back(), "[DONE]");
  std::string text;
  int index = 0;
  for (std::size_t i = 1; i + 2 < frames.size(); ++i) {
    const json token = json::parse(frames[i]);
    ASSERT_EQ(token["type"], "token");
    EXPECT_EQ(token["i"], index++);
    text += token["t"].get<std::string>();
  }
  EXPECT_EQ(index, 12);
  const json end = json::parse(frames[frames.size() - 2]);
  EXPECT_EQ(end["type"], "end");
  EXPECT_EQ(end["stop_reason"], "max_tokens");
  // The same text as the OpenAI route gives.
  auto completion = server_->client().Post("/v1/completions", json{{"prompt", "In the beginning"}, {"max_tokens", 12}, {"temperature", 0}}.dump(), "application/json");
  EXPECT_EQ(text, json::parse(completion->body)["choices"][0]["text"].get<std::string>());
  // A job is streamed once.
  EXPECT_EQ(server_->client().Get(job["sse_url"].get<std::string>())->status, 404);
}

TEST_F(Jobs, DeleteCancelsAJobBeingStreamed) {
  const json job = create({{"operation", "infer"}, {"prompt", "And the LORD said"}, {"max_tokens", 400}, {"temperature", 0}});
  const std::string id = job["job_id"];
  std::string body;
  bool deleted = false;
  auto res = server_->client().Get(job["sse_url"].get<std::string>(), [&](const char* data, std::size_t size) {
    body.append(data, size);
    if (!deleted && body.find("\"token\"") != std::string::npos) {
      deleted = true;
      EXPECT_EQ(server_->client().Delete("/v1/jobs/" + id)->status, 200);
    }
    return true;
  });
  ASSERT_TRUE(res);
  const auto frames = sse_data(body);
  ASSERT_GE(frames.size(), 3u);
  EXPECT_EQ(frames.back(), "[DONE]");
  const json error = json::parse(frames[frames.size() - 2]);
  EXPECT_EQ(error["type"], "error");
  EXPECT_EQ(error["code"], "CANCELLED");
  EXPECT_TRUE(error["message"].is_string());
  wait_until_idle(server_->model());
  EXPECT_EQ(server_->model().scheduler().metrics().kv_blocks_used, 0);
}

TEST_F(Jobs, DeleteCancelsAJobNobodyStreamed) {
  const json job = create({{"operation", "infer"}, {"prompt", "Blessed"}, {"max_tokens", 400}});
  EXPECT_EQ(server_->client().Delete("/v1/jobs/" + job["job_id"].get<std::string>())->status, 200);
  EXPECT_EQ(server_->client().Get(job["sse_url"].get<std::string>())->status, 404);
  wait_until_idle(server_->model());
  EXPECT_EQ(server_->model().scheduler().metrics().kv_blocks_used, 0);
}

// A raw socket that sends `body` to /v1/completions, left open in fd.
void send_completion(int port, const std::string& body, int& fd) {
  fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
}

// A raw socket that sends a streaming request, reads the first bytes of the answer and hangs up.
void stream_then_hang_up(int port, const std::string& body) {
  int fd = -1;
  ASSERT_NO_FATAL_FAILURE(send_completion(port, body, fd));
  std::string received;
  char buffer[4096];
  while (received.find("\"text\"") == std::string::npos) {
    const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    ASSERT_GT(n, 0);
    received.append(buffer, n);
  }
  close(fd);
}

TEST_F(Jobs, AClientThatHangsUpMidStreamIsCancelled) {
  auto& metrics = server_->model().scheduler().metrics();
  const auto cancelled_before = metrics.requests_cancelled.load();
  stream_then_hang_up(server_->port(), json{{"prompt", "And God said"}, {"max_tokens", 450}, {"stream", true}, {"ignore_eos", true}}.dump());
  EXPECT_TRUE(wait_for([&] { return metrics.requests_cancelled == cancelled_before + 1; }));
  wait_until_idle(server_->model());
  EXPECT_EQ(metrics.kv_blocks_used, 0);
  EXPECT_EQ(metrics.running, 0);
}

// A whole (non-streaming) answer is written only at the end: the server watches the connection while
// it generates, and a client that hangs up before then cancels its request.
TEST_F(Jobs, AClientThatHangsUpBeforeAWholeAnswerIsCancelled) {
  auto& metrics = server_->model().scheduler().metrics();
  const auto cancelled_before = metrics.requests_cancelled.load();
  const auto finished_before = metrics.requests_finished.load();
  int fd = -1;
  ASSERT_NO_FATAL_FAILURE(send_completion(
      server_->port(), json{{"prompt", "And God said"}, {"max_tokens", 450}, {"ignore_eos", true}}.dump(), fd));
  ASSERT_TRUE(wait_for([&] { return metrics.running == 1; }));
  close(fd);
  EXPECT_TRUE(wait_for([&] { return metrics.requests_cancelled == cancelled_before + 1; }));
  EXPECT_EQ(metrics.requests_finished, finished_before);
  wait_until_idle(server_->model());
  EXPECT_EQ(metrics.kv_blocks_used, 0);
}

// The whole answer's connection is looked for among every socket of the process: Unix sockets (whose
// "service" glibc names by their path) are passed over, not misread.
TEST_F(Jobs, AWholeAnswerIsServedBesideUnixSockets) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  auto res = server_->client().Post("/v1/completions", R"({"prompt": "In the beginning", "max_tokens": 3})", "application/json");
  close(pair[0]);
  close(pair[1]);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
}

TEST_F(Jobs, MetricsAreInPrometheusFormat) {
  server_->client().Post("/v1/completions", R"({"prompt": "In the beginning", "max_tokens": 3})", "application/json");
  auto res = server_->client().Get("/metrics");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_TRUE(res->get_header_value("Content-Type").starts_with("text/plain"));
  for (const char* needle :
       {"# TYPE rocmforge_generation_tokens_total counter", "rocmforge_queue_depth ", "rocmforge_running_sequences ",
        "rocmforge_kv_cache_usage_ratio ", "# TYPE rocmforge_time_to_first_token_seconds histogram",
        "rocmforge_time_to_first_token_seconds_bucket{le=\"+Inf\"}", "rocmforge_inter_token_latency_seconds_count ",
        "rocmforge_batch_tokens_sum ", "rocmforge_http_requests_total{route=\"/v1/completions\",status=\"200\"}"}) {
    EXPECT_NE(res->body.find(needle), std::string::npos) << needle;
  }
}

// Each answer is counted under its route and status before the client has it, the error handler's
// (401, 404, 413) too: /metrics asked right after shows it, with no wait. Counted after the body was
// sent, 20 rounds of each missed some count in 2 of 3 runs.
TEST(RequestCounts, EveryStatusIsCountedBeforeItsAnswerArrives) {
  TestServer server(demo_service(), ServerOptions{.api_key = "sesame", .max_body_bytes = 4096});
  const auto count_of = [&](const std::string& route, int status) {
    const std::string needle =
        fmt::format("rocmforge_http_requests_total{{route=\"{}\",status=\"{}\"}} ", route, status);
    auto metrics = server.client("sesame").Get("/metrics");
    const std::size_t at = metrics && metrics->status == 200 ? metrics->body.find(needle) : std::string::npos;
    return at == std::string::npos ? 0 : std::stoi(metrics->body.substr(at + needle.size()));
  };
  const std::string completion = R"({"prompt": "In the beginning", "max_tokens": 2})";
  struct Case {
    std::string what, path, body, key, route;
    int status;
  };
  const Case cases[] = {{"an answer", "/v1/completions", completion, "sesame", "/v1/completions", 200},
                        {"a bad field", "/v1/completions", R"({"prompt": 3})", "sesame", "/v1/completions", 400},
                        {"no key", "/v1/completions", completion, "", "/v1/completions", 401},
                        {"no route", "/v1/nowhere", completion, "sesame", "other", 404},
                        {"a body too large", "/v1/completions", std::string(8192, ' '), "sesame", "/v1/completions",
                         413}};
  for (const Case& c : cases) {
    for (int round = 1; round <= 20; ++round) {
      const int before = count_of(c.route, c.status);
      auto res = server.client(c.key).Post(c.path, c.body, "application/json");
      ASSERT_TRUE(res) << c.what;
      EXPECT_EQ(res->status, c.status) << c.what << ": " << res->body;
      EXPECT_EQ(count_of(c.route, c.status), before + 1) << c.what << ", round " << round;
    }
  }
}

}  // namespace
}  // namespace rf::server::testing
