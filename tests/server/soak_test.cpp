// A thousand concurrent clients on loopback, streaming or not, a share of them hanging up at a
// random moment. Bounded in time; afterwards the server still answers, every KV block is free
// and the process has not grown.
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "test_server.h"

namespace rf::server::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kClients = 1000;
constexpr auto kTimeLimit = 60s;

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

struct Tally {
  std::atomic<int> completed{0}, hung_up{0}, busy{0}, failed{0};
};

// One client: a random prompt, streamed or not, maybe hanging up after a few chunks.
void client(int port, int seed, Tally& tally) {
  std::mt19937 rng(seed);
  static const std::vector<std::string> prompts = {"In the beginning", "And the LORD said unto Moses,", "Blessed are the",
                                                   "The kingdom of heaven is like", "And it came to pass"};
  const bool stream = rng() % 2 == 0;
  const bool hang_up = rng() % 5 == 0;
  const int hang_up_after = 1 + static_cast<int>(rng() % 6);
  const json body = {{"prompt", prompts[rng() % prompts.size()]}, {"max_tokens", 8 + rng() % 40}, {"temperature", 0.7},
                     {"seed", seed}, {"stream", stream || hang_up}};
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60);
  c.set_connection_timeout(30);
  int chunks = 0;
  bool finished = false;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, std::size_t size, std::uint64_t, std::uint64_t) {
    finished = finished || std::string_view(data, size).find("[DONE]") != std::string_view::npos || !body["stream"];
    return !(hang_up && ++chunks >= hang_up_after);
  };
  auto res = c.send(req);
  if (hang_up && !finished) {
    ++tally.hung_up;
  } else if (res && res->status == 200 && finished) {
    ++tally.completed;
  } else if (res && (res->status == 429 || res->status == 503)) {
    ++tally.busy;
  } else {
    ++tally.failed;
  }
}

void run_clients(int port, int count, int seed, Tally& tally) {
  std::vector<std::thread> threads;
  for (int i = 0; i < count; ++i) threads.emplace_back(client, port, seed + i, std::ref(tally));
  for (auto& t : threads) t.join();
}

TEST(Soak, AThousandClientsSomeHangingUp) {
  SchedulerOptions scheduler{.max_running = 64, .max_queued = kClients};
  TestServer server(demo_service(scheduler, 8192), ServerOptions{.threads = kClients + 64});
  const auto& metrics = server.model().scheduler().metrics();

  // A first round grows the pools (threads, arenas, the KV cache's pages) to their working size.
  Tally warm_up;
  run_clients(server.port(), kClients, 1000, warm_up);
  wait_until_idle(server.model());
  const std::size_t rss_before = resident_bytes();

  Tally tally;
  const auto start = std::chrono::steady_clock::now();
  run_clients(server.port(), kClients, 5000, tally);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  wait_until_idle(server.model());
  const std::size_t rss_after = resident_bytes();

  std::printf("%d clients in %.1f s: %d completed, %d hung up, %d told busy, %d failed; RSS %.1f -> %.1f MB\n", kClients,
              std::chrono::duration<double>(elapsed).count(), tally.completed.load(), tally.hung_up.load(), tally.busy.load(),
              tally.failed.load(), rss_before / 1e6, rss_after / 1e6);
  EXPECT_LT(elapsed, kTimeLimit);
  EXPECT_EQ(tally.failed, 0);
  EXPECT_EQ(tally.busy, 0);  // the queue holds them all
  EXPECT_GT(tally.hung_up, kClients / 10);
  EXPECT_EQ(tally.completed + tally.hung_up, kClients);
  EXPECT_EQ(metrics.running, 0);
  EXPECT_EQ(metrics.waiting, 0);
  EXPECT_EQ(metrics.kv_blocks_used, 0);  // every block is free (cached ones are evictable)
  EXPECT_GT(metrics.requests_cancelled, 0u);
  EXPECT_LT(rss_after, rss_before + (32u << 20)) << "the process grew by " << (rss_after - rss_before) / 1e6 << " MB";

  // It still answers.
  auto res = server.client().Post("/v1/completions", R"({"prompt": "In the beginning", "max_tokens": 4})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(server.client().Get("/health")->status, 200);
}

}  // namespace
}  // namespace rf::server::testing
