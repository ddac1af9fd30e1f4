#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/runner_options.h"
#include "engine/bench.h"
#include "engine/model_runner.h"
#include "engine/synthetic_model.h"
#include "util/error.h"

namespace rf::cli {

namespace {

struct BenchFlags {
  std::string model;
  std::string synthetic;
  std::string dtype = "bf16";
  bool json = false;
  RunnerOptions options;
  BenchSettings settings;
};

DType parse_dtype(const std::string& name) {
  for (DType t : kWeightDTypes) {
    if (dtype_name(t) == name) return t;
  }
  fail("--dtype {}: unknown (use one of {})", name, weight_dtype_names());
}

// Enough KV cache for the longest prompt and for every batch of decoding sequences.
int needed_ctx(const BenchSettings& s) {
  int ctx = 1;
  for (int p : s.prompt_lengths) ctx = std::max(ctx, p);
  for (int n : s.generation_lengths) {
    const int blocks = (n + ModelRunner::kBlockSize - 1) / ModelRunner::kBlockSize;
    for (int b : s.batch_sizes) ctx = std::max(ctx, b * blocks * ModelRunner::kBlockSize);
  }
  return ctx;
}

// -m MODEL, --synthetic NAME, or neither: the bundled demo model, as `generate` takes it.
std::unique_ptr<ModelRunner> load(BenchFlags& f) {
  if (!f.model.empty() && !f.synthetic.empty()) fail("give exactly one of -m MODEL and --synthetic NAME");
  if (f.options.ctx_size == 0) f.options.ctx_size = needed_ctx(f.settings);
  if (f.synthetic.empty()) return std::make_unique<ModelRunner>(f.model.empty() ? default_model_path() : f.model, f.options);
  return std::make_unique<ModelRunner>(build_synthetic_model(f.synthetic, parse_dtype(f.dtype), 42), std::nullopt, f.options);
}

void run(BenchFlags& f) {
  auto runner = load(f);
  const DeviceCeilings ceilings = runner->backend().measure_ceilings();
  const auto rows = run_bench(*runner, f.settings, ceilings);
  const Checkpoint& ckpt = runner->checkpoint();
  const std::string model = !f.synthetic.empty() ? f.synthetic : f.model.empty() ? default_model_path() : f.model;
  if (f.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows) {
      out.push_back({{"model", model}, {"weights", ckpt.dtype_summary()}, {"params", ckpt.parameter_count()},
                     {"device", ceilings.device}, {"read_bandwidth", ceilings.read_bandwidth},
                     {"matmul_flops", ceilings.matmul_flops}, {"test", r.test}, {"batch", r.batch},
                     {"tokens_per_second", r.tokens_per_second}, {"median", r.median}, {"bound", r.bound},
                     {"bound_by", r.bound_by}, {"bytes_per_step", r.bytes_per_step}});
    }
    fmt::print("{}\n", out.dump(2));
    return;
  }
  fmt::print("device: {}; measured read bandwidth {:.1f} GB/s, matmul peak {:.1f} GFLOP/s\n", ceilings.device,
             ceilings.read_bandwidth / 1e9, ceilings.matmul_flops / 1e9);
  fmt::print("| model | weights | params | test | batch | t/s median | min .. max | bound t/s | % of bound |\n");
  fmt::print("|---|---|---|---|---:|---:|---:|---:|---:|\n");
  for (const auto& r : rows) {
    fmt::print("| {} | {} | {:.2f} B | {} | {} | {:.2f} | {:.2f} .. {:.2f} | {:.2f} ({}) | {:.0f}% |\n", model,
               ckpt.dtype_summary(), ckpt.parameter_count() / 1e9, r.test, r.batch, r.median, r.min, r.max, r.bound,
               r.bound_by, 100 * r.median / r.bound);
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto flags = std::make_shared<BenchFlags>();
  auto* cmd = app.add_subcommand("bench", "Measure prompt processing (pp) and generation (tg) speed against the device's bounds");
  cmd->add_option("-m,--model", flags->model, "A model folder or .gguf file (default, without --synthetic: the bundled demo model)");
  cmd->add_option("--synthetic", flags->synthetic,
                  fmt::format("A random-weight model of a real shape: {}", fmt::join(synthetic_model_names(), ", ")));
  cmd->add_option("--dtype", flags->dtype, "Weight type of a synthetic model: " + weight_dtype_names());
  cmd->add_option("-p,--n-prompt", flags->settings.prompt_lengths, "Prompt lengths (comma-separated; 0 skips)")->delimiter(',');
  cmd->add_option("-n,--n-gen", flags->settings.generation_lengths, "Generation lengths (comma-separated; 0 skips)")->delimiter(',');
  cmd->add_option("-b,--batch", flags->settings.batch_sizes, "Sequences decoding together (comma-separated)")->delimiter(',');
  cmd->add_option("-r,--repetitions", flags->settings.repetitions, "Repetitions per row")->check(CLI::PositiveNumber);
  add_device_option(*cmd, flags->options);
  cmd->add_option("-t,--threads", flags->options.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("-c,--ctx-size", flags->options.ctx_size, "KV cache size (0: what the settings need)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--ubatch", flags->options.max_batch_tokens, "Prompt tokens per forward step")->check(CLI::PositiveNumber);
  add_batch_invariant_flag(*cmd, flags->options);
  add_parallel_options(*cmd, flags->options);
  cmd->add_flag("--json", flags->json, "Print JSON instead of the table");
  cmd->callback([flags] { run(*flags); });
}

}  // namespace rf::cli
