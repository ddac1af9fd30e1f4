#pragma once
// The generations behind one HTTP request (one per prompt and per choice), read together from
// their channels by the handler thread. Whatever has not ended when this goes away is cancelled:
// the client has disconnected, or the server is stopping, and the engine frees its blocks.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"

namespace rf::server {

class Generations {
 public:
  explicit Generations(std::vector<std::shared_ptr<RequestChannel>> channels);
  ~Generations();
  Generations(const Generations&) = delete;
  Generations& operator=(const Generations&) = delete;

  std::size_t size() const { return channels_.size(); }
  // Waits up to `timeout` for events and hands each to `on_event` with its generation's index;
  // false once every generation has finished or failed.
  bool poll(std::chrono::milliseconds timeout, const std::function<void(std::size_t, StreamEvent&)>& on_event);

 private:
  std::vector<std::shared_ptr<RequestChannel>> channels_;
  std::vector<bool> ended_;
};

// One generation read to its end, for a response that is not streamed.
struct Generation {
  std::string text;
  std::vector<TokenLogprobs> logprobs;  // one per token when asked for
  FinishReason finish = FinishReason::Length;
  RequestUsage usage;
  std::optional<std::string> error;
};

// Reads every generation to its end; nullopt if `stopping` turns true first.
std::optional<std::vector<Generation>> read_all(Generations& generations, const std::function<bool()>& stopping);

}  // namespace rf::server
