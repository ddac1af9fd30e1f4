#include <algorithm>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/runner_options.h"
#include "engine/backend_select.h"
#include "engine/model_runner.h"
#include "model/checkpoint.h"
#include "models/stable_diffusion/checkpoint.h"
#include "models/stable_diffusion/memory_estimate.h"
#include "util/error.h"

namespace rf::cli {

namespace {

struct InfoFlags {
  std::string model;
  int ctx_size = 0;
  bool tensors = false;
  int width = 0, height = 0, batch = 0;  // Stable Diffusion's memory estimate; 0: native size, one image
  int tensor_parallel = 1;               // GPUs the GPU memory estimate splits the model over
};

std::string gib(std::size_t bytes) { return fmt::format("{:.2f} GiB", bytes / double(1u << 30)); }

void print_backends() {
  fmt::print("backends built: {}\n", fmt::join(built_backends(), ", "));
  fmt::print("devices: cpu ({} threads)\n", std::thread::hardware_concurrency());
  fmt::print("weight types supported: {}\n", weight_dtype_names());
  for (const auto& line : describe_gpu_devices()) fmt::print("         {}\n", line);
  if (const std::string collectives = describe_collectives(); !collectives.empty()) {
    fmt::print("collectives: {}\n", collectives);
  }
}

// One row per tensor in file order, then the totals, as gguf-dump lists a file.
void print_tensors(const TensorSet& tensors) {
  std::size_t name_width = 4, shape_width = 5;
  for (const auto& t : tensors) {
    name_width = std::max(name_width, t.name.size());
    shape_width = std::max(shape_width, t.shape_string().size());
  }
  const auto row = [&](std::string_view name, std::string_view type, std::string_view shape, auto elements,
                       auto bytes) {
    fmt::print("{:<{}}  {:<6}  {:<{}}  {:>12}  {:>14}\n", name, name_width, type, shape, shape_width, elements, bytes);
  };
  fmt::print("\n");
  row("name", "type", "shape", "elements", "bytes");
  std::uint64_t elements = 0, bytes = 0;
  for (const auto& t : tensors) {
    row(t.name, dtype_name(t.dtype), t.shape_string(), t.elements(), t.bytes);
    elements += t.elements();
    bytes += t.bytes;
  }
  fmt::print("total: {} tensors, {} elements, {} bytes ({})\n", tensors.size(), elements, bytes, gib(bytes));
}

// A Stable Diffusion checkpoint: what it is, its parts and their weights.
void print_stable_diffusion(const InfoFlags& f) {
  namespace sd = rf::stable_diffusion;
  sd::OpenOptions options;
  options.clip_vocab = ROCMFORGE_CLIP_VOCAB;
  const sd::Checkpoint ckpt = sd::Checkpoint::open(f.model, options);
  const sd::PipelineConfig& c = ckpt.config();
  const sd::CheckpointSummary& s = ckpt.summary();
  fmt::print("model: {}\n", f.model);
  fmt::print("format: {}\n", s.layout == sd::CheckpointLayout::diffusers_folder ? "diffusers folder" : "single file");
  std::vector<int> widths;
  for (const auto& level : c.unet.levels) widths.push_back(level.channels);
  fmt::print("architecture: {}, {} prediction; UNet {} input channels{}, widths {}, cross-attention {}; VAE 1/{}, "
             "scaling {}{}\n",
             sd::architecture_name(c.architecture), c.scheduler.prediction == sd::Prediction::v ? "v" : "epsilon",
             c.unet.in_channels, c.unet.in_channels == 9 ? " (inpainting)" : "", fmt::join(widths, "/"),
             c.unet.cross_attention_dim, c.vae.downscale(), c.vae.scaling_factor,
             c.vae.force_upcast ? ", fp32 (force_upcast)" : "");
  const int native = c.unet.sample_size * c.vae.downscale();
  fmt::print("native size: {}x{}\n", native, native);
  std::uint64_t total = 0;
  for (const auto& part : s.parts) {
    std::vector<std::string> types;
    for (const auto& [dtype, bytes] : part.dtype_bytes) types.push_back(std::string(dtype_name(dtype)));
    fmt::print("  {:<15} {:>8.2f} M parameters, {:.1f} MiB ({}), {}\n", part.name, part.parameters / 1e6,
               part.bytes / double(1u << 20),
               fmt::join(types, ", "), part.source);
    total += part.bytes;
  }
  fmt::print("memory: weights {} as stored\n", gib(total));
  sd::GenerationOptions o;
  o.width = f.width;
  o.height = f.height;
  o.batch = std::max(f.batch, 1);
  const sd::MemoryEstimate m = sd::estimate_memory(
      {c, ckpt.unet(), ckpt.vae(), ckpt.text_encoder(), ckpt.text_encoder_2(), ckpt.tokenizer()}, o);
  fmt::print("GPU memory at {}x{}, batch {}: at least {} (weights {}, fp32 activations {}: the most alive at once in a "
             "dry run); the kernels' scratch comes on top (docs/perf.md: measured 1.2x to 1.5x this)\n",
             f.width > 0 ? f.width : native, f.height > 0 ? f.height : native, o.batch, gib(m.total()), gib(m.weights),
             gib(m.activations));
  if (s.unused_tensors) fmt::print("unused tensors: {} (EMA copies, position ids, ...)\n", s.unused_tensors);
}

void print_model(const InfoFlags& f) {
  if (rf::stable_diffusion::is_stable_diffusion(f.model)) {
    if (f.tensors) fail("--tensors lists a language model's tensors; for Stable Diffusion checkpoints it is not there yet");
    if (f.ctx_size > 0) fail("--ctx-size sizes a language model's KV cache; a Stable Diffusion checkpoint has none");
    if (f.tensor_parallel > 1) fail("--tensor-parallel splits a language model; Stable Diffusion runs on one device");
    print_stable_diffusion(f);
    return;
  }
  if (f.width > 0 || f.height > 0 || f.batch > 0) {
    fail("-W, -H and --batch size a Stable Diffusion checkpoint's memory estimate; {} is a language model", f.model);
  }
  const Checkpoint ckpt = Checkpoint::load(f.model);
  const ModelConfig& c = ckpt.config();
  const int ctx = f.ctx_size > 0 ? f.ctx_size : default_ctx_size(c);
  // The CPU backend keeps keys and values in fp32.
  const std::size_t kv_bytes = 2ull * c.n_layers * ctx * c.kv_dim() * sizeof(float);
  fmt::print("model: {}\n", f.model);
  fmt::print("format: {}\n", ckpt.format() == CheckpointFormat::Gguf ? "gguf" : "hugging face safetensors");
  fmt::print("architecture: {} ({} layers, hidden {}, ffn {}, {} heads, {} kv heads, head dim {}, vocab {})\n",
             arch_name(c.arch), c.n_layers, c.hidden_size, c.intermediate_size, c.n_heads, c.n_kv_heads, c.head_dim,
             c.vocab_size);
  if (c.n_experts > 0) {
    const auto sparse = std::ranges::count(c.moe_layers, true);
    fmt::print("mixture of experts: {} experts, {} used per token, expert ffn {}, on {} of {} layers{}\n", c.n_experts,
               c.n_experts_used, c.expert_ffn, sparse, c.n_layers, c.norm_topk_prob ? "" : " (weights not renormalised)");
  }
  if (const int window = c.smallest_window()) {
    const auto sliding = std::ranges::count_if(c.layer_windows, [](int w) { return w > 0; });
    fmt::print("sliding-window attention: {} tokens on {} of {} layers\n", window, sliding, c.n_layers);
  }
  if (const auto& s = c.rope_scaling; s.kind == RopeScaling::Kind::LongRope) {
    fmt::print("rope: LongRoPE, the {} factors at a context of {} (original {}), attention factor {:.4f}\n",
               ctx > s.original_max_position ? "long" : "short", ctx, s.original_max_position, s.attention_factor);
  }
  if (c.rope_dims() != c.head_dim) fmt::print("partial rotary: {} of {} dimensions per head\n", c.rope_dims(), c.head_dim);
  fmt::print("parameters: {} ({:.2f} B)\n", ckpt.parameter_count(), ckpt.parameter_count() / 1e9);
  fmt::print("weight types: {}\n", ckpt.dtype_summary());
  if (c.n_experts > 0) {
    fmt::print("weights a token reads: {} of {}\n", gib(llama::active_matrix_bytes(ckpt.weights(), c)),
               gib(ckpt.weight_bytes()));
  }
  fmt::print("context length: {} (trained), {} (used below)\n", c.max_position_embeddings, ctx);
  fmt::print("memory: weights {}, KV cache {} (fp32, {} tokens), total {}\n", gib(ckpt.weight_bytes()), gib(kv_bytes),
             ctx, gib(ckpt.weight_bytes() + kv_bytes));
  const RunnerOptions defaults;
  const int block = ModelRunner::kBlockSize;
  BackendShape shape{block, (ctx + block - 1) / block, ctx, defaults.max_batch_tokens};
  shape.tensor_parallel = f.tensor_parallel;
  if (const auto gpu = gpu_footprint(ckpt, shape)) {
    const std::string split = f.tensor_parallel > 1 ? fmt::format(" on each of {} GPUs", f.tensor_parallel) : "";
    fmt::print("GPU memory{}: weights {}, KV cache {} (f16, {} tokens), activations {} ({} tokens a step), total {}\n",
               split, gib(gpu->weights), gib(gpu->kv_cache), ctx, gib(gpu->activations), defaults.max_batch_tokens,
               gib(gpu->total()));
  } else if (f.tensor_parallel > 1) {
    fmt::print("GPU memory: not estimated, as this build has no GPU backend to split the model over\n");
  }
  if (f.tensors) print_tensors(ckpt.tensors());
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto flags = std::make_shared<InfoFlags>();
  auto* cmd = app.add_subcommand("info", "The backends and devices of this build, and a model's shape and memory needs");
  auto* model = cmd->add_option("-m,--model", flags->model,
                                "A model folder or .gguf file, or a Stable Diffusion folder or single .safetensors "
                                "(default: the demo model, as generate)");
  cmd->add_option("-c,--ctx-size", flags->ctx_size, "Context size for the memory estimate")->check(CLI::NonNegativeNumber);
  cmd->add_option("--tensor-parallel,--tp", flags->tensor_parallel, "GPUs the GPU memory estimate splits the model over")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--tensors", flags->tensors, "Also list every tensor of the model: name, type, shape, elements, bytes");
  cmd->add_option("-W,--width", flags->width, "Stable Diffusion: image width for the memory estimate (default: native)")
      ->check(CLI::PositiveNumber)
      ->needs(model);
  cmd->add_option("-H,--height", flags->height, "Stable Diffusion: image height for the memory estimate (default: native)")
      ->check(CLI::PositiveNumber)
      ->needs(model);
  cmd->add_option("-b,--batch", flags->batch, "Stable Diffusion: images a run for the memory estimate (default: 1)")
      ->check(CLI::PositiveNumber)
      ->needs(model);
  cmd->callback([flags] {
    print_backends();
    if (flags->model.empty()) flags->model = default_model_path();
    print_model(*flags);
  });
}

}  // namespace rf::cli
