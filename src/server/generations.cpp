#include "server/generations.h"

#include "server/access_log.h"

namespace rf::server {

Generations::Generations(std::vector<std::shared_ptr<RequestChannel>> channels)
    : channels_(std::move(channels)), ended_(channels_.size(), false) {}

Generations::~Generations() {
  for (std::size_t i = 0; i < channels_.size(); ++i) {
    if (!ended_[i]) channels_[i]->cancel();
  }
}

bool Generations::poll(std::chrono::milliseconds timeout, const std::function<void(std::size_t, StreamEvent&)>& on_event) {
  bool waited = false;
  bool any_left = false;
  for (std::size_t i = 0; i < channels_.size(); ++i) {
    if (ended_[i]) continue;
    // Only the first open channel is waited on; the others are read as they are.
    auto events = channels_[i]->take(waited ? std::chrono::milliseconds(0) : timeout);
    waited = true;
    for (auto& e : events) {
      if (e.kind != StreamEvent::Kind::Text) ended_[i] = true;
      if (e.kind == StreamEvent::Kind::Text && e.token >= 0) access_log::token();
      if (e.kind == StreamEvent::Kind::Finished) access_log::usage(e.usage.prompt_tokens, e.usage.completion_tokens);
      on_event(i, e);
    }
    any_left = any_left || !ended_[i];
  }
  return any_left;
}

std::optional<std::vector<Generation>> read_all(Generations& generations, const std::function<bool()>& stopping) {
  std::vector<Generation> out(generations.size());
  auto on_event = [&](std::size_t i, StreamEvent& e) {
    Generation& g = out[i];
    switch (e.kind) {
      case StreamEvent::Kind::Text:
        g.text += e.text;
        if (e.logprobs) g.logprobs.push_back(std::move(*e.logprobs));
        break;
      case StreamEvent::Kind::Finished:
        g.finish = e.finish;
        g.usage = e.usage;
        break;
      case StreamEvent::Kind::Failed:
        g.error = e.text;
        break;
    }
  };
  while (generations.poll(std::chrono::milliseconds(100), on_event)) {
    if (stopping()) return std::nullopt;
  }
  return out;
}

}  // namespace rf::server
