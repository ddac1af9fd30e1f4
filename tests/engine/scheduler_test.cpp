// The continuous-batching scheduler on the demo model: batching never changes what a request
// gets, the KV cache's blocks all come back, preemption and the prefix cache are invisible in
// the output, and cancelled or refused requests leave nothing behind.
#include "engine/scheduler.h"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "engine/scheduler_client.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_stacks.h"
#include "util/error.h"

namespace rf {
namespace {

using namespace std::chrono_literals;
using serving_test::alone;
using serving_test::collect;
using serving_test::greedy;
using serving_test::Outcome;

const std::string kDemo = std::string(ROCMFORGE_SOURCE_DIR) + "/models/kjv-llama";

template <class Condition>
void wait_for(Condition condition) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!condition() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
}

void wait_until_idle(const Scheduler& scheduler) {
  wait_for([&] { return scheduler.metrics().running == 0 && scheduler.metrics().waiting == 0; });
}

class SchedulerTest : public testing::Test {
 protected:
  std::unique_ptr<ModelRunner> make_runner(int kv_cache_tokens, int batch = 512) {
    return std::make_unique<ModelRunner>(
        kDemo, RunnerOptions{.threads = 2, .ctx_size = 512, .kv_cache_tokens = kv_cache_tokens, .max_batch_tokens = batch});
  }
  std::vector<std::int32_t> encode(ModelRunner& runner, const std::string& text) { return runner.tokenizer().encode(text, true); }

  const std::vector<std::string>& prompts_ = serving_test::kDemoPrompts;
};

TEST_F(SchedulerTest, ConcurrentGreedyRequestsGetWhatTheyGetAlone) {
  auto runner = make_runner(8192);
  std::vector<std::vector<std::int32_t>> prompts;
  for (const auto& p : prompts_) prompts.push_back(encode(*runner, p));
  const int n = 40;
  const auto expected = alone(*runner, prompts, n);
  // Staggered arrivals: prompts join while others decode, so steps mix prefill and decode.
  Scheduler scheduler(*runner, {.step_tokens = 8});
  std::vector<std::shared_ptr<RequestChannel>> channels;
  for (const auto& p : prompts) {
    channels.push_back(scheduler.submit(greedy(p, n)));
    std::this_thread::sleep_for(3ms);
  }
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const Outcome out = collect(*channels[i]);
    ASSERT_TRUE(out.finished) << out.error;
    EXPECT_EQ(out.tokens, expected[i]) << prompts_[i];
    EXPECT_EQ(out.text, runner->tokenizer().decode(expected[i], true));
    EXPECT_EQ(out.usage.prompt_tokens, prompts[i].size());
    EXPECT_EQ(out.usage.completion_tokens, static_cast<std::size_t>(n));
  }
  wait_until_idle(scheduler);
  EXPECT_GT(scheduler.metrics().batch_tokens.snapshot().sum / scheduler.metrics().steps, 1.5) << "nothing was batched";
  EXPECT_EQ(scheduler.metrics().kv_blocks_used, 0);
  EXPECT_EQ(scheduler.metrics().requests_finished, prompts.size());
}

TEST_F(SchedulerTest, PreemptionWhenTheCacheRunsOutChangesNothing) {
  // 32 blocks of 16 for 8 sequences that need 5 each: some must give theirs back and resume.
  auto runner = make_runner(512);
  std::vector<std::vector<std::int32_t>> prompts;
  for (const auto& p : prompts_) prompts.push_back(encode(*runner, p));
  const int n = 64;
  const auto expected = alone(*runner, prompts, n);
  Scheduler scheduler(*runner, {});
  std::vector<std::shared_ptr<RequestChannel>> channels;
  for (const auto& p : prompts) channels.push_back(scheduler.submit(greedy(p, n)));
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const Outcome out = collect(*channels[i]);
    ASSERT_TRUE(out.finished) << out.error;
    EXPECT_EQ(out.tokens, expected[i]) << prompts_[i];
  }
  wait_until_idle(scheduler);
  EXPECT_GT(scheduler.metrics().preemptions, 0u);
  EXPECT_EQ(scheduler.metrics().kv_blocks_used, 0);
}

TEST_F(SchedulerTest, LongPromptsArePrefilledInChunksWhileOthersDecode) {
  auto runner = make_runner(4096);
  std::string long_text;
  for (int i = 0; i < 20; ++i) long_text += "And God said, Let there be light: and there was light. ";
  const auto long_prompt = encode(*runner, long_text);
  ASSERT_GT(long_prompt.size(), 200u);
  const auto short_prompt = encode(*runner, prompts_[0]);
  const auto expected = alone(*runner, {long_prompt, short_prompt}, 24);
  Scheduler scheduler(*runner, {.step_tokens = 64});
  auto short_channel = scheduler.submit(greedy(short_prompt, 24));
  auto long_channel = scheduler.submit(greedy(long_prompt, 24));
  EXPECT_EQ(collect(*short_channel).tokens, expected[1]);
  EXPECT_EQ(collect(*long_channel).tokens, expected[0]);
  wait_until_idle(scheduler);
  EXPECT_LE(scheduler.metrics().batch_tokens.snapshot().sum / scheduler.metrics().steps, 64);
}

