#pragma once
// The GPU's ImageBackend (backend/image_backend.h): Stable Diffusion's operations over device memory
// on one device context's stream, with fp32 activations. Plain C++: callers need no GPU compiler.
#include <memory>

#include "backend/image_backend.h"
#include "backend/gpu/runtime/device_context.h"

namespace rf::gpu {

// What the matrix products multiply: fp32 activations rounded to the 16-bit type of f16/bf16 weights
// (cuBLAS on the tensor cores; a relative error up to 2^-11 / 2^-8 a value), or, with fp32, the
// activations as they are with the weights converted to f32 (exact to fp32, slower, twice the memory).
enum class ProductInputs { weight_type, fp32 };

// Weights are copied to the device (as stored, or as f32); the context must outlive the backend, and
// the backend every tensor and weight it made.
std::unique_ptr<ImageBackend> make_image_backend(const DeviceContext& ctx,
                                                 ProductInputs products = ProductInputs::weight_type);
// The same on a context of its own for GPU `device`.
std::unique_ptr<ImageBackend> make_image_backend(int device, ProductInputs products = ProductInputs::weight_type);

}  // namespace rf::gpu
