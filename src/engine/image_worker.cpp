#include "engine/image_worker.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "engine/backend_select.h"
#include "formats/image_file.h"
#include "models/stable_diffusion/generation_parameters.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace rf {

namespace sd = stable_diffusion;

std::string_view operation_name(ImageOperation operation) {
  switch (operation) {
    case ImageOperation::generation: return "image_generation";
    case ImageOperation::transform: return "image_transform";
    case ImageOperation::inpaint: return "image_inpaint";
  }
  return "unknown";
}

std::vector<std::uint8_t> ImageEvent::png(std::size_t image) const {
  return encode_png(images.at(image), {{"parameters", infotexts.at(image)}});
}

std::vector<std::uint8_t> ImageJob::latest_preview() const {
  std::lock_guard lock(preview_mutex_);
  return preview_;
}

// The pipeline on a backend of its own, with the LoRAs merged in (members in construction order).
struct ImageWorker::Loaded {
  std::vector<sd::LoraFile> loras;
  sd::LoraSet merged;
  std::unique_ptr<ImageBackend> backend;
  sd::Pipeline pipeline;

  Loaded(const sd::Checkpoint& c, std::vector<sd::LoraFile> files, const std::string& device, ThreadPool& pool)
      : loras(std::move(files)),
        merged(c.config(), c.unet(), c.text_encoder(), c.text_encoder_2(), loras),
        backend(make_image_backend(device, pool)),
        pipeline({c.config(), merged.unet(), c.vae(), merged.text_encoder(), merged.text_encoder_2(), c.tokenizer()},
                 *backend) {}
};

namespace {

bool same_loras(const std::vector<sd::LoraFile>& a, const std::vector<sd::LoraFile>& b) {
  return std::ranges::equal(a, b, [](const auto& x, const auto& y) { return x.path == y.path && x.strength == y.strength; });
}

void add(std::atomic<double>& total, double value) {
  double seen = total.load();
  while (!total.compare_exchange_weak(seen, seen + value)) {
  }
}

}  // namespace

ImageWorker::ImageWorker(sd::Checkpoint checkpoint, ImageWorkerOptions options)
    : checkpoint_(std::move(checkpoint)), options_(std::move(options)), pool_(std::make_unique<ThreadPool>(options_.threads)) {
  load({});
  preview_.emplace(loaded_->pipeline);
  thread_ = std::thread([this] { run(); });
}

ImageWorker::~ImageWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (running_) running_->cancel();
  }
  wake_.notify_all();
  thread_.join();
  for (const auto& job : queue_) {
    ImageEvent stopped{ImageEvent::Kind::failed};
    stopped.message = "the server is shutting down";
    stopped.cancelled = true;
    job->push(std::move(stopped));
  }
}

sd::GenerationOptions ImageWorker::resolve(sd::GenerationOptions options) const {
  return sd::resolve_options(checkpoint_.config(), std::move(options));
}

void ImageWorker::check_lora(const sd::LoraFile& lora) const {
  const sd::Checkpoint& c = checkpoint_;
  sd::LoraSet::check(c.config(), c.unet(), c.text_encoder(), c.text_encoder_2(), lora);
}

std::shared_ptr<ImageJob> ImageWorker::submit(ImageJobRequest request) {
  auto job = std::make_shared<ImageJob>(std::move(request));
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || static_cast<int>(queue_.size()) >= options_.max_queued) return nullptr;
    queue_.push_back(job);
    metrics_.waiting = static_cast<int>(queue_.size());
  }
  wake_.notify_one();
  return job;
}

std::shared_ptr<const ImageJob> ImageWorker::running() const {
  std::lock_guard lock(mutex_);
  return running_;
}

ImageWorker::Loaded& ImageWorker::load(const std::vector<sd::LoraFile>& loras) {
  if (loaded_ && same_loras(loaded_->loras, loras)) return *loaded_;
  loaded_.reset();  // first: one copy of the weights at a time
  loaded_ = std::make_unique<Loaded>(checkpoint_, loras, options_.device, *pool_);
  return *loaded_;
}

