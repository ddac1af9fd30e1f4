#include "server/server_context.h"

#include <fmt/format.h>

#include "server/api_error.h"

namespace rf::server {

void RequestCounters::count(const std::string& route, int status) {
  std::lock_guard lock(mutex_);
  ++counts_[{route, status}];
}

std::map<std::pair<std::string, int>, std::uint64_t> RequestCounters::snapshot() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

std::shared_ptr<ModelService> ServerContext::model() const {
  std::lock_guard lock(mutex_);
  return model_;
}

std::shared_ptr<ModelService> ServerContext::require_model() const {
  auto m = model();
  if (m) return m;
  if (const auto image = image_model()) {
    throw ApiError(400, fmt::format("this worker serves the image model '{}': it makes images (POST /v1/images/generations, "
                                    "/v1/jobs with an image operation, /sdapi/v1/txt2img), not text", image->id()),
                   "", "wrong_model_kind");
  }
  throw ApiError(503, "the model is still loading; retry shortly", "", "model_loading");
}

std::shared_ptr<ImageService> ServerContext::image_model() const {
  std::lock_guard lock(mutex_);
  return image_model_;
}

std::shared_ptr<ImageService> ServerContext::require_image_model() const {
  auto m = image_model();
  if (m) return m;
  if (const auto text = model()) {
    throw ApiError(400, fmt::format("this worker serves the language model '{}', not an image model: start "
                                    "`rocmforge serve -m` with a Stable Diffusion checkpoint for images", text->id()),
                   "", "wrong_model_kind");
  }
  throw ApiError(503, "the model is still loading; retry shortly", "", "model_loading");
}

void ServerContext::set_image_model(std::shared_ptr<ImageService> model) {
  std::lock_guard lock(mutex_);
  image_model_ = std::move(model);
}

std::shared_ptr<ImageService> ServerContext::take_image_model() {
  std::lock_guard lock(mutex_);
  return std::move(image_model_);
}

void ServerContext::set_model(std::shared_ptr<ModelService> model) {
  std::lock_guard lock(mutex_);
  model_ = std::move(model);
}

std::shared_ptr<ModelService> ServerContext::take_model() {
  std::lock_guard lock(mutex_);
  return std::move(model_);
}

}  // namespace rf::server
