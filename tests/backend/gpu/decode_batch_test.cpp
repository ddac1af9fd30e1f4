// A decode batch (each sequence brings one token: its projections through the GEMM, and Llama's q, k
// and v from one GEMM of the stacked matrix) against each sequence's token decoded alone (the GEMV
// path), on f32 fixtures, where both paths multiply in fp32: a token reading another's row, or a
// wrong stride, is wrong by the logits' own size, where the two orders of the sums differ by 1e-5 to
// 5e-5 of it (H100). Qwen3's q/k norm keeps its q, k and v apart: that path is checked too.
#include "backend/gpu/llama_forward_gpu.h"
#include "gpu_test.h"

namespace rf::gpu::test {
namespace {

class DecodeBatches : public GpuTest {};

constexpr int kSequences = 3;
constexpr int kBlocksPerSequence = 4;  // 64 positions each

TEST_F(DecodeBatches, EachSequenceGetsWhatItGetsAlone) {
  const std::string source = ROCMFORGE_SOURCE_DIR;
  for (const std::string name : {"llama3", "qwen3"}) {
    const Checkpoint checkpoint = Checkpoint::load(source + "/tests/fixtures/models/" + name);
    const ModelConfig& config = checkpoint.config();
    const GpuForwardOptions options{.block_size = 16, .kv_blocks = kSequences * kBlocksPerSequence, .max_batch_tokens = 16};
    LlamaForwardGpu together(config, checkpoint.weights(), options), alone(config, checkpoint.weights(), options);
    std::vector<float> batched, single, all_batched, all_single;
    for (int position = 0; position < 40; ++position) {
      std::vector<std::int32_t> tokens(kSequences);
      for (auto& t : tokens) t = random_int(0, config.vocab_size - 1);
      together.forward(decode_batch({0, 1, 2}, tokens, position, kBlocksPerSequence), batched);
      all_batched.insert(all_batched.end(), batched.begin(), batched.end());
      for (int s = 0; s < kSequences; ++s) {
        alone.forward(decode_batch({s}, tokens, position, kBlocksPerSequence), single);
        all_single.insert(all_single.end(), single.begin(), single.end());
      }
    }
    expect_close(name + " decode batch of 3 vs each alone", all_batched, all_single, 1e-3);
  }
}

}  // namespace
}  // namespace rf::gpu::test
