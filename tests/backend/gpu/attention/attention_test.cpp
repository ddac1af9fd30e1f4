#include <optional>

#include "backend/gpu/attention/attention_setup.h"
#include "backend/gpu/attention/attention.h"
#include "backend/gpu/support/kernels.h"
#include "backend/gpu/gpu_test.h"
#include "util/half.h"
#include "util/error.h"

namespace rf::gpu::test {
namespace {

// The portable kernels compute in fp32 from the f16 cache; the reference uses the same f16 values in
// double. What is left is fp32 rounding in dot products and sums of a few hundred terms (~1e-6).
constexpr double kFp32Tolerance = 1e-5;
// The tensor-core kernel also rounds q (after scaling) and the softmax weights to f16 for its products:
// uniform relative errors within +-2^-11, rms 2.8e-4 each, which perturb scores by a fraction of that and
// outputs by about as much again (~4e-4 of the output's norm). 2e-3 leaves a factor of 5; indexing or
// masking mistakes are off by O(1).
constexpr double kTensorCoreTolerance = 2e-3;

class Attention : public GpuTest {
 protected:
  // Checks launch_attention, then every path by hand: the portable prefill kernel, the decode kernel
  // unsplit and cut into 3 key ranges, with its most heads a block, with 1 and 2, and in wide blocks, and
  // the tensor-core prefill kernel where it runs.
  void check_every_path(const std::string& name, const AttentionProblem& problem) {
    const std::vector<double> ref = problem.reference();
    const bool tensor_cores = tensor_core_attention_available(ctx(), problem.shape.head_dim);
    const AttentionPlan automatic = plan_attention(ctx(), problem.batch(), problem.shape);
    check(name + " auto(" + std::to_string(automatic.decode_splits) + ")", problem, ref, std::nullopt,
          tensor_cores ? kTensorCoreTolerance : kFp32Tolerance);
    for (const int splits : {1, 3}) {
      for (const int heads : {0, 1, 2}) {
        check(name + " portable/" + std::to_string(splits) + " heads/" + std::to_string(heads), problem, ref,
              AttentionPlan{false, splits, false, heads}, kFp32Tolerance);
      }
      check(name + " portable/" + std::to_string(splits) + " wide", problem, ref, AttentionPlan{false, splits, false, 1, true},
            kFp32Tolerance);
    }
    if (tensor_cores) check(name + " mma", problem, ref, AttentionPlan{true, 1}, kTensorCoreTolerance);
    check(name + " batch-invariant", problem, ref, plan_batch_invariant_attention(problem.batch(), problem.shape),
          kFp32Tolerance);
  }

  // One run: launch_attention when `plan` is empty, else launch_attention_planned with it, twice on
  // one workspace (the first launch must leave it fit for the second, as a decode step's layers do).
  void check(const std::string& what, const AttentionProblem& problem, const std::vector<double>& ref,
             std::optional<AttentionPlan> plan, double tolerance) {
    DeviceBuffer<float> out(problem.q.size());
    out.poison();
    if (!plan) {
      launch_attention(problem.q_gpu.data(), problem.cache(), problem.batch(), problem.shape, problem.scale(),
                       out.data(), ctx());
      synchronize();
      expect_close("attention " + what, out.download(), ref, tolerance);
      return;
    }
    DeviceBuffer<std::uint8_t> workspace(attention_workspace_bytes(*plan, problem.batch(), problem.shape));
    workspace.poison();
    clear_attention_workspace(*plan, problem.batch(), problem.shape, workspace.data(), ctx());
    for (const char* launch : {" (first)", " (second)"}) {
      launch_attention_planned(*plan, problem.q_gpu.data(), problem.cache(), problem.batch(), problem.shape,
                               problem.scale(), out.data(), workspace.data(), ctx());
      synchronize();
      expect_close("attention " + what + launch, out.download(), ref, tolerance);
      out.poison();
    }
  }

