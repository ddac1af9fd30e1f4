#pragma once
// 2-D convolution of NCHW images, the UNet's and the VAE's, y = conv2d(x, W) + bias (bias may be
// null): square kernels, zero padding, W [out_channels] rows of in_channels * kernel * kernel values.
// Where the weights are 16-bit and the channels suit it: cuDNN where the build has it, else an
// implicit GEMM on NVIDIA's tensor cores; otherwise (HIP, fp32 weights, the few-channel convolutions
// at either end of the networks) products with gathered patches. backend/cpu/image_ops.h's conv2d is
// the reference.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/conv_shape.h"
#include "backend/gpu/runtime/device_context.h"
#include "formats/weight_matrix.h"

namespace rf::gpu {

// The implicit GEMM on tensor cores (conv2d_mma.cu) takes W's columns ordered (ky, kx, c), so that a
// tile of them is whole channels of one kernel position: conv2d_mma_order permutes PyTorch's
// (c, ky, kx) into it, where conv2d_mma_order_suits (f16 or bf16 weights, in_channels a multiple of
// 32). It rounds the image to W's type. Available on CUDA devices of compute capability 8.0 and later
// whose blocks may have 80 KiB of shared memory; workspace holds conv2d_mma_workspace_bytes (the
// image rounded and pixel-major, and the sums of split k where the tiles alone would leave the device
// idle).
bool conv2d_mma_available(const DeviceContext& ctx);
bool conv2d_mma_order_suits(int in_channels, int kernel, DType weights);
std::vector<std::uint16_t> conv2d_mma_order(const std::uint16_t* weights, int out_channels, int in_channels,
                                            int kernel);
std::size_t conv2d_mma_workspace_bytes(const ConvShape& shape, const DeviceContext& ctx);
void launch_conv2d_mma(const ConvShape& shape, const float* x, const WeightMatrix& w, const float* bias, float* y,
                       void* workspace, const DeviceContext& ctx);

// cuDNN's NHWC convolution (conv2d_cudnn.cpp; conv2d_cudnn_absent.cpp where the build has no cuDNN),
// f16 or bf16 products summed in fp32, on W in conv2d_mma_order: x goes pixel-major in W's type (in
// y's memory where it fits), cuDNN writes y pixel-major in that type, and a last pass adds the bias
// into NCHW fp32 (so y is rounded to W's type once, as a 16-bit network's activations are). The
// algorithm is cuDNN's heuristic choice for the shape (PyTorch's default), made once a shape.
// workspace holds workspace_bytes(); y must be the whole output, not a view into a larger buffer.
class CudnnConvolutions {
 public:
  // None where the build has no cuDNN.
  static std::unique_ptr<CudnnConvolutions> create(const DeviceContext& ctx);
  virtual ~CudnnConvolutions() = default;
  virtual std::size_t workspace_bytes(const ConvShape& shape, DType weights) = 0;
  virtual void run(const ConvShape& shape, const float* x, const WeightMatrix& w, const float* bias, float* y,
                   void* workspace) = 0;
};

// Images between NCHW fp32 and pixel-major 16-bit ([n][y][x][c], f16 or bf16; pixel_major.cu):
// to_pixel_major rounds x into `out`; from_pixel_major writes y = x + bias (per channel, bias may be
// null). pixel_major_bytes: such an image's bytes, rounded up to 256 so that what follows it in a
// workspace stays aligned.
void launch_to_pixel_major(const float* x, int batch, int channels, int pixels, DType type, std::uint16_t* out,
                           const DeviceContext& ctx);
void launch_from_pixel_major(const std::uint16_t* x, int batch, int channels, int pixels, DType type,
                             const float* bias, float* y, const DeviceContext& ctx);
inline std::size_t pixel_major_bytes(int batch, int channels, int pixels) {
  const std::size_t bytes = static_cast<std::size_t>(batch) * channels * pixels * sizeof(std::uint16_t);
  return (bytes + 255) / 256 * 256;
}

// The portable way, W in PyTorch's order and any stored type: products of W with patches gathered a
// band of output pixels at a time, through launch_gemm (cuBLAS on CUDA, the tiled kernel on HIP);
// workspace holds conv2d_patches_workspace_bytes (a band of patches and of their products).
std::size_t conv2d_patches_workspace_bytes(const ConvShape& shape);
void launch_conv2d_by_patches(const ConvShape& shape, const float* x, const WeightMatrix& w, const float* bias,
                              float* y, void* workspace, const DeviceContext& ctx);

// Refuses (as a launch error naming `launch`) a bad shape or weights of another shape.
void check_conv2d(const ConvShape& shape, const WeightMatrix& w, const char* launch);

}  // namespace rf::gpu
