// CudnnConvolutions (conv.h) through cuDNN's convolution API, NHWC on both sides. cuDNN's kernels
// for these shapes (the ones PyTorch and so diffusers run) outpace the project's implicit GEMM; the
// implicit GEMM stays for builds without cuDNN and the patches path for HIP, which has no MIOpen here.
#include <cudnn.h>

#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "backend/gpu/conv/conv.h"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

namespace {

void check(cudnnStatus_t status, const char* call) {
  if (status != CUDNN_STATUS_SUCCESS) throw_bad_launch(call, cudnnGetErrorString(status));
}

// Descriptors owned for the handle's lifetime.
template <typename T, cudnnStatus_t (*kCreate)(T*), cudnnStatus_t (*kDestroy)(T)>
class Descriptor {
 public:
  Descriptor() { check(kCreate(&d_), "cudnnCreate*Descriptor"); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() { (void)kDestroy(d_); }
  T get() const { return d_; }

 private:
  T d_{};
};
using TensorDescriptor = Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDescriptor = Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor =
    Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;

// One shape's descriptors and the algorithm chosen for it.
struct Plan {
  TensorDescriptor x, y;
  FilterDescriptor w;
  ConvolutionDescriptor conv;
  cudnnConvolutionFwdAlgo_t algorithm{};
  std::size_t algorithm_bytes = 0;
};

// The most scratch an algorithm may ask for: past it the memory costs more than the time it saves.
constexpr std::size_t kMaxAlgorithmBytes = std::size_t{256} << 20;

// x's pixel-major copy goes into y's memory where it fits (cuDNN has read it before the last pass
// writes y there), so that most convolutions need no room of their own for it.
bool copy_fits_in_output(const ConvShape& s) {
  const std::size_t copy = static_cast<std::size_t>(s.batch) * s.in_channels * s.height * s.width * sizeof(std::uint16_t);
  return copy <= static_cast<std::size_t>(s.batch) * s.out_channels * s.out_height() * s.out_width() * sizeof(float);
}

class Convolutions final : public CudnnConvolutions {
 public:
  explicit Convolutions(const DeviceContext& ctx) : ctx_(ctx) {
    check(cudnnCreate(&handle_), "cudnnCreate");
    if (const cudnnStatus_t status = cudnnSetStream(handle_, ctx.stream()); status != CUDNN_STATUS_SUCCESS) {
      (void)cudnnDestroy(handle_);
      check(status, "cudnnSetStream");
    }
  }
  ~Convolutions() override {
    plans_.clear();
    (void)cudnnDestroy(handle_);
  }

  std::size_t workspace_bytes(const ConvShape& s, DType weights) override {
    const Plan& plan = plan_for(s, weights);
    const std::size_t copy = copy_fits_in_output(s) ? 0 : pixel_major_bytes(s.batch, s.in_channels, s.height * s.width);
    return copy + pixel_major_bytes(s.batch, s.out_channels, s.out_height() * s.out_width()) + plan.algorithm_bytes;
  }

  void run(const ConvShape& s, const float* x, const WeightMatrix& w, const float* bias, float* y,
           void* workspace) override {
    check_conv2d(s, w, "CudnnConvolutions::run");
    require(conv2d_mma_order_suits(s.in_channels, s.kernel, w.dtype), "CudnnConvolutions::run",
            "needs f16 or bf16 weights in conv2d_mma_order");
    const Plan& plan = plan_for(s, w.dtype);
    const int out_pixels = s.out_height() * s.out_width();
    auto* next = static_cast<std::uint8_t*>(workspace);
    const auto take = [&next](std::size_t bytes) {
      return reinterpret_cast<std::uint16_t*>(std::exchange(next, next + bytes));
    };
    auto* x16 = copy_fits_in_output(s) ? reinterpret_cast<std::uint16_t*>(y)
                                       : take(pixel_major_bytes(s.batch, s.in_channels, s.height * s.width));
    auto* y16 = take(pixel_major_bytes(s.batch, s.out_channels, out_pixels));
    void* scratch = next;
    launch_to_pixel_major(x, s.batch, s.in_channels, s.height * s.width, w.dtype, x16, ctx_);
    const float one = 1.0f, zero = 0.0f;
    check(cudnnConvolutionForward(handle_, &one, plan.x.get(), x16, plan.w.get(), w.data, plan.conv.get(),
                                  plan.algorithm, scratch, plan.algorithm_bytes, &zero, plan.y.get(), y16),
          "cudnnConvolutionForward");
    launch_from_pixel_major(y16, s.batch, s.out_channels, out_pixels, w.dtype, bias, y, ctx_);
  }

