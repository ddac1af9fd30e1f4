#include "models/stable_diffusion/parameters.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "util/error.h"

namespace rf::stable_diffusion {

ParameterReader ParameterReader::operator[](std::string_view name) const {
  return {tensors_, backend_, prefix_ + std::string(name) + ".", fp16_overflows_};
}

const TensorView& ParameterReader::get(std::string_view name, std::initializer_list<int> shape) const {
  const std::string full = prefix_ + std::string(name);
  const TensorView* view = tensors_.find(full);
  if (!view) fail("{}: tensor {} is missing", tensors_.source(), full);
  if (!std::ranges::equal(view->dims(), shape, [](std::uint64_t a, int b) { return a == static_cast<std::uint64_t>(b); })) {
    fail("{}: tensor {} has shape {}, expected [{}] from the model's config", tensors_.source(), full,
         view->shape_string(), fmt::join(shape, ", "));
  }
  return *view;
}

WeightMatrix ParameterReader::matrix(std::string_view name, int rows, int cols) const {
  return backend_.matrix(get(name, {rows, cols}), rows, cols, fp16_overflows_);
}

LinearWeights ParameterReader::linear(std::string_view name, int in, int out, bool bias) const {
  const std::string n(name);
  LinearWeights w{matrix(n + ".weight", out, in)};
  if (bias) w.bias = backend_.vector(get(n + ".bias", {out}));
  return w;
}

ConvWeights ParameterReader::conv(std::string_view name, int in, int out, int kernel) const {
  const std::string n(name);
  return backend_.conv_weights(get(n + ".weight", {out, in, kernel, kernel}), backend_.vector(get(n + ".bias", {out})),
                               in, kernel, fp16_overflows_);
}

NormWeights ParameterReader::norm(std::string_view name, int channels) const {
  const std::string n(name);
  return {backend_.vector(get(n + ".weight", {channels})), backend_.vector(get(n + ".bias", {channels})), channels};
}

}  // namespace rf::stable_diffusion
