#pragma once
// Reading a network's parameters by their diffusers names into a backend: each weight is checked
// against the shape the config implies, so that a forward never meets a surprise.
#include <string>
#include <string_view>

#include "backend/image_backend.h"
#include "formats/tensor.h"

namespace rf::stable_diffusion {

class ParameterReader {
 public:
  // With `fp16_overflows`, every matrix is read so that no product takes f16 inputs
  // (ImageBackend::matrix): for a VAE whose config says force_upcast.
  ParameterReader(const TensorSet& tensors, ImageBackend& backend, std::string prefix = {}, bool fp16_overflows = false)
      : tensors_(tensors), backend_(backend), prefix_(std::move(prefix)), fp16_overflows_(fp16_overflows) {}

  // The reader of a submodule: names under `prefix.name.`.
  ParameterReader operator[](std::string_view name) const;
  ParameterReader operator[](int index) const { return (*this)[std::to_string(index)]; }

  bool has(std::string_view name) const { return tensors_.find(prefix_ + std::string(name)) != nullptr; }
  // `name`.weight [out, in] and, with `bias`, `name`.bias [out].
  LinearWeights linear(std::string_view name, int in, int out, bool bias = true) const;
  // `name`.weight [out, in, kernel, kernel] and `name`.bias [out].
  ConvWeights conv(std::string_view name, int in, int out, int kernel) const;
  // `name`.weight and `name`.bias, [channels] each.
  NormWeights norm(std::string_view name, int channels) const;
  // `name` itself, [rows, cols], in its stored type.
  WeightMatrix matrix(std::string_view name, int rows, int cols) const;
  ImageBackend& backend() const { return backend_; }

 private:
  const TensorView& get(std::string_view name, std::initializer_list<int> shape) const;

  const TensorSet& tensors_;
  ImageBackend& backend_;
  std::string prefix_;
  bool fp16_overflows_;
};

}  // namespace rf::stable_diffusion
