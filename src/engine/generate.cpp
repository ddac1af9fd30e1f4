#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "engine/model_runner.h"
#include "engine/sequence.h"
#include "engine/stop_matcher.h"
#include "util/error.h"

namespace rf {

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
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
  // The next token after `batch`, which asks for its last token's logits: sampled by the backend.
  auto next_token = [&](const Batch& batch) {
    const SampleRow row{sampler, history};
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
  // Queues the step that runs `token` at `pos`. Without penalties, the step after it is queued before
  // its token reaches the host (ForwardPass::queue_sample), so the device never waits for the host.
  const bool ahead = !penalises(options.sampling);
  auto queue_step = [&](std::int32_t token, int pos) {
    blocks.reserve(pos + 1);
    Batch batch;
    batch.block_tables.push_back(blocks.table());
    batch.add_sequence(0, &token, 1, pos, true);
    const SampleRow row{sampler, history};
    runner.queue_sample(batch, std::span(&row, 1));
  };
  bool queued = false;  // whether the step that runs `next` is queued already
  while (static_cast<int>(result.tokens.size()) < max_tokens) {
    if (!options.ignore_eos && std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end()) {
      result.finish = FinishReason::Stop;
      break;
    }
    result.tokens.push_back(next);
    history.push_back(next);
    emit(stops.push(decoder.push(next)));
    if (stops.stopped()) {
      result.finish = FinishReason::Stop;
      break;
    }
    const int generated = static_cast<int>(result.tokens.size());
    if (generated == max_tokens) break;  // no forward for a token nobody samples
    const int pos = static_cast<int>(history.size()) - 1;
    if (!queued) queue_step(next, pos);
    queued = ahead && generated + 1 < max_tokens;
    if (queued) queue_step(previous_token(0), pos + 1);
    next = runner.take_tokens().front();
  }
  if (queued) runner.take_tokens();  // a step past the end: its token is not wanted
  if (!stops.stopped()) emit(stops.push(decoder.flush()) + stops.flush());
  result.generate_seconds = seconds_since(decode_start);
  return result;
}

}  // namespace rf
