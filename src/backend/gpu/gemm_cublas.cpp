// launch_gemm on CUDA, through cuBLAS. 16-bit weights go through the tensor cores with fp32 accumulation
// and output, the activations rounded to the weight's type first; quantized weights are first decoded to
// f16, as llama.cpp does for prefill (f16, not bf16: 3 more bits; through bf16 the quantized test models'
// logits drifted past the HF reference's 1e-2. Activations past f16's 65504 would overflow, which
// Llama-family models stay far below). f32 weights take SGEMM, fp32 throughout (cuBLAS uses TF32 only
// when asked to).
#include <cublas_v2.h>

#include "backend/gpu/device_buffer.h"
#include "backend/gpu/gemm_kernels.h"
#include "backend/gpu/launch_check.h"
#include "backend/gpu/ops.h"

namespace rf::gpu {

namespace {

void check(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_bad_launch(call, cublasGetStatusString(status));
}

}  // namespace

class GemmContext {
 public:
  explicit GemmContext(gpuStream_t stream) : stream_(stream) {
    check(cublasCreate(&handle_), "cublasCreate");
    const cublasStatus_t status = cublasSetStream(handle_, stream);
    if (status != CUBLAS_STATUS_SUCCESS) (void)cublasDestroy(handle_);
    check(status, "cublasSetStream");
  }
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;
  ~GemmContext() { (void)cublasDestroy(handle_); }

  void multiply(const WeightMatrix& w, const float* x, int n_tokens, float* out) {
    const int rows = static_cast<int>(w.rows), cols = static_cast<int>(w.cols);
    const float one = 1.0f, zero = 0.0f;
    // Row-major out[n_tokens][rows] = x[n_tokens][cols] W^T is, to column-major cuBLAS, W^T (W's rows
    // are its columns) times x.
    if (w.dtype == DType::F32) {
      check(cublasSgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, rows, n_tokens, cols, &one, static_cast<const float*>(w.data),
                        cols, x, cols, &zero, out, rows),
            "cublasSgemm");
      return;
    }
    const void* w16 = w.data;
    if (is_quantized(w.dtype)) {
      std::uint16_t* decoded = grown(weights_, w.rows * w.cols);
      launch_decode_to_f16(w, decoded, stream_);
      w16 = decoded;
    }
    const DType operand = w.dtype == DType::BF16 ? DType::BF16 : DType::F16;
    const std::size_t x_count = static_cast<std::size_t>(n_tokens) * cols;
    std::uint16_t* x16 = grown(activations_, x_count);
    launch_round_to_16bit(x, x_count, operand, x16, stream_);
    const cudaDataType type = operand == DType::F16 ? CUDA_R_16F : CUDA_R_16BF;
    check(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, rows, n_tokens, cols, &one, w16, type, cols, x16, type, cols,
                       &zero, out, CUDA_R_32F, rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  }

 private:
  // `buffer`, holding at least `count` values: regrown (never shrunk) once the queued work is done with it.
  std::uint16_t* grown(DeviceBuffer<std::uint16_t>& buffer, std::size_t count) {
    if (buffer.size() < count) {
      RF_GPU_CHECK(gpuStreamSynchronize(stream_));
      buffer = DeviceBuffer<std::uint16_t>(count);
    }
    return buffer.data();
  }

  gpuStream_t stream_;
  cublasHandle_t handle_ = nullptr;
  DeviceBuffer<std::uint16_t> activations_, weights_;
};

std::unique_ptr<GemmContext> make_gemm_context(gpuStream_t stream) { return std::make_unique<GemmContext>(stream); }

void launch_gemm(GemmContext& ctx, const WeightMatrix& w, const float* x, int n_tokens, float* out) {
  require(w.rows > 0 && w.cols > 0 && w.rows <= (1u << 30) && w.cols <= (1u << 30), "launch_gemm",
          "weight shape is empty or too large");
  require(n_tokens >= 0, "launch_gemm", "negative token count");
  if (n_tokens > 0) ctx.multiply(w, x, n_tokens, out);
}

}  // namespace rf::gpu

void std::default_delete<rf::gpu::GemmContext>::operator()(rf::gpu::GemmContext* ctx) const { delete ctx; }
