#include "server/image_service.h"

#include <algorithm>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/json_fields.h"
#include "util/error.h"

namespace rf::server {

namespace fs = std::filesystem;
namespace sd = stable_diffusion;

namespace {

// `text` with every occurrence of `from` written as `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size()) text.replace(at, from.size(), to);
  return text;
}

}  // namespace

ImageService::ImageService(std::unique_ptr<ImageWorker> worker, std::string id, std::string path,
                           std::optional<fs::path> lora_dir)
    : worker_(std::move(worker)),
      id_(std::move(id)),
      path_(std::move(path)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()) {
  if (lora_dir) {
    std::error_code ec;
    lora_dir_ = fs::canonical(*lora_dir, ec);
    if (ec || !fs::is_directory(*lora_dir_)) fail("--lora-dir {}: not a folder", lora_dir->string());
  }
}

sd::LoraFile ImageService::lora(const std::string& name, double strength, const std::string& field) const {
  if (!lora_dir_) bad_field(field, "names a LoRA, but this worker was started without --lora-dir, so it loads none");
  const fs::path asked(name);
  if (name.empty()) bad_field(field, "is empty");
  if (asked.is_absolute()) bad_field(field, "must name a LoRA inside the worker's LoRA folder, not an absolute path");
  if (std::ranges::any_of(asked, [](const fs::path& part) { return part == ".."; })) bad_field(field, "must not contain '..'");
  fs::path file = *lora_dir_ / asked;
  if (file.extension() != ".safetensors") file += ".safetensors";
  std::error_code ec;
  const fs::path real = fs::canonical(file, ec);
  if (ec) bad_field(field, fmt::format("'{}': no such LoRA in the worker's LoRA folder", name));
  const auto [dir_end, real_end] = std::mismatch(lora_dir_->begin(), lora_dir_->end(), real.begin(), real.end());
  if (dir_end != lora_dir_->end()) bad_field(field, fmt::format("'{}' leads out of the worker's LoRA folder", name));
  if (!fs::is_regular_file(real)) bad_field(field, fmt::format("'{}' is not a file", name));
  sd::LoraFile lora{real.string(), strength};
  try {
    worker_->check_lora(lora);
  } catch (const Error& e) {
    bad_field(field, replaced(e.what(), real.string(), "'" + name + "'"));
  }
  return lora;
}

sd::GenerationOptions ImageService::resolve(sd::GenerationOptions options) const {
  try {
    return worker_->resolve(std::move(options));
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  }
}

std::shared_ptr<ImageJob> ImageService::submit(ImageJobRequest request) {
  auto job = worker_->submit(std::move(request));
  if (!job) throw ApiError(429, "the image worker is busy: too many jobs are waiting; retry later", "", "queue_full");
  return job;
}

ImageEvent ImageService::run(ImageJobRequest request, const std::function<bool()>& stopping) {
  const std::shared_ptr<ImageJob> job = submit(std::move(request));
  while (!stopping()) {
    for (ImageEvent& e : job->take(std::chrono::milliseconds(100))) {
      if (e.kind == ImageEvent::Kind::complete) return std::move(e);
      if (e.kind == ImageEvent::Kind::failed) {
        if (e.cancelled) throw ApiError(503, "the job was cancelled: the server is shutting down");
        throw ApiError(500, "the image job failed: " + e.message, "", "image_job_failed");
      }
    }
  }
  job->cancel();
  throw ApiError(503, "the server is shutting down");
}

}  // namespace rf::server