TEST_F(SchedulerTest, SharedPrefixesReuseCachedBlocks) {
  auto runner = make_runner(4096);
  const std::string system = "And the LORD spake unto Moses in the wilderness of Sinai, in the tabernacle of the "
                             "congregation, on the first day of the second month, saying, ";
  const auto first = encode(*runner, system + "Take ye the sum");
  const auto second = encode(*runner, system + "Number the children");
  const auto expected = alone(*runner, {second}, 16);
  Scheduler scheduler(*runner, {});
  const Outcome a = collect(*scheduler.submit(greedy(first, 16)));
  const Outcome b = collect(*scheduler.submit(greedy(second, 16)));
  ASSERT_TRUE(a.finished && b.finished);
  EXPECT_EQ(a.usage.cached_prompt_tokens, 0u);
  const std::size_t shared = encode(*runner, system).size() / ModelRunner::kBlockSize * ModelRunner::kBlockSize;
  EXPECT_GE(b.usage.cached_prompt_tokens, shared - ModelRunner::kBlockSize);
  EXPECT_GT(b.usage.cached_prompt_tokens, 0u);
  EXPECT_EQ(b.tokens, expected[0]);
  wait_until_idle(scheduler);
  EXPECT_EQ(scheduler.metrics().kv_blocks_used, 0);
  EXPECT_GT(scheduler.metrics().kv_blocks_cached, 0);
}

TEST_F(SchedulerTest, CancelledRequestsFreeTheirBlocks) {
  auto runner = make_runner(4096);
  Scheduler scheduler(*runner, {});
  auto channel = scheduler.submit(greedy(encode(*runner, prompts_[1]), 400));
  while (channel->take(100ms).empty()) {
  }
  channel->cancel();
  wait_for([&] { return scheduler.metrics().requests_cancelled == 1; });
  wait_until_idle(scheduler);
  EXPECT_EQ(scheduler.metrics().requests_cancelled, 1u);
  EXPECT_EQ(scheduler.metrics().kv_blocks_used, 0);
  // The engine goes on serving.
  EXPECT_TRUE(collect(*scheduler.submit(greedy(encode(*runner, prompts_[0]), 4))).finished);
}

TEST_F(SchedulerTest, StopStringsAndTokenLimitsEndRequests) {
  auto runner = make_runner(4096);
  const auto prompt = encode(*runner, prompts_[1]);
  const auto full = alone(*runner, {prompt}, 30)[0];
  const std::string text = runner->tokenizer().decode(full, true);
  const std::string stop = text.substr(text.size() / 2, 4);
  Scheduler scheduler(*runner, {});
  auto request = greedy(prompt, 30);
  request.options.stop = {stop};
  const Outcome out = collect(*scheduler.submit(request));
  ASSERT_TRUE(out.finished);
  EXPECT_EQ(out.text, text.substr(0, text.find(stop)));
  EXPECT_EQ(collect(*scheduler.submit(greedy(prompt, 3))).usage.completion_tokens, 3u);
}

TEST_F(SchedulerTest, RefusesWhatCanNeverRunAndWhatDoesNotFitInTheQueue) {
  auto runner = make_runner(1024);
  Scheduler scheduler(*runner, {.max_running = 1, .max_queued = 0});
  EXPECT_THROW(scheduler.submit(greedy({}, 4)), Error);
  EXPECT_THROW(scheduler.submit(greedy(std::vector<std::int32_t>(512, 5), 4)), Error);
  EXPECT_THROW(scheduler.submit(greedy({1, 99999}, 4)), Error);
  auto bad_sampling = greedy({1, 2}, 4);
  bad_sampling.options.sampling.top_p = 0;
  EXPECT_THROW(scheduler.submit(bad_sampling), Error);
  // No waiting room: the one running slot takes a request, and refuses the next while it runs.
  auto long_request = greedy({1, 2}, 900);
  long_request.options.ignore_eos = true;
  auto running = scheduler.submit(long_request);
  ASSERT_NE(running, nullptr);
  EXPECT_EQ(scheduler.submit(greedy({1, 2}, 4)), nullptr);
  // Once it leaves, the slot takes the next.
  running->cancel();
  wait_for([&] { return scheduler.metrics().requests_cancelled == 1; });
  auto next = scheduler.submit(greedy({1, 2}, 4));
  ASSERT_NE(next, nullptr);
  EXPECT_TRUE(collect(*next).finished);
}

