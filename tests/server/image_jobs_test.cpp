// rbee's image jobs on a real server with the demo image model: each operation end to end, the
// server's image against `rocmforge image`'s, cancelling by DELETE and by hanging up, and /metrics.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "formats/image_file.h"
#include "run_command.h"
#include "server/base64.h"
#include "test_server.h"

namespace rf::server::testing {
namespace {

namespace fs = std::filesystem;

json generation(json extra = json::object()) {
  json job = {{"operation", "image_generation"}, {"hive_id", "hive-1"}, {"model", "sd-demo"},
              {"prompt", "a red apple"}, {"steps", 7}, {"width", 64}, {"height", 64}, {"seed", 11}};
  job.update(extra);
  return job;
}

std::string png_base64(int width, int height, int channels, std::uint8_t base) {
  Image image{width, height, channels, std::vector<std::uint8_t>(static_cast<std::size_t>(width) * height * channels)};
  for (std::size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<std::uint8_t>(base + i * 7);
  return base64_encode(encode_png(image));
}

// A mask of `width` x `height`: its left half white (repaint), its right half black (keep).
std::string half_mask(int width, int height) {
  Image mask{width, height, 1, std::vector<std::uint8_t>(static_cast<std::size_t>(width) * height)};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) mask.pixels[y * width + x] = x < width / 2 ? 255 : 0;
  return base64_encode(encode_png(mask));
}

Image decoded(const std::string& base64) {
  const auto bytes = base64_decode(base64);
  EXPECT_TRUE(bytes.has_value());
  return decode_image(*bytes, "the job's image");
}

class ImageJobs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(image_service()); }
  static void TearDownTestSuite() { delete server_; }

