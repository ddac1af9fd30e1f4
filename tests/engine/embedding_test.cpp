// Embeddings on the CPU: the checkpoint's pooling read from its files, and vectors that match
// transformers' (tests/engine/embedding_reference.h), whatever else runs beside them.
#include <gtest/gtest.h>

#include "engine/embedding_reference.h"
#include "util/error.h"

namespace rf::embedding_reference {
namespace {

TEST(EmbeddingStyle, ReadFromTheSentenceTransformersFiles) {
  const ModelRunner embedding(kFolder, RunnerOptions{.threads = 1, .ctx_size = 64});
  const EmbeddingStyle style = embedding_style(embedding.checkpoint());
  EXPECT_EQ(to_string(style.pooling), std::string("last"));
  EXPECT_TRUE(style.normalize);
  EXPECT_FALSE(style.truncatable);
  // A checkpoint that names none: the last token, normalised, as vLLM pools decoder models.
  const ModelRunner plain(std::string(ROCMFORGE_FIXTURES) + "/models/llama3/model.gguf", RunnerOptions{.threads = 1, .ctx_size = 64});
  EXPECT_EQ(to_string(embedding_style(plain.checkpoint()).pooling), std::string("last"));
}

TEST(EmbeddingPooler, PoolsTheRowsItWants) {
  EmbeddingPooler mean(Pooling::Mean, 2, 3), first(Pooling::First, 2, 3), last(Pooling::Last, 2, 3);
  const float rows[3][2] = {{1, 2}, {3, 4}, {5, 9}};
  for (std::size_t t = 0; t < 3; ++t) {
    for (auto* pooler : {&mean, &first, &last}) {
      if (pooler->wants(t)) pooler->add(rows[t]);
    }
  }
  EXPECT_EQ(mean.result(false), (std::vector<float>{3, 5}));
  EXPECT_EQ(first.result(false), (std::vector<float>{1, 2}));
  EXPECT_EQ(last.result(false), (std::vector<float>{5, 9}));
  const auto unit = last.result(true);
  EXPECT_NEAR(unit[0] * unit[0] + unit[1] * unit[1], 1.0, 1e-6);
}

class EmbeddingCpu : public EmbeddingReferenceTest {};

// f32 weights and activations against transformers' f32 run pooled in f64: 1e-5 leaves room for the
// order of the sums (the largest seen is printed); a wrong norm, pooling row or position is O(0.1).
TEST_F(EmbeddingCpu, MatchesTransformersInChunks) {
  load("cpu", 8);
  expect_matches_reference(1e-5);
}

TEST_F(EmbeddingCpu, MatchesTransformersInOneStepAndBesideAGeneration) {
  load("cpu", 512);
  GenerationRequest request;
  request.prompt = {1, 2, 3, 4, 5};
  request.options.max_tokens = 64;
  request.options.ignore_eos = true;
  const auto generation = scheduler_->submit(request);
  expect_matches_reference(1e-5);
  generation->cancel();
}

TEST_F(EmbeddingCpu, RefusesWhatCanNeverRun) {
  load("cpu");
  EXPECT_THROW(scheduler_->embed({}, Pooling::Last, true), Error);
  EXPECT_THROW(scheduler_->embed({1, 99999}, Pooling::Last, true), Error);
  EXPECT_THROW(scheduler_->embed(std::vector<std::int32_t>(513, 1), Pooling::Last, true), Error);
}

}  // namespace
}  // namespace rf::embedding_reference
