#include "models/llama/gpu_forward.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include <fmt/format.h>

#include "backend/gpu/attention_kernels.h"
#include "backend/gpu/gpu_device.h"
#include "backend/gpu/probe.h"
#include "util/error.h"

namespace rf::llama {

// The GPU backend's kernels and runtime.
using namespace rf::gpu;

namespace {

// Sub-buffers start 256 bytes apart, so that every kernel's vector loads stay aligned.
constexpr std::size_t kAlignElements = 64;

std::size_t round_up(std::size_t n) { return (n + kAlignElements - 1) / kAlignElements * kAlignElements; }

std::size_t kv_cache_elements(const ModelConfig& c, const GpuForwardOptions& o) {
  return 2ull * c.n_layers * o.kv_blocks * o.block_size * c.kv_dim();
}

std::string describe_device() {
  const DeviceScan scan = scan_devices();
  if (scan.devices.empty()) fail("{}", scan.why_none);
  const DeviceInfo& d = scan.devices.front();  // the runtime's current device
  return fmt::format("{}:{} {} ({})", backend_name(), d.index, d.name, d.arch);
}

// Attention's bound on positions, rounded up to a power of two so that a decode graph serves many
// steps; eager steps use the same rounding, so graph and eager runs launch the same work.
int attention_span(int positions, int cache_positions) {
  constexpr int kMinSpan = 64;
  return std::min(static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(positions, kMinSpan)))), cache_positions);
}

// The most scratch attention needs in any step (about 2 MiB for Llama 3 8B).
std::size_t attention_scratch_bytes(const ModelConfig& c, const GpuForwardOptions& o) {
  if (o.batch_invariant) return 0;  // one range per token: no partials
  return most_attention_workspace_bytes(o.max_batch_tokens, o.kv_blocks, o.block_size,
                                        {c.n_heads, c.n_kv_heads, c.head_dim});
}

// The int8 copy of a GEMV's input holds the tokens the GEMV serves (one, or a whole step when
// batch-invariant) of the widest input.
struct RoundedShape {
  std::size_t tokens, cols;
};

RoundedShape rounded_shape(const ModelConfig& c, const GpuForwardOptions& o) {
  return {static_cast<std::size_t>(o.batch_invariant ? o.max_batch_tokens : 1),
          static_cast<std::size_t>(std::max({c.hidden_size, c.q_dim(), c.intermediate_size}))};
}

std::size_t rounded_bytes(const ModelConfig& c, const GpuForwardOptions& o) {
  const RoundedShape shape = rounded_shape(c, o);
  return quantized_activations_bytes(shape.tokens, shape.cols);
}

// Whether two matrices of one input can go to one GEMV launch (GGUF mixes types within a layer).
bool same_type(const WeightMatrix& a, const WeightMatrix& b) { return a.dtype == b.dtype && a.cols == b.cols; }

}  // namespace

GpuForward::GpuForward(const ModelConfig& config, const LlamaWeights& weights, const GpuForwardOptions& options)
    : config_(config),
      options_(options),
      device_name_(describe_device()),
      gemm_(make_gemm_context(stream_.get())),
      weights_(config, weights),
      kv_cache_(kv_cache_elements(config, options)),
      activation_storage_(layout(config, options.max_batch_tokens, nullptr, nullptr)),
      input_storage_(layout(options.max_batch_tokens, options.kv_blocks, nullptr, nullptr)),
      sampler_(config.vocab_size, options.max_batch_tokens) {
  if (options.max_batch_tokens <= 0 || options.kv_blocks <= 0 || options.block_size <= 0) {
    fail("the GPU decoder needs a positive batch size, KV cache and block size");
  }
  layout(config, options.max_batch_tokens, activation_storage_.data(), &activations_);
  layout(options.max_batch_tokens, options.kv_blocks, input_storage_.data(), &inputs_);
  attention_workspace_ = DeviceBuffer<std::uint8_t>(attention_scratch_bytes(config, options));
  rounded_storage_ = DeviceBuffer<std::uint8_t>(rounded_bytes(config, options));
  const RoundedShape rounded = rounded_shape(config, options);
  rounded_ = quantized_activations_at(rounded_storage_.data(), rounded.tokens, rounded.cols);
  norms_foldable_ = std::none_of(weights_.layers.begin(), weights_.layers.end(), [](const GpuLayer& w) {
    return is_quantized(w.wq.dtype) || is_quantized(w.wk.dtype) || is_quantized(w.wv.dtype) ||
           is_quantized(w.w_gate.dtype) || is_quantized(w.w_up.dtype);
  });
}

