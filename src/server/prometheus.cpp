#include "server/prometheus.h"

#include <array>

#include <fmt/format.h>

namespace rf::server {

namespace {

class Writer {
 public:
  void metric(const char* name, const char* type, const char* help) {
    out_ += fmt::format("# HELP rocmforge_{} {}\n# TYPE rocmforge_{} {}\n", name, help, name, type);
  }
  void sample(const char* name, double value, const std::string& labels = {}) {
    out_ += fmt::format("rocmforge_{}{}{} {}\n", name, labels.empty() ? "" : "{", labels.empty() ? labels : labels + "}", value);
  }
  void gauge(const char* name, const char* help, double value) {
    metric(name, "gauge", help);
    sample(name, value);
  }
  void counter(const char* name, const char* help, double value) {
    metric(name, "counter", help);
    sample(name, value);
  }
  void histogram(const char* name, const char* help, const Histogram& h) {
    metric(name, "histogram", help);
    const auto s = h.snapshot();
    const std::string bucket = fmt::format("{}_bucket", name);
    for (std::size_t i = 0; i < s.upper_bounds.size(); ++i) {
      sample(bucket.c_str(), static_cast<double>(s.cumulative[i]), fmt::format("le=\"{}\"", s.upper_bounds[i]));
    }
    sample(bucket.c_str(), static_cast<double>(s.count), "le=\"+Inf\"");
    sample(fmt::format("{}_sum", name).c_str(), s.sum);
    sample(fmt::format("{}_count", name).c_str(), static_cast<double>(s.count));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

void image_metrics(Writer& w, const ImageMetrics& m) {
  static constexpr std::array<const char*, 3> outcomes{"completed", "failed", "cancelled"};
  w.metric("image_jobs_total", "counter", "Image jobs ended, by operation and outcome");
  for (ImageOperation op : kImageOperations) {
    for (std::size_t o = 0; o < outcomes.size(); ++o) {
      w.sample("image_jobs_total", static_cast<double>(m.ended(op, static_cast<JobOutcome>(o))),
               fmt::format("operation=\"{}\",outcome=\"{}\"", operation_name(op), outcomes[o]));
    }
  }
  w.counter("images_total", "Images made", m.images);
  w.counter("image_steps_total", "Sampling steps run", m.steps);
  w.counter("image_step_seconds_total", "Seconds from each job's first step to its last", m.step_seconds);
  w.gauge("image_steps_per_second", "Steps a second of the last job that ended", m.last_steps_per_second);
  w.gauge("queue_depth", "Jobs waiting", m.waiting);
  w.gauge("image_jobs_running", "Jobs running (0 or 1)", m.running);
  w.histogram("image_seconds_per_image", "A job's seconds from its start to its images, over its images", m.seconds_per_image);
}

}  // namespace

std::string prometheus_text(const EngineMetrics* engine, const ImageMetrics* images, const RequestCounters& counters) {
  Writer w;
  w.gauge("model_loaded", "1 once the model has loaded", engine || images ? 1 : 0);
  w.metric("http_requests_total", "counter", "HTTP requests answered, by route and status");
  for (const auto& [key, count] : counters.snapshot()) {
    w.sample("http_requests_total", static_cast<double>(count), fmt::format("route=\"{}\",status=\"{}\"", key.first, key.second));
  }
  if (images) image_metrics(w, *images);
  if (!engine) return w.take();
  const EngineMetrics& m = *engine;
  w.counter("requests_finished_total", "Generations that ran to their end", m.requests_finished);
  w.counter("requests_cancelled_total", "Generations cancelled (client gone, DELETE)", m.requests_cancelled);
  w.counter("requests_failed_total", "Generations that failed", m.requests_failed);
  w.counter("prompt_tokens_total", "Prompt tokens of finished generations", m.prompt_tokens);
  w.counter("prefix_cache_hit_tokens_total", "Prompt tokens whose KV came from the prefix cache", m.cached_prompt_tokens);
  w.counter("generation_tokens_total", "Tokens generated", m.generated_tokens);
  w.counter("embedding_tokens_total", "Tokens of the texts embedded", m.embedded_tokens);
  w.counter("preemptions_total", "Sequences preempted for KV-cache room and recomputed later", m.preemptions);
  w.counter("engine_steps_total", "Forward steps run", m.steps);
  w.gauge("queue_depth", "Requests waiting for a place in the batch", m.waiting);
  w.gauge("running_sequences", "Sequences in the batch", m.running);
  w.gauge("kv_cache_blocks_total", "KV-cache blocks", m.kv_blocks_total);
  w.gauge("kv_cache_blocks_used", "KV-cache blocks held by sequences", m.kv_blocks_used);
  w.gauge("kv_cache_blocks_cached", "KV-cache blocks in the prefix cache", m.kv_blocks_cached);
  w.gauge("kv_cache_usage_ratio", "Share of the KV cache held by sequences",
          m.kv_blocks_total > 0 ? static_cast<double>(m.kv_blocks_used) / m.kv_blocks_total : 0.0);
  w.histogram("batch_tokens", "Tokens per forward step", m.batch_tokens);
  w.histogram("time_to_first_token_seconds", "From arrival to the first generated token", m.time_to_first_token);
  w.histogram("inter_token_latency_seconds", "Between consecutive tokens of a generation", m.inter_token_latency);
  w.histogram("request_duration_seconds", "From arrival to the last token", m.request_latency);
  w.histogram("grammar_mask_seconds", "Working out a step's grammar masks (structured output)", m.grammar_masks);
  return w.take();
}

}  // namespace rf::server
