// A request's sampling fields over the model's defaults, as `generate` takes them: what the request
// sets, else generation_config.json's, else llama.cpp's (temperature 0.8, top-k 40, top-p 0.95, min-p
// 0.05).
#include <gtest/gtest.h>

#include "server/generation_fields.h"

namespace rf::server {
namespace {

using nlohmann::json;

TEST(GenerationFields, UnsetFieldsTakeWhatGenerateTakes) {
  const SamplingParams s = generation_fields(json::object(), GenerationDefaults{}, std::nullopt).sampling;
  EXPECT_DOUBLE_EQ(s.temperature, 0.8);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_DOUBLE_EQ(s.top_p, 0.95);
  EXPECT_DOUBLE_EQ(s.min_p, 0.05);
  EXPECT_DOUBLE_EQ(s.repetition_penalty, 1.0);
}

TEST(GenerationFields, TheModelsDefaultsComeBeforeLlamaCpps) {
  GenerationDefaults model;
  model.temperature = 0.6;
  model.top_p = 0.9;
  model.top_k = 20;
  const SamplingParams s = generation_fields(json::object(), model, std::nullopt).sampling;
  EXPECT_DOUBLE_EQ(s.temperature, 0.6);
  EXPECT_EQ(s.top_k, 20);
  EXPECT_DOUBLE_EQ(s.top_p, 0.9);
  EXPECT_DOUBLE_EQ(s.min_p, 0.05);
  model.do_sample = false;
  EXPECT_DOUBLE_EQ(generation_fields(json::object(), model, std::nullopt).sampling.temperature, 0.0);
  // What the request sets wins.
  const json body = {{"temperature", 1.0}, {"top_k", -1}, {"top_p", 1.0}, {"min_p", 0.0}};
  const SamplingParams given = generation_fields(body, model, std::nullopt).sampling;
  EXPECT_DOUBLE_EQ(given.temperature, 1.0);
  EXPECT_EQ(given.top_k, -1);
  EXPECT_DOUBLE_EQ(given.top_p, 1.0);
  EXPECT_DOUBLE_EQ(given.min_p, 0.0);
}

}  // namespace
}  // namespace rf::server
