#include "engine/scheduler.h"

#include <algorithm>
#include <future>

#include <spdlog/spdlog.h>

#include "engine/logprobs.h"
#include "engine/model_runner.h"
#include "util/error.h"

namespace rf {

namespace {
constexpr int kBlockSize = ModelRunner::kBlockSize;

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
}  // namespace

Scheduler::Scheduler(ModelRunner& runner, const SchedulerOptions& options) : runner_(runner), options_(options) {
  if (options_.max_context <= 0) options_.max_context = runner.ctx_size();
  if (options_.step_tokens <= 0) options_.step_tokens = runner.max_batch_tokens();
  // Every running sequence must fit in a step with its next token.
  options_.step_tokens = std::max(options_.step_tokens, options_.max_running);
  const int cache_positions = runner.blocks().total_blocks() * kBlockSize;
  if (options_.max_context > cache_positions) {
    fail("a sequence may use {} positions but the KV cache only holds {}", options_.max_context, cache_positions);
  }
  if (options_.max_running <= 0 || options_.max_queued < 0) fail("the scheduler needs room for at least one sequence");
  publish_state();
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

std::unique_ptr<ActiveSequence> Scheduler::admissible(GenerationRequest request,
                                                     const std::shared_ptr<RequestChannel>& channel) const {
  const auto& prompt = request.prompt;
  if (prompt.empty()) fail("the prompt is empty: nothing to generate from");
  const int vocab = runner_.config().vocab_size;
  for (auto id : prompt) {
    if (id < 0 || id >= vocab) fail("token id {} is outside the vocabulary (0..{})", id, vocab - 1);
  }
  if (static_cast<int>(prompt.size()) >= options_.max_context) {
    fail("the prompt has {} tokens, which does not fit in the context of {} tokens", prompt.size(), options_.max_context);
  }
  if (request.options.max_tokens == 0) fail("max_tokens must be at least 1");
  for (const auto& [id, bias] : request.options.sampling.logit_bias) {
    if (id < 0 || id >= vocab) fail("logit_bias names token id {}, outside the vocabulary (0..{})", id, vocab - 1);
  }
  // Built here, on the caller's thread, so that bad sampling values throw to the caller.
  return std::make_unique<ActiveSequence>(std::move(request), channel, runner_.tokenizer(), options_.max_context);
}

std::shared_ptr<RequestChannel> Scheduler::submit(GenerationRequest request) {
  std::vector<GenerationRequest> one;
  one.push_back(std::move(request));
  auto channels = submit_all(std::move(one));
  return channels.empty() ? nullptr : std::move(channels.front());
}

std::vector<std::shared_ptr<RequestChannel>> Scheduler::submit_all(std::vector<GenerationRequest> requests) {
  std::vector<std::shared_ptr<RequestChannel>> channels;
  std::vector<std::unique_ptr<ActiveSequence>> sequences;
  for (auto& request : requests) {
    channels.push_back(std::make_shared<RequestChannel>());
    sequences.push_back(admissible(std::move(request), channels.back()));
  }
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || admitted_ + static_cast<int>(sequences.size()) > capacity()) return {};
    admitted_ += static_cast<int>(sequences.size());
    for (auto& sequence : sequences) incoming_.push_back(std::move(sequence));
    metrics_.waiting += static_cast<int>(sequences.size());  // seen before the engine thread takes them
  }
  wake_.notify_one();
  return channels;
}

std::future<std::vector<float>> Scheduler::embed(std::vector<std::int32_t> tokens, Pooling pooling, bool normalize) {
  if (tokens.empty()) fail("the text is empty: nothing to embed");
  const int vocab = runner_.config().vocab_size;
  for (auto id : tokens) {
    if (id < 0 || id >= vocab) fail("token id {} is outside the vocabulary (0..{})", id, vocab - 1);
  }
  if (static_cast<int>(tokens.size()) > options_.max_context) {
    fail("the text has {} tokens, more than the context of {} tokens", tokens.size(), options_.max_context);
  }
  const std::size_t n = tokens.size();
  auto job = std::make_unique<EmbeddingJob>(
      EmbeddingJob{std::move(tokens), EmbeddingPooler(pooling, runner_.config().hidden_size, n), normalize, {}, {}, 0});
  auto result = job->result.get_future();
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || static_cast<int>(incoming_embeddings_.size()) >= capacity()) return {};
    incoming_embeddings_.push_back(std::move(job));
  }
  wake_.notify_one();
  return result;
}

