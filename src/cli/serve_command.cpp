// rocmforge serve: the model behind an OpenAI-compatible HTTP API (and rbee's worker contract),
// many requests at once through the continuous-batching scheduler.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/runner_options.h"
#include "server/http_server.h"
#include "server/model_service.h"

namespace rf::cli {

namespace {

struct ServeFlags {
  RunnerFlags runner;
  server::ServerOptions http;
  SchedulerOptions scheduler;
  std::string model_name;
  bool no_prefix_cache = false;
  CLI::Option* http_threads = nullptr;
};

std::string model_id(const ServeFlags& f, const std::string& path) {
  if (!f.model_name.empty()) return f.model_name;
  return std::filesystem::path(path).lexically_normal().filename().string();
}

// The API key comes from --api-key, else from $ROCMFORGE_API_KEY (which keeps it out of `ps`).
void resolve_api_key(ServeFlags& f) {
  if (const char* env = std::getenv("ROCMFORGE_API_KEY"); f.http.api_key.empty() && env) f.http.api_key = env;
}

void run(ServeFlags& f) {
  // A worker's log: stderr, timestamped, and never an exception when whoever reads it has gone.
  spdlog::set_default_logger(spdlog::stderr_color_mt("rocmforge"));
  resolve_api_key(f);
  const std::string path = f.runner.model.empty() ? default_model_path() : f.runner.model;
  // SIGINT and SIGTERM go to one thread waiting for them, so that stopping runs outside a signal handler.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  server::HttpServer http(f.http);
  const int port = http.bind();
  spdlog::info("listening on http://{}:{}, loading {}", f.http.host, port, path);
  std::atomic<bool> signalled{false};
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    signalled = true;
    http.stop();
  });
  std::thread listener([&] { http.listen(); });
  auto stop = [&] {
    if (!signalled) kill(getpid(), SIGTERM);  // no signal came: the stopper still waits for one
    stopper.join();
  };
  try {
    http.set_model(std::make_shared<server::ModelService>(f.runner.load(), model_id(f, path), f.scheduler));
  } catch (...) {
    stop();
    listener.join();
    throw;
  }
  spdlog::info("ready, serving '{}'", model_id(f, path));
  listener.join();  // until a signal stops the server
  stop();
  http.context().take_model();  // stops the scheduler: requests still queued are failed
  spdlog::info("stopped");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto flags = std::make_shared<ServeFlags>();
  auto* cmd = app.add_subcommand("serve", "Serve the model over HTTP: OpenAI's API, rbee's jobs, health and metrics");
  flags->runner.options.kv_cache_tokens = 16384;
  flags->runner.add_to(*cmd);
  cmd->add_option("--host", flags->http.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", flags->http.port, "Port to listen on (0: any free one)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", flags->http.api_key, "Require 'Authorization: Bearer KEY' (default: $ROCMFORGE_API_KEY)");
  cmd->add_option("--served-model-name", flags->model_name, "The model's name in the API (default: its folder or file name)");
  cmd->add_option("--kv-size", flags->runner.options.kv_cache_tokens, "Positions the KV cache holds for all requests together")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--max-seqs", flags->scheduler.max_running, "Sequences generating at once")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--max-queue", flags->scheduler.max_queued, "Requests waiting beyond those; more get 429")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-prefix-cache", flags->no_prefix_cache, "Do not reuse the KV blocks of shared prompt prefixes");
  cmd->add_option("--max-body", flags->http.max_body_bytes, "Largest request body in bytes; larger ones get 413")->capture_default_str();
  flags->http_threads = cmd->add_option("--http-threads", flags->http.threads,
                                        "Connections served at once (default: --max-seqs + --max-queue + 16)")
                            ->check(CLI::PositiveNumber);
  cmd->callback([flags] {
    // Every request the scheduler holds keeps its connection's thread until it ends.
    if (!flags->http_threads->count()) flags->http.threads = flags->scheduler.max_running + flags->scheduler.max_queued + 16;
    flags->scheduler.prefix_caching = !flags->no_prefix_cache;
    run(*flags);
  });
}

}  // namespace rf::cli
