// launch_gemm on CUDA, through cuBLAS. 16-bit weights go through the tensor cores with fp32 accumulation
// and output, the activations rounded to the weight's type first; quantized weights are first decoded to
// f16, as llama.cpp does for prefill (f16, not bf16: 3 more bits; through bf16 the quantized test models'
// logits drifted past the HF reference's 1e-2. Activations past f16's 65504 would overflow, which
// Llama-family models stay far below). f32 weights take SGEMM, fp32 throughout (cuBLAS uses TF32 only
// when asked to). Decode batches of 16-bit weights may go to the project's own tensor-core kernel
// instead (launch_gemm_few_tokens), on the same rounded operands, and those of quantized weights, given
// x's int8 copy, to its integer tensor-core kernel (launch_gemm_quantized_few_tokens).
#include <cublas_v2.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "backend/gpu/runtime/device_buffer.h"
#include "backend/gpu/gemm/gemm_kernels.h"
#include "backend/gpu/runtime/launch_check.h"
#include "backend/gpu/quant/activation_copies.h"
#include "backend/gpu/gemm/gemv.h"
#include "backend/gpu/gemm/gemm.h"

namespace rf::gpu {

namespace {

void check(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_bad_launch(call, cublasGetStatusString(status));
}

// ROCMFORGE_FEW_TOKENS_GEMM=0 leaves decode batches to cuBLAS (there to measure the kernels' gain).
bool few_tokens_allowed() {
  const char* setting = std::getenv("ROCMFORGE_FEW_TOKENS_GEMM");
  return setting == nullptr || std::string_view(setting) != "0";
}

}  // namespace

class GemmContext {
 public:
  explicit GemmContext(const DeviceContext& device)
      : device_(device), workspace_(kWorkspaceBytes), few_tokens_(few_tokens_allowed() && few_tokens_gemm_available()) {
    check(cublasCreate(&handle_), "cublasCreate");
    cublasStatus_t status = cublasSetStream(handle_, device.stream());
    if (status == CUBLAS_STATUS_SUCCESS) status = cublasSetWorkspace(handle_, workspace_.data(), workspace_.bytes());
    if (status != CUBLAS_STATUS_SUCCESS) (void)cublasDestroy(handle_);
    check(status, "cublasSetStream/cublasSetWorkspace");
  }
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;
  ~GemmContext() { (void)cublasDestroy(handle_); }

  void multiply(std::span<const WeightProduct> products, const float* x, int n_tokens, HalfCopy half,
                QuantizedActivations rounded) {
    // x's 16-bit copy: the caller's, else made once per operand type the products need.
    DType rounded_as = half.data ? half.type : DType::F32;
    const std::uint16_t* x16 = half.data;
    for (const WeightProduct& p : products) {
      const WeightMatrix& w = p.w;
      const int rows = static_cast<int>(w.rows), cols = static_cast<int>(w.cols);
      const float one = 1.0f, zero = 0.0f;
      // Row-major out[n_tokens][rows] = x[n_tokens][cols] W^T is, to column-major cuBLAS, W^T (W's rows
      // are its columns) times x.
      require(x || (w.dtype != DType::F32 && rounded_as == gemm_operand_type(w.dtype)),
              "launch_gemm", "no x, and no 16-bit copy of the type these weights need");
      if (w.dtype == DType::F32) {
        check(cublasSgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, rows, n_tokens, cols, &one,
                          static_cast<const float*>(w.data), cols, x, cols, &zero, p.out, rows),
              "cublasSgemm");
        continue;
      }
      if (rounded.codes && gemm_multiplies_rounded(w.dtype, n_tokens)) {
        launch_gemm_quantized_few_tokens(w, rounded, n_tokens, p.out, device_);
        continue;
      }
      const void* w16 = w.data;
      if (is_quantized(w.dtype)) {
        std::uint16_t* decoded = grown(weights_, w.rows * w.cols);
        launch_decode_to_f16(w, decoded, device_);
        w16 = decoded;
      }
      const DType operand = gemm_operand_type(w.dtype);
      const std::size_t x_count = static_cast<std::size_t>(n_tokens) * cols;
      if (operand != rounded_as) {
        std::uint16_t* copy = grown(activations_, x_count);
        launch_round_to_16bit(x, x_count, operand, copy, device_);
        x16 = copy;
        rounded_as = operand;
      }
      if (const int tiles = few_tokens_tiles(w, n_tokens)) {
        launch_gemm_few_tokens(w, x16, n_tokens, p.out, device_, tiles);
        continue;
      }
      const cudaDataType type = operand == DType::F16 ? CUDA_R_16F : CUDA_R_16BF;
      check(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, rows, n_tokens, cols, &one, w16, type, cols,
                         x16, type, cols, &zero, p.out, CUDA_R_32F, rows, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
    }
  }

 private:
  // A decode batch's 16-bit product goes to the tensor-core stream kernel where its blocks fit one wave
  // and fill it (few_tokens_row_tiles), where it beat cuBLAS; Llama 3 8B's gate/up (28,672 rows) stays
  // with cuBLAS, which ran it faster (measured: docs/perf_history.md, v16). Returns its row tiles, or 0
  // for cuBLAS.
  int few_tokens_tiles(const WeightMatrix& w, int n_tokens) const {
    const bool fits = few_tokens_ && n_tokens <= kMostFewTokens && !is_quantized(w.dtype) &&
                      w.cols % kFewTokensColumnMultiple == 0 && reinterpret_cast<std::uintptr_t>(w.data) % 16 == 0;
    return fits ? few_tokens_row_tiles(device_, w.rows, n_tokens) : 0;
  }

  // `buffer`, holding at least `count` values: regrown (never shrunk) once the queued work is done with it.
  std::uint16_t* grown(DeviceBuffer<std::uint16_t>& buffer, std::size_t count) {
    if (buffer.size() < count) {
      device_.synchronize();
      buffer = DeviceBuffer<std::uint16_t>(count);
    }
    return buffer.data();
  }

  // cuBLAS's advice for Hopper: 32 MiB lets it choose split-K kernels for skinny products (decode
  // batches); it is also the workspace graph-captured GEMMs use, so nothing is allocated in a capture.
  static constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

  const DeviceContext& device_;
  DeviceBuffer<std::uint8_t> workspace_;
  cublasHandle_t handle_ = nullptr;
  bool few_tokens_;
  DeviceBuffer<std::uint16_t> activations_, weights_;
};

std::unique_ptr<GemmContext> make_gemm_context(const DeviceContext& device) {
  return std::make_unique<GemmContext>(device);
}

bool gemm_takes_half_copy() { return true; }

// Decoding a quantized decode batch's weights to f16 for cuBLAS instead wrote and read 3.6 times their
// bytes (Q4_0), step after step (docs/perf_history.md, issue #25).
bool gemm_multiplies_rounded(DType type, int n_tokens) {
  static const bool available = few_tokens_allowed() && quantized_few_tokens_available();
  return available && n_tokens <= kMostQuantizedFewTokens && gemv_reads_rounded(type);
}

void launch_gemm_group(const DeviceContext& ctx, std::span<const WeightProduct> products, const float* x, int n_tokens,
                       HalfCopy half, QuantizedActivations rounded) {
  check_gemm_group(products, n_tokens);
  check_half_copy(half, "launch_gemm");
  if (n_tokens > 0) ctx.gemm().multiply(products, x, n_tokens, half, rounded);
}

}  // namespace rf::gpu

void std::default_delete<rf::gpu::GemmContext>::operator()(rf::gpu::GemmContext* ctx) const { delete ctx; }
