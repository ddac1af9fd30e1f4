#include "server/image_jobs.h"

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/base64.h"
#include "server/event_stream.h"
#include "server/image_fields.h"
#include "server/json_fields.h"
#include "server/routes.h"

namespace rf::server {

namespace {

namespace sd = stable_diffusion;
using nlohmann::json;

ImageOperation operation_of(const std::string& name) {
  for (ImageOperation op : kImageOperations)
    if (operation_name(op) == name) return op;
  bad_field("operation", fmt::format("'{}' is not an operation of this worker", name));
}

// The fields of each operation, as rbee's hive sends them.
void refuse_unknown(const json& body, ImageOperation op) {
  switch (op) {
    case ImageOperation::generation:
      return refuse_unknown_fields(body, {"operation", "hive_id", "model", "prompt", "negative_prompt", "steps",
                                          "guidance_scale", "seed", "width", "height", "loras", "worker_id"});
    case ImageOperation::transform:
      return refuse_unknown_fields(body, {"operation", "hive_id", "model", "prompt", "negative_prompt", "steps",
                                          "guidance_scale", "seed", "loras", "worker_id", "input_image", "strength"});
    case ImageOperation::inpaint:
      return refuse_unknown_fields(body, {"operation", "hive_id", "model", "prompt", "negative_prompt", "steps",
                                          "guidance_scale", "seed", "loras", "worker_id", "init_image", "mask_image",
                                          "strength"});
  }
}

ImageJobRequest job_request(const json& body, ImageOperation op, const ImageService& model) {
  if (!string_field(body, "hive_id")) bad_field("hive_id", "is required");
  const auto name = string_field(body, "model");
  if (!name) bad_field("model", "is required");
  if (!model.answers_to(*name)) {
    throw ApiError(404, fmt::format("The model '{}' is not loaded here; this worker serves '{}'", *name, model.id()),
                   "model", "model_not_found");
  }
  string_field(body, "worker_id");  // checked for its type: the hive's own name for this worker
  ImageJobRequest r;
  r.operation = op;
  sd::GenerationOptions& o = r.options;
  prompt_fields(body, o, "prompt", "negative_prompt");
  o.sampler.kind = sd::SamplerKind::euler_ancestral;  // the CLI's default, so that the two agree
  o.sampler.steps = static_cast<int>(integer_field(body, "steps", ImageLimits::kMinSteps, ImageLimits::kMaxSteps).value_or(20));
  o.guidance = number_field(body, "guidance_scale", 0, ImageLimits::kMaxGuidance).value_or(7.5);
  o.seed = seed_field(body, "seed").value_or(random_seed());
  if (op == ImageOperation::generation) {
    o.width = side(integer_field(body, "width", LLONG_MIN, LLONG_MAX).value_or(512), "width");
    o.height = side(integer_field(body, "height", LLONG_MIN, LLONG_MAX).value_or(512), "height");
  } else {
    const double strength = number_field(body, "strength", 0, 1).value_or(0.8);
    if (op == ImageOperation::transform) {
      o.init = init_image(image_field(body, "input_image"), nullptr, strength, "");
    } else {
      const Image image = image_field(body, "init_image"), mask = mask_field(body, "mask_image");
      o.init = init_image(image, &mask, strength, "mask_image");
    }
    side(o.init->image.width, op == ImageOperation::transform ? "input_image" : "init_image");
    side(o.init->image.height, op == ImageOperation::transform ? "input_image" : "init_image");
  }
  r.loras = lora_list(body, "loras", model);
  r.options = model.resolve(std::move(o));
  return r;
}

// One job's events as rbee's hive reads them; the job is cancelled if the stream ends first.
struct ImageStream {
  ServerContext& context;
  std::shared_ptr<Job<ImageJob>> job;
  std::shared_ptr<ImageService> keep_alive;
  bool ended = false;

  ImageStream(ServerContext& context, std::shared_ptr<Job<ImageJob>> job)
      : context(context), job(std::move(job)), keep_alive(context.image_model()) {}
  ImageStream(const ImageStream&) = delete;
  ImageStream& operator=(const ImageStream&) = delete;
  ~ImageStream() {
    if (!ended) job->channel->cancel();
    context.image_jobs.remove(job->id);
  }

  static json step_fields(const char* type, const ImageEvent& e) {
    return {{"type", type}, {"step", e.step}, {"total", e.steps}, {"percent", e.steps ? 100.0 * e.step / e.steps : 0.0}};
  }

  std::string frames(const ImageEvent& e) {
    switch (e.kind) {
      case ImageEvent::Kind::progress: return sse_event("progress", step_fields("progress", e));
      case ImageEvent::Kind::preview: {
        json preview = step_fields("preview", e);
        preview["image"] = base64_encode(e.preview);
        preview["format"] = "png";
        return sse_event("preview", preview);
      }
      case ImageEvent::Kind::complete:
        end();
        return sse_event("complete", {{"type", "complete"}, {"image", base64_encode(e.png(0))}, {"format", "png"}});
      case ImageEvent::Kind::failed:
        end();
        return sse_event("error", {{"type", "error"}, {"message", e.message}});
    }
    return {};
  }

  // The job is gone from the registry before its last event leaves, so that a client that has read
  // it finds no job to cancel.
  void end() {
    ended = true;
    context.image_jobs.remove(job->id);
  }
};

}  // namespace

bool is_image_operation(const std::string& operation) { return operation.starts_with("image_"); }

void create_image_job(ServerContext& context, const json& body, httplib::Response& res) {
  const auto model = context.require_image_model();
  const ImageOperation op = operation_of(string_field(body, "operation").value_or(""));
  refuse_unknown(body, op);
  ImageJobRequest request = job_request(body, op, *model);
  const std::string id = context.image_jobs.add(model->id(), model->submit(std::move(request)));
  send_json(res, {{"job_id", id}, {"sse_url", fmt::format("/v1/jobs/{}/stream", id)}});
}

void stream_image_job(ServerContext& context, std::shared_ptr<Job<ImageJob>> job, httplib::Response& res) {
  auto stream = std::make_shared<ImageStream>(context, std::move(job));
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider("text/event-stream", [stream](std::size_t, httplib::DataSink& sink) {
    std::string out;
    for (const ImageEvent& e : stream->job->channel->take(std::chrono::milliseconds(100))) out += stream->frames(e);
    if (!out.empty() && !sink.write(out.data(), out.size())) return false;  // the client has gone: cancelled
    if (stream->ended) sink.done();
    return true;
  });
}

}  // namespace rf::server