  AttentionProblem make(HeadShape shape, int block_size, const std::vector<SequenceChunk>& chunks) {
    return AttentionProblem(shape, block_size, chunks, [&](std::size_t n, float lo, float hi) {
      return random_floats(n, lo, hi);
    }, [&](int lo, int hi) { return random_int(lo, hi); });
  }
};

std::string shape_name(HeadShape s) {
  return std::to_string(s.n_heads) + "/" + std::to_string(s.n_kv_heads) + "x" + std::to_string(s.head_dim);
}

// One prompt from position 0: GQA groups 1, 2, 4, 7 and 8, every head dim, chunks crossing tiles. (Heads
// of 256 take the decode kernel for every token.)
TEST_F(Attention, PrefillMatchesReference) {
  const struct {
    HeadShape shape;
    int tokens;
  } cases[] = {{{8, 8, 64}, 150}, {{8, 2, 80}, 97},  {{16, 2, 96}, 130}, {{8, 2, 128}, 200}, {{4, 4, 128}, 70},
               {{14, 2, 64}, 83}, {{16, 2, 128}, 65}, {{4, 2, 16}, 41},   {{4, 1, 32}, 70},  {{8, 4, 256}, 75}};
  for (const auto& c : cases) {
    check_every_path("prefill " + shape_name(c.shape) + " S=" + std::to_string(c.tokens),
                     make(c.shape, 16, {{0, c.tokens}}));
  }
}

// Prefill chunks (one continuing a cached prefix) mixed with decode tokens of other sequences, one of
// them at position 0, in blocks of 7 positions: each token is served by the kernel of its kind.
TEST_F(Attention, MixedBatchMatchesReference) {
  const std::vector<SequenceChunk> chunks = {{40, 77}, {299, 1}, {4, 1}, {0, 33}, {700, 1}, {0, 1}, {130, 2}};
  for (const HeadShape shape :
       {HeadShape{8, 2, 128}, HeadShape{16, 1, 64}, HeadShape{4, 4, 80}, HeadShape{16, 2, 96}, HeadShape{4, 2, 32},
        HeadShape{4, 1, 256}}) {
    check_every_path("mixed " + shape_name(shape), make(shape, 7, chunks));
  }
}

// Decode tokens alone, long contexts: launch_attention splits their keys.
TEST_F(Attention, DecodeBatchMatchesReference) {
  const std::vector<SequenceChunk> chunks = {{1000, 1}, {1337, 1}, {64, 1}, {1500, 1}, {511, 1}};
  for (const HeadShape shape : {HeadShape{32, 8, 128}, HeadShape{8, 1, 80}, HeadShape{16, 8, 256}}) {
    check_every_path("decode " + shape_name(shape), make(shape, 16, chunks));
  }
}

// Sliding windows (Mistral, Gemma) and Gemma 2's soft cap: a prompt from position 0 with windows
// shorter than a key tile, crossing tiles and longer than the prompt; prefill chunks continuing long
// cached prefixes mixed with decode tokens; decode tokens alone at long contexts, whose ranges split
// the window only. Caps of 1 and 3 bend these scores (|q.k| * scale reaches about 3 here); Gemma's 50
// would hardly touch them.
TEST_F(Attention, SlidingWindowAndSoftcapMatchReference) {
  struct Case {
    std::vector<SequenceChunk> chunks;
    int window;
    float softcap;
  };
  const Case cases[] = {{{{0, 200}}, 37, 0.0f},
                        {{{0, 200}}, 64, 1.0f},
                        {{{0, 130}}, 1, 0.0f},
                        {{{0, 90}}, 150, 3.0f},
                        {{{0, 150}}, 0, 1.0f},
                        {{{40, 77}, {299, 1}, {4, 1}, {0, 33}, {700, 1}, {0, 1}, {130, 2}}, 100, 0.0f},
                        {{{40, 77}, {299, 1}, {4, 1}, {0, 33}, {700, 1}, {0, 1}, {130, 2}}, 50, 3.0f},
                        {{{1000, 1}, {1337, 1}, {64, 1}, {1500, 1}, {511, 1}}, 257, 0.0f},
                        {{{1000, 1}, {1337, 1}, {64, 1}, {1500, 1}, {511, 1}}, 1024, 1.0f}};
  for (const HeadShape shape : {HeadShape{8, 2, 128}, HeadShape{4, 1, 32}, HeadShape{16, 2, 96}, HeadShape{8, 4, 256}}) {
    for (const Case& c : cases) {
      AttentionProblem problem = make(shape, 16, c.chunks);
      problem.window = c.window;
      problem.softcap = c.softcap;
      check_every_path("window " + std::to_string(c.window) + " cap " + std::to_string(static_cast<int>(c.softcap)) + " " +
                           shape_name(shape) + " seqs " + std::to_string(c.chunks.size()),
                       problem);
    }
  }
}

// A decode step with RoPE and the KV append fused into the decode kernel gives the same bits as
// launch_rope_kv_append followed by attention: the same output, the same cache. Group sizes 4, 8 and 16
// (two blocks per KV head), both RoPE layouts, unsplit and split (the new key in the last range), in
// blocks of 128 threads and wide ones. The fused launch also writes out's 16-bit copy (bf16 unsplit,
// f16 split) and, for heads of whole blocks of 32, its int8 rounding: out rounded, bit for bit.
TEST_F(Attention, FusedRopeMatchesSeparateLaunches) {
  const std::vector<SequenceChunk> chunks = {{1000, 1}, {64, 1}, {0, 1}, {299, 1}};
  for (const HeadShape shape : {HeadShape{32, 8, 128}, HeadShape{8, 1, 80}, HeadShape{16, 1, 64}, HeadShape{8, 1, 256}}) {
    const AttentionProblem problem = make(shape, 16, chunks);
    const AttentionBatch batch = problem.batch();
    const int n = batch.n_tokens, kv_dim = shape.n_kv_heads * shape.head_dim;
    std::vector<std::int32_t> slots(n);
    for (int t = 0; t < n; ++t) {
      const int pos = problem.positions[t], block = problem.block_tables[problem.seq[t] * batch.max_blocks + pos / problem.block_size];
      slots[t] = block * problem.block_size + pos % problem.block_size;
    }
    const DeviceBuffer<std::int32_t> slots_gpu(slots);
    const DeviceBuffer<float> k(random_floats(n * kv_dim, -2.0f, 2.0f)), v(random_floats(n * kv_dim, -2.0f, 2.0f));
    const DeviceBuffer<float> inv_freq(random_floats(shape.head_dim / 2, 0.0f, 1.0f));
    for (const RopeLayout layout : {RopeLayout::SplitHalves, RopeLayout::Interleaved}) {
      for (const auto& [splits, wide] : {std::pair{1, false}, std::pair{5, false}, std::pair{1, true}, std::pair{5, true}}) {
        const AttentionPlan plan{false, splits, false, splits == 1 && !wide ? 0 : 1, wide};
        const std::string name = "fused rope " + shape_name(shape) + (layout == RopeLayout::Interleaved ? " interleaved/" : " halves/") +
                                 std::to_string(splits) + (wide ? " wide" : "");
        DeviceBuffer<std::uint8_t> workspace(attention_workspace_bytes(plan, batch, shape));
        clear_attention_workspace(plan, batch, shape, workspace.data(), ctx());
        // Separate launches, on a copy of q (rotated in place) and of the cache.
        DeviceBuffer<float> q(problem.q), separate(problem.q.size()), fused(problem.q.size());
        DeviceBuffer<std::uint16_t> keys(problem.keys), values(problem.values);
        DeviceBuffer<std::uint16_t> fused_keys(problem.keys), fused_values(problem.values);
        separate.poison();
        fused.poison();
        launch_rope_kv_append(q.data(), k.data(), v.data(), batch.positions, slots_gpu.data(), n, shape, inv_freq.data(),
                              layout, {keys.data(), values.data()}, ctx());
        launch_attention_planned(plan, q.data(), {keys.data(), values.data()}, batch, shape, problem.scale(),
                                 separate.data(), workspace.data(), ctx());
        const DecodeRope rope{k.data(), v.data(), slots_gpu.data(), inv_freq.data(), layout};
        const DType half_type = splits == 1 ? DType::BF16 : DType::F16;
        DeviceBuffer<std::uint16_t> half(problem.q.size());
        half.poison();
        const bool rounds = shape.head_dim % 32 == 0;
        RoundedBuffer rounded_out(n, static_cast<std::size_t>(shape.n_heads) * shape.head_dim);
        rounded_out.poison();
        launch_attention_planned(plan, problem.q_gpu.data(), {fused_keys.data(), fused_values.data()}, batch, shape,
                                 problem.scale(), fused.data(), workspace.data(), ctx(), rope, {half.data(), half_type},
                                 rounds ? rounded_out.view() : QuantizedActivations{});
        synchronize();
        const auto out = fused.download();
        expect_close(name, out, separate.download(), 0.0);
        std::vector<std::uint16_t> rounded(out.size());
        for (std::size_t i = 0; i < out.size(); ++i) rounded[i] = half_type == DType::BF16 ? f32_to_bf16(out[i]) : f32_to_f16(out[i]);
        EXPECT_EQ(half.download(), rounded) << name << ": out's 16-bit copy";
        if (rounds) expect_same_rounding(name + ": out's int8 copy", rounded_out.download(), round_to_int8(out));
        EXPECT_EQ(fused_keys.download(), keys.download()) << name << ": keys in the cache";
        EXPECT_EQ(fused_values.download(), values.download()) << name << ": values in the cache";
      }
    }
  }
}

// The workspace a forward pass allocates once (most_attention_workspace_bytes) holds what the plan of
// any batch of up to its token count needs, at any context: also past the batch sizes whose blocks fit
// one wave of wide blocks, where narrow blocks take more ranges again.
TEST_F(Attention, WorkspaceHoldsEveryBatchPlan) {
  constexpr int kMaxTokens = 256, kMaxBlocks = 512, kBlockSize = 16;
  for (const HeadShape shape : {HeadShape{32, 8, 128}, HeadShape{8, 1, 80}, HeadShape{4, 2, 32}, HeadShape{8, 4, 256}}) {
    const std::size_t most = most_attention_workspace_bytes(ctx(), kMaxTokens, kMaxBlocks, kBlockSize, shape);
    for (int n = 1; n <= kMaxTokens; ++n) {
      for (const int blocks : {1, 8, kMaxBlocks}) {
        const AttentionBatch batch{nullptr, nullptr, nullptr, n, kMaxBlocks, kBlockSize, blocks * kBlockSize};
        EXPECT_LE(attention_workspace_bytes(plan_attention(ctx(), batch, shape), batch, shape), most)
            << shape_name(shape) << ", " << n << " tokens at " << blocks * kBlockSize << " positions";
      }
    }
  }
}

// Under the batch-invariant plan, every token of a mixed batch (prefill chunks and decode tokens) gets
// the bits it gets as the only token of a batch: the batch around it, and its bound on positions, leave
// its output as it is.
TEST_F(Attention, BatchInvariantPlanGivesEachTokenItsOwnBits) {
  const std::vector<SequenceChunk> chunks = {{40, 77}, {299, 1}, {0, 33}, {700, 1}, {0, 1}};
  for (const HeadShape shape : {HeadShape{32, 8, 128}, HeadShape{16, 2, 96}, HeadShape{4, 2, 32}}) {
    const AttentionProblem problem = make(shape, 7, chunks);
    const AttentionBatch batch = problem.batch();
    const AttentionPlan plan = plan_batch_invariant_attention(batch, shape);
    const std::size_t q_dim = static_cast<std::size_t>(shape.n_heads) * shape.head_dim;
    DeviceBuffer<float> together(problem.q.size()), alone(problem.q.size());
    together.poison();
    alone.poison();
    launch_attention_planned(plan, problem.q_gpu.data(), problem.cache(), batch, shape, problem.scale(), together.data(),
                             nullptr, ctx());
    const DeviceBuffer<std::int32_t> first_sequence(std::vector<std::int32_t>{0});
    for (int t = 0; t < batch.n_tokens; ++t) {
      const AttentionBatch one{batch.positions + t, first_sequence.data(),
                               batch.block_tables + static_cast<std::size_t>(problem.seq[t]) * batch.max_blocks, 1,
                               batch.max_blocks, batch.block_size, problem.positions[t] + 1};
      launch_attention_planned(plan_batch_invariant_attention(one, shape), problem.q_gpu.data() + t * q_dim,
                               problem.cache(), one, shape, problem.scale(), alone.data() + t * q_dim, nullptr, ctx());
    }
    synchronize();
    EXPECT_EQ(bits(together.download()), bits(alone.download())) << shape_name(shape);
  }
}

// The int8 copy needs the decode kernel for every token, and heads of whole blocks of 32.
TEST_F(Attention, RejectsAnInt8CopyItCannotMake) {
  for (const HeadShape shape : {HeadShape{8, 1, 128}, HeadShape{8, 1, 80}}) {
    const AttentionProblem problem = make(shape, 16, {{10, 1}});
    DeviceBuffer<float> out(problem.q.size());
    RoundedBuffer rounded(1, problem.q.size());
    const AttentionPlan plan = shape.head_dim == 80 ? plan_batch_invariant_attention(problem.batch(), shape) : AttentionPlan{false, 1};
    EXPECT_THROW(launch_attention_planned(plan, problem.q_gpu.data(), problem.cache(), problem.batch(), shape,
                                          problem.scale(), out.data(), nullptr, ctx(), {}, {}, rounded.view()),
                 Error)
        << shape_name(shape);
  }
}

TEST_F(Attention, RejectsUnsupportedHeadDim) {
  const AttentionProblem problem = make({4, 4, 64}, 16, {{0, 3}});
  DeviceBuffer<float> out(problem.q.size());
  EXPECT_THROW(launch_attention(problem.q_gpu.data(), problem.cache(), problem.batch(), {4, 4, 72}, problem.scale(),
                                out.data(), ctx()),
               Error);
}

}  // namespace
}  // namespace rf::gpu::test
