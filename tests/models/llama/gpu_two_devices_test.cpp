// Two GPUs in one process: the same model on device 0 and device 1, each driven by its own thread at
// the same time, gives each device the logits it gives when it runs alone, bit for bit. Nothing of a
// device's (streams, BLAS handles, scratch, memoised occupancies, attributes) may leak into the
// other's work: this is the proof that no per-device state is shared.
#include <thread>

#include "backend/gpu/gpu_test.h"
#include "backend/gpu/runtime/devices.h"
#include "model/checkpoint.h"
#include "models/llama/gpu_forward.h"

namespace rf::gpu::test {
namespace {

class TwoDevices : public GpuTest {};

constexpr int kSequences = 3;
constexpr int kBlocksPerSequence = 8;  // 128 positions each
constexpr int kPromptTokens = 24;
constexpr int kDecodeSteps = 40;

// The tokens a session feeds: each sequence's prompt, then one token a step for each.
struct Script {
  std::vector<std::vector<std::int32_t>> prompts;
  std::vector<std::vector<std::int32_t>> steps;
};

// Prefill of every sequence (the GEMM and prefill attention), then decode steps of all three (the
// batched GEMM, graphs) and last of one (the GEMV): every logit row's bits, in order.
std::vector<std::uint32_t> run_session(const Checkpoint& checkpoint, int device, const Script& script) {
  const llama::GpuForwardOptions options{
      .device = device, .block_size = 16, .kv_blocks = kSequences * kBlocksPerSequence, .max_batch_tokens = 64};
  llama::GpuForward gpu(checkpoint.config(), checkpoint.weights(), options);
  std::vector<std::uint32_t> all;
  std::vector<float> logits;
  auto keep = [&] {
    const std::vector<std::uint32_t> b = bits(logits);
    all.insert(all.end(), b.begin(), b.end());
  };
  Batch prefill;
  for (int s = 0; s < kSequences; ++s) {
    std::vector<std::int32_t> table(kBlocksPerSequence);
    for (int b = 0; b < kBlocksPerSequence; ++b) table[b] = s * kBlocksPerSequence + b;
    prefill.block_tables.push_back(table);
    prefill.add_sequence(s, script.prompts[s].data(), kPromptTokens, 0, true);
  }
  gpu.forward(prefill, logits);
  keep();
  for (int step = 0; step < kDecodeSteps; ++step) {
    const std::vector<int> active = step < kDecodeSteps / 2 ? std::vector<int>{0, 1, 2} : std::vector<int>{1};
    gpu.forward(decode_batch(active, script.steps[step], kPromptTokens + step, kBlocksPerSequence), logits);
    keep();
  }
  return all;
}

TEST_F(TwoDevices, EachDeviceGetsItsAloneBitsWhileTheOtherRuns) {
  if (scan_devices().devices.size() < 2) GTEST_SKIP() << "needs two GPUs";
  const std::string source = ROCMFORGE_SOURCE_DIR;
  for (const std::string& model : {source + "/tests/fixtures/models/llama3", source + "/models/kjv-llama",
                                   source + "/models/kjv-llama/model.q8_0.gguf"}) {
    const Checkpoint checkpoint = Checkpoint::load(model);
    const int vocab = checkpoint.config().vocab_size;
    Script script;
    for (int s = 0; s < kSequences; ++s) {
      script.prompts.emplace_back(kPromptTokens);
      for (auto& t : script.prompts.back()) t = random_int(0, vocab - 1);
    }
    for (int step = 0; step < kDecodeSteps; ++step) {
      script.steps.emplace_back(kSequences);
      for (auto& t : script.steps.back()) t = random_int(0, vocab - 1);
    }
    const std::vector<std::uint32_t> alone0 = run_session(checkpoint, 0, script);
    const std::vector<std::uint32_t> alone1 = run_session(checkpoint, 1, script);

    std::vector<std::uint32_t> together0, together1;
    std::exception_ptr failure0, failure1;
    auto on = [&](int device, std::vector<std::uint32_t>& out, std::exception_ptr& failure) {
      try {
        out = run_session(checkpoint, device, script);
      } catch (...) {
        failure = std::current_exception();
      }
    };
    std::thread first(on, 0, std::ref(together0), std::ref(failure0));
    std::thread second(on, 1, std::ref(together1), std::ref(failure1));
    first.join();
    second.join();
    if (failure0) std::rethrow_exception(failure0);
    if (failure1) std::rethrow_exception(failure1);

    ASSERT_FALSE(alone0.empty());
    EXPECT_EQ(together0, alone0) << model << ": device 0 beside device 1 differs from device 0 alone";
    EXPECT_EQ(together1, alone1) << model << ": device 1 beside device 0 differs from device 1 alone";
    std::printf("[  two gpu ] %s: %zu logits a device, each device's bits as alone\n", model.c_str(), alone0.size());
  }
}

}  // namespace
}  // namespace rf::gpu::test
