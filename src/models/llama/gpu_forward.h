#pragma once
// The Llama-family decoder on the GPU (host code; the kernels are backend/gpu's), step for step the CPU
// decoder's (models/llama/cpu_forward.cpp): weights copied to the device once in their stored
// types, the paged KV cache in f16 allocated up front, activations for max_batch_tokens tokens
// (longer batches run in chunks of that many, in order, so later tokens see earlier ones' keys).
// Decode steps, in which every sequence brings one token, are captured into a graph per shape
// and replayed; sample() keeps the logits on the device and returns only token ids, and
// queue_sample() lets the host stage the next step while the device runs this one.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "backend/gpu/attention/attention.h"
#include "backend/gpu/attention/kv_cache.h"
#include "backend/gpu/gemm/gemm.h"
#include "backend/gpu/gemm/gemv.h"
#include "backend/gpu/moe/moe.h"
#include "backend/gpu/quant/activation_copies.h"
#include "backend/gpu/collective/communicator.h"
#include "backend/gpu/runtime/device_buffer.h"
#include "backend/gpu/runtime/graph.h"
#include "backend/gpu/runtime/host_staging.h"
#include "backend/gpu/sampling/device_sampler.h"
#include "model/config.h"
#include "model/forward_pass.h"
#include "models/llama/gpu_step_plan.h"
#include "models/llama/gpu_weights.h"
#include "models/llama/weights.h"

namespace rf::llama {

struct GpuForwardOptions {
  int device = 0;  // the runtime's index of the GPU to run on
  int block_size = 16;
  int kv_blocks = 0;
  // The longest sequence the engine runs; 0: the whole KV cache. LongRoPE picks its factors by it.
  int max_context = 0;
  int max_batch_tokens = 512;
  bool graphs = true;  // false: decode steps launch eagerly too (tests compare the two)
  // Every token's logits have the same bits whatever the batch around it (as on the CPU): all
  // projections through the GEMV, all attention through the unsplit decode kernel. Prefill is slower.
  bool batch_invariant = false;
  ProgressFn load_progress = {};  // told the weights' bytes as they are uploaded
  // A rank of a tensor-parallel group (models/llama/tensor_split.h), running its shard: o's and down's
  // outputs are added up over the group before the residual add. Null: the whole model on one GPU.
  gpu::Communicator* communicator = nullptr;
};

// Why the GPU decoder cannot run this model (its attention kernels lack its head dim, it rotates
// part of each head: Phi-4-mini's partial rotary, or its experts exceed the routing kernel's
// limits), or nothing.
std::optional<std::string> gpu_unsupported(const ModelConfig& config);

class GpuForward : public ForwardPass {
 public:
  // The config must outlive this object; the weights are copied (the host copy may go).
  GpuForward(const ModelConfig& config, const LlamaWeights& weights, const GpuForwardOptions& options);
  ~GpuForward() override;

  // What the constructor will allocate, without a device: `weight_bytes` as Checkpoint::weight_bytes.
  static MemoryFootprint footprint(const ModelConfig& config, std::size_t weight_bytes, const GpuForwardOptions& options);

  void forward(const Batch& batch, std::vector<float>& logits) override;
  void hidden_states(const Batch& batch, std::vector<float>& states) override;
  std::vector<std::int32_t> sample(const Batch& batch, std::span<const SampleRow> rows) override;
  void queue_sample(const Batch& batch, std::span<const SampleRow> rows) override;
  std::vector<std::int32_t> take_tokens() override;
  int kv_blocks() const override { return options_.kv_blocks; }
  std::size_t kv_cache_bytes() const override { return kv_cache_.bytes(); }
  std::string device_name() const override { return device_name_; }
  DeviceCeilings measure_ceilings() override;

  int graphs_captured() const;

