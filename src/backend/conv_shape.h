#pragma once
// A 2-D convolution's shape, as the CPU and GPU backends both take it (backend/cpu/image_ops.h,
// backend/gpu/conv/conv.h): NCHW images, square kernels, zero padding.

namespace rf {

struct ConvShape {
  int batch, in_channels, height, width;
  int out_channels, kernel, stride, padding;
  int out_height() const { return (height + 2 * padding - kernel) / stride + 1; }
  int out_width() const { return (width + 2 * padding - kernel) / stride + 1; }
};

}  // namespace rf
