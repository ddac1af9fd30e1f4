// rocmforge serve: the model behind an OpenAI-compatible HTTP API (and rbee's worker contract):
// a language model's requests many at once through the continuous-batching scheduler, or a Stable
// Diffusion checkpoint's image jobs one at a time through the image worker (with A1111's API too).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <thread>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/runner_options.h"
#include "engine/image_worker.h"
#include "models/stable_diffusion/checkpoint.h"
#include "server/http_server.h"
#include "server/image_service.h"
#include "server/model_service.h"
#include "util/error.h"

namespace rf::cli {

namespace {

struct ServeFlags {
  RunnerFlags runner;
  server::ServerOptions http;
  SchedulerOptions scheduler;
  std::string model_name;
  bool no_prefix_cache = false;
  std::string lora_dir, vae;  // image models
  CLI::Option* http_threads = nullptr;
  CLI::Option* max_queue = nullptr;
  std::vector<CLI::Option*> text_only, image_only;  // options that apply to one kind of model
};

constexpr int kImageQueue = 16;  // image jobs waiting, unless --max-queue says

// Refuses the options given that do not apply to the kind of model being served.
void refuse_options_of_the_other_kind(const ServeFlags& f, bool image) {
  for (const CLI::Option* option : image ? f.text_only : f.image_only) {
    if (option->count()) {
      fail("{} applies to {} models; {} is {}", option->get_name(), image ? "language" : "image (Stable Diffusion)",
           f.runner.model, image ? "a Stable Diffusion checkpoint" : "a language model");
    }
  }
}

// The image worker for a Stable Diffusion checkpoint.
std::shared_ptr<server::ImageService> load_image_model(const ServeFlags& f, const std::string& path, const std::string& id) {
  stable_diffusion::OpenOptions open;
  open.vae = f.vae;
  open.clip_vocab = ROCMFORGE_CLIP_VOCAB;
  ImageWorkerOptions options;
  options.device = f.runner.options.device;
  options.threads = f.runner.options.threads;
  options.max_queued = f.max_queue->count() ? f.scheduler.max_queued : kImageQueue;
  options.model_name = std::filesystem::path(path).stem().string();
  auto worker = std::make_unique<ImageWorker>(stable_diffusion::Checkpoint::open(path, open), options);
  std::optional<std::filesystem::path> lora_dir;
  if (!f.lora_dir.empty()) lora_dir = f.lora_dir;
  return std::make_shared<server::ImageService>(std::move(worker), id, path, lora_dir);
}

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
    const bool image = stable_diffusion::is_stable_diffusion(path);
    refuse_options_of_the_other_kind(f, image);
    if (image) {
      http.set_image_model(load_image_model(f, path, model_id(f, path)));
    } else {
      http.set_model(std::make_shared<server::ModelService>(f.runner.load([](std::string_view line) { spdlog::info("{}", line); }),
                                                            model_id(f, path), f.scheduler));
    }
  } catch (...) {
    stop();
    listener.join();
    throw;
  }
  spdlog::info("ready, serving '{}'", model_id(f, path));
  listener.join();  // until a signal stops the server
  stop();
  http.context().take_model();  // stops the scheduler: requests still queued are failed
  http.context().take_image_model();
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
  cmd->add_option("--cors-origin", flags->http.cors_origins,
                  "Let web pages of this origin call the API from a browser (repeatable; *: any; default: none)");
  cmd->add_option("--served-model-name", flags->model_name, "The model's name in the API (default: its folder or file name)");
  flags->text_only = {cmd->get_option("--ctx-size"), cmd->get_option("--batch-size"), cmd->get_option("--batch-invariant")};
  cmd->add_option("--kv-size", flags->runner.options.kv_cache_tokens, "Positions the KV cache holds for all requests together")
      ->capture_default_str()->check(CLI::PositiveNumber);
  flags->text_only.push_back(cmd->get_option("--kv-size"));
  flags->text_only.push_back(
      cmd->add_option("--max-seqs", flags->scheduler.max_running, "Sequences generating at once")->capture_default_str()->check(CLI::PositiveNumber));
  flags->max_queue = cmd->add_option("--max-queue", flags->scheduler.max_queued,
                                     fmt::format("Requests waiting beyond those running; more get 429 (default: 256; "
                                                 "image models: {} jobs)", kImageQueue))
                         ->check(CLI::NonNegativeNumber);
  flags->text_only.push_back(
      cmd->add_flag("--no-prefix-cache", flags->no_prefix_cache, "Do not reuse the KV blocks of shared prompt prefixes"));
  flags->image_only.push_back(cmd->add_option(
      "--lora-dir", flags->lora_dir,
      "Image models: the folder of LoRA .safetensors files jobs may name (by file name); without it, jobs with LoRAs get 400"));
  flags->image_only.push_back(cmd->add_option("--vae", flags->vae, "Image models: a separate VAE file or folder"));
  cmd->add_option("--max-body", flags->http.max_body_bytes,
                  "Largest request body in bytes; larger ones get 413 (default: 8 MiB; image models: 64 MiB, for images in base64)");
  flags->http_threads = cmd->add_option("--http-threads", flags->http.threads,
                                        "Connections served at once (default: --max-seqs + --max-queue + 16)")
                            ->check(CLI::PositiveNumber);
  auto* max_body = cmd->get_option("--max-body");
  cmd->callback([flags, max_body] {
    const std::string path = flags->runner.model.empty() ? default_model_path() : flags->runner.model;
    const bool image = stable_diffusion::is_stable_diffusion(path);
    if (image && !max_body->count()) flags->http.max_body_bytes = 64 << 20;
    // Every request the scheduler (or image worker) holds keeps its connection's thread until it ends.
    const int queued = image && !flags->max_queue->count() ? kImageQueue : flags->scheduler.max_queued;
    if (!flags->http_threads->count()) flags->http.threads = (image ? 1 : flags->scheduler.max_running) + queued + 16;
    flags->scheduler.prefix_caching = !flags->no_prefix_cache;
    run(*flags);
  });
}

}  // namespace rf::cli
