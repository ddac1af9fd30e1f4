#pragma once
// Embeddings end to end against Hugging Face, for any device: tests/fixtures/models/qwen3_embedding
// (made by tools/fixtures/make_embedding_fixture.py) is a Qwen3-Embedding-style checkpoint with
// transformers' final hidden states of a few texts pooled by the last token, the mean and the first
// token, normalised (and the last token's not). Each backend's test runs it with its tolerance.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/embedding.h"
#include "engine/model_runner.h"
#include "engine/scheduler.h"

namespace rf::embedding_reference {

inline const std::string kFolder = std::string(ROCMFORGE_FIXTURES) + "/models/qwen3_embedding";

class EmbeddingReferenceTest : public testing::Test {
 protected:
  // The fixture on `device`, the scheduler running up to `step_tokens` tokens a step (few: the longer
  // texts then take several steps, as a long text does at any budget).
  void load(const std::string& device, int step_tokens = 8) {
    std::ifstream in(kFolder + "/reference.json");
    ASSERT_TRUE(in) << "missing fixture " << kFolder << "/reference.json";
    ref_ = nlohmann::json::parse(in);
    RunnerOptions options;
    options.threads = 2;
    options.ctx_size = 512;
    options.max_batch_tokens = step_tokens;
    options.device = device;
    runner_ = std::make_unique<ModelRunner>(kFolder, options);
    scheduler_ = std::make_unique<Scheduler>(*runner_, SchedulerOptions{.max_running = 4, .step_tokens = step_tokens});
  }

  // Every case's vector for every pooling, submitted together (so batched), against the reference's:
  // the largest error of any component (the vectors are unit length, but for the unnormalised one,
  // whose error is taken relative to its largest component).
  void expect_matches_reference(double tolerance) {
    struct Pending {
      std::string key;
      std::future<std::vector<float>> vector;
      const nlohmann::json* expected;
    };
    std::vector<Pending> pending;
    for (const auto& c : ref_.at("cases")) {
      const auto ids = c.at("ids").get<std::vector<std::int32_t>>();
      EXPECT_EQ(runner_->tokenizer().encode(c.at("text").get<std::string>(), true), ids) << c.at("text");
      for (const auto& [key, pooling, normalize] : {std::tuple{"last", Pooling::Last, true}, {"mean", Pooling::Mean, true},
                                                    {"cls", Pooling::First, true}, {"last_unnormalised", Pooling::Last, false}}) {
        pending.push_back({key, scheduler_->embed(ids, pooling, normalize), &c.at(key)});
      }
    }
    for (auto& p : pending) {
      const std::vector<float> got = p.vector.get();
      const auto want = p.expected->get<std::vector<double>>();
      ASSERT_EQ(got.size(), want.size());
      double max_error = 0, max_value = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        max_error = std::max(max_error, std::abs(got[i] - want[i]));
        max_value = std::max(max_value, std::abs(want[i]));
      }
      const double error = p.key == "last_unnormalised" ? max_error / max_value : max_error;
      worst_ = std::max(worst_, error);
      EXPECT_LT(error, tolerance) << p.key;
    }
    fmt::print("embeddings vs transformers ({} vectors, 4 poolings): largest component error {:.2e}, tolerance {:.0e}\n",
               pending.size(), worst_, tolerance);
  }

  nlohmann::json ref_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Scheduler> scheduler_;
  double worst_ = 0;
};

}  // namespace rf::embedding_reference
