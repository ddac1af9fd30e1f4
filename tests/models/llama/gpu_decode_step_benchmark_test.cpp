// What one decode step of the Llama 3.1 8B shape spends per kernel: each launch of a layer's step
// (bf16, Q8_0, Q4_0 and Q4_K weights, one token, 128 cached positions) replayed 32 times in a captured
// graph, as the decoder replays its layers, with weight copies that together exceed L2. Q8_0 and
// Q4_0 layers round the GEMVs' inputs to int8 as the decoder does: in the norms, in the attention, and
// in a pass of its own before down; bf16 layers fold the norms into the GEMVs after them. The sum over a layer,
// times 32, against rocmforge bench's tg figure, says how much of a step is kernels and how much is
// the gaps between them. A bf16 step of 32 sequences (GEMMs through cuBLAS) is broken down the same
// way, with the whole layer's launches in one graph beside the sum of its parts, and the alternatives
// that tune it. Disabled by default (a measurement); tools/gpu_check.sh runs it.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

#include "backend/gpu/attention/attention_setup.h"
#include "backend/gpu/attention/attention.h"
#include "backend/gpu/runtime/graph.h"
#include "backend/gpu/quant/activation_copies.h"
#include "backend/gpu/norm/norm.h"
#include "backend/gpu/attention/kv_cache.h"
#include "backend/gpu/elementwise/elementwise.h"
#include "backend/gpu/gemm/gemv.h"
#include "backend/gpu/gemm/gemm.h"
#include "backend/gpu/sampling/sampling.h"
#include "backend/gpu/gpu_test.h"
#include "backend/gpu/runtime/event_timer.h"

namespace rf::gpu::test {
namespace {

constexpr int kLayers = 32;
constexpr int kHidden = 4096, kFfn = 14336, kPositions = 128;
constexpr HeadShape kHeads{32, 8, 128};
constexpr std::size_t kWorkingSet = std::size_t{1} << 29;

// Copies of a random matrix, together past any L2; the l-th layer's.
class Matrices {
 public:
  Matrices(DType type, std::size_t rows, std::size_t cols, const std::vector<std::uint8_t>& matrix)
      : type_(type), rows_(rows), cols_(cols) {
    for (std::size_t bytes = 0; bytes < kWorkingSet || copies_.size() < 2; bytes += matrix.size()) copies_.emplace_back(matrix);
  }
  WeightMatrix operator[](int l) const { return {type_, rows_, cols_, copies_[l % copies_.size()].data()}; }
  double bytes() const { return static_cast<double>(copies_[0].bytes()); }

 private:
  DType type_;
  std::size_t rows_, cols_;
  std::vector<DeviceBuffer<std::uint8_t>> copies_;
};

class DecodeStepBenchmark : public GpuTest {
 protected:
  Matrices matrices(DType type, std::size_t rows, std::size_t cols) {
    return Matrices(type, rows, cols, tiled_matrix(type, rows, cols));
  }
  void layer(DType type);
  void batch_layer();
  void head_and_sampling();

  // Median microseconds per launch of launch(layer) over kLayers launches replayed as one graph.
  float time_in_graph(const std::function<void(int layer)>& launch) {
    const CapturedGraph graph(ctx().stream(), [&] {
      for (int l = 0; l < kLayers; ++l) launch(l);
    });
    graph.launch(ctx().stream());
    std::vector<float> ms;
    for (int i = 0; i < 10; ++i) {
      timer_.start(ctx());
      graph.launch(ctx().stream());
      ms.push_back(timer_.stop_ms(ctx()));
    }
    return median(ms) * 1e3f / kLayers;
  }

  // Median microseconds of the decode attention over `problem` (q as `rope` lays it out), its keys cut
  // into `splits` ranges, its output rounded to int8 where `rounded` has codes.
  float time_attention(const AttentionProblem& problem, int splits, const DecodeRope& rope, const float* q, float* out,
                       QuantizedActivations rounded = {}) {
    AttentionPlan plan = plan_attention(ctx(), problem.batch(), kHeads);
    plan.decode_splits = splits;
    DeviceBuffer<std::uint8_t> workspace(std::max<std::size_t>(1, attention_workspace_bytes(plan, problem.batch(), kHeads)));
    clear_attention_workspace(plan, problem.batch(), kHeads, workspace.data(), ctx());
    return time_in_graph([&](int) {
      launch_attention_planned(plan, q, problem.cache(), problem.batch(), kHeads, problem.scale(), out, workspace.data(),
                               ctx(), rope, {}, rounded);
    });
  }

