#include "engine/bench.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <memory>
#include <random>

#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "models/llama/weights.h"
#include "util/error.h"

namespace rf {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::vector<std::int32_t> random_tokens(std::size_t n, int vocab, std::mt19937& rng) {
  std::uniform_int_distribution<std::int32_t> pick(0, vocab - 1);
  std::vector<std::int32_t> ids(n);
  for (auto& id : ids) id = pick(rng);
  return ids;
}

// Weight bytes a forward step of `tokens` tokens reads: every dense matrix once, except the embedding
// table, of which only one row per token is gathered (unless it doubles as the output head); of a
// sparse layer's experts, those the tokens pick: k of n for one token, and for more the share
// expected to be picked at least once were each token's picks uniform, 1 - (1 - k/n)^tokens.
// Split over `ranks` GPUs (tensor parallelism), each rank reads its share of the layers and the whole
// output head: what one rank reads, which bounds the step.
double step_weight_bytes(const Checkpoint& ckpt, int tokens, int ranks) {
  const ModelConfig& c = ckpt.config();
  const auto& e = ckpt.weights().token_embedding;
  const double embedding = static_cast<double>(e.bytes());
  const double head = static_cast<double>(ckpt.weights().output.bytes());
  const double experts = static_cast<double>(llama::expert_matrix_bytes(ckpt.weights(), c));
  const double picked = c.n_experts ? 1.0 - std::pow(1.0 - static_cast<double>(c.n_experts_used) / c.n_experts, tokens) : 0.0;
  const double all = static_cast<double>(ckpt.weight_bytes()) - experts * (1.0 - picked) -
                     (c.tie_word_embeddings ? 0.0 : embedding);
  return (all - head) / ranks + head;
}

// Bytes of keys and values a token at `position` reads, every layer, in the backend's cache type
// (fp32 on the CPU, f16 on the GPU): one rank's share where the backend is split.
double kv_bytes_read(const ForwardPass& backend, int position) {
  const double per_position = static_cast<double>(backend.kv_cache_bytes()) / (backend.kv_blocks() * ModelRunner::kBlockSize);
  return per_position / backend.ranks() * (position + 1);
}

// Prefill runs every layer's projections for every token, but the output head only for the last.
double prefill_flops(const ModelConfig& c, std::size_t layer_parameters, int tokens) {
  const double projections = 2.0 * static_cast<double>(layer_parameters) * tokens + 2.0 * c.vocab_size * c.hidden_size;
  // QK^T and PV over the causal triangle, every head of every layer.
  const double attention = 4.0 * c.head_dim * c.n_heads * c.n_layers * (tokens * (tokens + 1.0) / 2.0);
  return projections + attention;
}

// The layers' matrix parameters a token multiplies: a sparse layer's k experts' of its n.
std::size_t layer_matrix_parameters(const ModelConfig& c) {
  std::size_t parameters = 0;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::size_t ffn = c.is_moe(l) ? static_cast<std::size_t>(c.n_experts_used) * c.expert_ffn : c.intermediate_size;
    parameters += static_cast<std::size_t>(c.hidden_size) * (2 * c.q_dim() + 2 * c.kv_dim()) + 3ull * c.hidden_size * ffn;
  }
  return parameters;
}

double time_prefill(ModelRunner& runner, const std::vector<std::int32_t>& tokens) {
  SequenceBlocks blocks(runner.blocks(), ModelRunner::kBlockSize);
  blocks.reserve(static_cast<int>(tokens.size()));  // the cache's bookkeeping stays out of the timing
  std::vector<float> logits;
  const auto start = Clock::now();
  for_each_chunk(tokens, runner.max_batch_tokens(), blocks, ChunkLogits::Last,
                 [&](const Batch& batch, std::size_t, std::size_t) { runner.forward(batch, logits); });
  return seconds_since(start);
}

