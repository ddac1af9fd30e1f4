#pragma once
// Server-sent events: `data: JSON` frames as OpenAI and rbee send them, pumped from a request's
// generations into httplib's chunked response. A failed write (the client has gone) ends the
// response, and with it the generations, which cancels them.
#include <memory>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/generations.h"

namespace rf::server {

std::string sse_frame(const nlohmann::json& data);
// A frame with an event name: "event: NAME" before its data.
std::string sse_event(const std::string& name, const nlohmann::json& data);
inline const std::string kSseDone = "data: [DONE]\n\n";

// Turns a request's events into frames; each method returns the frames to send (maybe none).
class EventFormatter {
 public:
  virtual ~EventFormatter() = default;
  virtual std::string opening() { return {}; }
  virtual std::string event(std::size_t generation, const StreamEvent& event) = 0;
  virtual std::string closing() = 0;  // after every generation has ended, [DONE] included
};

// `keep_alive`: what the formatter refers to (the model and its tokenizer), held until the stream ends.
void stream_events(httplib::Response& res, std::unique_ptr<Generations> generations,
                   std::unique_ptr<EventFormatter> formatter, std::shared_ptr<const void> keep_alive);

}  // namespace rf::server