  // One row of the table; `counted` rows add up to the layer's time, the others are alternatives.
  void report(const std::string& what, float us, double bytes, bool counted = true) {
    if (counted) total_us_ += us;
    std::printf("[  bench   ] decode step %-40s %7.1f us", what.c_str(), us);
    if (bytes > 0) std::printf("  %6.0f GB/s", bytes / us / 1e3);
    std::printf("\n");
  }

  EventTimer timer_;
  float total_us_ = 0;
};

void DecodeStepBenchmark::layer(DType type) {
  total_us_ = 0;
  std::printf("[  bench   ] decode step, %s weights\n", std::string(dtype_name(type)).c_str());
  DeviceBuffer<float> x(random_floats(kFfn)), residual(random_floats(kHidden)), norm(random_floats(kHidden));
  DeviceBuffer<float> out(kFfn), q(kHeads.n_heads * kHeads.head_dim), k(kHidden), v(kHidden);
  RoundedBuffer rounded(1, kFfn);
  const bool integer = gemv_reads_rounded(type);
  const GemvInput input = integer ? GemvInput{x.data(), rounded.view()} : GemvInput{x.data()};
  // As the decoder runs one token: a bf16 layer's norms fold into the GEMVs after them, and o and down
  // add into x (GpuForward::folds_norms).
  const bool fold = !is_quantized(type);
  const float eps = 1e-5f;
  const GemvInput normed_input = fold ? GemvInput{x.data(), RmsNormOf{norm.data(), eps}} : input;
  launch_quantize_activations(x.data(), 1, kFfn, rounded.view(), ctx());
  auto norm_step = [&] {
    if (fold) return;
    report(integer ? "rms_norm + residual, rounded to int8" : "rms_norm + residual", time_in_graph([&](int) {
             launch_rms_norm(x.data(), residual.data(), norm.data(), 1, kHidden, eps, out.data(), ctx(),
                             integer ? rounded.view() : QuantizedActivations{});
           }), 0);
  };
  // SwiGLU's output rounded for down in a pass of its own (the copy the GEMV then reads stays the same).
  auto rounding_step = [&] {
    if (!integer) return;
    DeviceBuffer<float> copy(random_floats(kFfn));
    RoundedBuffer scratch(1, kFfn);
    report("round " + std::to_string(kFfn) + " values to int8", time_in_graph([&](int) {
             launch_quantize_activations(copy.data(), 1, kFfn, scratch.view(), ctx());
           }), 0);
  };
  double layer_bytes = 0;
  norm_step();
  {
    const int kv_dim = kHeads.n_kv_heads * kHeads.head_dim;
    const Matrices wq = matrices(type, kHidden, kHidden), wk = matrices(type, kv_dim, kHidden), wv = matrices(type, kv_dim, kHidden);
    report("gemv q,k,v 6144x4096", time_in_graph([&](int l) {
             const WeightProduct qkv[] = {{wq[l], q.data()}, {wk[l], k.data()}, {wv[l], v.data()}};
             launch_gemv_group(qkv, normed_input, 1, ctx());
           }), wq.bytes() + wk.bytes() + wv.bytes());
    layer_bytes += wq.bytes() + wk.bytes() + wv.bytes();
  }
  {
    const AttentionProblem problem(kHeads, 16, {{kPositions - 1, 1}},
                                   [&](std::size_t n, float lo, float hi) { return random_floats(n, lo, hi); },
                                   [&](int lo, int hi) { return random_int(lo, hi); });
    DeviceBuffer<float> inv_freq(random_floats(kHeads.head_dim / 2, 0.0f, 1.0f));
    DeviceBuffer<std::int32_t> slot(std::vector<std::int32_t>{3});
    DeviceBuffer<float> attention_out(problem.q.size());
    const int splits = plan_attention(ctx(), problem.batch(), kHeads).decode_splits;
    // As the decoder runs a decode step: RoPE and the KV append inside the attention kernel.
    const DecodeRope rope{k.data(), v.data(), slot.data(), inv_freq.data(), RopeLayout::SplitHalves};
    // Q8_0 and Q4_0: the attention also rounds its output for o.
    RoundedBuffer attention_rounded(1, attention_out.size());
    report(std::string("attention + RoPE + KV append") + (integer ? " + int8 copy, " : ", ") + std::to_string(kPositions) +
               " positions, " + std::to_string(splits) + " splits",
           time_attention(problem, splits, rope, problem.q_gpu.data(), attention_out.data(),
                          integer ? attention_rounded.view() : QuantizedActivations{}),
           0);
    // Other ways to cut the same keys, for tuning the plan (not counted in the layer).
    for (const int other : {1, 2, 8}) {
      report("  (the same with " + std::to_string(other) + " splits)",
             time_attention(problem, other, rope, problem.q_gpu.data(), attention_out.data()), 0, false);
    }
  }
  {
    const Matrices wo = matrices(type, kHidden, kHidden);
    report("gemv o 4096x4096", time_in_graph([&](int l) { launch_gemv(wo[l], input, 1, out.data(), ctx(), fold); }),
           wo.bytes());
    layer_bytes += wo.bytes();
  }
  norm_step();
  {
    const Matrices gate = matrices(type, kFfn, kHidden), up = matrices(type, kFfn, kHidden);
    report("gemv gate,up + swiglu 2x14336x4096", time_in_graph([&](int l) {
             launch_gemv_swiglu(gate[l], up[l], normed_input, 1, out.data(), ctx());
           }), gate.bytes() + up.bytes());
    layer_bytes += gate.bytes() + up.bytes();
  }
  rounding_step();
  {
    const Matrices down = matrices(type, kHidden, kFfn);
    report("gemv down 4096x14336",
           time_in_graph([&](int l) { launch_gemv(down[l], input, 1, out.data(), ctx(), fold); }), down.bytes());
    layer_bytes += down.bytes();
  }
  std::printf("[  bench   ] decode step: one layer %.1f us for %.1f MB of weights; "
              "x %d layers = %.2f ms before the output head and sampling\n",
              total_us_, layer_bytes / 1e6, kLayers, total_us_ * kLayers / 1e3);
}

// A decode step of kBatch sequences (bf16): the decoder's launches for a batch, GEMMs through cuBLAS on
// the 16-bit copy of x that the kernel before each writes, gate and up as one stacked matrix; each
// timed alone and then the whole layer in one graph, whose excess over the sum is the gaps.
void DecodeStepBenchmark::batch_layer() {
  constexpr int kBatch = 32;
  const DType type = DType::BF16;
  total_us_ = 0;
  std::printf("[  bench   ] decode step, %d sequences, bf16 weights\n", kBatch);
  const int kv_dim = kHeads.n_kv_heads * kHeads.head_dim, q_dim = kHeads.n_heads * kHeads.head_dim;
  DeviceBuffer<float> x(random_floats(std::size_t{kBatch} * kFfn)), residual(random_floats(std::size_t{kBatch} * kHidden));
  DeviceBuffer<float> norm(random_floats(kHidden)), out(std::size_t{kBatch} * kFfn), out2(std::size_t{kBatch} * kFfn);
  DeviceBuffer<float> gate_up_out(std::size_t{kBatch} * 2 * kFfn);
  DeviceBuffer<std::uint16_t> x16(std::size_t{kBatch} * kFfn);
  x16.poison();
  const HalfCopy half{x16.data(), type};
  const int qkv_dim = q_dim + 2 * kv_dim;
  DeviceBuffer<float> q(std::size_t{kBatch} * q_dim), k(std::size_t{kBatch} * kv_dim), v(std::size_t{kBatch} * kv_dim);
  DeviceBuffer<float> qkv(random_floats(std::size_t{kBatch} * qkv_dim));
  const Matrices wqkv = matrices(type, qkv_dim, kHidden), wo = matrices(type, kHidden, q_dim);
  const Matrices gate_up = matrices(type, 2 * kFfn, kHidden), down = matrices(type, kHidden, kFfn);
  // Rows [first, first + count) of a matrix: q, k and v (gate and up) as views of one allocation.
  auto rows_of = [&](const WeightMatrix& w, std::size_t first, std::size_t count) {
    return WeightMatrix{w.dtype, count, w.cols, static_cast<const std::uint8_t*>(w.data) + first * row_bytes(w.dtype, w.cols)};
  };
  const std::vector<SequenceChunk> chunks(kBatch, SequenceChunk{kPositions - 1, 1});
  const AttentionProblem problem(kHeads, 16, chunks, [&](std::size_t n, float lo, float hi) { return random_floats(n, lo, hi); },
                                 [&](int lo, int hi) { return random_int(lo, hi); });
  DeviceBuffer<float> inv_freq(random_floats(kHeads.head_dim / 2, 0.0f, 1.0f));
  std::vector<std::int32_t> slot_values(kBatch);
  for (int i = 0; i < kBatch; ++i) slot_values[i] = 3 + 16 * i;
  DeviceBuffer<std::int32_t> slots(slot_values);
  const AttentionPlan plan = plan_attention(ctx(), problem.batch(), kHeads);
  DeviceBuffer<std::uint8_t> workspace(std::max<std::size_t>(1, attention_workspace_bytes(plan, problem.batch(), kHeads)));
  clear_attention_workspace(plan, problem.batch(), kHeads, workspace.data(), ctx());
  // As the decoder reads them: rows of q, k and v from one GEMM.
  const DecodeRope rope{qkv.data() + q_dim, qkv.data() + q_dim + kv_dim, slots.data(), inv_freq.data(),
                        RopeLayout::SplitHalves, qkv_dim};
  const float eps = 1e-5f;
  // The products of x's 16-bit copy.
  auto multiply = [&](std::span<const WeightProduct> products) { launch_gemm_group(ctx(), products, x.data(), kBatch, half); };
  auto product = [&](const WeightMatrix& w, float* to) {
    const WeightProduct p{w, to};
    multiply(std::span(&p, 1));
  };

  const std::vector<std::pair<std::string, std::function<void(int)>>> steps = {
      {"rms_norm + residual", [&](int) { launch_rms_norm(x.data(), residual.data(), norm.data(), kBatch, kHidden, eps, out.data(), ctx(), {}, half); }},
      {"gemm q, k, v (one stacked matrix)", [&](int l) { product(wqkv[l], qkv.data()); }},
      {"attention + RoPE + KV append, " + std::to_string(plan.decode_splits) + " splits", [&](int) {
         launch_attention_planned(plan, qkv.data(), problem.cache(), problem.batch(), kHeads, problem.scale(), out2.data(),
                                  workspace.data(), ctx(), rope, half);
       }},
      {"gemm o", [&](int l) { product(wo[l], out.data()); }},
      {"rms_norm + residual", [&](int) { launch_rms_norm(x.data(), residual.data(), norm.data(), kBatch, kHidden, eps, out.data(), ctx(), {}, half); }},
      {"gemm gate, up (one stacked matrix)", [&](int l) { product(gate_up[l], gate_up_out.data()); }},
      {"swiglu (the 16-bit copy only)", [&](int) { launch_swiglu_stacked(gate_up_out.data(), kBatch, kFfn, half, ctx()); }},
      {"gemm down", [&](int l) { product(down[l], out2.data()); }},
  };
  // q, k and v as three GEMMs (as biases or a q/k norm keep them), gate and up as two: alternatives.
  auto three_gemms = [&](int l) {
    const WeightMatrix w = wqkv[l];
    const WeightProduct p[] = {{rows_of(w, 0, q_dim), q.data()}, {rows_of(w, q_dim, kv_dim), k.data()},
                               {rows_of(w, q_dim + kv_dim, kv_dim), v.data()}};
    multiply(p);
  };
  auto gate_up_gemms = [&](int l) {
    const WeightMatrix w = gate_up[l];
    const WeightProduct p[] = {{rows_of(w, 0, kFfn), out.data()}, {rows_of(w, kFfn, kFfn), out2.data()}};
    multiply(p);
  };
  // Once eagerly first: cuBLAS and GemmContext size their scratch outside the capture.
  for (const auto& step : steps) step.second(0);
  three_gemms(0);
  gate_up_gemms(0);
  synchronize();
  for (const auto& [what, launch] : steps) report(what, time_in_graph(launch), 0);
  const float sum = total_us_;
  report("whole layer in one graph", time_in_graph([&](int l) {
           for (const auto& step : steps) step.second(l);
         }), 0, false);
  report("  (gemm q, k, v as three matrices)", time_in_graph(three_gemms), wqkv.bytes(), false);
  report("  (gemm gate, up as two matrices)", time_in_graph(gate_up_gemms), gate_up.bytes(), false);
  report("  (gemm gate, up alone)", time_in_graph([&](int l) { product(gate_up[l], gate_up_out.data()); }), gate_up.bytes(), false);
  report("  (gemm o alone)", time_in_graph([&](int l) { product(wo[l], out.data()); }), wo.bytes(), false);
  report("  (gemm down alone)", time_in_graph([&](int l) { product(down[l], out2.data()); }), down.bytes(), false);
  for (const int splits : {1, 2, 4}) {
    report("  (attention with " + std::to_string(splits) + " splits)",
           time_attention(problem, splits, rope, qkv.data(), out2.data()), 0, false);
  }
  std::printf("[  bench   ] decode step, %d sequences: kernels %.1f us a layer\n", kBatch, sum);
}

// What a step spends after its layers: the bf16 output head, and greedy sampling of its rows.
void DecodeStepBenchmark::head_and_sampling() {
  constexpr int kVocab = 128256;
  std::printf("[  bench   ] decode step after the layers, %d-token vocabulary\n", kVocab);
  const auto host_logits = random_floats(std::size_t{32} * kVocab);
  // The masked runs leave -infinity in their rows: theirs are a copy.
  DeviceBuffer<float> x(random_floats(kHidden)), logits(host_logits), masked_logits(host_logits);
  const Matrices head = matrices(DType::BF16, kVocab, kHidden);
  report("gemv output head, bf16", time_in_graph([&](int l) { launch_gemv(head[l], {x.data()}, 1, logits.data(), ctx()); }),
         head.bytes(), false);
  for (const int rows : {1, 32}) {
    RowSampling greedy{};
    greedy.mask_begin = -1;
    const DeviceBuffer<RowSampling> params(std::vector<RowSampling>(rows, greedy));
    DeviceBuffer<std::int32_t> counts(static_cast<std::size_t>(rows) * kVocab), tokens(rows);
    DeviceBuffer<std::uint64_t> scratch(sample_scratch_keys(rows, kVocab));
    counts.zero();
    report("sample greedily, " + std::to_string(rows) + " rows", time_in_graph([&](int) {
             launch_sample(logits.data(), rows, kVocab, params.data(), nullptr, nullptr, counts.data(), scratch.data(),
                           tokens.data(), ctx());
           }), static_cast<double>(rows) * kVocab * sizeof(float), false);
    // llama.cpp's default filters and a draw, then both under a grammar's mask per row (structured
    // output) that allows one token in 64: the masks' bits are read too.
    RowSampling drawn = row_sampling(SamplingParams{}, 0, 0, 0, -1);
    const DeviceBuffer<RowSampling> drawn_params(std::vector<RowSampling>(rows, drawn));
    report("sample at the default filters, " + std::to_string(rows) + " rows", time_in_graph([&](int) {
             launch_sample(logits.data(), rows, kVocab, drawn_params.data(), nullptr, nullptr, counts.data(),
                           scratch.data(), tokens.data(), ctx());
           }), static_cast<double>(rows) * kVocab * sizeof(float), false);
    DeviceBuffer<std::uint64_t> masks(std::vector<std::uint64_t>(static_cast<std::size_t>(rows) * mask_words(kVocab), 1));
    for (const RowSampling& row : {greedy, drawn}) {
      std::vector<RowSampling> masked(rows, row);
      for (int r = 0; r < rows; ++r) masked[r].mask_begin = r * mask_words(kVocab);
      const DeviceBuffer<RowSampling> masked_params(masked);
      const std::string what = row.temperature > 0 ? "at the default filters" : "greedily";
      report("sample " + what + " under masks, " + std::to_string(rows) + " rows", time_in_graph([&](int) {
               launch_sample(masked_logits.data(), rows, kVocab, masked_params.data(), nullptr, masks.data(), counts.data(),
                             scratch.data(), tokens.data(), ctx());
             }), static_cast<double>(rows) * kVocab * (sizeof(float) + 1.0 / 8), false);
    }
  }
}

TEST_F(DecodeStepBenchmark, DISABLED_OutputHeadAndSampling) { head_and_sampling(); }

TEST_F(DecodeStepBenchmark, DISABLED_KernelsOfOneLayer) {
  for (const DType type : {DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K}) layer(type);
}

TEST_F(DecodeStepBenchmark, DISABLED_KernelsOfABatchLayer) { batch_layer(); }

}  // namespace
}  // namespace rf::gpu::test
