// torch's generators against torch 2.11's own draws (fixture made on an x86-64 CPU with AVX-512
// and an H100): the CPU generator bit for bit; the CUDA one to the GPU's approximate __logf and
// __sincosf, which put up to about 2e-6 between its Box-Muller and libm's.
#include "models/stable_diffusion/noise.h"

#include "sampling_fixture.h"

namespace rf::stable_diffusion {
namespace {

using fixture::sampling;

// Max |got - want| over a draw, and how many values differ at all.
struct Difference {
  double max = 0;
  int count = 0;
};

Difference difference(const std::vector<float>& got, const std::vector<float>& want) {
  Difference d;
  for (std::size_t i = 0; i < want.size(); ++i) {
    d.max = std::max(d.max, std::abs(static_cast<double>(got[i]) - want[i]));
    d.count += got[i] != want[i];
  }
  return d;
}

template <typename Generator, typename... GeneratorArgs>
void check_draws(const nlohmann::json& seeds, double tolerance, GeneratorArgs... args) {
  for (const auto& s : seeds) {
    const auto seed = s["seed"].get<std::uint64_t>();
    Generator generator(seed, args...);
    for (const auto& draw : s["draws"]) {
      std::vector<float> got(fixture::element_count(draw["shape"]));
      generator.randn(got);
      const Difference d = difference(got, fixture::floats(draw["values"]));
      fixture::check(fmt::format("seed {} shape {} ({} differ)", seed, draw["shape"].dump(), d.count), d.max, tolerance);
    }
  }
}

TEST(TorchCpuGenerator, EqualsTorchBitForBit) {
  // Consecutive draws from one generator: sizes under 16 (torch's scalar path, whose cached second
  // normal carries across calls), 16 and over, and ragged ends.
  check_draws<TorchCpuGenerator>(sampling()["noise"]["cpu"], 0.0);
}

constexpr double kCudaTolerance = 4e-6;

TEST(TorchCudaGenerator, EqualsTorchUpToTheGpusLogAndSincos) {
  const auto& meta = sampling()["meta"];
  const CudaGpu gpu{meta["multi_processor_count"].get<int>(), meta["max_threads_per_multi_processor"].get<int>()};
  check_draws<TorchCudaGenerator>(sampling()["noise"]["cuda"], kCudaTolerance, gpu);
}

TEST(TorchCudaGenerator, DrawsLargerThanTheGpuHoldsAtOnce) {
  // More elements than one wave of threads: each thread fills several, a grid apart, from the
  // four normals of a Philox call and then from further calls.
  const auto& meta = sampling()["meta"];
  const CudaGpu gpu{meta["multi_processor_count"].get<int>(), meta["max_threads_per_multi_processor"].get<int>()};
  for (const auto& s : sampling()["noise"]["cuda_sampled"]) {
    TorchCudaGenerator generator(s["seed"].get<std::uint64_t>(), gpu);
    std::vector<float> all(fixture::element_count(s["shape"]));
    generator.randn(all);
    std::vector<float> got;
    for (const auto& i : s["indices"]) got.push_back(all[i.get<std::size_t>()]);
    const Difference d = difference(got, fixture::floats(s["values"]));
    fixture::check(fmt::format("seed {} shape {}, {} values", s["seed"].get<std::uint64_t>(), s["shape"].dump(), got.size()),
                   d.max, kCudaTolerance);
  }
}

}  // namespace
}  // namespace rf::stable_diffusion