 private:
  // Device buffers of one step, carved from one allocation each.
  struct Activations {
    float *x, *normed, *q, *k, *v, *attn, *proj, *gate, *up, *logit_in, *logits;
    std::uint16_t* half;  // a GEMM input's 16-bit copy, from the norm or SwiGLU before it
    // A sparse layer's: router logits, and per entry (a token's pick of an expert) the expert's
    // gate (then its activation), up and output; the routing's arrays (gpu::ExpertRoutes) last.
    float *router_logits, *expert_in, *expert_gate, *expert_up, *expert_out;
    void* routes;
  };
  struct StepInputs {
    std::int32_t *tokens, *positions, *seq, *slots, *logit_tokens, *block_tables;
  };
  // What a chunk's launches depend on besides the buffers: a graph replays for one StepShape.
  struct StepShape {
    int n_tokens;
    int n_logits;
    int max_positions;  // rounded up, so that few shapes occur
    bool decode_only;   // every token of its own sequence: attention does RoPE and the KV append
    bool operator<(const StepShape& o) const {
      return std::tie(n_tokens, n_logits, max_positions, decode_only) <
             std::tie(o.n_tokens, o.n_logits, o.max_positions, o.decode_only);
    }
  };

  static std::size_t layout(const ModelConfig& c, int tokens, float* base, Activations* out);
  static std::size_t layout(int tokens, int table_width, std::int32_t* base, StepInputs* out);

  // Runs the batch chunk by chunk; after each chunk, its logit rows [first, first + count) are in
  // activations_.logits and on_logits(first, count) is called. Its previous_token(r) take row r of
  // the step sampled before, r < previous_rows (the embedding reads them on the device).
  void run(const Batch& batch, const std::function<void(int first, int count)>& on_logits, int previous_rows = 0);
  // Uploads tokens [begin, end) of the batch with logit rows [first_row, end_row), and says their shape.
  StepShape stage(const Batch& batch, int begin, int end, int first_row, int end_row);
  // Drops the graphs when a step of this shape may grow GemmContext's operand copies (see below).
  void drop_graphs_if_gemm_grows(const StepShape& shape);
  // The step's attention batch for `layer` (its window); for any layer (no window: what sizes the plan).
  gpu::AttentionBatch attention_batch(const StepShape& shape, int layer = -1) const;
  // The step's plan (gpu_step_plan.h), made the first time its shape comes.
  const StepPlan& step_plan(const StepShape& shape);
  StepPlan plan_step(const StepShape& shape) const;
  LayerPlan plan_layer(const GpuLayer& w, const StepShape& shape) const;
  // A step's launches; with hidden_only_, the logit rows' final hidden states (left at
  // hidden_rows_) instead of their logits.
  void launch_step(const StepShape& shape);
  // Returns the residual the next norm adds to x: the layer's last output, or null where it added it.
  const float* launch_layer(int layer, const StepShape& shape, const StepPlan& step, const float* residual);
  // A sparse layer's MLP of activations_.normed into out: the router's logits (by the GEMV, in fp32,
  // so that the picks are the CPU's but at near ties), the routing, each picked expert's products
  // (as p.ffn says), and their weighted sum.
  void launch_experts(const GpuLayer& w, const LayerPlan& p, int n_tokens, float* out);
  // A tensor-parallel rank's: proj's n_tokens rows added up over the group, in place.
  void sum_over_ranks(int n_tokens);
  void multiply_experts_by_gemv(const GpuLayer& w, const LayerPlan& p, const gpu::ExpertRoutes& routes, int n_tokens);
  void multiply_experts_by_gemm(const GpuLayer& w, const gpu::ExpertRoutes& routes, int n_tokens);
  // Whether the GEMV serves a step of n_tokens (else the GEMM does): decode, or any step when batch-invariant.
  bool gemv_serves(int n_tokens) const;
  // Whether a step of n_tokens folds each layer's norms into the GEMVs after them (RmsNormOf), its
  // o and down GEMVs adding into x: one token, one GPU (a rank's partial sums go through the
  // all-reduce first), and 16- or 32-bit float weights in every product of a norm's output. (Quantized weights read x's int8 copy, which the norm makes.) Not in batch-invariant
  // mode, whose steps of several tokens keep the norm's launch.
  bool folds_norms(int n_tokens) const;
  // Whether the GEMM that multiplies w for n_tokens takes x's int8 copy: quantized weights in a decode
  // batch (gemm_multiplies_rounded), rounded as the GEMV rounds one token's. Prefill keeps 16-bit
  // operands: the int8 rounding moved the quantized fixtures' prefill logits 8 times as far from the
  // reference (docs/perf_history.md, issue #25).
  bool gemm_reads_rounded(const WeightMatrix& w, int n_tokens, bool decode_only) const;
  // Where the GEMV or GEMM that multiplies w for n_tokens wants its input rounded to int8: the step's
  // buffer for it; else none.
  gpu::QuantizedActivations rounding_for(const WeightMatrix& w, int n_tokens, bool decode_only) const;
  // Where the GEMM that multiplies w for n_tokens takes a 16-bit copy of its input (16-bit and
  // quantized weights, unless it takes the int8 copy): the step's buffer for it, as the type it needs;
  // else none.
  gpu::HalfCopy half_copy_for(const WeightMatrix& w, int n_tokens, bool decode_only) const;
  gpu::AttentionPlan attention_plan(const gpu::AttentionBatch& batch) const;
  // out = W x for n_tokens tokens (GEMV or GEMM, as above); products of one x go together.
  void project(std::span<const gpu::WeightProduct> products, gpu::GemvInput x, int n_tokens);
  // The same for one product; with `accumulate` (GEMV only), out += W x.
  void project(const WeightMatrix& w, gpu::GemvInput x, int n_tokens, float* out, bool accumulate = false);
  gpu::KvCacheLayer cache_layer(int layer);

