#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace rf {

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) { params_.validate(); }

void Sampler::adjust_logits(std::span<float> logits, std::span<const std::int32_t> history) const {
  for (const auto& [token, bias] : params_.logit_bias) {
    if (static_cast<std::size_t>(token) < logits.size()) logits[token] += bias;
  }
  std::unordered_map<std::int32_t, int> counts;
  for (auto id : penalty_window(params_, history)) ++counts[id];
  for (const auto& [id, count] : counts) {
    if (id < 0 || static_cast<std::size_t>(id) >= logits.size()) continue;
    float& l = logits[id];
    l = l > 0 ? l / static_cast<float>(params_.repetition_penalty) : l * static_cast<float>(params_.repetition_penalty);
    l -= static_cast<float>(count * params_.frequency_penalty + params_.presence_penalty);
  }
}

std::vector<double> Sampler::filtered_weights(std::span<const float> logits) {
  candidates_.clear();
  for (std::size_t i = 0; i < logits.size(); ++i) candidates_.emplace_back(logits[i], static_cast<std::int32_t>(i));
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  std::size_t keep = candidates_.size();
  if (params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < keep) {
    keep = params_.top_k;
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  candidates_.resize(keep);

  // Probabilities at temperature 1 decide the top-p and min-p cut-offs, as in llama.cpp.
  std::vector<double> probs(keep);
  double sum = 0;
  for (std::size_t i = 0; i < keep; ++i) sum += probs[i] = std::exp(static_cast<double>(candidates_[i].first - candidates_[0].first));
  if (params_.top_p < 1.0) {
    double cumulative = 0;
    for (std::size_t i = 0; i < keep; ++i) {
      cumulative += probs[i] / sum;
      if (cumulative >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (params_.min_p > 0) {
    const double threshold = params_.min_p * probs[0];  // probs[0] is the largest, relative to itself
    std::size_t kept = 1;
    while (kept < keep && probs[kept] >= threshold) ++kept;
    keep = kept;
  }
  candidates_.resize(keep);

  std::vector<double> weights(keep);
  for (std::size_t i = 0; i < keep; ++i) {
    weights[i] = std::exp(static_cast<double>(candidates_[i].first - candidates_[0].first) / params_.temperature);
  }
  return weights;
}

std::int32_t Sampler::sample(std::span<float> logits, std::span<const std::int32_t> history) {
  adjust_logits(logits, history);
  if (params_.temperature <= 0) {
    return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  const auto weights = filtered_weights(logits);
  std::discrete_distribution<std::size_t> draw(weights.begin(), weights.end());
  return candidates_[draw(rng_)].second;
}

std::vector<std::pair<std::int32_t, double>> Sampler::distribution(std::span<float> logits,
                                                                   std::span<const std::int32_t> history) {
  adjust_logits(logits, history);
  const auto weights = filtered_weights(logits);
  double total = 0;
  for (double w : weights) total += w;
  std::vector<std::pair<std::int32_t, double>> result;
  for (std::size_t i = 0; i < weights.size(); ++i) result.emplace_back(candidates_[i].second, weights[i] / total);
  return result;
}

}  // namespace rf
