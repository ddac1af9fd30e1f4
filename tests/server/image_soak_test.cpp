// A hundred image jobs from four clients, a third cancelled by DELETE and a third by hanging up
// mid-stream: every job ends, the worker is idle, no job is left registered, and the process's
// memory is back where it was after the first jobs.
#include <malloc.h>

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <thread>

#include "test_server.h"

namespace rf::server::testing {
namespace {

// Resident memory in bytes, after glibc has given back what it can.
std::size_t resident_bytes() {
  malloc_trim(0);
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

void one_job(TestServer& server, std::mt19937& rng) {
  const json body = {{"operation", "image_generation"}, {"hive_id", "soak"}, {"model", "sd-demo"}, {"prompt", "a red apple"},
                     {"steps", std::uniform_int_distribution(2, 12)(rng)}, {"width", 64}, {"height", 64},
                     {"seed", rng()}};
  auto res = server.client().Post("/v1/jobs", body.dump(), "application/json");
  ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
  const json job = json::parse(res->body);
  switch (std::uniform_int_distribution(0, 2)(rng)) {
    case 0:  // cancelled, queued or running
      EXPECT_EQ(server.client().Delete("/v1/jobs/" + job["job_id"].get<std::string>())->status, 200);
      break;
    case 1: {  // the client hangs up after the first event
      std::string seen;
      server.client().Get(job["sse_url"].get<std::string>(), [&](const char* data, std::size_t size) {
        seen.append(data, size);
        return seen.find("\n\n") == std::string::npos;
      });
      break;
    }
    default: {  // read to the end
      const auto events = sse_events(server.client().Get(job["sse_url"].get<std::string>())->body);
      ASSERT_FALSE(events.empty());
      EXPECT_EQ(events.back().first, "complete");
    }
  }
}

TEST(ImageSoak, AHundredJobsWithRandomCancelsLeaveNothingBehind) {
  TestServer server(image_service());
  const ImageMetrics& m = server.image_model().worker().metrics();
  const auto idle = [&] { return m.running == 0 && m.waiting == 0 && server.server().context().image_jobs.size() == 0; };
  std::mt19937 warm_rng(1);
  for (int i = 0; i < 8; ++i) one_job(server, warm_rng);
  ASSERT_TRUE(wait_for(idle));
  const std::size_t before = resident_bytes();

  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 rng(100 + c);
      for (int i = 0; i < 25; ++i) one_job(server, rng);
    });
  }
  for (auto& t : clients) t.join();
  ASSERT_TRUE(wait_for(idle)) << "running " << m.running << ", waiting " << m.waiting << ", registered "
                              << server.server().context().image_jobs.size();
  std::uint64_t ended = 0;
  for (ImageOperation op : kImageOperations)
    for (JobOutcome o : {JobOutcome::completed, JobOutcome::failed, JobOutcome::cancelled}) ended += m.ended(op, o);
  EXPECT_EQ(ended, 108u) << "every job ended";
  EXPECT_EQ(m.ended(ImageOperation::generation, JobOutcome::failed), 0u);
  const std::size_t after = resident_bytes();
  // The demo model's jobs hold a few MB each: growth past 16 MiB would be jobs' memory kept.
  const double grown = (static_cast<double>(after) - static_cast<double>(before)) / (1 << 20);
  fmt::print("  resident memory {:.1f} MiB before, {:.1f} MiB after: grown {:.2f} MiB  tolerance 16 MiB\n",
             before / double(1 << 20), after / double(1 << 20), grown);
  EXPECT_LE(grown, 16.0);
}

}  // namespace
}  // namespace rf::server::testing
