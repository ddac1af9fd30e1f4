#pragma once
// /metrics in Prometheus' text format: HTTP requests by route and status, the engine's totals
// (tokens, preemptions, prefix-cache hits), its state (queue depth, running sequences, KV-cache
// blocks) and its histograms (batch size, time to first token, inter-token latency).
#include <string>

#include "engine/engine_metrics.h"
#include "server/server_context.h"

namespace rf::server {

// `engine` is null while the model loads.
std::string prometheus_text(const EngineMetrics* engine, const RequestCounters& counters);

}  // namespace rf::server