GpuForward::~GpuForward() = default;

MemoryFootprint GpuForward::footprint(const ModelConfig& config, std::size_t weight_bytes,
                                           const GpuForwardOptions& options) {
  // Norms and biases are left out: kilobytes beside the matrices.
  return {weight_bytes, kv_cache_elements(config, options) * sizeof(std::uint16_t),
          layout(config, options.max_batch_tokens, nullptr, nullptr) * sizeof(float) +
              layout(options.max_batch_tokens, options.kv_blocks, nullptr, nullptr) * sizeof(std::int32_t) +
              rounded_bytes(config, options)};
}

std::size_t GpuForward::layout(const ModelConfig& c, int tokens, float* base, Activations* out) {
  std::size_t used = 0;
  auto take = [&](std::size_t per_token) {
    float* at = base ? base + used : nullptr;
    used += round_up(per_token * tokens);
    return at;
  };
  Activations a{};
  a.x = take(c.hidden_size);
  a.normed = take(c.hidden_size);
  // q, k and v in one region: arrays of their own, or rows of q_dim + 2 kv_dim from one GEMM.
  a.q = take(c.q_dim() + 2 * c.kv_dim());
  a.k = a.q ? a.q + static_cast<std::size_t>(tokens) * c.q_dim() : nullptr;
  a.v = a.k ? a.k + static_cast<std::size_t>(tokens) * c.kv_dim() : nullptr;
  a.attn = take(c.q_dim());
  a.proj = take(c.hidden_size);
  // gate and up adjacent: a stacked gate/up GEMM writes rows of 2 intermediate_size over both.
  a.gate = take(c.intermediate_size);
  a.up = take(c.intermediate_size);
  a.logit_in = take(c.hidden_size);
  a.logits = take(c.vocab_size);
  a.half = reinterpret_cast<std::uint16_t*>(take((std::max(c.hidden_size, c.intermediate_size) + 1) / 2));
  if (out) *out = a;
  return used;
}

std::size_t GpuForward::layout(int tokens, int table_width, std::int32_t* base, StepInputs* out) {
  std::size_t used = 0;
  auto take = [&](std::size_t per_token) {
    std::int32_t* at = base ? base + used : nullptr;
    used += round_up(per_token * tokens);
    return at;
  };
  // A chunk has at most one sequence per token: `tokens` block tables of table_width blocks, last,
  // so that a step uploads only the tables it uses.
  const StepInputs in{take(1), take(1), take(1), take(1), take(1), take(table_width)};
  if (out) *out = in;
  return used;
}

KvCacheLayer GpuForward::cache_layer(int layer) {
  const std::size_t per_layer = static_cast<std::size_t>(options_.kv_blocks) * options_.block_size * config_.kv_dim();
  std::uint16_t* keys = kv_cache_.data() + 2 * layer * per_layer;
  return {keys, keys + per_layer};
}

void GpuForward::forward(const Batch& batch, std::vector<float>& logits) {
  const std::size_t vocab = config_.vocab_size;
  logits.resize(batch.logit_rows.size() * vocab);
  run(batch, [&](int first, int count) {
    RF_GPU_CHECK(gpuMemcpyAsync(logits.data() + first * vocab, activations_.logits, count * vocab * sizeof(float),
                                gpuMemcpyDeviceToHost, stream_.get()));
  });
  stream_.synchronize();
}

