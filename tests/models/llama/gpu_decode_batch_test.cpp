// A decode batch (each sequence brings one token: its projections through the GEMM, and Llama's q, k
// and v from one GEMM of the stacked matrix) against each sequence's token decoded alone (the GEMV
// path). On f32 fixtures both paths multiply in fp32: a token reading another's row, or a wrong
// stride, is wrong by the logits' own size, where the two orders of the sums differ by 1e-5 to 5e-5
// of it (H100). Qwen3's q/k norm keeps its q, k and v apart: that path is checked too, and so is
// Qwen3-MoE's expert GEMV, whose blocks take each expert's tokens from the routing. With bf16
// weights the batch goes through the tensor-core GEMM of decode batches on 16-bit x, the single token
// through the GEMV on fp32 x.
#include "backend/cpu/quant.h"
#include "model/checkpoint.h"
#include "models/llama/gpu_forward.h"
#include "backend/gpu/gpu_test.h"

namespace rf::gpu::test {
namespace {

class DecodeBatches : public GpuTest {
 protected:
  // Logits of 40 decode steps of kSequences sequences, decoded together and each alone.
  void expect_batch_matches_alone(const std::string& what, const ModelConfig& config, const LlamaWeights& weights,
                                  double tolerance);
};

constexpr int kSequences = 3;
constexpr int kBlocksPerSequence = 4;  // 64 positions each

void DecodeBatches::expect_batch_matches_alone(const std::string& what, const ModelConfig& config,
                                               const LlamaWeights& weights, double tolerance) {
  const llama::GpuForwardOptions options{.block_size = 16, .kv_blocks = kSequences * kBlocksPerSequence, .max_batch_tokens = 16};
  llama::GpuForward together(config, weights, options), alone(config, weights, options);
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
  expect_close(what + " decode batch of 3 vs each alone", all_batched, all_single, tolerance);
}

Checkpoint load_fixture(const std::string& name) {
  return Checkpoint::load(std::string(ROCMFORGE_SOURCE_DIR) + "/tests/fixtures/models/" + name);
}

TEST_F(DecodeBatches, EachSequenceGetsWhatItGetsAlone) {
  for (const std::string name : {"llama3", "qwen3", "qwen3_moe"}) {
    const Checkpoint checkpoint = load_fixture(name);
    expect_batch_matches_alone(name, checkpoint.config(), checkpoint.weights(), 1e-3);
  }
}

// An f32 matrix's rows rounded to bf16, in `storage`.
WeightMatrix rounded_to_bf16(const WeightMatrix& w, std::vector<std::vector<std::uint8_t>>& storage) {
  auto& bytes = storage.emplace_back(w.rows * w.cols * sizeof(std::uint16_t));
  for (std::size_t r = 0; r < w.rows; ++r) {
    cpu::quantize_row(DType::BF16, static_cast<const float*>(w.data) + r * w.cols, &bytes[r * w.cols * 2], w.cols);
  }
  return {DType::BF16, w.rows, w.cols, bytes.data()};
}

// The llama3 fixture's projections and output head in bf16 (its widths are multiples of 256, so that
// the batch takes the tensor-core kernel where the build has it). The batch's x is rounded to bf16
// (2^-9 relative) where the single token's is not: 7.0e-3 of the logits (H100), where a token reading
// another's row is off by their own size.
TEST_F(DecodeBatches, Bf16SequencesGetWhatTheyGetAlone) {
  const Checkpoint checkpoint = load_fixture("llama3");
  ASSERT_EQ(checkpoint.weights().output.dtype, DType::F32);
  std::vector<std::vector<std::uint8_t>> storage;
  LlamaWeights weights = checkpoint.weights();
  for (LayerWeights& layer : weights.layers) {
    for (WeightMatrix* w : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w_gate, &layer.w_up, &layer.w_down}) {
      *w = rounded_to_bf16(*w, storage);
    }
  }
  weights.output = rounded_to_bf16(weights.output, storage);
  expect_batch_matches_alone("llama3 bf16", checkpoint.config(), weights, 2e-2);
}

}  // namespace
}  // namespace rf::gpu::test
