#pragma once
// The fixtures made with llama.cpp's own tools (tests/fixtures/models/llama3/quants, made by
// tools/fixtures/make_quant_fixtures.py): the llama3 fixture quantized by llama-quantize into each of
// these types, and per type a reference of llama.cpp's making (gguf-py's decoded values, the logits of
// the f32 twin that gguf-py's values make).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/model_runner.h"
#include "engine/perplexity.h"

namespace rf::test {

inline const std::vector<std::string> kLlamaCppQuantTypes = {"q4_1", "q5_0", "q5_1",   "q2_k",
                                                             "q3_k", "q5_k", "iq4_nl", "iq4_xs"};

inline std::string llama_cpp_quant_path(const std::string& file) {
  return std::string(ROCMFORGE_FIXTURES) + "/models/llama3/quants/" + file;
}

// reference.<type>.json: `file` (the quantized model), `decoded` (tensor, rows, cols, values) and
// `prompts` (prompt, ids, positions, logits at those positions).
inline nlohmann::json llama_cpp_quant_reference(const std::string& type) {
  const std::string path = llama_cpp_quant_path("reference." + type + ".json");
  std::ifstream in(path);
  if (!in) ADD_FAILURE() << "missing fixture " << path;
  return in ? nlohmann::json::parse(in) : nlohmann::json{};
}

// How far a runner's logits on a quantized file are from its f32 twin's (the reference's), at the
// reference's positions of each prompt.
struct TwinLogitErrors {
  double max_error = 0, largest = 0;  // max |difference|, max |twin's logit|
  std::size_t positions = 0;
};

inline TwinLogitErrors twin_logit_errors(ModelRunner& runner, const nlohmann::json& ref) {
  const std::size_t vocab = runner.config().vocab_size;
  TwinLogitErrors e;
  for (const auto& prompt : ref.at("prompts")) {
    const auto ids = prompt.at("ids").get<std::vector<std::int32_t>>();
    const auto positions = prompt.at("positions").get<std::vector<std::size_t>>();
    const auto& want = prompt.at("logits");
    EXPECT_EQ(want.size(), positions.size());
    const std::vector<float> logits = prompt_logits(runner, ids);
    for (std::size_t k = 0; k < std::min(positions.size(), want.size()); ++k) {
      EXPECT_LT(positions[k], ids.size());
      EXPECT_EQ(want[k].size(), vocab);
      if (positions[k] >= ids.size() || want[k].size() != vocab) continue;
      for (std::size_t i = 0; i < vocab; ++i) {
        const double got = logits[positions[k] * vocab + i], expected = want[k][i].get<double>();
        EXPECT_TRUE(std::isfinite(got)) << "position " << positions[k] << " logit " << i;
        e.max_error = std::max(e.max_error, std::isfinite(got) ? std::fabs(got - expected) : INFINITY);
        e.largest = std::max(e.largest, std::fabs(expected));
      }
      ++e.positions;
    }
  }
  return e;
}

inline std::string type_test_name(const testing::TestParamInfo<std::string>& info) { return info.param; }

}  // namespace rf::test
