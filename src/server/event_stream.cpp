#include "server/event_stream.h"

namespace rf::server {

std::string sse_frame(const nlohmann::json& data) {
  return "data: " + data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

std::string sse_event(const std::string& name, const nlohmann::json& data) { return "event: " + name + "\n" + sse_frame(data); }

namespace {
struct StreamState {
  std::shared_ptr<const void> keep_alive;  // first: outlives the formatter
  std::unique_ptr<Generations> generations;
  std::unique_ptr<EventFormatter> formatter;
  bool opened = false;
};
}  // namespace

void stream_events(httplib::Response& res, std::unique_ptr<Generations> generations,
                   std::unique_ptr<EventFormatter> formatter, std::shared_ptr<const void> keep_alive) {
  auto state = std::make_shared<StreamState>(StreamState{std::move(keep_alive), std::move(generations), std::move(formatter)});
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider("text/event-stream", [state](std::size_t, httplib::DataSink& sink) {
    std::string frames;
    if (!state->opened) {
      state->opened = true;
      frames = state->formatter->opening();
    }
    const bool more = state->generations->poll(std::chrono::milliseconds(50), [&](std::size_t i, StreamEvent& e) {
      frames += state->formatter->event(i, e);
    });
    if (!more) frames += state->formatter->closing();
    if (!frames.empty() && !sink.write(frames.data(), frames.size())) return false;
    if (!more) sink.done();
    return true;
  });
}

}  // namespace rf::server