void Scheduler::run() {
  while (true) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] {
        return stopping_ || !incoming_.empty() || !waiting_.empty() || !running_.empty() ||
               !incoming_embeddings_.empty() || !embeddings_.empty();
      });
      if (stopping_) break;
      for (auto& s : incoming_) waiting_.push_back(std::move(s));
      incoming_.clear();
      for (auto& e : incoming_embeddings_) embeddings_.push_back(std::move(e));
      incoming_embeddings_.clear();
    }
    run_embeddings();
    step();
    publish_state();
  }
  std::lock_guard lock(mutex_);
  for (auto* queue : {&incoming_embeddings_, &embeddings_}) {
    for (auto& e : *queue) {
      runner_.blocks().release_all(e->block_table);
      e->result.set_exception(std::make_exception_ptr(Error("the server is shutting down")));
    }
  }
  for (auto* queue : {&incoming_, &waiting_}) {
    for (auto& s : *queue) s->fail("the server is shutting down");
  }
  for (auto& s : running_) {
    s->fail("the server is shutting down");
    runner_.blocks().release_all(s->block_table);
  }
}

// The embeddings in hand, oldest first, as many tokens of them as a step takes: each one's KV
// blocks are reserved whole when it starts (none are shared: the prefix cache is for generation),
// its chunks' wanted hidden states are pooled as they come, and it resolves with its last chunk.
void Scheduler::run_embeddings() {
  Batch batch;
  std::vector<std::pair<EmbeddingJob*, std::size_t>> chunks;  // job, tokens it runs
  int budget = options_.step_tokens;
  for (auto& job : embeddings_) {
    if (budget <= 0) break;
    if (job->block_table.empty() &&
        !runner_.blocks().reserve(job->block_table, static_cast<int>(job->tokens.size()), kBlockSize)) {
      break;  // no room until running sequences give some back
    }
    const std::size_t count = std::min<std::size_t>(job->tokens.size() - job->computed, budget);
    const auto index = static_cast<std::int32_t>(batch.block_tables.size());
    batch.block_tables.push_back(job->block_table);
    for (std::size_t i = 0; i < count; ++i) {
      if (job->pooler.wants(job->computed + i)) batch.logit_rows.push_back(static_cast<std::int32_t>(batch.size() + i));
    }
    batch.add_sequence(index, job->tokens.data() + job->computed, count, static_cast<std::int32_t>(job->computed), false);
    chunks.emplace_back(job.get(), count);
    budget -= static_cast<int>(count);
  }
  if (chunks.empty()) return;
  ++metrics_.steps;
  auto done = [&](EmbeddingJob* job) {
    runner_.blocks().release_all(job->block_table);
    std::erase_if(embeddings_, [&](const auto& e) { return e.get() == job; });
  };
  try {
    runner_.hidden_states(batch, hidden_);
  } catch (const std::exception& e) {
    spdlog::error("embedding step failed: {}", e.what());
    for (const auto& [job, count] : chunks) {
      job->result.set_exception(std::make_exception_ptr(Error(e.what())));
      done(job);
    }
    return;
  }
  const std::size_t hidden = runner_.config().hidden_size;
  std::size_t row = 0;
  for (const auto& [job, count] : chunks) {
    for (std::size_t i = 0; i < count; ++i) {
      if (job->pooler.wants(job->computed + i)) job->pooler.add(std::span(hidden_).subspan(row++ * hidden, hidden));
    }
    job->computed += count;
    if (job->computed < job->tokens.size()) continue;
    metrics_.embedded_tokens += job->tokens.size();
    job->result.set_value(job->pooler.result(job->normalize));
    done(job);
  }
}

void Scheduler::step() {
  drop_cancelled();
  std::vector<Scheduled> scheduled;
  int budget = options_.step_tokens;
  const bool preempted = schedule_running(scheduled, budget);
  // Admitting right after a preemption would hand the freed blocks straight back.
  if (!preempted) admit_waiting(scheduled, budget);
  if (scheduled.empty()) return;
  execute(scheduled);
}

void Scheduler::drop_cancelled() {
  auto drop = [&](auto& queue) {
    return std::erase_if(queue, [&](const auto& s) {
      if (!s->channel().cancelled()) return false;
      runner_.blocks().release_all(s->block_table);
      s->fail("the request was cancelled");  // for a reader still there (rbee's DELETE)
      return true;
    });
  };
  const std::size_t dropped = drop(running_) + drop(waiting_);
  forget(dropped);  // before the count that tells a watcher they are gone
  metrics_.requests_cancelled += dropped;
}

