// GET /health (200 once the model has loaded, 503 before), GET /ready (200 while new requests
// can be queued) and GET /metrics (Prometheus).
#include "server/prometheus.h"
#include "server/routes.h"

namespace rf::server {

void add_status_routes(httplib::Server& http, ServerContext& context) {
  http.Get("/health", guarded([&](const httplib::Request&, httplib::Response& res) {
    if (!context.loaded()) {
      res.set_header("Retry-After", "1");
      send_json(res, {{"status", "loading"}}, 503);
      return;
    }
    send_json(res, {{"status", "ok"}});
  }));
  http.Get("/ready", guarded([&](const httplib::Request&, httplib::Response& res) {
    if (!context.loaded()) return send_error(res, 503, "the model is still loading", "", "model_loading");
    if (context.stopping()) return send_error(res, 503, "the server is shutting down");
    if (const auto image = context.image_model()) {
      const auto& m = image->worker().metrics();
      return send_json(res, {{"status", "ready"}, {"model", image->id()}, {"kind", "image"},
                             {"queue_depth", m.waiting.load()}, {"running", m.running.load()}});
    }
    const auto model = context.model();
    const auto& m = model->scheduler().metrics();
    send_json(res, {{"status", "ready"}, {"model", model->id()}, {"queue_depth", m.waiting.load()},
                    {"running", m.running.load()}});
  }));
  http.Get("/metrics", guarded([&](const httplib::Request&, httplib::Response& res) {
    const auto model = context.model();
    const auto image = context.image_model();
    res.set_content(prometheus_text(model ? &model->scheduler().metrics() : nullptr,
                                    image ? &image->worker().metrics() : nullptr, context.counters),
                    "text/plain; version=0.0.4");
  }));
}

}  // namespace rf::server
