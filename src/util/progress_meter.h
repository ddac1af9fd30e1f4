#pragma once
// Progress of a long step (loading weights), for someone waiting on it: a bar redrawn in place on
// a terminal, or a line at every tenth for a log. A quick step shows nothing: the bar appears after
// 0.3 s, the lines after a second, so small models and tests load silently.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace rf {

// Told `done` of `total` units (bytes) as a step advances; done == total ends it.
using ProgressFn = std::function<void(std::uint64_t done, std::uint64_t total)>;

class ProgressMeter {
 public:
  enum class Style { Bar, Lines };
  // Bar: `write` gets text to put out as is ("\r" redraws, "\n" ends); Lines: whole lines, no "\n".
  using Write = std::function<void(std::string_view)>;
  using Clock = std::function<double()>;  // seconds, from any origin

  ProgressMeter(std::string label, Style style, Write write, Clock clock = steady_seconds);

  void update(std::uint64_t done, std::uint64_t total);

  static double steady_seconds();

 private:
  void draw_bar(std::uint64_t done, std::uint64_t total, double elapsed);

  std::string label_;
  Style style_;
  Write write_;
  Clock clock_;
  double started_;
  bool shown_ = false;
  int tenths_shown_ = 0;   // Lines: the last tenth written
  double last_drawn_ = 0;  // Bar: when it was last redrawn
};

// A meter for stderr: a bar when stderr is a terminal, else lines through `log` (stderr's when empty).
ProgressFn stderr_progress(std::string label, ProgressMeter::Write log = {});

}  // namespace rf
