#pragma once
// Events passed from the engine's thread, which produces them, to the thread that reads them (an
// HTTP handler), with the reader's wish to stop going the other way.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <iterator>
#include <mutex>
#include <vector>

namespace rf {

template <class Event>
class EventChannel {
 public:
  void push(Event event) {
    {
      std::lock_guard lock(mutex_);
      events_.push_back(std::move(event));
    }
    ready_.notify_one();
  }
  // Everything pending, after waiting up to `timeout` for something to arrive.
  std::vector<Event> take(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, timeout, [&] { return !events_.empty(); });
    std::vector<Event> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
    events_.clear();
    return out;
  }
  // The reader has gone: the engine drops the work at its next step and frees what it held.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Event> events_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace rf
