// The GPU decoder's captured decode steps against the same steps launched eagerly, on an f32 fixture
// and the demo model in bf16 and q8_0 (whose GEMMs go through cuBLAS with scratch copies): decode
// batches of three and two sequences (the GEMM path) and of one (the GEMV path), long enough that
// the attention span grows into a second graph. And decoding ahead (queue_sample), which the
// graphs serve, against step-by-step sampling.
#include "model/checkpoint.h"
#include "models/llama/gpu_forward.h"
#include "engine/decode_ahead.h"
#include "backend/gpu/gpu_test.h"

namespace rf::gpu::test {
namespace {

class DecodeGraphs : public GpuTest {};

constexpr int kBlocksPerSequence = 8;  // 128 positions each

std::string name(const std::string& path) { return path.substr(path.find("models/") + 7); }

TEST_F(DecodeGraphs, ReplaysGiveTheEagerLogits) {
  const std::string source = ROCMFORGE_SOURCE_DIR;
  for (const std::string& model : {source + "/tests/fixtures/models/llama3", source + "/models/kjv-llama",
                                   source + "/models/kjv-llama/model.q8_0.gguf"}) {
    const Checkpoint checkpoint = Checkpoint::load(model);
    const ModelConfig& config = checkpoint.config();
    llama::GpuForwardOptions options{.block_size = 16, .kv_blocks = 4 * kBlocksPerSequence, .max_batch_tokens = 16};
    llama::GpuForward graphs(config, checkpoint.weights(), options);
    options.graphs = false;
    llama::GpuForward eager(config, checkpoint.weights(), options);

    // Three sequences decode together from position 0; the third stops at 40, and the first two go on.
    constexpr int kSteps = 70;  // past 64 positions: a second attention span
    std::vector<float> with_graphs, without;
    for (int position = 0; position < kSteps; ++position) {
      const std::vector<int> active = position < 40 ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 1};
      std::vector<std::int32_t> tokens(3);
      for (auto& t : tokens) t = random_int(0, config.vocab_size - 1);
      const Batch batch = decode_batch(active, tokens, position, kBlocksPerSequence);
      graphs.forward(batch, with_graphs);
      eager.forward(batch, without);
      if (position % 10 == 9) expect_close(name(model) + " decode step " + std::to_string(position), with_graphs, without, 1e-6);
    }
    // A single sequence, after the others: the GEMV path.
    for (int position = 0; position < 20; ++position) {
      const Batch batch = decode_batch({3}, {0, 0, 0, random_int(0, config.vocab_size - 1)}, position, kBlocksPerSequence);
      graphs.forward(batch, with_graphs);
      eager.forward(batch, without);
    }
    expect_close(name(model) + " single-sequence decode", with_graphs, without, 1e-6);
    // Shapes: 3 tokens (attention span 64), 2 tokens (spans 64 and 128), 1 token (64).
    EXPECT_GE(graphs.graphs_captured(), 4) << model;
    EXPECT_EQ(eager.graphs_captured(), 0) << model;
  }
}

// The previous_token()s resolve on the device, in the graph's embedding: three sequences (the GEMM
// path) and one (the GEMV path), greedy and at temperature 1 with a seed, past 64 positions.
TEST_F(DecodeGraphs, DecodingAheadGivesTheStepByStepTokens) {
  const std::string source = ROCMFORGE_SOURCE_DIR;
  for (const std::string& model : {source + "/tests/fixtures/models/llama3", source + "/models/kjv-llama/model.q8_0.gguf"}) {
    const Checkpoint checkpoint = Checkpoint::load(model);
    const ModelConfig& config = checkpoint.config();
    llama::GpuForward gpu(config, checkpoint.weights(), {.block_size = 16, .kv_blocks = 6 * kBlocksPerSequence, .max_batch_tokens = 16});
    for (const double temperature : {0.0, 1.0}) {
      SamplingParams params;
      params.temperature = temperature;
      params.seed = 2024;
      for (const std::vector<std::int32_t>& first :
           {std::vector<std::int32_t>{random_int(0, config.vocab_size - 1), random_int(0, config.vocab_size - 1),
                                      random_int(0, config.vocab_size - 1)},
            std::vector<std::int32_t>{random_int(0, config.vocab_size - 1)}}) {
        const rf::test::DecodeTraces traces = rf::test::decode_both_ways(gpu, first, 70, params, kBlocksPerSequence);
        EXPECT_EQ(traces.ahead, traces.step_by_step)
            << name(model) << ", " << first.size() << " sequences, temperature " << temperature;
      }
    }
    EXPECT_GE(gpu.graphs_captured(), 4) << model;
  }
}

}  // namespace
}  // namespace rf::gpu::test