 private:
  using Key = std::tuple<int, int, int, int, int, int, int, int, DType>;

  const Plan& plan_for(const ConvShape& s, DType weights) {
    const Key key{s.batch, s.in_channels, s.height, s.width, s.out_channels, s.kernel, s.stride, s.padding, weights};
    if (const auto found = plans_.find(key); found != plans_.end()) return *found->second;
    auto made = std::make_unique<Plan>();  // kept only once whole: a failed shape is not left half set up
    Plan& plan = *made;
    const cudnnDataType_t type = weights == DType::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    check(cudnnSetTensor4dDescriptor(plan.x.get(), CUDNN_TENSOR_NHWC, type, s.batch, s.in_channels, s.height, s.width),
          "cudnnSetTensor4dDescriptor");
    check(cudnnSetTensor4dDescriptor(plan.y.get(), CUDNN_TENSOR_NHWC, type, s.batch, s.out_channels, s.out_height(),
                                     s.out_width()),
          "cudnnSetTensor4dDescriptor");
    // conv2d_mma_order's (out, ky, kx, c) is cuDNN's NHWC filter layout, KRSC.
    check(cudnnSetFilter4dDescriptor(plan.w.get(), type, CUDNN_TENSOR_NHWC, s.out_channels, s.in_channels, s.kernel,
                                     s.kernel),
          "cudnnSetFilter4dDescriptor");
    check(cudnnSetConvolution2dDescriptor(plan.conv.get(), s.padding, s.padding, s.stride, s.stride, 1, 1,
                                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "cudnnSetConvolution2dDescriptor");
    check(cudnnSetConvolutionMathType(plan.conv.get(), CUDNN_TENSOR_OP_MATH), "cudnnSetConvolutionMathType");
    choose_algorithm(plan);
    return *plans_.emplace(key, std::move(made)).first->second;
  }

  // cuDNN's heuristic choice, the first that fits kMaxAlgorithmBytes. Its own timing
  // (cudnnFindConvolutionForwardAlgorithm) picked better 1x1 and strided algorithms, but cost 1.4 s
  // of an SD 1.5 image's first run; those shapes go to the implicit GEMM anyway, by the backend's
  // timing of the two paths.
  void choose_algorithm(Plan& plan) {
    cudnnConvolutionFwdAlgoPerf_t ranked[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int count = 0;
    check(cudnnGetConvolutionForwardAlgorithm_v7(handle_, plan.x.get(), plan.w.get(), plan.conv.get(), plan.y.get(),
                                                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, ranked),
          "cudnnGetConvolutionForwardAlgorithm_v7");
    for (int i = 0; i < count; ++i) {  // best first
      if (ranked[i].status != CUDNN_STATUS_SUCCESS || ranked[i].memory > kMaxAlgorithmBytes) continue;
      plan.algorithm = ranked[i].algo;
      plan.algorithm_bytes = ranked[i].memory;
      return;
    }
    throw_bad_launch("cudnnGetConvolutionForwardAlgorithm_v7", "no algorithm for this convolution");
  }

  const DeviceContext& ctx_;
  cudnnHandle_t handle_ = nullptr;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace

std::unique_ptr<CudnnConvolutions> CudnnConvolutions::create(const DeviceContext& ctx) {
  return std::make_unique<Convolutions>(ctx);
}

}  // namespace rf::gpu