  const ModelConfig& config_;
  GpuForwardOptions options_;
  std::string device_name_;
  // First of the device's members: made first (it makes its device current for the buffers below) and
  // gone last.
  gpu::DeviceContext ctx_;
  GpuWeights weights_;
  gpu::DeviceBuffer<std::uint16_t> kv_cache_;  // per layer: keys, then values
  gpu::DeviceBuffer<float> activation_storage_;
  Activations activations_;
  gpu::DeviceBuffer<std::int32_t> input_storage_;
  StepInputs inputs_;
  gpu::Uploads<std::int32_t> input_uploads_;  // staging, in input_storage_'s layout
  gpu::DeviceSampler sampler_;
  // The attention's split partials, for any step (allocated once: graphs hold its address).
  gpu::DeviceBuffer<std::uint8_t> attention_workspace_;
  // The int8 copy of a GEMV's input, for as many tokens as the GEMV serves.
  gpu::DeviceBuffer<std::uint8_t> rounded_storage_;
  gpu::QuantizedActivations rounded_;
  // The int8 copies of a sparse layer's inputs to quantized experts: the tokens' (gate and up), then
  // every entry's (down), for a whole step.
  gpu::DeviceBuffer<std::uint8_t> expert_rounded_storage_;
  gpu::QuantizedActivations expert_rounded_;
  std::vector<std::int32_t> expert_begin_;  // a prefill step's routing's offsets, read back
  // GemmContext's operand copies grow with the steps (up to most_tokens_ tokens). Growing moves them,
  // and graphs hold their address: they are dropped then. Only a step of a shape not seen before,
  // which runs eagerly, grows them.
  int most_tokens_ = 0;
  // Every layer's q, k, v, gate and up hold 16- or 32-bit floats (folds_norms).
  bool norms_foldable_ = false;
  std::map<StepShape, StepPlan> plans_;
  // A decode shape's first step runs eagerly; the second captures it.
  std::map<StepShape, std::optional<gpu::CapturedGraph>> graphs_;
  bool hidden_only_ = false;              // hidden_states() is running (never in a graph)
  const float* hidden_rows_ = nullptr;    // where its chunk's rows are
};

}  // namespace rf::llama
