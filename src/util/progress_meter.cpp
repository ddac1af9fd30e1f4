#include "util/progress_meter.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

namespace rf {

namespace {

constexpr double kBarDelay = 0.3, kLinesDelay = 1.0;
constexpr double kRedrawInterval = 0.1;
constexpr int kBarWidth = 30;

std::string gibibytes(std::uint64_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / (1u << 30)); }

}  // namespace

ProgressMeter::ProgressMeter(std::string label, Style style, Write write, Clock clock)
    : label_(std::move(label)), style_(style), write_(std::move(write)), clock_(std::move(clock)), started_(clock_()) {}

double ProgressMeter::steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void ProgressMeter::update(std::uint64_t done, std::uint64_t total) {
  const double elapsed = clock_() - started_;
  const bool finished = done >= total;
  if (style_ == Style::Bar) {
    if (!shown_ && elapsed < kBarDelay) return;
    if (finished || !shown_ || elapsed - last_drawn_ >= kRedrawInterval) draw_bar(done, total, elapsed);
    return;
  }
  if (!shown_ && elapsed < kLinesDelay) return;
  shown_ = true;
  const int tenths = total == 0 ? 10 : static_cast<int>(10 * done / total);
  if (finished) {
    write_(fmt::format("{}: {} GiB in {:.1f} s", label_, gibibytes(total), elapsed));
  } else if (tenths > tenths_shown_) {
    write_(fmt::format("{}: {}% ({} of {} GiB)", label_, 10 * tenths, gibibytes(done), gibibytes(total)));
  }
  tenths_shown_ = tenths;
}

void ProgressMeter::draw_bar(std::uint64_t done, std::uint64_t total, double elapsed) {
  shown_ = true;
  last_drawn_ = elapsed;
  const double fraction = total == 0 ? 1.0 : static_cast<double>(done) / total;
  const int filled = static_cast<int>(fraction * kBarWidth);
  const std::string bar = std::string(filled, '=') + std::string(kBarWidth - filled, ' ');
  std::string text = fmt::format("\r{} [{}] {:3.0f}% {} / {} GiB", label_, bar, 100 * fraction, gibibytes(done),
                                 gibibytes(total));
  if (done >= total) text += fmt::format(" in {:.1f} s\n", elapsed);
  write_(text);
}

ProgressFn stderr_progress(std::string label, ProgressMeter::Write log) {
  const bool terminal = isatty(STDERR_FILENO);
  if (!log || terminal) {
    log = terminal ? ProgressMeter::Write([](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stderr);
      std::fflush(stderr);
    })
                   : ProgressMeter::Write([](std::string_view line) { fmt::print(stderr, "{}\n", line); });
  }
  auto meter = std::make_shared<ProgressMeter>(std::move(label), terminal ? ProgressMeter::Style::Bar
                                                                          : ProgressMeter::Style::Lines,
                                               std::move(log));
  return [meter](std::uint64_t done, std::uint64_t total) { meter->update(done, total); };
}

}  // namespace rf
