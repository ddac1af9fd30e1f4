// The `rocmforge serve` binary as a worker is run: with no -m it serves the bundled demo model,
// answers once loaded, and stops cleanly on SIGTERM.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>

#include "test_server.h"

namespace rf::server::testing {
namespace {

struct ServeProcess {
  pid_t pid = -1;
  int port = 0;
  std::string log;
};

// Starts `rocmforge serve --port 0 ARGS`, its log going to a file, and waits for it to name its port.
ServeProcess start_serve(const std::string& name, const std::vector<std::string>& args, const std::string& api_key_env = {}) {
  std::filesystem::create_directories(ROCMFORGE_SCRATCH);
  const std::string log_path = std::string(ROCMFORGE_SCRATCH) + "/" + name + ".log";
  std::filesystem::remove(log_path);  // a log of an earlier run would name its port
  ServeProcess p;
  p.pid = fork();
  if (p.pid == 0) {
    freopen(log_path.c_str(), "w", stderr);
    if (!api_key_env.empty()) setenv("ROCMFORGE_API_KEY", api_key_env.c_str(), 1);
    std::vector<std::string> all = {ROCMFORGE_BINARY, "serve", "--port", "0", "--threads", "2"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+))");
  std::smatch match;
  wait_for([&] {
    std::ifstream in(log_path);
    p.log.assign(std::istreambuf_iterator<char>(in), {});
    return std::regex_search(p.log, match, listening);
  });
  if (!match.empty()) p.port = std::stoi(match[1]);
  return p;
}

// Its exit code, or -1 (and killed) if it has not exited within 30 s.
int exit_code(const ServeProcess& p) {
  int status = 0;
  if (!wait_for([&] { return waitpid(p.pid, &status, WNOHANG) == p.pid; })) {
    kill(p.pid, SIGKILL);
    waitpid(p.pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int stop(const ServeProcess& p) {
  kill(p.pid, SIGTERM);
  return exit_code(p);
}

TEST(ServeCommand, ServesTheDemoModelByDefaultAndStopsOnSigterm) {
  ServeProcess serve = start_serve("default_model", {});
  ASSERT_GT(serve.port, 0) << serve.log;
  httplib::Client client("127.0.0.1", serve.port);
  EXPECT_TRUE(wait_for([&] {
    auto res = client.Get("/health");
    return res && res->status == 200;
  }));
  auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "kjv-llama");
  auto completion = client.Post("/v1/completions", R"({"prompt": "In the beginning", "max_tokens": 4})", "application/json");
  ASSERT_TRUE(completion);
  EXPECT_EQ(completion->status, 200);
  EXPECT_EQ(stop(serve), 0);
}

TEST(ServeCommand, TakesTheApiKeyFromTheEnvironment) {
  ServeProcess serve = start_serve("api_key_env", {}, "sesame");
  ASSERT_GT(serve.port, 0) << serve.log;
  httplib::Client client("127.0.0.1", serve.port);
  EXPECT_TRUE(wait_for([&] {
    auto res = client.Get("/health");
    return res && res->status == 200;
  }));
  EXPECT_EQ(client.Get("/v1/models")->status, 401);
  client.set_bearer_token_auth("sesame");
  EXPECT_EQ(client.Get("/v1/models")->status, 200);
  EXPECT_EQ(stop(serve), 0);
}

TEST(ServeCommand, AModelThatCannotLoadEndsTheProcessWithAMessage) {
  ServeProcess serve = start_serve("missing_model", {"-m", "/no/such/model"});
  ASSERT_GT(serve.port, 0) << serve.log;
  EXPECT_EQ(exit_code(serve), 1);
}

TEST(ServeCommand, ServesAStableDiffusionCheckpointAsAnImageWorker) {
  ServeProcess serve = start_serve("image_model", {"-m", kDemoImageModel, "--device", "cpu"});
  ASSERT_GT(serve.port, 0) << serve.log;
  httplib::Client client("127.0.0.1", serve.port);
  EXPECT_TRUE(wait_for([&] {
    auto res = client.Get("/health");
    return res && res->status == 200;
  }));
  EXPECT_EQ(json::parse(client.Get("/v1/models")->body)["data"][0]["kind"], "image");
  auto images = client.Post("/sdapi/v1/txt2img", R"({"prompt": "a red apple", "steps": 3, "width": 64, "height": 64})",
                            "application/json");
  ASSERT_TRUE(images);
  EXPECT_EQ(images->status, 200);
  EXPECT_EQ(json::parse(images->body)["images"].size(), 1u);
  EXPECT_EQ(stop(serve), 0);
}

// Options for the other kind of model are refused, not ignored.
TEST(ServeCommand, RefusesOptionsOfTheOtherKindOfModel) {
  ServeProcess image = start_serve("image_with_kv_size", {"-m", kDemoImageModel, "--kv-size", "4096"});
  EXPECT_EQ(exit_code(image), 1);
  std::ifstream image_log(std::string(ROCMFORGE_SCRATCH) + "/image_with_kv_size.log");
  const std::string image_text(std::istreambuf_iterator<char>(image_log), {});
  EXPECT_NE(image_text.find("--kv-size applies to language models"), std::string::npos) << image_text;
  ServeProcess text = start_serve("text_with_lora_dir", {"--lora-dir", ROCMFORGE_SCRATCH});
  EXPECT_EQ(exit_code(text), 1);
  std::ifstream text_log(std::string(ROCMFORGE_SCRATCH) + "/text_with_lora_dir.log");
  const std::string text_text(std::istreambuf_iterator<char>(text_log), {});
  EXPECT_NE(text_text.find("--lora-dir applies to image (Stable Diffusion) models"), std::string::npos) << text_text;
}

}  // namespace
}  // namespace rf::server::testing
