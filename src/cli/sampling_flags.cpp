#include "cli/sampling_flags.h"

#include <random>

namespace rf::cli {

void SamplingFlags::add_to(CLI::App& cmd) {
  auto& s = given_;
  temperature_ = cmd.add_option("--temp", s.temperature, "Temperature (0: greedy)");
  top_k_ = cmd.add_option("--top-k", s.top_k, "Keep the k most likely tokens (0: off)")->check(CLI::NonNegativeNumber);
  top_p_ = cmd.add_option("--top-p", s.top_p, "Nucleus sampling threshold (1: off)");
  min_p_ = cmd.add_option("--min-p", s.min_p, "Drop tokens below min-p times the top probability (0: off)");
  repetition_penalty_ = cmd.add_option("--repeat-penalty", s.repetition_penalty, "Repetition penalty (1: off)");
  cmd.add_option("--repeat-last-n", s.penalty_last_n, "Recent tokens the penalties look at (-1: all)");
  cmd.add_option("--presence-penalty", s.presence_penalty, "Presence penalty");
  cmd.add_option("--frequency-penalty", s.frequency_penalty, "Frequency penalty");
  seed_ = cmd.add_option("-s,--seed", s.seed, "Random seed (default: random)");
}

SamplingParams SamplingFlags::resolve(const GenerationDefaults& d) const {
  check();
  SamplingParams s = given_;
  const SamplingParams model = d.sampling();
  if (!temperature_->count()) s.temperature = model.temperature;
  if (!top_k_->count()) s.top_k = model.top_k;
  if (!top_p_->count()) s.top_p = model.top_p;
  if (!min_p_->count()) s.min_p = model.min_p;
  if (!repetition_penalty_->count()) s.repetition_penalty = model.repetition_penalty;
  if (!seed_->count()) s.seed = std::random_device{}();
  return s;
}

}  // namespace rf::cli