std::vector<std::int32_t> GpuForward::sample(const Batch& batch, std::span<const SampleRow> rows) {
  if (sampler_.steps_in_flight() > 0) fail("sample() while decode steps are queued: take their tokens first");
  queue_sample(batch, rows);
  return take_tokens();
}

void GpuForward::queue_sample(const Batch& batch, std::span<const SampleRow> rows) {
  check_queued(batch, rows, sampler_.steps_in_flight());
  const int previous_rows = sampler_.rows_on_device();
  sampler_.prepare(rows, stream_.get());
  run(batch, [&](int first, int count) { sampler_.sample(activations_.logits, first, count, stream_.get()); },
      previous_rows);
  sampler_.finish(stream_.get());
}

std::vector<std::int32_t> GpuForward::take_tokens() { return sampler_.take(); }

void GpuForward::run(const Batch& batch, const std::function<void(int first, int count)>& on_logits,
                          int previous_rows) {
  check_batch(batch, config_.vocab_size, options_.block_size, options_.kv_blocks, previous_rows);
  const int n = static_cast<int>(batch.size());
  const int rows = static_cast<int>(batch.logit_rows.size());
  for (int r = 0; r < rows; ++r) {
    const int t = batch.logit_rows[r];
    if (t < 0 || t >= n || (r > 0 && t <= batch.logit_rows[r - 1])) {
      fail("logit rows must be distinct tokens of the batch in increasing order");
    }
  }
  const int capacity = options_.max_batch_tokens;
  const bool decode = n <= capacity && rows == n && batch.block_tables.size() == batch.size();
  int row = 0;
  for (int begin = 0; begin < n; begin += capacity) {
    const int end = std::min(n, begin + capacity);
    const int first = row;
    while (row < rows && batch.logit_rows[row] < end) ++row;
    const StepShape shape = stage(batch, begin, end, first, row);
    drop_graphs_if_gemm_grows(shape);
    if (decode && options_.graphs) {
      auto [graph, first_seen] = graphs_.try_emplace(shape);
      if (first_seen) {
        launch_step(shape);
      } else {
        if (!graph->second) graph->second.emplace(stream_.get(), [&] { launch_step(shape); });
        graph->second->launch(stream_.get());
      }
    } else {
      launch_step(shape);
    }
    if (row > first) on_logits(first, row - first);
  }
}

GpuForward::StepShape GpuForward::stage(const Batch& batch, int begin, int end, int first_row, int end_row) {
  const int width = options_.kv_blocks, block_size = options_.block_size;
  std::int32_t* staging = input_uploads_.slot(input_storage_.size());
  auto host = [&](std::int32_t* device) { return staging + (device - input_storage_.data()); };
  std::int32_t* tokens = host(inputs_.tokens);
  std::int32_t* positions = host(inputs_.positions);
  std::int32_t* seq = host(inputs_.seq);
  std::int32_t* slots = host(inputs_.slots);
  std::int32_t* tables = host(inputs_.block_tables);
  // The chunk's sequences, numbered in order of appearance: their tables are the chunk's.
  std::vector<int> chunk_seq(batch.block_tables.size(), -1);
  int n_seqs = 0, max_position = 0;
  for (int t = begin; t < end; ++t) {
    const int i = t - begin, s = batch.sequence[t], position = batch.positions[t];
    const auto& table = batch.block_tables[s];
    if (chunk_seq[s] < 0) {
      if (static_cast<int>(table.size()) > width) fail("a block table of {} blocks exceeds the KV cache", table.size());
      chunk_seq[s] = n_seqs++;
      std::copy(table.begin(), table.end(), tables + static_cast<std::size_t>(chunk_seq[s]) * width);
    }
    tokens[i] = batch.tokens[t];
    positions[i] = position;
    seq[i] = chunk_seq[s];
    slots[i] = table[position / block_size] * block_size + position % block_size;
    max_position = std::max(max_position, position);
  }
  std::int32_t* logit_tokens = host(inputs_.logit_tokens);
  for (int r = first_row; r < end_row; ++r) logit_tokens[r - first_row] = batch.logit_rows[r] - begin;
  const std::size_t used = (tables - staging) + static_cast<std::size_t>(n_seqs) * width;
  input_uploads_.copy(input_storage_.data(), used, stream_.get());
  return {end - begin, end_row - first_row, attention_span(max_position + 1, width * block_size), n_seqs == end - begin};
}

