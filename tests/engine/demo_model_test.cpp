// The shipped demo model (models/kjv-llama) against the numbers its training script recorded
// with transformers (models/kjv-llama/reference.json, made by tools/train_demo_model.py).
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/generate.h"
#include "engine/model_runner.h"
#include "engine/perplexity.h"

namespace rf {
namespace {

const std::string kDemo = std::string(ROCMFORGE_SOURCE_DIR) + "/models/kjv-llama";

nlohmann::json reference() {
  std::ifstream in(kDemo + "/reference.json");
  return nlohmann::json::parse(in);
}

class DemoModel : public testing::TestWithParam<std::string> {
 protected:
  ModelRunner runner_{kDemo + GetParam(), RunnerOptions{.threads = 2, .ctx_size = 512, .max_batch_tokens = 512}};
};

TEST_P(DemoModel, HeldOutPerplexityAgreesWithTheTrainingScript) {
  const auto ref = reference();
  std::ifstream in(kDemo + "/heldout.txt", std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const auto ids = runner_.tokenizer().encode(text.str(), true);
  EXPECT_EQ(ids.size(), ref.at("n_tokens").get<std::size_t>());
  const auto result = perplexity(runner_, ids, ref.at("n_ctx").get<int>());
  EXPECT_EQ(result.scored_tokens, ref.at("n_scored").get<std::size_t>());
  // The Q8_0 file's reference was computed from its dequantized weights.
  const double expected = ref.at(GetParam().empty() ? "perplexity" : "perplexity_q8_0_gguf").get<double>();
  const double rel = std::abs(result.perplexity / expected - 1);
  fmt::print("held-out perplexity {:.6f} vs transformers {:.6f}: relative difference {:.2e} (must be < 1e-2)\n",
             result.perplexity, expected, rel);
  EXPECT_LT(rel, 1e-2);
}

// transformers' greedy references were made from the bf16 weights, so only the HF folder is compared.
TEST(DemoModelHf, GreedyContinuationsMatchTransformers) {
  ModelRunner runner{kDemo, RunnerOptions{.threads = 2, .ctx_size = 512, .max_batch_tokens = 512}};
  const auto ref = reference();  // a range-for over reference().at(...) would outlive the temporary
  for (const auto& item : ref.at("greedy")) {
    const auto prompt_ids = item.at("prompt_ids").get<std::vector<std::int32_t>>();
    EXPECT_EQ(runner.tokenizer().encode(item.at("prompt").get<std::string>(), true), prompt_ids);
    GenerateOptions options;
    options.sampling.temperature = 0;
    options.ignore_eos = true;
    const auto expected = item.at("greedy_ids").get<std::vector<std::int32_t>>();
    options.max_tokens = static_cast<int>(expected.size());
    EXPECT_EQ(generate(runner, prompt_ids, options).tokens, expected) << item.at("prompt");
  }
}

INSTANTIATE_TEST_SUITE_P(Files, DemoModel, testing::Values("", "/model.q8_0.gguf"),
                         [](const auto& info) { return info.param.empty() ? std::string("hf") : std::string("q8_0_gguf"); });

}  // namespace
}  // namespace rf
