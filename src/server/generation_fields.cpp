#include "server/generation_fields.h"

#include <charconv>
#include <limits>
#include <random>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "server/json_fields.h"

namespace rf::server {

namespace {

constexpr long long kMaxTokens = 1 << 30;

// OpenAI's logit_bias: {"token id": bias from -100 to 100}. (The scheduler checks the ids against the
// vocabulary.)
std::vector<std::pair<std::int32_t, float>> logit_bias_field(const json& body) {
  std::vector<std::pair<std::int32_t, float>> biases;
  const auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return biases;
  if (!it->is_object()) bad_field("logit_bias", "must be an object of token ids (as strings) to biases");
  for (const auto& [key, value] : it->items()) {
    std::int32_t id = -1;
    const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (error != std::errc{} || end != key.data() + key.size() || id < 0) {
      bad_field("logit_bias", fmt::format("has the key '{}', which is not a token id", key));
    }
    if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100)) {
      bad_field("logit_bias", fmt::format("gives token {} a bias that is not a number from -100 to 100", key));
    }
    biases.emplace_back(id, value.get<float>());
  }
  return biases;
}

}  // namespace

GenerateOptions generation_fields(const json& body, const GenerationDefaults& defaults, std::optional<int> default_max_tokens) {
  GenerateOptions o;
  auto max_tokens = integer_field(body, "max_completion_tokens", 1, kMaxTokens);
  if (!max_tokens) max_tokens = integer_field(body, "max_tokens", 1, kMaxTokens);
  o.max_tokens = static_cast<int>(max_tokens.value_or(default_max_tokens.value_or(-1)));

  auto& s = o.sampling;
  const SamplingParams model = defaults.sampling();  // what `generate` samples with too
  s.temperature = number_field(body, "temperature", 0, 2).value_or(model.temperature);
  s.top_p = number_field(body, "top_p", 0, 1).value_or(model.top_p);
  if (s.top_p == 0) bad_field("top_p", "must be greater than 0");
  // vLLM's extensions: -1 (or 0) turns top_k off.
  s.top_k = static_cast<int>(integer_field(body, "top_k", -1, 1 << 30).value_or(model.top_k));
  s.min_p = number_field(body, "min_p", 0, 1).value_or(model.min_p);
  s.presence_penalty = number_field(body, "presence_penalty", -2, 2).value_or(0.0);
  s.frequency_penalty = number_field(body, "frequency_penalty", -2, 2).value_or(0.0);
  s.repetition_penalty = number_field(body, "repetition_penalty", 0.01, 100).value_or(model.repetition_penalty);
  s.penalty_last_n = -1;  // OpenAI's penalties count every generated token
  s.logit_bias = logit_bias_field(body);
  const auto seed = integer_field(body, "seed", std::numeric_limits<long long>::min(), std::numeric_limits<long long>::max());
  s.seed = seed ? static_cast<std::uint64_t>(*seed) : std::random_device{}();
  o.stop = strings_field(body, "stop", 16);
  o.ignore_eos = bool_field(body, "ignore_eos").value_or(false);
  return o;
}

}  // namespace rf::server