AttentionBatch GpuForward::attention_batch(const StepShape& shape) const {
  return {inputs_.positions, inputs_.seq, inputs_.block_tables, shape.n_tokens, options_.kv_blocks, options_.block_size,
          shape.max_positions};
}

void GpuForward::drop_graphs_if_gemm_grows(const StepShape& shape) {
  if (shape.n_tokens <= most_tokens_) return;
  stream_.synchronize();  // nothing queued still uses the graphs
  graphs_.clear();
  most_tokens_ = shape.n_tokens;
}

bool GpuForward::gemv_serves(int n_tokens) const { return n_tokens == 1 || options_.batch_invariant; }

bool GpuForward::folds_norms(int n_tokens) const {
  return n_tokens == 1 && !options_.batch_invariant && norms_foldable_;
}

QuantizedActivations GpuForward::rounding_for(const WeightMatrix& w, int n_tokens) const {
  return gemv_serves(n_tokens) && gemv_reads_rounded(w.dtype) ? rounded_ : QuantizedActivations{};
}

HalfCopy GpuForward::half_copy_for(const WeightMatrix& w, int n_tokens) const {
  if (gemv_serves(n_tokens) || w.dtype == DType::F32 || !gemm_takes_half_copy()) return {};
  return {activations_.half, gemm_operand_type(w.dtype)};
}

AttentionPlan GpuForward::attention_plan(const AttentionBatch& batch) const {
  const HeadShape heads{config_.n_heads, config_.n_kv_heads, config_.head_dim};
  return options_.batch_invariant ? plan_batch_invariant_attention(batch, heads) : plan_attention(batch, heads);
}

void GpuForward::project(std::span<const WeightProduct> products, GemvInput x, int n_tokens) {
  if (!gemv_serves(n_tokens)) return launch_gemm_group(*gemm_, products, x.x, n_tokens, x.half);
  x.fixed_order = options_.batch_invariant;
  // One GEMV launch for the products that share a type (all of them but in some GGUF mixes).
  const bool shared = std::all_of(products.begin(), products.end(), [&](const WeightProduct& p) { return same_type(p.w, products[0].w); });
  if (shared) return launch_gemv_group(products, x, n_tokens, stream_.get());
  for (const WeightProduct& p : products) launch_gemv(p.w, x, n_tokens, p.out, stream_.get());
}

void GpuForward::project(const WeightMatrix& w, GemvInput x, int n_tokens, float* out, bool accumulate) {
  if (accumulate) {
    require(gemv_serves(n_tokens), "project", "only the GEMV adds into its output");
    x.fixed_order = options_.batch_invariant;
    return launch_gemv(w, x, n_tokens, out, stream_.get(), true);
  }
  const WeightProduct product{w, out};
  project(std::span(&product, 1), x, n_tokens);
}

