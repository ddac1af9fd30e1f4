#pragma once
// 2-D convolution of NCHW images (conv2d.cu): the products of the UNet's and the VAE's convolutions
// as matrix products of W with patches gathered a band of output pixels at a time, through
// launch_gemm (cuBLAS on CUDA, the tiled kernel on HIP). backend/cpu/image_ops.h's conv2d, which
// works the same way, is the reference.
#include <cstddef>

#include "backend/conv_shape.h"
#include "backend/gpu/runtime/device_context.h"
#include "formats/weight_matrix.h"

namespace rf::gpu {

// Scratch launch_conv2d needs for this shape: a band of patches and of their products.
std::size_t conv2d_workspace_bytes(const ConvShape& shape);

// y = conv2d(x, W) + bias (bias may be null): square kernels, zero padding; W is [out_channels] rows
// of in_channels * kernel * kernel values (PyTorch's [out, in, kh, kw]) in any stored type.
// workspace holds conv2d_workspace_bytes(shape).
void launch_conv2d(const ConvShape& shape, const float* x, const WeightMatrix& w, const float* bias, float* y,
                   void* workspace, const DeviceContext& ctx);

}  // namespace rf::gpu
