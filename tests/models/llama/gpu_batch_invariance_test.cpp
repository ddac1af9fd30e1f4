// Batch invariance on the GPU (llama::GpuForwardOptions::batch_invariant): a token's logits have the same bits
// whether its sequence runs alone or batched with others, its prompt in one step or cut into chunks
// mixed with other sequences' decode tokens. And, end to end, concurrent greedy requests through the
// scheduler get exactly the tokens each gets alone, as the CPU's scheduler test checks there.
#include <chrono>
#include <thread>

#include "model/checkpoint.h"
#include "models/llama/gpu_forward.h"
#include "engine/backend_select.h"
#include "engine/scheduler_client.h"
#include "backend/gpu/gpu_test.h"

namespace rf::gpu::test {
namespace {

using namespace std::chrono_literals;

class BatchInvariance : public GpuTest {};

const std::string kSource = ROCMFORGE_SOURCE_DIR;
// bf16 (the demo model), f32, and Q8_0 weights.
const std::string kModels[] = {kSource + "/models/kjv-llama", kSource + "/tests/fixtures/models/llama3",
                               kSource + "/models/kjv-llama/model.q8_0.gguf"};
constexpr int kBlocksPerSequence = 4;  // 64 positions each

std::vector<std::int32_t> table_of(int sequence) {
  std::vector<std::int32_t> table(kBlocksPerSequence);
  for (int b = 0; b < kBlocksPerSequence; ++b) table[b] = sequence * kBlocksPerSequence + b;
  return table;
}

// A sequence's tokens [begin, end) at their positions, every one's logits asked for (or the last's).
void add(Batch& batch, int sequence, const std::vector<std::int32_t>& tokens, int begin, int end, bool every_logit = true) {
  batch.block_tables.push_back(table_of(sequence));
  batch.add_sequence(static_cast<std::int32_t>(batch.block_tables.size() - 1), tokens.data() + begin, end - begin, begin,
                     true, every_logit);
}

TEST_F(BatchInvariance, LogitsOfATokenDoNotDependOnItsBatch) {
  for (const std::string& model : kModels) {
    const Checkpoint checkpoint = Checkpoint::load(model);
    const ModelConfig& config = checkpoint.config();
    // Three sequences: prompts of 21, 9 and 14 tokens, then 3 decode steps each.
    constexpr int kPrompt[] = {21, 9, 14}, kDecode = 3;
    std::vector<std::vector<std::int32_t>> tokens(3);
    for (int s = 0; s < 3; ++s) {
      for (int i = 0; i < kPrompt[s] + kDecode; ++i) tokens[s].push_back(random_int(0, config.vocab_size - 1));
    }
    const llama::GpuForwardOptions options{
        .block_size = 16, .kv_blocks = 3 * kBlocksPerSequence, .max_batch_tokens = 8, .batch_invariant = true};
    const std::size_t vocab = config.vocab_size;
    std::vector<float> logits;

    // Alone: each sequence's prompt in one batch (chunks of 8), then its decode steps one at a time.
    std::vector<std::vector<float>> alone(3);
    {
      llama::GpuForward gpu(config, checkpoint.weights(), options);
      for (int s = 0; s < 3; ++s) {
        Batch prompt;
        add(prompt, s, tokens[s], 0, kPrompt[s]);
        gpu.forward(prompt, logits);
        alone[s] = logits;
        for (int i = kPrompt[s]; i < kPrompt[s] + kDecode; ++i) {
          Batch step;
          add(step, s, tokens[s], i, i + 1);
          gpu.forward(step, logits);
          alone[s].insert(alone[s].end(), logits.begin(), logits.end());
        }
      }
    }

    // Together: steps of mixed work. Sequence 0's prompt comes in pieces of 5 beside the others'
    // prompts and decode tokens, asking for each piece's last logits only (so that a step's logit rows
    // are gathered from its tokens); every step has a different token count and chunking.
    std::vector<std::vector<float>> together(3);
    std::vector<std::vector<int>> positions(3);  // together[s]'s rows
    std::vector<int> done(3, 0);
    llama::GpuForward gpu(config, checkpoint.weights(), options);
    while (done[0] < kPrompt[0] + kDecode || done[1] < kPrompt[1] + kDecode || done[2] < kPrompt[2] + kDecode) {
      Batch step;
      std::vector<int> taken(3, 0);
      std::vector<bool> last_only(3, false);
      for (int s = 0; s < 3; ++s) {
        const int total = kPrompt[s] + kDecode;
        if (done[s] >= total) continue;
        const int want = done[s] < kPrompt[s] ? (s == 0 ? 5 : kPrompt[s]) : 1;
        taken[s] = std::min({want, total - done[s], done[s] < kPrompt[s] ? kPrompt[s] - done[s] : 1});
        last_only[s] = s == 0 && done[s] < kPrompt[s];
        add(step, s, tokens[s], done[s], done[s] + taken[s], !last_only[s]);
      }
      gpu.forward(step, logits);
      std::size_t row = 0;
      for (int s = 0; s < 3; ++s) {
        const int rows = last_only[s] ? std::min(taken[s], 1) : taken[s];
        together[s].insert(together[s].end(), logits.begin() + row * vocab, logits.begin() + (row + rows) * vocab);
        for (int i = done[s] + taken[s] - rows; i < done[s] + taken[s]; ++i) positions[s].push_back(i);
        row += rows;
        done[s] += taken[s];
      }
    }
    for (int s = 0; s < 3; ++s) {
      std::vector<float> expected;
      for (const int i : positions[s]) expected.insert(expected.end(), alone[s].begin() + i * vocab, alone[s].begin() + (i + 1) * vocab);
      EXPECT_EQ(bits(together[s]), bits(expected)) << model << " sequence " << s;
    }
  }
}

// The scheduler on the GPU, batch-invariant: staggered greedy requests, so that steps mix prefill
// chunks and decode tokens, each get what generate() gives the same prompt alone.
TEST_F(BatchInvariance, ConcurrentGreedyRequestsGetWhatTheyGetAlone) {
  using serving_test::greedy;
  for (const std::string& model : {kModels[0], kModels[2]}) {
    ModelRunner runner(model, {.ctx_size = 256, .kv_cache_tokens = 4096, .max_batch_tokens = 64,
                               .device = built_backends().back(), .batch_invariant = true});
    constexpr int kTokens = 32;
    std::vector<std::vector<std::int32_t>> prompts;
    for (const auto& text : serving_test::kDemoPrompts) prompts.push_back(runner.tokenizer().encode(text, true));
    const auto expected = serving_test::alone(runner, prompts, kTokens);
    Scheduler scheduler(runner, {.step_tokens = 8});
    std::vector<std::shared_ptr<RequestChannel>> channels;
    for (const auto& prompt : prompts) {
      channels.push_back(scheduler.submit(greedy(prompt, kTokens)));
      std::this_thread::sleep_for(2ms);
    }
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      const serving_test::Outcome out = serving_test::collect(*channels[i]);
      EXPECT_TRUE(out.finished) << serving_test::kDemoPrompts[i] << ": " << out.error;
      EXPECT_EQ(out.tokens, expected[i]) << model << ": " << serving_test::kDemoPrompts[i];
    }
    EXPECT_GT(scheduler.metrics().batch_tokens.snapshot().sum / std::max<double>(1, scheduler.metrics().steps), 1.5)
        << "nothing was batched";
  }
}

}  // namespace
}  // namespace rf::gpu::test
