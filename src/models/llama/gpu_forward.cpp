#include "models/llama/gpu_forward.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include <fmt/format.h>

#include "backend/gpu/attention/attention.h"
#include "backend/gpu/elementwise/elementwise.h"
#include "backend/gpu/embedding/embedding.h"
#include "backend/gpu/norm/norm.h"
#include "backend/gpu/rope/rope.h"
#include "backend/gpu/runtime/devices.h"
#include "backend/gpu/probe/probe.h"
#include "util/error.h"

namespace rf::llama {

// The GPU backend's kernels and runtime.
using namespace rf::gpu;

namespace {

const ModelConfig& supported_by_gpu(const ModelConfig& c) {
  if (const auto why = gpu_unsupported(c)) fail("{}; use --device cpu", *why);
  return c;
}

// Sub-buffers start 256 bytes apart, so that every kernel's vector loads stay aligned.
constexpr std::size_t kAlignElements = 64;

std::size_t round_up(std::size_t n) { return (n + kAlignElements - 1) / kAlignElements * kAlignElements; }

std::size_t kv_cache_elements(const ModelConfig& c, const GpuForwardOptions& o) {
  return 2ull * c.n_layers * o.kv_blocks * o.block_size * c.kv_dim();
}

std::string describe_device(int index) {
  const DeviceScan scan = scan_devices();
  if (index < 0 || index >= static_cast<int>(scan.devices.size())) {
    fail("no {} device {} ({})", backend_name(), index,
         scan.devices.empty() ? scan.why_none : fmt::format("this machine has {}", scan.devices.size()));
  }
  const DeviceInfo& d = scan.devices[index];
  return fmt::format("{}:{} {} ({})", backend_name(), d.index, d.name, d.arch);
}

// Attention's bound on positions, rounded up to a power of two so that a decode graph serves many
// steps; eager steps use the same rounding, so graph and eager runs launch the same work.
int attention_span(int positions, int cache_positions) {
  constexpr int kMinSpan = 64;
  return std::min(static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(positions, kMinSpan)))), cache_positions);
}

// The most scratch attention needs in any step (about 2 MiB for Llama 3 8B).
std::size_t attention_scratch_bytes(const DeviceContext& ctx, const ModelConfig& c, const GpuForwardOptions& o) {
  if (o.batch_invariant) return 0;  // one range per token: no partials
  return most_attention_workspace_bytes(ctx, o.max_batch_tokens, o.kv_blocks, o.block_size,
                                        {c.n_heads, c.n_kv_heads, c.head_dim});
}

// The int8 copy of a GEMV's input holds the tokens the GEMV serves (one, or a whole step when
// batch-invariant) of the widest input.
struct RoundedShape {
  std::size_t tokens, cols;
};

// The int8 copy serves one token's GEMVs, decode batches' quantized GEMMs (up to
// kMostQuantizedFewTokens tokens), and every step's GEMVs when batch-invariant.
RoundedShape rounded_shape(const ModelConfig& c, const GpuForwardOptions& o) {
  const int tokens = o.batch_invariant ? o.max_batch_tokens : std::min(o.max_batch_tokens, kMostQuantizedFewTokens);
  const int cols = std::max({c.hidden_size, c.q_dim(), c.intermediate_size});
  return {static_cast<std::size_t>(tokens), static_cast<std::size_t>(cols)};
}

std::size_t rounded_bytes(const ModelConfig& c, const GpuForwardOptions& o) {
  const RoundedShape shape = rounded_shape(c, o);
  return quantized_activations_bytes(shape.tokens, shape.cols);
}

// A sparse layer's int8 copies hold a step's entries (k a token) of the wider of its inputs.
RoundedShape expert_rounded_shape(const ModelConfig& c, const GpuForwardOptions& o) {
  if (c.n_experts == 0) return {0, 0};
  return {static_cast<std::size_t>(o.max_batch_tokens) * c.n_experts_used,
          static_cast<std::size_t>(std::max(c.hidden_size, c.expert_ffn))};
}

std::size_t expert_rounded_bytes(const ModelConfig& c, const GpuForwardOptions& o) {
  const RoundedShape shape = expert_rounded_shape(c, o);
  return shape.tokens ? quantized_activations_bytes(shape.tokens, shape.cols) : 0;
}

