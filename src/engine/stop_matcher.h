#pragma once
// Finds stop strings in streamed text. Text that could still turn into a stop string is held
// back, so what has been released never contains (part of) a stop string.
#include <string>
#include <string_view>
#include <vector>

namespace rf {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Adds generated text; returns the part that is now safe to release.
  std::string push(std::string_view text);
  bool stopped() const { return stopped_; }
  // At the end of generation, without a stop: whatever was held back.
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace rf
