#pragma once
// End to end against Hugging Face, for any device: the fixtures in tests/fixtures/models were made
// by tools/fixtures/make_model_fixtures.py, which records transformers' float64 outputs for small
// random-weight models of each architecture (see tests/fixtures/models/README.md). Each backend's
// test instantiates HfReferenceTest for its device and its tolerances.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/generate.h"
#include "engine/model_runner.h"
#include "engine/perplexity.h"
#include "engine/sequence.h"

namespace rf::hf_reference {

struct Case {
  std::string model;      // folder under tests/fixtures/models
  std::string file;       // "" for the Hugging Face folder itself, else a .gguf in it
  std::string reference;  // reference json in the same folder
};

inline void PrintTo(const Case& c, std::ostream* os) { *os << c.model << "/" << (c.file.empty() ? "(hf folder)" : c.file); }

inline std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string name = info.param.model + "_" + (info.param.file.empty() ? "hf" : info.param.file);
  for (char& c : name) if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

// The fixtures every backend runs: Llama, Mistral (with a sliding window of 4 tokens in
// mistral_window), Qwen2, Qwen3, Gemma 2 and Gemma 3 (windows of 6 and 5, soft caps in gemma2), Phi-3
// (fused qkv and gate_up, LongRoPE), and the mixtures of experts (per-expert safetensors and
// llama.cpp's stacked GGUF tensors).
inline std::vector<Case> every_backend_cases() {
  return {Case{"llama3", "", "reference.json"}, Case{"llama3", "model.gguf", "reference.json"},
          Case{"llama3", "model.q8_0.gguf", "reference.q8_0.json"},
          Case{"llama3", "model.q4_0.gguf", "reference.q4_0.json"},
          Case{"llama3", "model.q4_k_m.gguf", "reference.q4_k_m.json"},
          Case{"mistral", "", "reference.json"}, Case{"mistral", "model.gguf", "reference.json"},
          Case{"qwen2", "", "reference.json"}, Case{"qwen2", "model.gguf", "reference.json"},
          Case{"qwen3", "", "reference.json"}, Case{"qwen3", "model.gguf", "reference.json"},
          Case{"mistral_window", "", "reference.json"},
          Case{"gemma2", "", "reference.json"}, Case{"gemma2", "model.gguf", "reference.json"},
          Case{"gemma3", "", "reference.json"}, Case{"gemma3", "model.gguf", "reference.json"},
          // gemma3's weights as a multimodal checkpoint's language model: gemma3's outputs
          Case{"gemma3_multimodal", "", "../gemma3/reference.json"},
          // LongRoPE's short factors and attention factor
          Case{"phi3_short", "", "reference.json"}, Case{"phi3_short", "model.gguf", "reference.json"},
          // LongRoPE's long factors (the context of 512 exceeds the original 16) with a window of 6
          Case{"phi3", "", "reference.json"}, Case{"phi3", "model.gguf", "reference.json"},
          Case{"mixtral", "", "reference.json"}, Case{"mixtral", "model.gguf", "reference.json"},
          Case{"qwen3_moe", "", "reference.json"}, Case{"qwen3_moe", "model.gguf", "reference.json"}};
}

// Those tensor parallelism splits over 2 and 4 ranks: all but the Q4_K_M file, whose o (256 columns
// in blocks of 256) does not split.
inline std::vector<Case> splittable_cases() {
  std::vector<Case> cases;
  for (const Case& c : every_backend_cases()) {
    if (c.file != "model.q4_k_m.gguf") cases.push_back(c);
  }
  return cases;
}

// The fixtures only the CPU backend runs for now: partial rotary (Phi-4-mini's 12 of 16 dimensions,
// with long factors, tied embeddings and GQA).
inline std::vector<Case> cpu_only_cases() { return {Case{"phi4_mini", "", "reference.json"}}; }

inline auto all_cases() {
  std::vector<Case> cases = every_backend_cases();
  for (const Case& c : cpu_only_cases()) cases.push_back(c);
  return testing::ValuesIn(cases);
}

class HfReferenceTest : public testing::TestWithParam<Case> {
 protected:
  // Loads the case's model on `device`, prefilling in chunks of max_batch_tokens, split over
  // `tensor_parallel` ranks.
  void load(const std::string& device, int max_batch_tokens = 7, int tensor_parallel = 1) {
    const std::string folder = std::string(ROCMFORGE_FIXTURES) + "/models/" + GetParam().model;
    std::ifstream in(folder + "/" + GetParam().reference);
    ASSERT_TRUE(in) << "missing fixture " << folder << "/" << GetParam().reference;
    ref_ = nlohmann::json::parse(in);
    RunnerOptions options;
    options.threads = 2;
    options.ctx_size = 512;
    options.max_batch_tokens = max_batch_tokens;  // 7: several prefill chunks, none aligned to the KV blocks
    options.device = device;
    options.tensor_parallel = tensor_parallel;
    runner_ = std::make_unique<ModelRunner>(GetParam().file.empty() ? folder : folder + "/" + GetParam().file, options);
  }

  std::vector<std::int32_t> ids(const char* key) const { return ref_.at(key).get<std::vector<std::int32_t>>(); }
  // The reference's weight type: f32, f16, bf16, q8_0, q4_0 or q4_k_m.
  std::string dtype() const { return ref_.at("dtype").get<std::string>(); }