// The longest sequence the backend serves.
int served_context(const GpuForwardOptions& o) { return o.max_context > 0 ? o.max_context : o.kv_blocks * o.block_size; }

// Whether two matrices of one input can go to one GEMV launch (GGUF mixes types within a layer).
bool same_type(const WeightMatrix& a, const WeightMatrix& b) { return a.dtype == b.dtype && a.cols == b.cols; }

}  // namespace

std::optional<std::string> gpu_unsupported(const ModelConfig& c) {
  if (!supported_head_dim(c.head_dim)) {
    return fmt::format("the GPU attention kernels do not take this model's head dim of {} yet", c.head_dim);
  }
  if (c.rope_dims() != c.head_dim) {
    return fmt::format("this model rotates {} of each head's {} dimensions (partial rotary), which the GPU backend "
                       "does not implement yet",
                       c.rope_dims(), c.head_dim);
  }
  if (c.n_experts > kMostExperts || c.n_experts_used > 32) {
    return fmt::format("{} routes each token to {} of {} experts; the GPU routing takes at most {} experts and 32 "
                       "a token",
                       arch_name(c.arch), c.n_experts_used, c.n_experts, kMostExperts);
  }
  return std::nullopt;
}

GpuForward::GpuForward(const ModelConfig& config, const LlamaWeights& weights, const GpuForwardOptions& options)
    : config_(supported_by_gpu(config)),
      options_(options),
      device_name_(describe_device(options.device)),
      ctx_(options.device),
      weights_(config, weights, served_context(options), options.load_progress),
      kv_cache_(kv_cache_elements(config, options)),
      activation_storage_(layout(config, options.max_batch_tokens, nullptr, nullptr)),
      input_storage_(layout(options.max_batch_tokens, options.kv_blocks, nullptr, nullptr)),
      sampler_(config.vocab_size, options.max_batch_tokens) {
  if (options.max_batch_tokens <= 0 || options.kv_blocks <= 0 || options.block_size <= 0) {
    fail("the GPU decoder needs a positive batch size, KV cache and block size");
  }
  if (static_cast<long long>(options.max_batch_tokens) * config.n_experts_used > kMostPicks) {
    fail("a step of {} tokens routes {} picks of experts; the GPU routing takes at most {}: lower the batch size",
         options.max_batch_tokens, static_cast<long long>(options.max_batch_tokens) * config.n_experts_used, kMostPicks);
  }
  layout(config, options.max_batch_tokens, activation_storage_.data(), &activations_);
  layout(options.max_batch_tokens, options.kv_blocks, input_storage_.data(), &inputs_);
  attention_workspace_ = DeviceBuffer<std::uint8_t>(attention_scratch_bytes(ctx_, config, options));
  rounded_storage_ = DeviceBuffer<std::uint8_t>(rounded_bytes(config, options));
  const RoundedShape rounded = rounded_shape(config, options);
  rounded_ = quantized_activations_at(rounded_storage_.data(), rounded.tokens, rounded.cols);
  expert_rounded_storage_ = DeviceBuffer<std::uint8_t>(expert_rounded_bytes(config, options));
  const RoundedShape expert_rounded = expert_rounded_shape(config, options);
  if (expert_rounded.tokens) {
    expert_rounded_ = quantized_activations_at(expert_rounded_storage_.data(), expert_rounded.tokens, expert_rounded.cols);
  }
  const auto reads_quantized = [](const GpuLayer& w) {
    return is_quantized(w.wq.dtype) || is_quantized(w.wk.dtype) || is_quantized(w.wv.dtype) ||
           is_quantized(w.w_gate.dtype) || is_quantized(w.w_up.dtype);
  };
  // Post-norms (Gemma) take the layer's outputs before the residual add: no GEMV adds into x. The
  // router multiplies the norm's output.
  norms_foldable_ = !config.post_norms && config.n_experts == 0 &&
                    std::none_of(weights_.layers.begin(), weights_.layers.end(), reads_quantized);
}

GpuForward::~GpuForward() {
  // The members after ctx_ free their device memory with its device current; a destructor must not
  // throw, and a failure here only means the frees find another device current.
  (void)gpuSetDevice(ctx_.index());
}

