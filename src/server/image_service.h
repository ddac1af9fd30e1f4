#pragma once
// The loaded image model as the HTTP layer serves it: its public name, the worker that runs its
// jobs, and the LoRA folder requests may name files in.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "engine/image_worker.h"

namespace rf::server {

class ImageService {
 public:
  // `lora_dir`: the folder jobs' LoRAs are looked up in; none: jobs with LoRAs are refused.
  ImageService(std::unique_ptr<ImageWorker> worker, std::string id, std::string path,
               std::optional<std::filesystem::path> lora_dir);

  const std::string& id() const { return id_; }
  bool answers_to(const std::string& name) const { return name == id_ || name == path_; }
  std::int64_t created() const { return created_; }
  ImageWorker& worker() { return *worker_; }
  const stable_diffusion::PipelineConfig& config() const { return worker_->checkpoint().config(); }
  // The model's native side in pixels (512 for SD 1.5, 1024 for SDXL).
  int native_size() const { return config().unet.sample_size * config().vae.downscale(); }

  // The LoRA a request names in `field`: a .safetensors file inside the LoRA folder, by its name
  // with or without the extension. An absolute path, "..", a link out of the folder, a missing
  // file or one that is not a LoRA of this model is a 400 naming the field; so is any LoRA when
  // the worker has no folder. The message names the file as the request did, not where it lives.
  stable_diffusion::LoraFile lora(const std::string& name, double strength, const std::string& field) const;
  // The options as the pipeline will run them: a 400 for what it cannot.
  stable_diffusion::GenerationOptions resolve(stable_diffusion::GenerationOptions options) const;
  // Queues a checked job; a 429 when the queue is full.
  std::shared_ptr<ImageJob> submit(ImageJobRequest request);
  // Queues a job and waits for its images (the complete event): for the routes that answer at the
  // end. A 500 when it fails, a 503 when `stopping` turns true first (the job is cancelled).
  ImageEvent run(ImageJobRequest request, const std::function<bool()>& stopping);

 private:
  std::unique_ptr<ImageWorker> worker_;
  std::string id_;
  std::string path_;
  std::optional<std::filesystem::path> lora_dir_;  // canonical
  std::int64_t created_;
};

}  // namespace rf::server
