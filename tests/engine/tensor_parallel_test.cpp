// Tensor parallelism on the CPU (engine/tensor_parallel.h over models/llama/tensor_split.h): the
// Hugging Face fixtures split over 2 and 4 ranks and held to the float64 references with one rank's
// tolerances (hf_reference_test.cpp), as the split changes only the order of o's and down's sums. At
// 4 ranks every fixture has fewer KV heads than ranks (1 or 2 of them, but phi3's 4): each is replicated.
#include <gtest/gtest.h>

#include <chrono>

#include "backend/cpu/rank_sum.h"
#include "engine/hf_reference.h"
#include "engine/tensor_parallel.h"
#include "models/llama/cpu_forward.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace rf::hf_reference {
namespace {

class TensorParallelTwo : public HfReferenceTest {
 protected:
  void SetUp() override { load("cpu", 7, 2); }
};

class TensorParallelFour : public HfReferenceTest {
 protected:
  void SetUp() override { load("cpu", 7, 4); }
};

TEST_P(TensorParallelTwo, LogitsMatchAtEveryPromptPosition) { expect_logits_match(1e-4); }
TEST_P(TensorParallelTwo, GreedyContinuationIsIdentical) { expect_greedy_continuation_identical(); }
TEST_P(TensorParallelFour, LogitsMatchAtEveryPromptPosition) { expect_logits_match(1e-4); }
TEST_P(TensorParallelFour, GreedyContinuationIsIdentical) { expect_greedy_continuation_identical(); }

INSTANTIATE_TEST_SUITE_P(Fixtures, TensorParallelTwo, testing::ValuesIn(splittable_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Fixtures, TensorParallelFour, testing::ValuesIn(splittable_cases()), case_name);

RunnerOptions cpu_ranks(int ranks) {
  RunnerOptions options;
  options.threads = 2;
  options.ctx_size = 64;
  options.device = "cpu";
  options.tensor_parallel = ranks;
  return options;
}

std::string fixture(const std::string& path) { return std::string(ROCMFORGE_FIXTURES) + "/models/" + path; }

void expect_refused(const std::string& model, int ranks, const std::string& says) {
  try {
    ModelRunner runner(fixture(model), cpu_ranks(ranks));
    ADD_FAILURE() << model << " split over " << ranks << " ranks";
  } catch (const Error& e) {
    fmt::print("{} over {} ranks: {}\n", model, ranks, e.what());
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

// Quantized blocks are never cut: o's 256 columns (Q4_K, blocks of 256) would be 128 a rank.
TEST(TensorParallelRefuses, ColumnsThatWouldCutQuantBlocks) {
  expect_refused("llama3/model.q4_k_m.gguf", 2, "layer 0's attention output (o) (q4_k, blocks of 256 values)");
}

TEST(TensorParallelRefuses, HeadsThatDoNotDivide) {
  expect_refused("llama3", 3, "attention heads (4) do not divide by 3");
  expect_refused("phi3", 8, "attention heads (4) do not divide by 8");
}

// --devices picks GPUs: on the CPU it is refused, with ranks or alone, rather than ignored.
TEST(TensorParallelRefuses, DevicesOnTheCpu) {
  for (const std::vector<int>& devices : {std::vector<int>{0, 1}, std::vector<int>{1}}) {
    RunnerOptions options = cpu_ranks(devices.size() == 1 ? 1 : 2);
    options.devices = devices;
    EXPECT_THROW(ModelRunner(fixture("llama3"), options), Error) << devices.size() << " devices";
  }
}

// A rank that fails mid-step (its third all-reduce throws) must not leave the other waiting for it in
// the all-reduce: the step fails at once with that rank's error, and every later call fails too.
TEST(TensorParallelFailure, ARankFailingMidStepReleasesTheOther) {
  const Checkpoint checkpoint = Checkpoint::load(fixture("llama3"));
  auto sum = std::make_shared<cpu::RankSum>(2);
  ThreadPool pools[2] = {ThreadPool(1), ThreadPool(1)};
  TensorParallelForward::Backend backend;
  backend.make = [&](int rank, const ModelConfig& config, const LlamaWeights& weights) {
    auto pass = std::make_unique<llama::CpuForward>(config, weights, pools[rank], 16, 4);
    pass->set_rank_sum([sum, rank, calls = 0](std::span<float> values) mutable {
      if (rank == 1 && ++calls == 3) throw Error("rank 1 lost its device");
      sum->sum(rank, values);
    });
    return pass;
  };
  backend.abort = [sum] { sum->abort(); };
  TensorParallelForward forward(checkpoint.config(), checkpoint.weights(), 2, std::move(backend));
  const std::vector<std::int32_t> tokens = {1, 2, 3, 4};
  Batch batch;
  batch.block_tables.push_back({0});
  batch.add_sequence(0, tokens.data(), tokens.size(), 0, true);
  std::vector<float> logits;
  const auto start = std::chrono::steady_clock::now();
  try {
    forward.forward(batch, logits);
    ADD_FAILURE() << "the step went through";
  } catch (const Error& e) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print("the step failed after {:.3f} s: {}\n", seconds, e.what());
    EXPECT_STREQ(e.what(), "rank 1 lost its device");
  }
  EXPECT_THROW(forward.forward(batch, logits), Error);
}

}  // namespace
}  // namespace rf::hf_reference