// `batch` sequences decode `steps` tokens together from an empty context, each step's tokens
// sampled greedily by the backend from the last, as generation does: each step is queued before the
// tokens of the one before reach the host (on the GPU only the ids cross, after the step).
double time_decode(ModelRunner& runner, int batch_size, int steps, std::mt19937& rng) {
  std::vector<std::unique_ptr<SequenceBlocks>> sequences;
  SamplingParams greedy;
  greedy.temperature = 0;
  std::vector<Sampler> samplers(batch_size, Sampler(greedy));
  std::vector<SampleRow> rows;
  for (int s = 0; s < batch_size; ++s) {
    sequences.push_back(std::make_unique<SequenceBlocks>(runner.blocks(), ModelRunner::kBlockSize));
    sequences.back()->reserve(steps);
    rows.push_back({samplers[s], {}});
  }
  const std::vector<std::int32_t> first = random_tokens(batch_size, runner.config().vocab_size, rng);
  std::vector<std::int32_t> previous(batch_size);
  for (int s = 0; s < batch_size; ++s) previous[s] = previous_token(s);  // sequence s is logit row s
  const auto start = Clock::now();
  for (int step = 0; step < steps; ++step) {
    Batch batch;
    for (int s = 0; s < batch_size; ++s) {
      batch.block_tables.push_back(sequences[s]->table());
      batch.add_sequence(s, step == 0 ? &first[s] : &previous[s], 1, step, true);
    }
    runner.queue_sample(batch, rows);
    if (step > 0) runner.take_tokens();
  }
  runner.take_tokens();
  return seconds_since(start);
}

BenchRow summarise(std::string test, int batch, std::vector<double> rates) {
  BenchRow row;
  row.test = std::move(test);
  row.batch = batch;
  row.tokens_per_second = rates;
  std::sort(rates.begin(), rates.end());
  row.median = rates[rates.size() / 2];
  row.min = rates.front();
  row.max = rates.back();
  return row;
}

}  // namespace

std::vector<BenchRow> run_bench(ModelRunner& runner, const BenchSettings& settings, const DeviceCeilings& ceilings) {
  if (settings.repetitions < 1) fail("repetitions must be at least 1");
  const ModelConfig& c = runner.config();
  // The bound of a split model leaves out its all-reduces (docs/perf.md says what they cost).
  const int ranks = runner.backend().ranks();
  std::mt19937 rng(12345);
  std::vector<BenchRow> rows;

  for (int p : settings.prompt_lengths) {
    if (p <= 0) continue;
    if (p > runner.ctx_size()) fail("pp{} does not fit in the context of {} (raise --ctx-size)", p, runner.ctx_size());
    const auto tokens = random_tokens(p, c.vocab_size, rng);
    time_prefill(runner, tokens);  // warm-up
    std::vector<double> rates;
    for (int r = 0; r < settings.repetitions; ++r) rates.push_back(p / time_prefill(runner, tokens));
    BenchRow row = summarise("pp" + std::to_string(p), 1, std::move(rates));
    const double chunks = std::ceil(static_cast<double>(p) / runner.max_batch_tokens());
    const double weight_bytes = step_weight_bytes(runner.checkpoint(), std::min(p, runner.max_batch_tokens()), ranks);
    const double memory_seconds = chunks * weight_bytes / ceilings.read_bandwidth;
    const double compute_seconds = prefill_flops(c, layer_matrix_parameters(c), p) / ranks / ceilings.matmul_flops;
    row.bound = p / std::max(memory_seconds, compute_seconds);
    row.bound_by = compute_seconds >= memory_seconds ? "compute" : "memory";
    row.bytes_per_step = chunks * weight_bytes;
    rows.push_back(std::move(row));
  }

  for (int n : settings.generation_lengths) {
    if (n <= 0) continue;
    for (int b : settings.batch_sizes) {
      if (b <= 0) fail("batch sizes must be positive, got {}", b);
      if (static_cast<long>(b) * ((n + ModelRunner::kBlockSize - 1) / ModelRunner::kBlockSize) > runner.blocks().total_blocks()) {
        fail("tg{} with batch {} needs more KV cache than the context of {} holds (raise --ctx-size)", n, b, runner.ctx_size());
      }
      time_decode(runner, b, std::min(n, 8), rng);  // warm-up
      std::vector<double> rates;
      for (int r = 0; r < settings.repetitions; ++r) rates.push_back(static_cast<double>(b) * n / time_decode(runner, b, n, rng));
      BenchRow row = summarise("tg" + std::to_string(n), b, std::move(rates));
      const double weight_bytes = step_weight_bytes(runner.checkpoint(), b, ranks);
      double bytes = 0;
      for (int step = 0; step < n; ++step) bytes += weight_bytes + b * kv_bytes_read(runner.backend(), step);
      row.bound = static_cast<double>(b) * n / (bytes / ceilings.read_bandwidth);
      row.bound_by = "memory";
      row.bytes_per_step = bytes / n;
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

}  // namespace rf