MemoryFootprint GpuForward::footprint(const ModelConfig& config, std::size_t weight_bytes,
                                           const GpuForwardOptions& options) {
  // Norms and biases are left out: kilobytes beside the matrices.
  return {weight_bytes, kv_cache_elements(config, options) * sizeof(std::uint16_t),
          layout(config, options.max_batch_tokens, nullptr, nullptr) * sizeof(float) +
              layout(options.max_batch_tokens, options.kv_blocks, nullptr, nullptr) * sizeof(std::int32_t) +
              rounded_bytes(config, options) + expert_rounded_bytes(config, options)};
}

std::size_t GpuForward::layout(const ModelConfig& c, int tokens, float* base, Activations* out) {
  std::size_t used = 0;
  auto take_words = [&](std::size_t words) {
    float* at = base ? base + used : nullptr;
    used += round_up(words);
    return at;
  };
  auto take = [&](std::size_t per_token) { return take_words(per_token * tokens); };
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
  const std::size_t k = c.n_experts_used;
  a.router_logits = take(c.n_experts);
  a.expert_in = take(k * c.hidden_size);
  a.expert_gate = take(k * c.expert_ffn);
  a.expert_up = take(k * c.expert_ffn);
  a.expert_out = take(k * c.hidden_size);
  a.routes = c.n_experts ? take_words(expert_routes_words(tokens, c.n_experts, c.n_experts_used)) : nullptr;
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
  const ContextScope scope(ctx_);
  const std::size_t vocab = config_.vocab_size;
  logits.resize(batch.logit_rows.size() * vocab);
  run(batch, [&](int first, int count) {
    RF_GPU_CHECK(gpuMemcpyAsync(logits.data() + first * vocab, activations_.logits, count * vocab * sizeof(float),
                                gpuMemcpyDeviceToHost, ctx_.stream()));
  });
  ctx_.synchronize();
}

void GpuForward::hidden_states(const Batch& batch, std::vector<float>& states) {
  const ContextScope scope(ctx_);
  const std::size_t hidden = config_.hidden_size;
  states.resize(batch.logit_rows.size() * hidden);
  hidden_only_ = true;
  try {
    run(batch, [&](int first, int count) {
      RF_GPU_CHECK(gpuMemcpyAsync(states.data() + first * hidden, hidden_rows_, count * hidden * sizeof(float),
                                  gpuMemcpyDeviceToHost, ctx_.stream()));
    });
  } catch (...) {
    hidden_only_ = false;
    throw;
  }
  hidden_only_ = false;
  ctx_.synchronize();
}

std::vector<std::int32_t> GpuForward::sample(const Batch& batch, std::span<const SampleRow> rows) {
  if (sampler_.steps_in_flight() > 0) fail("sample() while decode steps are queued: take their tokens first");
  queue_sample(batch, rows);
  return take_tokens();
}

void GpuForward::queue_sample(const Batch& batch, std::span<const SampleRow> rows) {
  const ContextScope scope(ctx_);
  check_queued(batch, rows, sampler_.steps_in_flight());
  const int previous_rows = sampler_.rows_on_device();
  sampler_.prepare(rows, ctx_);
  run(batch, [&](int first, int count) { sampler_.sample(activations_.logits, first, count, ctx_); },
      previous_rows);
  sampler_.finish(ctx_);
}