// One call's requests are queued all or none (issue #29: an oversized call used to queue what fit,
// then fail, leaving its cancelled sequences holding every place until the engine dropped them).
TEST_F(SchedulerTest, ACallIsQueuedWhollyOrNotAtAllAndCountedAtOnce) {
  auto runner = make_runner(1024);
  Scheduler scheduler(*runner, {.max_running = 1, .max_queued = 2});
  EXPECT_EQ(scheduler.capacity(), 3);
  auto long_request = greedy({1, 2}, 900);
  long_request.options.ignore_eos = true;
  auto running = scheduler.submit(long_request);
  ASSERT_NE(running, nullptr);
  wait_for([&] { return scheduler.metrics().running == 1; });
  // Three more do not fit beside the running one: none is queued, and the two places stay free.
  EXPECT_TRUE(scheduler.submit_all({greedy({1, 2}, 4), greedy({1, 3}, 4), greedy({1, 4}, 4)}).empty());
  EXPECT_EQ(scheduler.metrics().waiting, 0);
  // A call with one request that can never run queues none of the others.
  EXPECT_THROW(scheduler.submit_all({greedy({1, 2}, 4), greedy({}, 4)}), Error);
  EXPECT_EQ(scheduler.metrics().waiting, 0);
  auto two = scheduler.submit_all({greedy({1, 2}, 4), greedy({1, 3}, 4)});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(scheduler.metrics().waiting, 2);  // counted when queued, not at the engine's next step
  running->cancel();
  for (auto& channel : two) EXPECT_TRUE(collect(*channel).finished);
}

TEST_F(SchedulerTest, LogprobsDescribeTheChosenToken) {
  auto runner = make_runner(1024);
  Scheduler scheduler(*runner, {});
  auto request = greedy(encode(*runner, prompts_[0]), 3);
  request.top_logprobs = 2;
  auto channel = scheduler.submit(request);
  int seen = 0;
  for (bool done = false; !done;) {
    for (auto& e : channel->take(100ms)) {
      done = e.kind != StreamEvent::Kind::Text;
      if (e.kind != StreamEvent::Kind::Text || e.token < 0) continue;
      ASSERT_TRUE(e.logprobs);
      ASSERT_EQ(e.logprobs->top.size(), 2u);
      EXPECT_EQ(e.logprobs->chosen.token, e.token);
      EXPECT_EQ(e.logprobs->top[0].token, e.token);  // greedy picks the most likely
      EXPECT_LE(e.logprobs->chosen.logprob, 0);
      EXPECT_GE(e.logprobs->top[0].logprob, e.logprobs->top[1].logprob);
      ++seen;
    }
  }
  EXPECT_EQ(seen, 3);
}

// Constrained decoding inside the batch: each request's text stays within its grammar, a finished
// grammar ends its request with "stop", and batching and preemption change nothing.
TEST_F(SchedulerTest, GrammarsHoldInTheBatchAndThroughPreemption) {
  auto runner = make_runner(512);
  auto words = std::make_shared<grammar::TokenGrammar>(
      grammar::parse_gbnf(R"(root ::= (" " ("LORD" | "God" | "the" | "and" | [a-z]{1,3}) ","?)+)"), runner->grammar_vocabulary());
  auto answer = std::make_shared<grammar::TokenGrammar>(grammar::parse_gbnf(R"(root ::= " And" (" the" | " he") " said")"),
                                                        runner->grammar_vocabulary());
  auto request = [&](std::size_t i) {
    auto r = greedy(encode(*runner, prompts_[i]), 96);
    r.options.grammar = i % 4 == 3 ? answer : words;
    r.options.sampling.temperature = 1;  // seeded: the same draws alone and batched
    r.options.sampling.seed = i;
    return r;
  };
  std::vector<Outcome> expected;
  {
    Scheduler alone(*runner, {.max_running = 1});
    for (std::size_t i = 0; i < prompts_.size(); ++i) expected.push_back(collect(*alone.submit(request(i))));
  }
  Scheduler scheduler(*runner, {});
  std::vector<std::shared_ptr<RequestChannel>> channels;
  for (std::size_t i = 0; i < prompts_.size(); ++i) channels.push_back(scheduler.submit(request(i)));
  for (std::size_t i = 0; i < prompts_.size(); ++i) {
    const Outcome out = collect(*channels[i]);
    ASSERT_TRUE(out.finished) << out.error;
    EXPECT_EQ(out.tokens, expected[i].tokens) << prompts_[i];
    const auto& g = (i % 4 == 3 ? answer : words)->grammar();
    grammar::GrammarStacks stacks(g);
    const auto state = stacks.advance(stacks.initial(), out.text);
    EXPECT_NE(state, grammar::GrammarStacks::kDead) << out.text;
    if (i % 4 == 3) {
      EXPECT_TRUE(stacks.accepts(state)) << out.text;
      EXPECT_LT(out.usage.completion_tokens, 96u) << "a complete grammar must end its request";
    } else {
      EXPECT_EQ(out.usage.completion_tokens, 96u);
    }
    std::printf("%s -> %s\n", prompts_[i].c_str(), out.text.c_str());
  }
  wait_until_idle(scheduler);
  EXPECT_GT(scheduler.metrics().preemptions, 0u);
  EXPECT_EQ(scheduler.metrics().kv_blocks_used, 0);
}

}  // namespace
}  // namespace rf
