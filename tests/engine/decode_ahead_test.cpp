// Decoding ahead on the CPU (ForwardPass's own queue_sample), on the demo model: the tokens of
// step-by-step sampling, clear errors for what it cannot take, and generate() leaving no step queued
// when it stops early.
#include <gtest/gtest.h>

#include "engine/decode_ahead.h"
#include "engine/generate.h"
#include "engine/model_runner.h"
#include "util/error.h"

namespace rf::test {
namespace {

const std::string kDemo = std::string(ROCMFORGE_SOURCE_DIR) + "/models/kjv-llama";
constexpr int kBlocksPerSequence = 2;

class DecodeAhead : public testing::Test {
 protected:
  ModelRunner runner_{kDemo, RunnerOptions{.threads = 2, .ctx_size = 12 * kBlocksPerSequence * ModelRunner::kBlockSize}};
};

SamplingParams seeded(double temperature) {
  SamplingParams params;
  params.temperature = temperature;
  params.seed = 77;
  return params;
}

TEST_F(DecodeAhead, GivesTheTokensOfStepByStepSampling) {
  for (const double temperature : {0.0, 1.0}) {
    const DecodeTraces traces =
        decode_both_ways(runner_.backend(), {5, 900, 17}, 20, seeded(temperature), kBlocksPerSequence);
    EXPECT_EQ(traces.ahead, traces.step_by_step) << "temperature " << temperature;
    EXPECT_EQ(traces.step_by_step.size(), 20u);
  }
}

Batch one_token(std::int32_t token, int position) {
  Batch batch;
  batch.block_tables.push_back({0, 1});
  batch.add_sequence(0, &token, 1, position, true);
  return batch;
}

TEST_F(DecodeAhead, RefusesWhatItCannotTake) {
  ForwardPass& backend = runner_.backend();
  EXPECT_THROW(backend.take_tokens(), Error);  // nothing queued

  Sampler greedy(seeded(0.0));
  const SampleRow row{greedy, {}};
  backend.queue_sample(one_token(5, 0), std::span(&row, 1));
  // Row 1 of a step that sampled one row.
  EXPECT_THROW(backend.queue_sample(one_token(previous_token(1), 1), std::span(&row, 1)), Error);
  SamplingParams penalised = seeded(0.0);
  penalised.repetition_penalty = 1.1;
  Sampler with_penalty(penalised);
  const SampleRow penalty_row{with_penalty, {}};
  EXPECT_THROW(backend.queue_sample(one_token(previous_token(0), 1), std::span(&penalty_row, 1)), Error);

  backend.queue_sample(one_token(previous_token(0), 1), std::span(&row, 1));
  EXPECT_THROW(backend.queue_sample(one_token(previous_token(0), 2), std::span(&row, 1)), Error)
      << "a third step in flight";
  EXPECT_EQ(backend.take_tokens().size(), 1u);
  EXPECT_EQ(backend.take_tokens().size(), 1u);
}

// A stop string ends generation with the step after it already queued; the next generation must find
// the runner as new, and give what it gives alone.
TEST_F(DecodeAhead, GenerationThatStopsLeavesNoStepBehind) {
  const auto prompt = runner_.tokenizer().encode("In the beginning", true);
  GenerateOptions options;
  options.sampling.temperature = 0;
  options.ignore_eos = true;
  options.max_tokens = 24;
  const GenerateResult whole = generate(runner_, prompt, options);
  ASSERT_GT(whole.text.size(), 12u);
  GenerateOptions stopping = options;
  stopping.stop = {whole.text.substr(8, 4)};
  const GenerateResult stopped = generate(runner_, prompt, stopping);
  EXPECT_EQ(stopped.finish, FinishReason::Stop);
  EXPECT_LT(stopped.tokens.size(), whole.tokens.size());
  EXPECT_EQ(generate(runner_, prompt, options).tokens, whole.tokens);
}

}  // namespace
}  // namespace rf::test
