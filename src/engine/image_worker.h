#pragma once
// The image worker's engine: Stable Diffusion jobs queued first come, first served and run one at a
// time on the worker's own thread, each reporting its steps, previews and finished PNGs through its
// own channel and stopping at the next step once cancelled.
//
// One job at a time: a job's own images (n, batch_size) run as one batch, but jobs are not batched
// together, because the pipeline conditions a batch on one prompt and one set of options. (On the
// H100, SD 1.5 gives about 1.4x the images a second at batch 4 as at batch 1; see docs/perf.md.)
//
// LoRAs are merged into the matrices they touch (models/stable_diffusion/lora.h), and the pipeline
// is rebuilt on its backend whenever a job asks for another set than the last job's: one copy of
// the weights on the device at any time, the cost of a load each time the set changes. Device
// memory that activations held is given back once the queue has been empty for a second (at once,
// each job's first steps would wait for the device's allocations).
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/event_channel.h"
#include "formats/image_file.h"
#include "models/stable_diffusion/checkpoint.h"
#include "models/stable_diffusion/latent_preview.h"
#include "models/stable_diffusion/lora.h"
#include "models/stable_diffusion/pipeline.h"
#include "util/histogram.h"

namespace rf {

class ThreadPool;

enum class ImageOperation { generation, transform, inpaint };
inline constexpr std::array<ImageOperation, 3> kImageOperations{ImageOperation::generation, ImageOperation::transform,
                                                                ImageOperation::inpaint};
// rbee's names: "image_generation", "image_transform", "image_inpaint".
std::string_view operation_name(ImageOperation operation);

struct ImageJobRequest {
  ImageOperation operation = ImageOperation::generation;
  stable_diffusion::GenerationOptions options;  // as ImageWorker::resolve returned them
  std::vector<stable_diffusion::LoraFile> loras;  // checked by ImageWorker::check_lora
  int preview_every = 5;  // a preview every this many steps and at the last; 0: none
};

struct ImageEvent {
  enum class Kind { progress, preview, complete, failed };
  Kind kind = Kind::progress;
  int step = 0, steps = 0;   // progress and preview: steps done (from 1) of steps
  std::vector<std::uint8_t> preview = {};  // preview: the first image's, a PNG
  // complete: the images, each with its seed and its A1111 parameters; png() encodes one, on the
  // reader's thread, so that the worker goes on to the next job meanwhile.
  std::vector<Image> images = {};
  std::vector<std::uint64_t> seeds = {};
  std::vector<std::string> infotexts = {};
  std::string message = {};  // failed
  bool cancelled = false;  // failed: because the job was cancelled

  std::vector<std::uint8_t> png(std::size_t image) const;
};

// A job as both sides see it: the worker pushes its events; the reader takes them and may cancel.
class ImageJob : public EventChannel<ImageEvent> {
 public:
  explicit ImageJob(ImageJobRequest request) : request_(std::move(request)) {}
  const ImageJobRequest& request() const { return request_; }

  // Where it stands (A1111's /progress): 0 of 0 while queued.
  int step() const { return step_; }
  int steps() const { return steps_; }
  std::vector<std::uint8_t> latest_preview() const;

 private:
  friend class ImageWorker;
  const ImageJobRequest request_;
  std::atomic<int> step_{0}, steps_{0};
  mutable std::mutex preview_mutex_;
  std::vector<std::uint8_t> preview_;
};

enum class JobOutcome { completed, failed, cancelled };

struct ImageMetrics {
  // Jobs ended, by operation and outcome.
  std::array<std::array<std::atomic<std::uint64_t>, 3>, 3> jobs{};
  std::atomic<std::uint64_t> images{0};
  std::atomic<std::uint64_t> steps{0};
  std::atomic<double> step_seconds{0};       // spent in those steps
  std::atomic<double> last_steps_per_second{0};
  std::atomic<int> waiting{0};
  std::atomic<int> running{0};
  Histogram seconds_per_image{{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600}};

  std::uint64_t ended(ImageOperation op, JobOutcome outcome) const {
    return jobs[static_cast<int>(op)][static_cast<int>(outcome)];
  }
};

struct ImageWorkerOptions {
  std::string device = "auto";  // as --device takes it
  int threads = 0;              // CPU threads; 0: one per hardware thread
  int max_queued = 16;          // jobs waiting beyond the one running; submit() refuses more
  std::string model_name;       // the PNGs' "Model" parameter
};

class ImageWorker {
 public:
  // Builds the pipeline (no LoRAs) and fits the preview before it returns: a checkpoint that cannot
  // run fails here, not in the first job.
  ImageWorker(stable_diffusion::Checkpoint checkpoint, ImageWorkerOptions options);
  ~ImageWorker();  // jobs still queued or running fail
  ImageWorker(const ImageWorker&) = delete;
  ImageWorker& operator=(const ImageWorker&) = delete;

  const stable_diffusion::Checkpoint& checkpoint() const { return checkpoint_; }
  const std::string& model_name() const { return options_.model_name; }
  // The options with the model's defaults filled in and checked; rf::Error names what is wrong.
  stable_diffusion::GenerationOptions resolve(stable_diffusion::GenerationOptions options) const;
  // rf::Error naming the file when it is not a LoRA this model can take.
  void check_lora(const stable_diffusion::LoraFile& lora) const;
  // Queues a job; null when the queue is full.
  std::shared_ptr<ImageJob> submit(ImageJobRequest request);
  // The job running now, if any.
  std::shared_ptr<const ImageJob> running() const;
  const ImageMetrics& metrics() const { return metrics_; }

 private:
  struct Loaded;  // the pipeline on its backend, for one set of LoRAs

  void run();
  void run_job(ImageJob& job);
  Loaded& load(const std::vector<stable_diffusion::LoraFile>& loras);
  std::shared_ptr<ImageJob> next_job();  // null once stopping
  std::vector<std::uint8_t> preview_png(const stable_diffusion::StepState& state) const;

  stable_diffusion::Checkpoint checkpoint_;
  ImageWorkerOptions options_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Loaded> loaded_;
  std::optional<stable_diffusion::LatentPreview> preview_;
  ImageMetrics metrics_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<ImageJob>> queue_;
  std::shared_ptr<ImageJob> running_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest is in place
};

}  // namespace rf
