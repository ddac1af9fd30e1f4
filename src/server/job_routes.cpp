// rbee's worker contract: POST /v1/jobs {"operation": "infer", "hive_id", "model", "prompt",
// "max_tokens", "temperature", "top_p", "top_k", "stream"} -> {"job_id", "sse_url"};
// GET /v1/jobs/{id}/stream -> {"type": "started"}, {"type": "token", "t", "i"} per token, then
// {"type": "end"} or {"type": "error", "code", "message"}, then [DONE]; DELETE /v1/jobs/{id} cancels.
// An image worker takes the image operations instead (image_jobs.h).
#include <fmt/chrono.h>
#include <fmt/format.h>

#include "server/api_error.h"
#include "server/event_stream.h"
#include "server/generation_fields.h"
#include "server/image_jobs.h"
#include "server/json_fields.h"
#include "server/routes.h"

namespace rf::server {

namespace {

using nlohmann::json;

class JobFormatter : public EventFormatter {
 public:
  JobFormatter(std::shared_ptr<Job<RequestChannel>> job, JobRegistry<RequestChannel>& registry) : job_(std::move(job)), registry_(registry) {}
  ~JobFormatter() override { registry_.remove(job_->id); }

  std::string opening() override {
    return sse_frame({{"type", "started"}, {"job_id", job_->id}, {"model", job_->model},
                      {"started_at", fmt::format("{:%FT%TZ}", fmt::gmtime(std::time(nullptr)))}});
  }

  std::string event(std::size_t, const StreamEvent& e) override {
    switch (e.kind) {
      case StreamEvent::Kind::Text:
        if (e.token < 0 && e.text.empty()) return {};
        return sse_frame({{"type", "token"}, {"t", e.text}, {"i", index_++}});
      case StreamEvent::Kind::Finished:
        registry_.remove(job_->id);  // before the last event leaves: a client that read it finds no job
        return sse_frame({{"type", "end"}, {"tokens_out", e.usage.completion_tokens}, {"tokens_in", e.usage.prompt_tokens},
                          {"stop_reason", e.finish == FinishReason::Stop ? "stop" : "max_tokens"}});
      case StreamEvent::Kind::Failed:
        registry_.remove(job_->id);
        return sse_frame({{"type", "error"}, {"code", job_->channel->cancelled() ? "CANCELLED" : "INFERENCE_FAILED"},
                          {"message", e.text}});
    }
    return {};
  }

  std::string closing() override { return kSseDone; }

 private:
  std::shared_ptr<Job<RequestChannel>> job_;
  JobRegistry<RequestChannel>& registry_;
  std::size_t index_ = 0;
};

void create_job(ServerContext& context, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  const auto operation = string_field(body, "operation");
  if (operation && is_image_operation(*operation)) return create_image_job(context, body, res);
  const auto model = context.require_model();
  if (operation != "infer") bad_field("operation", "must be \"infer\"");
  string_field(body, "hive_id");  // checked for its type; the hive names itself to its own logs
  if (const auto name = string_field(body, "model"); name && !model->answers_to(*name)) {
    throw ApiError(404, fmt::format("The model '{}' is not loaded here; this worker serves '{}'", *name, model->id()), "model",
                   "model_not_found");
  }
  bool_field(body, "stream");  // checked for its type: jobs always stream
  const auto prompt = string_field(body, "prompt");
  if (!prompt) bad_field("prompt", "is required");
  GenerationRequest request;
  request.options = generation_fields(body, model->defaults(), std::nullopt);
  request.prompt = model->tokenizer().encode(*prompt, true);
  const std::string id = context.jobs.add(model->id(), model->submit(std::move(request)));
  send_json(res, {{"job_id", id}, {"sse_url", fmt::format("/v1/jobs/{}/stream", id)}});
}

void stream_job(ServerContext& context, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  if (auto image_job = context.image_jobs.claim(id)) return stream_image_job(context, std::move(image_job), res);
  auto job = context.jobs.claim(id);
  if (!job) throw ApiError(404, fmt::format("no job '{}' waiting to be streamed", id), "", "job_not_found");
  const auto model = context.require_model();
  auto generations = std::make_unique<Generations>(std::vector{job->channel});
  stream_events(res, std::move(generations), std::make_unique<JobFormatter>(job, context.jobs), model);
}

}  // namespace

void add_job_routes(httplib::Server& http, ServerContext& context) {
  http.Post("/v1/jobs", guarded([&](const httplib::Request& req, httplib::Response& res) { create_job(context, req, res); }));
  http.Get(R"(/v1/jobs/([^/]+)/stream)",
           guarded([&](const httplib::Request& req, httplib::Response& res) { stream_job(context, req, res); }));
  http.Delete(R"(/v1/jobs/([^/]+))", guarded([&](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (!context.jobs.cancel(id) && !context.image_jobs.cancel(id)) throw ApiError(404, fmt::format("no job '{}'", id), "", "job_not_found");
    send_json(res, {{"job_id", id}, {"status", "cancelled"}});
  }));
}

}  // namespace rf::server