bool Scheduler::schedule_running(std::vector<Scheduled>& scheduled, int& budget) {
  bool preempted = false;
  while (true) {
    // Decoding sequences first, one token each, oldest first; then prompts part-way through prefill.
    for (int prefill = 0; prefill < 2; ++prefill) {
      for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
        ActiveSequence& s = *running_[i];
        if ((s.pending() > 1) != (prefill == 1)) continue;
        std::size_t count = reserve_up_to(s, std::min<std::size_t>(s.pending(), budget));
        // A decoding sequence that finds the cache full takes the room of the newest one.
        while (count == 0 && !prefill && running_.back().get() != &s) {
          preempt_newest();
          preempted = true;
          count = reserve_up_to(s, 1);
        }
        if (count == 0 && !prefill) {  // it is the newest itself
          preempt_newest();
          preempted = true;
          break;
        }
        if (count == 0) continue;
        scheduled.push_back({&s, count});
        budget -= static_cast<int>(count);
      }
    }
    // Prompts part-way through prefill can hold every block with none of them able to move on:
    // give the newest one's blocks back and try again.
    if (!scheduled.empty() || running_.empty()) return preempted;
    preempt_newest();
    preempted = true;
  }
}

void Scheduler::admit_waiting(std::vector<Scheduled>& scheduled, int& budget) {
  auto& blocks = runner_.blocks();
  while (!waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < options_.max_running) {
    ActiveSequence& s = *waiting_.front();
    if (options_.prefix_caching) {
      // The last token is always computed: its logits choose the next one.
      const std::size_t cached = s.prefix.adopt_cached(blocks, s.tokens, kBlockSize, (s.tokens.size() - 1) / kBlockSize, s.block_table);
      s.computed = cached;
      if (s.generated() == 0) s.cached_prompt_tokens = std::max(s.cached_prompt_tokens, cached);
    }
    const std::size_t count = reserve_up_to(s, std::min<std::size_t>(s.pending(), budget));
    if (count == 0) {
      blocks.release_all(s.block_table);
      s.prefix.reset();
      s.computed = 0;
      return;
    }
    scheduled.push_back({&s, count});
    budget -= static_cast<int>(count);
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

std::size_t Scheduler::reserve_up_to(ActiveSequence& s, std::size_t wanted) {
  auto& blocks = runner_.blocks();
  const std::size_t room = (s.block_table.size() + blocks.free_blocks()) * kBlockSize - s.computed;
  const std::size_t count = std::min(wanted, room);
  if (count > 0 && !blocks.reserve(s.block_table, static_cast<int>(s.computed + count), kBlockSize)) {
    fail("the KV cache refused {} positions it had room for", s.computed + count);
  }
  return count;
}

void Scheduler::preempt_newest() {
  auto sequence = std::move(running_.back());
  running_.pop_back();
  runner_.blocks().release_all(sequence->block_table);
  sequence->prefix.reset();
  sequence->computed = 0;
  waiting_.push_front(std::move(sequence));
  ++metrics_.preemptions;
}

void Scheduler::execute(const std::vector<Scheduled>& scheduled) {
  Batch batch;
  for (const auto& [s, count] : scheduled) {
    const auto index = static_cast<std::int32_t>(batch.block_tables.size());
    batch.block_tables.push_back(s->block_table);
    batch.add_sequence(index, s->tokens.data() + s->computed, count, static_cast<std::int32_t>(s->computed),
                       s->computed + count == s->tokens.size());
  }
  metrics_.batch_tokens.observe(static_cast<double>(batch.size()));
  ++metrics_.steps;
  std::vector<std::int32_t> next;
  std::vector<std::optional<TokenLogprobs>> logprobs;
  try {
    sample_next(scheduled, batch, next, logprobs);
  } catch (const std::exception& e) {
    spdlog::error("forward step failed: {}", e.what());
    for (const auto& item : scheduled) {
      item.sequence->fail(e.what());
      ++metrics_.requests_failed;
      retire(*item.sequence);
    }
    return;
  }

  std::size_t row = 0;
  const auto now = Clock::now();
  for (const auto& [s, count] : scheduled) {
    s->computed += count;
    if (options_.prefix_caching) s->prefix.publish_full(runner_.blocks(), s->tokens, s->computed, kBlockSize, s->block_table);
    if (s->computed < s->tokens.size()) continue;  // a prompt chunk short of the end
    const bool finished = s->failed() || s->advance(next[row], std::move(logprobs[row]), runner_.stop_ids());
    ++row;
    if (s->failed()) {
      ++metrics_.requests_failed;
      retire(*s);
      continue;
    }
    ++metrics_.generated_tokens;
    if (s->last_token_time == Clock::time_point{}) {
      metrics_.time_to_first_token.observe(seconds_between(s->arrival, now));
    } else {
      metrics_.inter_token_latency.observe(seconds_between(s->last_token_time, now));
    }
    s->last_token_time = now;
    if (finished) {
      ++metrics_.requests_finished;
      metrics_.prompt_tokens += s->tokens.size() - s->generated();
      metrics_.cached_prompt_tokens += s->cached_prompt_tokens;
      metrics_.request_latency.observe(seconds_between(s->arrival, now));
      retire(*s);
    }
  }
}

// The next token of every sequence whose last token ran. The backend samples (on its device,
// where it has one, grammars' masks included) unless someone wants log-probabilities or a logit
// bias, which need the logits on the host; the masks are then worked out while the step runs.
void Scheduler::sample_next(const std::vector<Scheduled>& scheduled, const Batch& batch, std::vector<std::int32_t>& next,
                            std::vector<std::optional<TokenLogprobs>>& logprobs) {
  std::vector<ActiveSequence*> sampling;
  for (const auto& [s, count] : scheduled) {
    if (s->computed + count == s->tokens.size()) sampling.push_back(s);
  }
  logprobs.assign(sampling.size(), std::nullopt);
  const bool host_logits = std::any_of(sampling.begin(), sampling.end(), [](auto* s) {
    return s->top_logprobs() >= 0 || !s->sampler().params().logit_bias.empty();
  });
  auto prepare_masks = [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      if (sampling[i]->constrained()) sampling[i]->prepare_constraint();
    }
  };
  const bool constrained = std::any_of(sampling.begin(), sampling.end(), [](auto* s) { return s->constrained(); });
  const auto masks_start = Clock::now();
  if (!host_logits) {
    // Before the step, on the pool's threads: a mask the cache lacks walks the whole vocabulary.
    if (constrained) {
      runner_.pool().parallel_for(sampling.size(), 1, prepare_masks);
      metrics_.grammar_masks.observe(seconds_between(masks_start, Clock::now()));
    }
    std::vector<SampleRow> rows;
    for (auto* s : sampling) rows.push_back({s->sampler(), s->penalty_history(), s->allowed_tokens()});
    next = runner_.sample(batch, rows);  // a failed sequence's pick is ignored: execute() retires it
    return;
  }
  // During the step, on a thread of its own: the CPU backend's step has the pool.
  std::future<void> masks;
  if (constrained) {
    masks = std::async(std::launch::async, [&] {
      prepare_masks(0, sampling.size());
      metrics_.grammar_masks.observe(seconds_between(masks_start, Clock::now()));
    });
  }
  runner_.forward(batch, logits_);
  if (masks.valid()) masks.get();
  const std::size_t vocab = runner_.config().vocab_size;
  next.clear();
  for (std::size_t r = 0; r < sampling.size(); ++r) {
    if (sampling[r]->failed()) {  // its grammar allowed nothing: execute() retires it
      next.push_back(-1);
      continue;
    }
    const std::span<float> row(logits_.data() + r * vocab, vocab);
    const int top = sampling[r]->top_logprobs();
    std::vector<float> raw;
    if (top >= 0) raw.assign(row.begin(), row.end());  // the sampler edits the row
    if (sampling[r]->constrained()) mask_logits(row, sampling[r]->allowed_tokens());
    next.push_back(sampling[r]->sampler().sample(row, sampling[r]->penalty_history()));
    if (top >= 0) logprobs[r] = token_logprobs(raw, next.back(), top);
  }
}

// A sequence leaves the batch, giving its blocks back.
void Scheduler::retire(ActiveSequence& sequence) {
  runner_.blocks().release_all(sequence.block_table);
  std::erase_if(running_, [&](const auto& s) { return s.get() == &sequence; });
  forget(1);
}

void Scheduler::forget(std::size_t sequences) {
  if (sequences == 0) return;
  std::lock_guard lock(mutex_);
  admitted_ -= static_cast<int>(sequences);
}

void Scheduler::publish_state() {
  const auto& blocks = runner_.blocks();
  {
    std::lock_guard lock(mutex_);  // requests submitted since the loop took the incoming ones wait too
    metrics_.waiting = static_cast<int>(waiting_.size() + incoming_.size());
  }
  metrics_.running = static_cast<int>(running_.size());
  metrics_.kv_blocks_total = blocks.total_blocks();
  metrics_.kv_blocks_used = blocks.total_blocks() - blocks.free_blocks();
  metrics_.kv_blocks_cached = blocks.cached_blocks();
}

}  // namespace rf