void GpuForward::launch_step(const StepShape& shape) {
  const auto& c = config_;
  const Activations& a = activations_;
  const int n = shape.n_tokens;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const HeadShape heads{c.n_heads, c.n_kv_heads, c.head_dim};
  const AttentionBatch batch = attention_batch(shape);
  const AttentionPlan plan = attention_plan(batch);
  clear_attention_workspace(plan, batch, heads, attention_workspace_.data(), stream_.get());
  launch_embedding(weights_.token_embedding, inputs_.tokens, n, a.x, stream_.get(), sampler_.device_tokens());
  // Each layer's last residual add is fused into the next norm, or made by the GEMV itself.
  const float* residual = nullptr;
  for (int l = 0; l < c.n_layers; ++l) residual = launch_layer(l, shape, plan, residual);
  if (shape.n_logits == 0) return;
  // Logit rows are increasing: as many as tokens means every token, in order; else gather them
  // (an embedding lookup is a row gather of any matrix) and round the gathered rows, which gives
  // each row the bits the norm's rounding gives it.
  const bool every_token = shape.n_logits == n;
  const QuantizedActivations rounded = rounding_for(weights_.output, shape.n_logits);
  launch_rms_norm(a.x, residual, weights_.output_norm, n, c.hidden_size, eps, a.normed, stream_.get(),
                  every_token ? rounded : QuantizedActivations{});
  const float* logit_input = a.normed;
  if (!every_token) {
    const WeightMatrix normed{DType::F32, static_cast<std::size_t>(n), static_cast<std::size_t>(c.hidden_size), a.normed};
    launch_embedding(normed, inputs_.logit_tokens, shape.n_logits, a.logit_in, stream_.get());
    logit_input = a.logit_in;
    if (rounded.codes) launch_quantize_activations(logit_input, shape.n_logits, c.hidden_size, rounded, stream_.get());
  }
  project(weights_.output, {logit_input, rounded}, shape.n_logits, a.logits);
}