std::shared_ptr<ImageJob> ImageWorker::next_job() {
  constexpr auto kIdleBeforeRelease = std::chrono::seconds(1);
  std::unique_lock lock(mutex_);
  const auto ready = [&] { return stopping_ || !queue_.empty(); };
  if (!wake_.wait_for(lock, kIdleBeforeRelease, ready)) {
    lock.unlock();
    if (loaded_) loaded_->backend->release_unused_memory();
    lock.lock();
    wake_.wait(lock, ready);
  }
  if (stopping_) return nullptr;
  running_ = queue_.front();
  queue_.pop_front();
  metrics_.waiting = static_cast<int>(queue_.size());
  metrics_.running = 1;
  return running_;
}

void ImageWorker::run() {
  while (const std::shared_ptr<ImageJob> job = next_job()) {
    run_job(*job);
    std::lock_guard lock(mutex_);
    running_.reset();
    metrics_.running = 0;
  }
}

std::vector<std::uint8_t> ImageWorker::preview_png(const sd::StepState& state) const {
  const std::size_t first = static_cast<std::size_t>(state.channels) * state.height * state.width;
  const sd::Images shown = preview_->render(state.denoised.first(first), 1, state.height, state.width);
  return encode_png(sd::to_rgb8(shown, 0));
}

void ImageWorker::run_job(ImageJob& job) {
  const ImageJobRequest& r = job.request();
  const auto start = std::chrono::steady_clock::now();
  auto first_step = start;
  JobOutcome outcome = JobOutcome::completed;
  ImageEvent last;  // complete or failed: pushed after the outcome is counted
  try {
    if (job.cancelled()) fail("cancelled before it started");
    const sd::Pipeline& pipeline = load(r.loras).pipeline;
    const sd::Images images = pipeline.generate(r.options, [&](const sd::StepState& state) {
      if (job.cancelled()) return false;
      if (state.step == 1) first_step = std::chrono::steady_clock::now();
      job.step_ = state.step;
      job.steps_ = state.steps;
      ++metrics_.steps;
      job.push({ImageEvent::Kind::progress, state.step, state.steps});
      if (r.preview_every > 0 && (state.step % r.preview_every == 0 || state.step == state.steps)) {
        std::vector<std::uint8_t> png = preview_png(state);
        {
          std::lock_guard lock(job.preview_mutex_);
          job.preview_ = png;
        }
        job.push({ImageEvent::Kind::preview, state.step, state.steps, std::move(png)});
      }
      return true;
    });
    const double stepping = std::chrono::duration<double>(std::chrono::steady_clock::now() - first_step).count();
    add(metrics_.step_seconds, stepping);
    if (job.steps_ > 1 && stepping > 0) metrics_.last_steps_per_second = (job.steps_ - 1) / stepping;

    ImageEvent done{ImageEvent::Kind::complete, job.steps_, job.steps_};
    for (int i = 0; i < images.batch; ++i) {
      const sd::GenerationParameters p = sd::run_parameters(r.options, i, options_.model_name, r.loras);
      done.images.push_back(sd::to_rgb8(images, i));
      done.seeds.push_back(p.seed);
      done.infotexts.push_back(sd::format_infotext(p));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (int i = 0; i < images.batch; ++i) metrics_.seconds_per_image.observe(seconds / images.batch);
    metrics_.images += images.batch;
    last = std::move(done);
  } catch (const std::exception& e) {
    // A failed job (a LoRA that will not merge, the device out of memory) leaves the worker serving.
    outcome = job.cancelled() ? JobOutcome::cancelled : JobOutcome::failed;
    if (outcome == JobOutcome::failed) spdlog::warn("image job failed: {}", e.what());
    last = {ImageEvent::Kind::failed, job.step_, job.steps_};
    last.cancelled = outcome == JobOutcome::cancelled;
    last.message = last.cancelled ? "the job was cancelled" : e.what();
  }
  // Counted before the job's end goes out, so that whoever sees it end (a test, /metrics after the
  // response) sees it counted.
  ++metrics_.jobs[static_cast<int>(r.operation)][static_cast<int>(outcome)];
  job.push(std::move(last));
}

}  // namespace rf
