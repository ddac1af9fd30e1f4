#pragma once
// /metrics in Prometheus' text format: HTTP requests by route and status, the engine's totals
// (tokens, preemptions, prefix-cache hits), its state (queue depth, running sequences, KV-cache
// blocks) and its histograms (batch size, time to first token, inter-token latency); for an image
// model, its jobs by operation and outcome, queue depth, steps and seconds per image.
#include <string>

#include "engine/engine_metrics.h"
#include "server/server_context.h"

namespace rf::server {

// `engine` and `images` are null while the model loads; one of them is null after.
std::string prometheus_text(const EngineMetrics* engine, const ImageMetrics* images, const RequestCounters& counters);

}  // namespace rf::server
