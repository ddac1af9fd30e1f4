#pragma once
// The fixtures made with llama.cpp's own tools (tests/fixtures/models/llama3/quants, made by
// tools/fixtures/make_quant_fixtures.py): the llama3 fixture quantized by llama-quantize into each of
// these types, and per type a reference of llama.cpp's making (gguf-py's decoded values, the logits of
// the f32 twin that gguf-py's values make).
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

inline std::string type_test_name(const testing::TestParamInfo<std::string>& info) { return info.param; }

}  // namespace rf::test
