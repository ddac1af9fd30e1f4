#include "engine/generate.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>

#include "engine/model_runner.h"
#include "engine/sequence.h"
#include "engine/stop_matcher.h"
#include "util/error.h"

namespace rf {

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One sequence's decode steps, queued and not yet taken. Those left when generation ends (a step
// queued past a stop, or an error on the way) are taken and dropped: the runner is ready for the next.
class QueuedSteps {
 public:
  explicit QueuedSteps(ModelRunner& runner) : runner_(runner) {}
  QueuedSteps(const QueuedSteps&) = delete;
  QueuedSteps& operator=(const QueuedSteps&) = delete;
  ~QueuedSteps() {
    try {
      while (count_ > 0) take();
    } catch (const std::exception&) {  // an error is already on its way out, or the device is gone
    }
  }

  void queue(const Batch& batch, const SampleRow& row) {
    runner_.queue_sample(batch, std::span(&row, 1));
    ++count_;
  }
  std::int32_t take() {
    --count_;
    return runner_.take_tokens().front();
  }
  int count() const { return count_; }

 private:
  ModelRunner& runner_;
  int count_ = 0;
};
}  // namespace

GenerateResult generate(ModelRunner& runner, const std::vector<std::int32_t>& prompt, const GenerateOptions& options,
                        const std::function<void(std::string_view)>& on_text) {
  if (prompt.empty()) fail("the prompt is empty: nothing to generate from");
  const int ctx = runner.ctx_size();
  if (static_cast<int>(prompt.size()) >= ctx) {
    fail("the prompt has {} tokens, which does not fit in the context of {} (raise --ctx-size)", prompt.size(), ctx);
  }
  const int room = ctx - static_cast<int>(prompt.size());
  const int max_tokens = options.max_tokens < 0 ? room : std::min(options.max_tokens, room);

  Sampler sampler(options.sampling);
  StopMatcher stops(options.stop);
  StreamDecoder decoder(runner.tokenizer());
  SequenceBlocks blocks(runner.blocks(), ModelRunner::kBlockSize);
  GenerateResult result;
  result.prompt_tokens = prompt.size();
  auto emit = [&](std::string_view text) {
    if (text.empty()) return;
    result.text += text;
    if (on_text) on_text(text);
  };

  std::vector<std::int32_t> history = prompt;
  std::optional<grammar::TokenConstraint> constraint;
  if (options.grammar) constraint.emplace(options.grammar);
  std::shared_ptr<const grammar::TokenMask> mask;
  // The row that samples the next token: its grammar's mask, where there is one.
  auto sample_row = [&]() {
    if (constraint) mask = constraint->allowed();
    return SampleRow{sampler, history, mask ? mask->words() : std::span<const std::uint64_t>{}};
  };
  // The next token after `batch`, which asks for its last token's logits: sampled by the backend.
  auto next_token = [&](const Batch& batch) {
    const SampleRow row = sample_row();
    return runner.sample(batch, std::span(&row, 1)).front();
  };

  std::vector<float> logits;
  std::int32_t next = 0;
  const auto prefill_start = std::chrono::steady_clock::now();
  for_each_chunk(prompt, runner.max_batch_tokens(), blocks, ChunkLogits::Last,
                 [&](const Batch& batch, std::size_t begin, std::size_t count) {
                   if (begin + count == prompt.size()) {
                     next = next_token(batch);
                   } else {
                     runner.forward(batch, logits);
                   }
                 });
  result.prompt_seconds = seconds_since(prefill_start);

  const auto& stop_ids = runner.stop_ids();
  const auto decode_start = std::chrono::steady_clock::now();
  // Queues the step that runs `token` at `pos`. Without penalties or a grammar, the step after it is
  // queued before its token reaches the host (ForwardPass::queue_sample), so the device never waits
  // for the host.
  const bool ahead = !penalises(options.sampling) && !constraint;
  QueuedSteps steps(runner);  // at the loop's top, one where the step that runs `next` is queued already
  auto queue_step = [&](std::int32_t token, int pos) {
    blocks.reserve(pos + 1);
    Batch batch;
    batch.block_tables.push_back(blocks.table());
    batch.add_sequence(0, &token, 1, pos, true);
    steps.queue(batch, sample_row());
  };
  while (static_cast<int>(result.tokens.size()) < max_tokens) {
    // A grammar ends where it may, whatever ignore_eos says: nothing else could follow.
    if ((!options.ignore_eos || constraint) && std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end()) {
      result.finish = FinishReason::Stop;
      break;
    }
    result.tokens.push_back(next);
    history.push_back(next);
    if (constraint) constraint->accept(next);
    emit(stops.push(decoder.push(next)));
    if (stops.stopped() || (constraint && constraint->complete())) {
      result.finish = FinishReason::Stop;
      break;
    }
    const int generated = static_cast<int>(result.tokens.size());
    if (generated == max_tokens) break;  // no forward for a token nobody samples
    const int pos = static_cast<int>(history.size()) - 1;
    if (steps.count() == 0) queue_step(next, pos);
    if (ahead && generated + 1 < max_tokens) queue_step(previous_token(0), pos + 1);
    next = steps.take();
  }
  if (!stops.stopped()) emit(stops.push(decoder.flush()) + stops.flush());
  result.generate_seconds = seconds_since(decode_start);
  return result;
}

}  // namespace rf