std::vector<std::int32_t> GpuForward::take_tokens() {
  const ContextScope scope(ctx_);
  return sampler_.take();
}

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
    if (decode && options_.graphs && gpu::kGraphCapture && !hidden_only_) {
      auto [graph, first_seen] = graphs_.try_emplace(shape);
      if (first_seen) {
        launch_step(shape);
      } else {
        if (!graph->second) graph->second.emplace(ctx_.stream(), [&] { launch_step(shape); });
        graph->second->launch(ctx_.stream());
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
  input_uploads_.copy(input_storage_.data(), used, ctx_.stream());
  return {end - begin, end_row - first_row, attention_span(max_position + 1, width * block_size), n_seqs == end - begin};
}

AttentionBatch GpuForward::attention_batch(const StepShape& shape, int layer) const {
  AttentionBatch batch{inputs_.positions, inputs_.seq,        inputs_.block_tables, shape.n_tokens,
                       options_.kv_blocks, options_.block_size, shape.max_positions};
  if (layer >= 0) batch.window = config_.window(layer);
  batch.softcap = static_cast<float>(config_.attn_logit_softcap);
  return batch;
}

void GpuForward::drop_graphs_if_gemm_grows(const StepShape& shape) {
  if (shape.n_tokens <= most_tokens_) return;
  ctx_.synchronize();  // nothing queued still uses the graphs
  graphs_.clear();
  most_tokens_ = shape.n_tokens;
}

bool GpuForward::gemv_serves(int n_tokens) const { return n_tokens == 1 || options_.batch_invariant; }

bool GpuForward::folds_norms(int n_tokens) const {
  return n_tokens == 1 && !options_.batch_invariant && norms_foldable_ && !options_.communicator;
}

bool GpuForward::gemm_reads_rounded(const WeightMatrix& w, int n_tokens, bool decode_only) const {
  return decode_only && !gemv_serves(n_tokens) && gemm_multiplies_rounded(w.dtype, n_tokens);
}

QuantizedActivations GpuForward::rounding_for(const WeightMatrix& w, int n_tokens, bool decode_only) const {
  const bool gemv = gemv_serves(n_tokens) && gemv_reads_rounded(w.dtype);
  return gemv || gemm_reads_rounded(w, n_tokens, decode_only) ? rounded_ : QuantizedActivations{};
}

HalfCopy GpuForward::half_copy_for(const WeightMatrix& w, int n_tokens, bool decode_only) const {
  if (gemv_serves(n_tokens) || w.dtype == DType::F32 || !gemm_takes_half_copy()) return {};
  if (gemm_reads_rounded(w, n_tokens, decode_only)) return {};
  return {activations_.half, gemm_operand_type(w.dtype)};
}

AttentionPlan GpuForward::attention_plan(const AttentionBatch& batch) const {
  const HeadShape heads{config_.n_heads, config_.n_kv_heads, config_.head_dim};
  return options_.batch_invariant ? plan_batch_invariant_attention(batch, heads) : plan_attention(ctx_, batch, heads);
}

void GpuForward::project(std::span<const WeightProduct> products, GemvInput x, int n_tokens) {
  if (!gemv_serves(n_tokens)) return launch_gemm_group(ctx_, products, x.x, n_tokens, x.half, x.rounded);
  x.fixed_order = options_.batch_invariant;
  // One GEMV launch for the products that share a type (all of them but in some GGUF mixes).
  const bool shared = std::all_of(products.begin(), products.end(), [&](const WeightProduct& p) { return same_type(p.w, products[0].w); });
  if (shared) return launch_gemv_group(products, x, n_tokens, ctx_);
  for (const WeightProduct& p : products) launch_gemv(p.w, x, n_tokens, p.out, ctx_);
}

void GpuForward::project(const WeightMatrix& w, GemvInput x, int n_tokens, float* out, bool accumulate) {
  if (accumulate) {
    require(gemv_serves(n_tokens), "project", "only the GEMV adds into its output");
    x.fixed_order = options_.batch_invariant;
    return launch_gemv(w, x, n_tokens, out, ctx_, true);
  }
  const WeightProduct product{w, out};
  project(std::span(&product, 1), x, n_tokens);
}

StepPlan GpuForward::plan_step(const StepShape& shape) const {
  StepPlan plan{attention_plan(attention_batch(shape)), {},
                {rounding_for(weights_.output, shape.n_logits, shape.decode_only), {}}};
  for (const GpuLayer& w : weights_.layers) plan.layers.push_back(plan_layer(w, shape));
  return plan;
}

LayerPlan GpuForward::plan_layer(const GpuLayer& w, const StepShape& shape) const {
  const int n = shape.n_tokens;
  LayerPlan p;
  // One token's norms go into the GEMVs after them, which then add o's and down's outputs into x: a
  // launch less each (docs/perf_history.md, v9).
  p.folded_norms = folds_norms(n);
  p.residual = p.folded_norms ? ResidualAt::InGemv : ResidualAt::NextNorm;
  // A GEMV that reads int8 x gets it from the norm before it, or from a rounding pass of its own.
  const bool decode = shape.decode_only;
  p.qkv_in = {rounding_for(w.wq, n, decode), half_copy_for(w.wq, n, decode)};
  // A decode batch's q, k and v from one GEMM of the stacked matrix, where only the attention (which
  // takes rows of all three) reads them: no biases, no q/k norm.
  p.stacked_qkv = shape.decode_only && !gemv_serves(n) && w.wqkv.data && !w.bq && !config_.qk_norm;
  p.rope = p.stacked_qkv ? RopeAt::InAttentionStackedRows
           : shape.decode_only ? RopeAt::InAttention
                               : RopeAt::OwnKernel;
  // o's 16-bit copy comes from the decode attention alone; so does its int8 copy where heads hold whole
  // blocks of 32 (else a rounding pass makes it).
  const bool attention_decodes = p.rope != RopeAt::OwnKernel;
  p.o_in = {rounding_for(w.wo, n, decode), attention_decodes ? half_copy_for(w.wo, n, decode) : HalfCopy{}};
  p.attention_rounds = p.o_in.rounded.codes && attention_decodes && config_.head_dim % 32 == 0;
  p.gate_up_in = {rounding_for(w.w_gate, n, decode), half_copy_for(w.w_gate, n, decode)};
  p.down_in = {rounding_for(w.w_down, n, decode), half_copy_for(w.w_down, n, decode)};
  // The stacked gate/up GEMM where down multiplies SwiGLU's 16-bit copy alone. (The fused kernels are
  // SwiGLU's; Gemma's GeGLU takes the separate launch.)
  const bool swiglu = config_.activation == MlpActivation::Silu;
  p.ffn = swiglu && gemv_serves(n) && same_type(w.w_gate, w.w_up)   ? FfnAt::GemvSwiglu
          : swiglu && w.w_gate_up.data && p.down_in.half.data ? FfnAt::StackedGemm
                                                              : FfnAt::Separate;
  if (w.router.data) {
    // Decode reads only the picked experts, through the GEMV (their int8 copies where they are
    // quantized), and graphs replay it; prefill multiplies each picked expert by a GEMM, as a dense
    // prefill does, but for a batch-invariant backend, whose products all go through the GEMV.
    const bool gemv = shape.decode_only || options_.batch_invariant;
    p.ffn = gemv ? FfnAt::ExpertGemvs : FfnAt::ExpertGemms;
    const auto rounding = [&](const StackedExperts& e) {
      return gemv && gemv_reads_rounded(e.matrix.dtype) ? expert_rounded_ : QuantizedActivations{};
    };
    p.gate_up_in = {rounding(w.experts_gate).codes ? rounding(w.experts_gate) : rounding(w.experts_up), {}};
    p.down_in = {rounding(w.experts_down), {}};
  }
  return p;
}

const StepPlan& GpuForward::step_plan(const StepShape& shape) {
  constexpr std::size_t kMostPlans = 1024;  // prefill chunks make many shapes; decode makes few
  if (plans_.size() >= kMostPlans) plans_.clear();
  auto [found, added] = plans_.try_emplace(shape);
  if (added) found->second = plan_step(shape);
  return found->second;
}

void GpuForward::launch_step(const StepShape& shape) {
  const auto& c = config_;
  const Activations& a = activations_;
  const int n = shape.n_tokens;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const HeadShape heads{c.n_heads, c.n_kv_heads, c.head_dim};
  const StepPlan& plan = step_plan(shape);
  clear_attention_workspace(plan.attention, attention_batch(shape), heads, attention_workspace_.data(), ctx_);
  launch_embedding(weights_.token_embedding, inputs_.tokens, n, a.x, ctx_, sampler_.device_tokens(), c.embedding_scale);
  // Each layer's last residual add is made by the next norm, or by the GEMV itself.
  const float* residual = nullptr;
  for (int l = 0; l < c.n_layers; ++l) residual = launch_layer(l, shape, plan, residual);
  if (shape.n_logits == 0) return;
  // Logit rows are increasing: as many as tokens means every token, in order; else gather them
  // (an embedding lookup is a row gather of any matrix) and round the gathered rows, which gives
  // each row the bits the norm's rounding gives it.
  const bool every_token = shape.n_logits == n;
  const QuantizedActivations rounded = plan.output_in.rounded;
  launch_rms_norm(a.x, residual, weights_.output_norm, n, c.hidden_size, eps, a.normed, ctx_,
                  every_token ? rounded : QuantizedActivations{});
  const float* logit_input = a.normed;
  if (!every_token) {
    const WeightMatrix normed{DType::F32, static_cast<std::size_t>(n), static_cast<std::size_t>(c.hidden_size), a.normed};
    launch_embedding(normed, inputs_.logit_tokens, shape.n_logits, a.logit_in, ctx_);
    logit_input = a.logit_in;
    if (rounded.codes) launch_quantize_activations(logit_input, shape.n_logits, c.hidden_size, rounded, ctx_);
  }
  if (hidden_only_) {
    hidden_rows_ = logit_input;
    return;
  }
  project(weights_.output, {logit_input, rounded}, shape.n_logits, a.logits);
  if (c.final_logit_softcap > 0) {
    const std::size_t values = static_cast<std::size_t>(shape.n_logits) * c.vocab_size;
    launch_softcap(a.logits, values, static_cast<float>(c.final_logit_softcap), ctx_);
  }
}

const float* GpuForward::launch_layer(int layer, const StepShape& shape, const StepPlan& step, const float* residual) {
  const auto& c = config_;
  const GpuLayer& w = weights_.layers[layer];
  const LayerPlan& p = step.layers[layer];
  const Activations& a = activations_;
  const int n = shape.n_tokens;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const HeadShape heads{c.n_heads, c.n_kv_heads, c.head_dim};
  const DeviceContext& ctx = ctx_;
  const bool fold = p.folded_norms, add_in_gemv = p.residual == ResidualAt::InGemv;
  require(!fold || !residual, "launch_layer", "a folded norm reads x as it is");
  float* const o_out = add_in_gemv ? a.x : a.proj;

  if (!fold) launch_rms_norm(a.x, residual, w.attn_norm, n, c.hidden_size, eps, a.normed, ctx, p.qkv_in.rounded, p.qkv_in.half);
  if (p.stacked_qkv) {
    project(w.wqkv, {a.normed, p.qkv_in.rounded, p.qkv_in.half}, n, a.q);
  } else {
    const WeightProduct qkv[] = {{w.wq, a.q}, {w.wk, a.k}, {w.wv, a.v}};
    project(qkv, fold ? GemvInput{a.x, RmsNormOf{w.attn_norm, eps}} : GemvInput{a.normed, p.qkv_in.rounded, p.qkv_in.half}, n);
  }
  if (w.bq) launch_add_bias(a.q, w.bq, n, c.q_dim(), ctx);
  if (w.bk) launch_add_bias(a.k, w.bk, n, c.kv_dim(), ctx);
  if (w.bv) launch_add_bias(a.v, w.bv, n, c.kv_dim(), ctx);
  if (c.qk_norm) launch_qk_norm(a.q, a.k, w.q_norm, w.k_norm, n, heads, eps, ctx);
  const KvCacheLayer cache = cache_layer(layer);
  const float* inv_freq = c.window(layer) > 0 ? weights_.inv_freq_local : weights_.inv_freq;
  DecodeRope fused_rope;
  switch (p.rope) {
    case RopeAt::InAttentionStackedRows:
      fused_rope = {a.q + c.q_dim(), a.q + c.q_dim() + c.kv_dim(), inputs_.slots, inv_freq, c.rope_layout,
                    c.q_dim() + 2 * c.kv_dim()};
      break;
    case RopeAt::InAttention: fused_rope = {a.k, a.v, inputs_.slots, inv_freq, c.rope_layout}; break;
    case RopeAt::OwnKernel:
      launch_rope_kv_append(a.q, a.k, a.v, inputs_.positions, inputs_.slots, n, heads, inv_freq, c.rope_layout, cache, ctx);
      break;
  }
  const auto scale = static_cast<float>(c.attention_scale()) * weights_.rope_scale_squared;
  launch_attention_planned(step.attention, a.q, cache, attention_batch(shape, layer), heads, scale, a.attn,
                           attention_workspace_.data(), ctx, fused_rope, p.o_in.half,
                           p.attention_rounds ? p.o_in.rounded : QuantizedActivations{});
  if (p.o_in.rounded.codes && !p.attention_rounds) launch_quantize_activations(a.attn, n, c.q_dim(), p.o_in.rounded, ctx);
  GemvInput o_input{a.attn, p.o_in.rounded, p.o_in.half};
  o_input.after_wide_attention = step.attention.decode_wide;
  project(w.wo, o_input, n, o_out, add_in_gemv);
  sum_over_ranks(n);
  if (w.post_attn_norm) launch_rms_norm(a.proj, nullptr, w.post_attn_norm, n, c.hidden_size, eps, a.proj, ctx);

  const InputCopies& ffn_in = p.gate_up_in;
  if (!fold) launch_rms_norm(a.x, a.proj, w.ffn_norm, n, c.hidden_size, eps, a.normed, ctx, ffn_in.rounded, ffn_in.half);
  const GemvInput ffn_input = fold ? GemvInput{a.x, RmsNormOf{w.ffn_norm, eps}} : GemvInput{a.normed, ffn_in.rounded, ffn_in.half};
  const float* down_input = a.gate;  // null where SwiGLU writes only the copy
  switch (p.ffn) {
    case FfnAt::ExpertGemvs:
    case FfnAt::ExpertGemms:
      launch_experts(w, p, n, o_out);  // down's products included
      break;
    case FfnAt::GemvSwiglu: launch_gemv_swiglu(w.w_gate, w.w_up, ffn_input, n, a.gate, ctx); break;
    case FfnAt::StackedGemm:
      project(w.w_gate_up, {a.normed, {}, ffn_in.half}, n, a.gate);
      launch_swiglu_stacked(a.gate, n, c.intermediate_size, p.down_in.half, ctx);
      down_input = nullptr;
      break;
    case FfnAt::Separate: {
      const WeightProduct gate_up[] = {{w.w_gate, a.gate}, {w.w_up, a.up}};
      project(gate_up, ffn_input, n);
      launch_glu(a.gate, a.up, static_cast<std::size_t>(n) * c.intermediate_size, c.activation, a.gate, ctx,
                 p.down_in.half);
      break;
    }
  }
  if (p.ffn != FfnAt::ExpertGemvs && p.ffn != FfnAt::ExpertGemms) {
    if (p.down_in.rounded.codes) launch_quantize_activations(a.gate, n, c.intermediate_size, p.down_in.rounded, ctx);
    project(w.w_down, {down_input, p.down_in.rounded, p.down_in.half}, n, o_out, add_in_gemv);
  }
  sum_over_ranks(n);
  if (w.post_ffn_norm) launch_rms_norm(a.proj, nullptr, w.post_ffn_norm, n, c.hidden_size, eps, a.proj, ctx);
  return add_in_gemv ? nullptr : a.proj;
}

void GpuForward::sum_over_ranks(int n_tokens) {
  if (!options_.communicator) return;
  const std::size_t values = static_cast<std::size_t>(n_tokens) * config_.hidden_size;
  options_.communicator->all_reduce_sum(activations_.proj, values, ctx_);
}

void GpuForward::launch_experts(const GpuLayer& w, const LayerPlan& p, int n_tokens, float* out) {
  const auto& c = config_;
  const Activations& a = activations_;
  GemvInput router_input{a.normed};
  router_input.fixed_order = options_.batch_invariant;
  launch_gemv(w.router, router_input, n_tokens, a.router_logits, ctx_);
  const ExpertRoutes routes = expert_routes_at(a.routes, n_tokens, c.n_experts, c.n_experts_used);
  launch_moe_route(a.router_logits, n_tokens, c.n_experts, c.n_experts_used, c.norm_topk_prob, routes, ctx_);
  if (p.ffn == FfnAt::ExpertGemvs) {
    multiply_experts_by_gemv(w, p, routes, n_tokens);
  } else {
    multiply_experts_by_gemm(w, routes, n_tokens);
  }
  launch_moe_combine(a.expert_out, routes, n_tokens, c.n_experts_used, c.hidden_size, out, ctx_);
}

// Each picked expert's gate, up and down for all its entries, by the expert GEMV: the routing's
// counts stay on the device. Output: activations_.expert_out, a row per entry.
void GpuForward::multiply_experts_by_gemv(const GpuLayer& w, const LayerPlan& p, const ExpertRoutes& routes,
                                          int n_tokens) {
  const auto& c = config_;
  const Activations& a = activations_;
  const int k = c.n_experts_used;
  const int slots = active_slots(n_tokens, c.n_experts, k);
  const ExpertProducts of_tokens{w.experts_gate.stride, routes.active, slots, routes.begin, routes.token, n_tokens};
  const GemvInput ffn_input{a.normed, p.gate_up_in.rounded};
  const std::size_t values = static_cast<std::size_t>(n_tokens) * k * c.expert_ffn;
  if (c.activation == MlpActivation::Silu && same_type(w.experts_gate.matrix, w.experts_up.matrix)) {
    launch_expert_gemv_swiglu(w.experts_gate.matrix, w.experts_up.matrix, of_tokens, ffn_input, a.expert_gate, ctx_);
  } else {
    launch_expert_gemv(w.experts_gate.matrix, of_tokens, ffn_input, a.expert_gate, ctx_);
    ExpertProducts up = of_tokens;
    up.stride = w.experts_up.stride;
    launch_expert_gemv(w.experts_up.matrix, up, ffn_input, a.expert_up, ctx_);
    launch_glu(a.expert_gate, a.expert_up, values, c.activation, a.expert_gate, ctx_);
  }
  const QuantizedActivations down_rounded = p.down_in.rounded;
  if (down_rounded.codes) launch_quantize_activations(a.expert_gate, n_tokens * k, c.expert_ffn, down_rounded, ctx_);
  ExpertProducts of_entries = of_tokens;
  of_entries.stride = w.experts_down.stride;
  of_entries.x_row = nullptr;
  launch_expert_gemv(w.experts_down.matrix, of_entries, {a.expert_gate, down_rounded}, a.expert_out, ctx_);
}

// The same by a GEMM per picked expert, of its entries' rows gathered in the routing's order. The
// host needs the routing's counts to size the GEMMs: it waits for them (a prefill step runs eagerly).
void GpuForward::multiply_experts_by_gemm(const GpuLayer& w, const ExpertRoutes& routes, int n_tokens) {
  const auto& c = config_;
  const Activations& a = activations_;
  const int entries = n_tokens * c.n_experts_used;
  expert_begin_.resize(c.n_experts + 1);
  RF_GPU_CHECK(gpuMemcpyAsync(expert_begin_.data(), routes.begin, expert_begin_.size() * sizeof(std::int32_t),
                              gpuMemcpyDeviceToHost, ctx_.stream()));
  ctx_.synchronize();
  // An embedding lookup is a row gather of any matrix: the normed rows of the entries' tokens.
  const WeightMatrix normed{DType::F32, static_cast<std::size_t>(n_tokens), static_cast<std::size_t>(c.hidden_size), a.normed};
  launch_embedding(normed, routes.token, entries, a.expert_in, ctx_);
  const std::size_t hidden = c.hidden_size, ffn = c.expert_ffn;
  for (int e = 0; e < c.n_experts; ++e) {
    const int first = expert_begin_[e], count = expert_begin_[e + 1] - first;
    if (count == 0) continue;
    const WeightProduct gate_up[] = {{w.experts_gate.expert(e), a.expert_gate + first * ffn},
                                     {w.experts_up.expert(e), a.expert_up + first * ffn}};
    launch_gemm_group(ctx_, gate_up, a.expert_in + first * hidden, count);
  }
  launch_glu(a.expert_gate, a.expert_up, entries * ffn, c.activation, a.expert_gate, ctx_);
  for (int e = 0; e < c.n_experts; ++e) {
    const int first = expert_begin_[e], count = expert_begin_[e + 1] - first;
    if (count == 0) continue;
    const WeightProduct down{w.experts_down.expert(e), a.expert_out + first * hidden};
    launch_gemm_group(ctx_, std::span(&down, 1), a.expert_gate + first * ffn, count);
  }
}

DeviceCeilings GpuForward::measure_ceilings() {
  const ContextScope scope(ctx_);
  DeviceCeilings ceilings{device_name_, measure_read_bandwidth(ctx_), measure_matmul_flops(ctx_)};
  // The matmul probe grew GemmContext's scratch, whose old address the graphs hold.
  ctx_.synchronize();
  graphs_.clear();
  return ceilings;
}

int GpuForward::graphs_captured() const {
  return static_cast<int>(std::count_if(graphs_.begin(), graphs_.end(), [](const auto& g) { return g.second.has_value(); }));
}

}  // namespace rf::llama