  void expect_tokenizes_as_transformers() {
    EXPECT_EQ(runner_->tokenizer().encode(ref_.at("prompt").get<std::string>(), true), ids("prompt_ids"));
    EXPECT_EQ(runner_->tokenizer().encode(ref_.at("ppl_text").get<std::string>(), true), ids("ppl_ids"));
    // A SentencePiece-style GGUF vocabulary tokenizes as llama.cpp does, which differs from
    // transformers around leading spaces and after special tokens: those files record llama.cpp's ids.
    const bool gguf = !GetParam().file.empty();
    for (const auto& item : ref_.value("hf_encodings", nlohmann::json::array())) {
      const auto& expected = gguf && item.contains("llama_cpp_ids") ? item.at("llama_cpp_ids") : item.at("ids");
      EXPECT_EQ(runner_->tokenizer().encode(item.at("text").get<std::string>(), false),
                expected.get<std::vector<std::int32_t>>())
          << "text: " << item.at("text").dump();
    }
  }

  struct LogitErrors {
    double relative_l2, max_abs, max_ref;  // max_ref: the largest |logit| of the reference
  };
  // The whole prompt in one batch (run as the loaded runner runs it), every position's logits against
  // the reference's.
  LogitErrors prompt_logit_errors() {
    const auto prompt = ids("prompt_ids");
    const std::vector<float> logits = prompt_logits(*runner_, prompt);
    const auto& expected = ref_.at("logits");
    EXPECT_EQ(expected.size(), prompt.size());
    const std::size_t vocab = runner_->config().vocab_size;
    double diff_sq = 0, ref_sq = 0, max_abs = 0, max_ref = 0;
    for (std::size_t p = 0; p < std::min(prompt.size(), expected.size()); ++p) {
      EXPECT_EQ(expected[p].size(), vocab);
      for (std::size_t i = 0; i < vocab; ++i) {
        const double want = expected[p][i].get<double>(), got = logits[p * vocab + i];
        EXPECT_TRUE(std::isfinite(got)) << "position " << p << " token " << i;
        diff_sq += (got - want) * (got - want);
        ref_sq += want * want;
        max_abs = std::max(max_abs, std::abs(got - want));
        max_ref = std::max(max_ref, std::abs(want));
      }
    }
    return {std::sqrt(diff_sq / ref_sq), max_abs, max_ref};
  }

  // Relative L2 error and max abs error (relative to the largest logit) within `tolerance`.
  void expect_logits_match(double tolerance) {
    const LogitErrors e = prompt_logit_errors();
    fmt::print("logits vs HF ({} positions, {}): relative L2 error {:.2e}, max abs error {:.2e} ({:.2e} of max |logit|), "
               "tolerance {:.0e}\n",
               ids("prompt_ids").size(), dtype(), e.relative_l2, e.max_abs, e.max_abs / e.max_ref, tolerance);
    EXPECT_LT(e.relative_l2, tolerance);
    EXPECT_LT(e.max_abs / e.max_ref, tolerance);
  }

  // Greedy decoding gives the reference's tokens. With near_tie > 0, the continuation may part from the
  // reference where this backend's own logits for its token and the reference's, after the common
  // prefix, are within near_tie of each other: a near tie that its rounding may flip. The tokens after
  // are not compared (they continue another text).
  void expect_greedy_continuation_identical(double near_tie = 0) {
    GenerateOptions options;
    options.sampling.temperature = 0;
    options.ignore_eos = true;
    const auto expected = ids("greedy_ids");
    options.max_tokens = static_cast<int>(expected.size());
    const auto result = generate(*runner_, ids("prompt_ids"), options);
    const auto parted = std::mismatch(expected.begin(), expected.end(), result.tokens.begin(), result.tokens.end());
    if (near_tie > 0 && parted.first != expected.end() && parted.second != result.tokens.end()) {
      auto context = ids("prompt_ids");
      context.insert(context.end(), expected.begin(), parted.first);
      const std::vector<float> logits = prompt_logits(*runner_, context);
      const float* last = logits.data() + logits.size() - runner_->config().vocab_size;
      const double gap = last[*parted.second] - last[*parted.first];
      fmt::print("greedy continuation parts from the reference at step {} of {} (the reference's smallest margin: "
                 "{:.3e}): logit gap between the two tokens {:.3e}, near-tie bound {:.1e}\n",
                 parted.first - expected.begin(), expected.size(), ref_.at("greedy_min_margin").get<double>(), gap,
                 near_tie);
      EXPECT_LE(std::abs(gap), near_tie);
    } else {
      EXPECT_EQ(result.tokens, expected) << "closest margin in the reference: " << ref_.at("greedy_min_margin");
    }
    EXPECT_EQ(runner_->blocks().free_blocks(), runner_->blocks().total_blocks()) << "generation leaked KV blocks";
  }

  void expect_perplexity_within(double tolerance) {
    const auto result = perplexity(*runner_, ids("ppl_ids"), runner_->ctx_size());
    const double expected = ref_.at("perplexity").get<double>();
    fmt::print("perplexity {:.6f} vs HF {:.6f}: relative error {:.2e}, tolerance {:.0e}\n", result.perplexity, expected,
               std::abs(result.perplexity / expected - 1), tolerance);
    EXPECT_EQ(result.windows, 1);
    EXPECT_NEAR(result.perplexity / expected, 1.0, tolerance);
  }

  nlohmann::json ref_;
  std::unique_ptr<ModelRunner> runner_;
};

}  // namespace rf::hf_reference