const float* GpuForward::launch_layer(int layer, const StepShape& shape, const AttentionPlan& plan,
                                          const float* residual) {
  const auto& c = config_;
  const GpuLayer& w = weights_.layers[layer];
  const Activations& a = activations_;
  const int n = shape.n_tokens;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const HeadShape heads{c.n_heads, c.n_kv_heads, c.head_dim};
  gpuStream_t stream = stream_.get();
  // One token's norms go into the GEMVs after them (their launches cost 5.7 us a layer: Llama 3 8B bf16,
  // H100, measured by leaving them out; folded, they add 1 us to each GEMV), and x takes o's and down's
  // outputs from those GEMVs.
  const bool fold = folds_norms(n);
  require(!fold || !residual, "launch_layer", "a folded norm reads x as it is");

  // A GEMV that reads int8 x gets it from the norm before it, or from a rounding pass of its own.
  QuantizedActivations rounded = rounding_for(w.wq, n);
  HalfCopy half = half_copy_for(w.wq, n);
  if (!fold) launch_rms_norm(a.x, residual, w.attn_norm, n, c.hidden_size, eps, a.normed, stream, rounded, half);
  const GemvInput attn_input = fold ? GemvInput{a.x, RmsNormOf{w.attn_norm, eps}} : GemvInput{a.normed, rounded, half};
  // A decode batch's q, k and v come from one GEMM of the stacked matrix when only the attention, which
  // takes rows of all three, reads them (no biases, no q/k norm): three GEMMs of one x cost 40% more
  // (32 sequences, Llama 3 8B bf16, H100: 32.2 against 23.0 us).
  const bool stacked_qkv = shape.decode_only && !gemv_serves(n) && w.wqkv.data && !w.bq && !c.qk_norm;
  if (stacked_qkv) {
    project(w.wqkv, {a.normed, {}, half}, n, a.q);
  } else {
    const WeightProduct qkv[] = {{w.wq, a.q}, {w.wk, a.k}, {w.wv, a.v}};
    project(qkv, attn_input, n);
  }
  if (w.bq) launch_add_bias(a.q, w.bq, n, c.q_dim(), stream);
  if (w.bk) launch_add_bias(a.k, w.bk, n, c.kv_dim(), stream);
  if (w.bv) launch_add_bias(a.v, w.bv, n, c.kv_dim(), stream);
  if (c.qk_norm) launch_qk_norm(a.q, a.k, w.q_norm, w.k_norm, n, heads, eps, stream);
  const KvCacheLayer cache = cache_layer(layer);
  DecodeRope fused_rope;
  if (stacked_qkv) {
    const int row = c.q_dim() + 2 * c.kv_dim();
    fused_rope = {a.q + c.q_dim(), a.q + c.q_dim() + c.kv_dim(), inputs_.slots, weights_.inv_freq, c.rope_layout, row};
  } else if (shape.decode_only) {
    fused_rope = {a.k, a.v, inputs_.slots, weights_.inv_freq, c.rope_layout};
  } else {
    launch_rope_kv_append(a.q, a.k, a.v, inputs_.positions, inputs_.slots, n, heads, weights_.inv_freq, c.rope_layout,
                          cache, stream);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  half = fused_rope.k ? half_copy_for(w.wo, n) : HalfCopy{};
  // A decode step's attention also rounds its output for o's GEMV, in place of a rounding pass.
  rounded = rounding_for(w.wo, n);
  const bool attention_rounds = rounded.codes && fused_rope.k && c.head_dim % 32 == 0;
  launch_attention_planned(plan, a.q, cache, attention_batch(shape), heads, scale, a.attn, attention_workspace_.data(),
                           stream, fused_rope, half, attention_rounds ? rounded : QuantizedActivations{});
  if (rounded.codes && !attention_rounds) launch_quantize_activations(a.attn, n, c.q_dim(), rounded, stream);
  GemvInput o_input{a.attn, rounded, half};
  o_input.after_wide_attention = plan.decode_wide;
  project(w.wo, o_input, n, fold ? a.x : a.proj, fold);
  rounded = rounding_for(w.w_gate, n);
  half = half_copy_for(w.w_gate, n);
  if (!fold) launch_rms_norm(a.x, a.proj, w.ffn_norm, n, c.hidden_size, eps, a.normed, stream, rounded, half);
  const GemvInput ffn_input = fold ? GemvInput{a.x, RmsNormOf{w.ffn_norm, eps}} : GemvInput{a.normed, rounded, half};
  // A GEMM of the stacked gate and up, where down multiplies SwiGLU's 16-bit copy alone (two GEMMs of one
  // x cost a launch more: 32 sequences, Llama 3 8B bf16, H100: 90.5 against 88.2 us).
  const HalfCopy down_half = half_copy_for(w.w_down, n);
  const float* down_input = a.gate;  // null where SwiGLU writes only the copy
  if (gemv_serves(n) && same_type(w.w_gate, w.w_up)) {
    launch_gemv_swiglu(w.w_gate, w.w_up, ffn_input, n, a.gate, stream);
  } else if (w.w_gate_up.data && down_half.data) {
    project(w.w_gate_up, {a.normed, {}, half}, n, a.gate);
    launch_swiglu_stacked(a.gate, n, c.intermediate_size, down_half, stream);
    down_input = nullptr;
  } else {
    const WeightProduct gate_up[] = {{w.w_gate, a.gate}, {w.w_up, a.up}};
    project(gate_up, ffn_input, n);
    launch_swiglu(a.gate, a.up, static_cast<std::size_t>(n) * c.intermediate_size, a.gate, stream, down_half);
  }
  rounded = rounding_for(w.w_down, n);
  if (rounded.codes) launch_quantize_activations(a.gate, n, c.intermediate_size, rounded, stream);
  project(w.w_down, {down_input, rounded, down_half}, n, fold ? a.x : a.proj, fold);
  return fold ? nullptr : a.proj;
}

DeviceCeilings GpuForward::measure_ceilings() {
  DeviceCeilings ceilings{device_name_, measure_read_bandwidth(stream_.get()), measure_matmul_flops(*gemm_, stream_.get())};
  // The matmul probe grew GemmContext's scratch, whose old address the graphs hold.
  stream_.synchronize();
  graphs_.clear();
  return ceilings;
}

int GpuForward::graphs_captured() const {
  return static_cast<int>(std::count_if(graphs_.begin(), graphs_.end(), [](const auto& g) { return g.second.has_value(); }));
}

}  // namespace rf::llama
