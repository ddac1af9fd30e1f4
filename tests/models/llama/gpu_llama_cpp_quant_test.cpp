// llama.cpp's quantization formats end to end on the GPU: each llama.cpp-quantized fixture's logits
// (tests/llama_cpp_quants.h) against its f32 twin's, whose weights llama.cpp's gguf-py decoded,
// through prefill's GEMM and through the decode path a token at a time. Skipped without a device.
#include <fmt/format.h>

#include "backend/gpu/runtime/devices.h"
#include "engine/backend_select.h"
#include "llama_cpp_quants.h"

namespace rf::test {
namespace {

// Of the largest |logit| at the compared positions. Prefill's GEMM multiplies quantized weights as
// bf16 operands (2^-9 each) and the KV cache is f16: the Hugging Face fixtures' quantized files
// measured up to 1.8e-2 (gpu_hf_reference_test.cpp). One token at a time, the GEMV decodes weights
// exactly; where the type has integer codes it multiplies x rounded to int8 in blocks of 32, which
// those fixtures measured up to 4.7e-2 (kInt8Tolerance there).
constexpr double kPrefillTolerance = 3e-2;
constexpr double kOneTokenTolerance = 8e-2;

class LlamaCppQuantLogitsGpu : public testing::TestWithParam<std::string> {};

TEST_P(LlamaCppQuantLogitsGpu, MatchTheTwins) {
  static const gpu::DeviceScan scan = gpu::scan_devices();
  if (scan.devices.empty()) GTEST_SKIP() << scan.why_none;
  const auto ref = llama_cpp_quant_reference(GetParam());
  ASSERT_FALSE(ref.is_null());
  for (const int chunk : {64, 1}) {
    RunnerOptions options;
    options.device = built_backends().back();
    options.ctx_size = 128;
    options.max_batch_tokens = chunk;
    ModelRunner runner(llama_cpp_quant_path(ref.at("file").get<std::string>()), options);
    const TwinLogitErrors e = twin_logit_errors(runner, ref);
    const double tolerance = chunk == 1 ? kOneTokenTolerance : kPrefillTolerance;
    fmt::print("{} on the GPU, prompts in chunks of {}: logits vs the f32 twin's at {} positions: max error {:.2e} = "
               "{:.2e} of the largest |logit| {:.3g} (tolerance {:.0e})\n",
               GetParam(), chunk, e.positions, e.max_error, e.max_error / e.largest, e.largest, tolerance);
    EXPECT_LE(e.max_error, tolerance * e.largest) << "chunks of " << chunk;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LlamaCppQuantLogitsGpu, testing::ValuesIn(kLlamaCppQuantTypes), type_test_name);

}  // namespace
}  // namespace rf::test