  static json create(const json& body) {
    auto res = server_->client().Post("/v1/jobs", body.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
    return res ? json::parse(res->body) : json{};
  }
  // The job's events, read to the end of its stream.
  static std::vector<std::pair<std::string, json>> stream(const json& job) {
    auto res = server_->client().Get(job["sse_url"].get<std::string>());
    EXPECT_TRUE(res && res->status == 200);
    EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
    std::vector<std::pair<std::string, json>> events;
    for (const auto& [name, data] : sse_events(res ? res->body : "")) events.emplace_back(name, json::parse(data));
    return events;
  }
  static const ImageMetrics& metrics() { return server_->image_model().worker().metrics(); }
  static void wait_until_idle() {
    ASSERT_TRUE(wait_for([] { return metrics().running == 0 && metrics().waiting == 0; }));
  }

  static TestServer* server_;
};
TestServer* ImageJobs::server_ = nullptr;

TEST_F(ImageJobs, AGenerationStreamsEveryStepPreviewsAndItsPng) {
  const json job = create(generation({{"steps", 11}}));
  const std::string id = job["job_id"];
  EXPECT_TRUE(id.starts_with("job-") && id.size() == 40) << id;  // job-<uuid>
  EXPECT_EQ(job["sse_url"], "/v1/jobs/" + id + "/stream");
  const auto events = stream(job);
  int step = 0;
  std::vector<int> previews;
  for (const auto& [name, e] : events) {
    ASSERT_EQ(name, e["type"].get<std::string>()) << "the event's name is its type";
    if (name == "progress") {
      EXPECT_EQ(e["step"], ++step);
      EXPECT_EQ(e["total"], 11);
      EXPECT_DOUBLE_EQ(e["percent"].get<double>(), 100.0 * step / 11);
    } else if (name == "preview") {
      EXPECT_EQ(e["step"], step) << "a preview follows its step's progress";
      EXPECT_EQ(e["format"], "png");
      const Image preview = decoded(e["image"]);
      EXPECT_GT(preview.width, 0);
      previews.push_back(step);
    }
  }
  EXPECT_EQ(step, 11);
  EXPECT_EQ(previews, (std::vector<int>{5, 10, 11}));
  ASSERT_EQ(events.back().first, "complete");
  EXPECT_EQ(events.back().second["format"], "png");
  const Image image = decoded(events.back().second["image"]);
  EXPECT_EQ(image.width, 64);
  EXPECT_EQ(image.height, 64);
  // A job is streamed once.
  EXPECT_EQ(server_->client().Get(job["sse_url"].get<std::string>())->status, 404);
}

// The same parameters and seed through `rocmforge image` give the same PNG, byte for byte.
TEST_F(ImageJobs, TheImageIsTheCliImageByteForByte) {
  const json job = create(generation({{"negative_prompt", "blurry"}, {"guidance_scale", 5.5}, {"seed", 1234}}));
  const auto events = stream(job);
  ASSERT_EQ(events.back().first, "complete");
  const auto served = base64_decode(events.back().second["image"].get<std::string>());
  const fs::path out = fs::path(ROCMFORGE_SCRATCH) / "server" / "cli-image.png";
  fs::create_directories(out.parent_path());
  const auto run = rf::test::run_command(std::string(ROCMFORGE_BINARY) + " image -m " + kDemoImageModel +
                                         " -p 'a red apple' -n blurry --steps 7 --cfg 5.5 --seed 1234 -W 64 -H 64 "
                                         "--device cpu -t 2 -o " + out.string() + " 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::ifstream in(out, std::ios::binary);
  const std::vector<std::uint8_t> written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(served.has_value());
  EXPECT_EQ(*served, written);
}

TEST_F(ImageJobs, ATransformTakesTheInputsSize) {
  const json job = create({{"operation", "image_transform"}, {"hive_id", "h"}, {"model", "sd-demo"}, {"prompt", "a pear"},
                           {"input_image", png_base64(80, 64, 3, 20)}, {"strength", 0.6}, {"steps", 10}, {"seed", 5}});
  const auto events = stream(job);
  ASSERT_EQ(events.back().first, "complete") << events.back().second.dump();
  const Image image = decoded(events.back().second["image"]);
  EXPECT_EQ(image.width, 80);
  EXPECT_EQ(image.height, 64);
  // strength 0.6 runs 6 of the 10 steps.
  EXPECT_EQ(events[events.size() - 2].second["total"], 6);
}

TEST_F(ImageJobs, AnInpaintKeepsWhatTheMaskKeeps) {
  const json job = create({{"operation", "image_inpaint"}, {"hive_id", "h"}, {"model", "sd-demo"}, {"prompt", "a pear"},
                           {"init_image", png_base64(64, 64, 3, 90)}, {"mask_image", half_mask(64, 64)}, {"steps", 6},
                           {"strength", 1.0}, {"seed", 9}});
  const auto events = stream(job);
  ASSERT_EQ(events.back().first, "complete") << events.back().second.dump();
  const Image image = decoded(events.back().second["image"]);
  EXPECT_EQ(image.width, 64);
  EXPECT_EQ(metrics().ended(ImageOperation::inpaint, JobOutcome::completed), 1u);
}

TEST_F(ImageJobs, DeleteCancelsAJobBeingStreamed) {
  const auto cancelled = metrics().ended(ImageOperation::generation, JobOutcome::cancelled);
  const json job = create(generation({{"steps", 150}}));
  const std::string id = job["job_id"];
  std::string body;
  bool deleted = false;
  auto res = server_->client().Get(job["sse_url"].get<std::string>(), [&](const char* data, std::size_t size) {
    body.append(data, size);
    if (!deleted && body.find("event: progress") != std::string::npos) {
      deleted = true;
      const auto answer = server_->client().Delete("/v1/jobs/" + id);
      EXPECT_EQ(answer->status, 200);
      EXPECT_EQ(json::parse(answer->body), (json{{"job_id", id}, {"status", "cancelled"}}));
    }
    return true;
  });
  ASSERT_TRUE(res);
  const auto events = sse_events(body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().first, "error");
  EXPECT_EQ(json::parse(events.back().second)["type"], "error");
  EXPECT_LT(events.size(), 100u) << "the job stopped at its next step";
  wait_until_idle();
  EXPECT_EQ(metrics().ended(ImageOperation::generation, JobOutcome::cancelled), cancelled + 1);
  EXPECT_EQ(server_->client().Delete("/v1/jobs/" + id)->status, 404);
}

TEST_F(ImageJobs, DeleteCancelsAQueuedJobNobodyStreamed) {
  const json job = create(generation({{"steps", 150}}));
  EXPECT_EQ(server_->client().Delete("/v1/jobs/" + job["job_id"].get<std::string>())->status, 200);
  EXPECT_EQ(server_->client().Get(job["sse_url"].get<std::string>())->status, 404);
  wait_until_idle();
  EXPECT_EQ(server_->client().Delete("/v1/jobs/job-00000000-0000-4000-8000-000000000000")->status, 404);
}

TEST_F(ImageJobs, AClientThatHangsUpMidStreamCancelsTheJob) {
  const auto cancelled = metrics().ended(ImageOperation::generation, JobOutcome::cancelled);
  const json job = create(generation({{"steps", 150}}));
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(server_->port()));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string request = "GET " + job["sse_url"].get<std::string>() + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string received;
  char buffer[4096];
  while (received.find("event: progress") == std::string::npos) {
    const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    ASSERT_GT(n, 0);
    received.append(buffer, n);
  }
  close(fd);
  EXPECT_TRUE(wait_for([&] { return metrics().ended(ImageOperation::generation, JobOutcome::cancelled) == cancelled + 1; }));
  wait_until_idle();
}

TEST_F(ImageJobs, ATextJobIsRefusedNamingTheKindOfModel) {
  auto res = server_->client().Post("/v1/jobs", json{{"operation", "infer"}, {"prompt", "x"}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("image model"), std::string::npos) << res->body;
  EXPECT_EQ(server_->client().Post("/v1/chat/completions", R"({"messages":[]})", "application/json")->status, 400);
}

TEST_F(ImageJobs, HealthReadyModelsAndMetricsDescribeTheImageModel) {
  EXPECT_EQ(server_->client().Get("/health")->status, 200);
  const json ready = json::parse(server_->client().Get("/ready")->body);
  EXPECT_EQ(ready["kind"], "image");
  const json models = json::parse(server_->client().Get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["id"], "sd-demo");
  EXPECT_EQ(models["data"][0]["kind"], "image");
  EXPECT_EQ(models["data"][0]["architecture"], "SD 1.x");
  stream(create(generation()));
  const std::string text = server_->client().Get("/metrics")->body;
  for (const char* needle : {"rocmforge_image_jobs_total{operation=\"image_generation\",outcome=\"completed\"}",
                             "rocmforge_queue_depth 0", "rocmforge_image_steps_total ", "rocmforge_image_steps_per_second ",
                             "# TYPE rocmforge_image_seconds_per_image histogram",
                             "rocmforge_image_seconds_per_image_bucket{le=\"+Inf\"}"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  }
}

}  // namespace
}  // namespace rf::server::testing
