#include "models/stable_diffusion/noise.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <numbers>

#include "util/error.h"

namespace rf::stable_diffusion {

namespace {

// The Cephes single-precision polynomials that torch's AVX2 normal fill evaluates eight lanes at a
// time. Its build fuses each multiply whose only use is an add into a fused multiply-add, so the
// same ones are std::fma here and the others round twice: the results match bit for bit.
namespace cephes {

float log(float x) {
  constexpr float p[] = {7.0376836292e-2f, -1.1514610310e-1f, 1.1676998740e-1f,
                         -1.2420140846e-1f, 1.4249322787e-1f, -1.6668057665e-1f,
                         2.0000714765e-1f, -2.4999993993e-1f, 3.3333331174e-1f};
  // x = m * 2^e with m in [0.5, 1); then m folded into [sqrt(1/2), sqrt(2)) around 1.
  const auto bits = std::bit_cast<std::uint32_t>(std::max(x, 1.17549435e-38f));
  float e = static_cast<float>(static_cast<std::int32_t>(bits >> 23) - 127) + 1.0f;
  float m = std::bit_cast<float>((bits & ~0x7f800000u) | 0x3f000000u);
  const bool small = m < 0.707106781186547524f;
  const float doubled = small ? m : 0.0f;
  m = m - 1.0f;
  e = e - (small ? 1.0f : 0.0f);
  m = m + doubled;
  const float z = m * m;
  float y = p[0];
  for (int i = 1; i < 9; ++i) y = std::fma(y, m, p[i]);
  y = y * m;
  y = std::fma(y, z, e * -2.12194440e-4f);
  y = std::fma(-z, 0.5f, y);
  return std::fma(e, 0.693359375f, m + y);
}

// sin and cos of x >= 0 (an angle 2*pi*u), with the octant reduction done in three parts of pi/4.
void sincos(float x, float& sin, float& cos) {
  int octant = static_cast<int>(x * 1.27323954473516f);
  octant = (octant + 1) & ~1;
  const float y = static_cast<float>(octant);
  const bool flip_sin = octant & 4;
  const bool sine_poly_for_sin = (octant & 2) == 0;
  const bool flip_cos = (~(octant - 2)) & 4;
  x = std::fma(y, -0.78515625f, x);
  x = std::fma(y, -2.4187564849853515625e-4f, x);
  x = std::fma(y, -3.77489497744594108e-8f, x);
  const float z = x * x;
  float c = 2.443315711809948e-5f;
  c = std::fma(c, z, -1.388731625493765e-3f);
  c = std::fma(c, z, 4.166664568298827e-2f);
  c = c * z;
  c = std::fma(c, z, -(z * 0.5f));
  c = c + 1.0f;
  float s = -1.9515295891e-4f;
  s = std::fma(s, z, 8.3321608736e-3f);
  s = std::fma(s, z, -1.6666654611e-1f);
  s = s * z;
  s = std::fma(s, x, x);
  sin = sine_poly_for_sin ? s : c;
  cos = sine_poly_for_sin ? c : s;
  if (flip_sin) sin = -sin;
  if (flip_cos) cos = -cos;
}

}  // namespace cephes

// torch's vectorised Box-Muller over 16 uniforms: the first 8 give the radii, the last 8 the angles.
void box_muller_16(float* data) {
  constexpr float two_pi = static_cast<float>(2.0 * std::numbers::pi);
  for (int j = 0; j < 8; ++j) {
    const float radius = std::sqrt(-2.0f * cephes::log(1.0f - data[j]));
    float sin, cos;
    cephes::sincos(two_pi * data[j + 8], sin, cos);
    data[j] = radius * cos;
    data[j + 8] = radius * sin;
  }
}

}  // namespace

TorchCpuGenerator::TorchCpuGenerator(std::uint64_t seed) : engine_(static_cast<std::uint32_t>(seed)) {}

float TorchCpuGenerator::uniform_float() {
  return static_cast<float>(engine_() & 0xffffffu) * 0x1p-24f;
}

double TorchCpuGenerator::uniform_double() {
  const std::uint64_t high = engine_();
  const std::uint64_t bits = (high << 32) | engine_();
  return static_cast<double>(bits & ((std::uint64_t{1} << 53) - 1)) * 0x1p-53;
}

double TorchCpuGenerator::normal_double() {
  if (next_normal_) {
    const double kept = *next_normal_;
    next_normal_.reset();
    return kept;
  }
  const double u1 = uniform_double();
  const double u2 = uniform_double();
  const double radius = std::sqrt(-2.0 * std::log1p(-u2));
  const double theta = 2.0 * std::numbers::pi * u1;
  next_normal_ = radius * std::sin(theta);
  return radius * std::cos(theta);
}

void TorchCpuGenerator::randn(std::span<float> out) {
  const std::size_t n = out.size();
  if (n < 16) {
    for (float& v : out) v = static_cast<float>(normal_double());
    return;
  }
  // All uniforms first, then Box-Muller in blocks of 16; a ragged end gets 16 fresh uniforms laid
  // over the last 16 places and transformed again.
  for (float& v : out) v = uniform_float();
  for (std::size_t i = 0; i + 16 <= n; i += 16) box_muller_16(out.data() + i);
  if (n % 16 != 0) {
    float* tail = out.data() + n - 16;
    for (int i = 0; i < 16; ++i) tail[i] = uniform_float();
    box_muller_16(tail);
  }
}

namespace {

using Philox = std::array<std::uint32_t, 4>;

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"), as cuRAND keys it.
Philox philox(Philox counter, std::uint64_t seed) {
  std::uint32_t key0 = static_cast<std::uint32_t>(seed), key1 = static_cast<std::uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t{0xD2511F53} * counter[0];
    const std::uint64_t p1 = std::uint64_t{0xCD9E8D57} * counter[2];
    counter = {static_cast<std::uint32_t>(p1 >> 32) ^ counter[1] ^ key0, static_cast<std::uint32_t>(p1),
               static_cast<std::uint32_t>(p0 >> 32) ^ counter[3] ^ key1, static_cast<std::uint32_t>(p0)};
    key0 += 0x9E3779B9;
    key1 += 0xBB67AE85;
  }
  return counter;
}

// cuRAND's Box-Muller on two 32-bit draws: (r sin v, r cos v). The GPU takes __logf and __sincosf
// (hardware approximations); libm's float functions here are what makes the values differ slightly.
std::array<float, 2> curand_box_muller(std::uint32_t a, std::uint32_t b) {
  constexpr float inv_2pow32 = 2.3283064e-10f;
  constexpr float inv_2pow32_2pi = 2.3283064e-10f * 6.2831855f;
  const float u = static_cast<float>(a) * inv_2pow32 + inv_2pow32 / 2.0f;
  const float v = std::fma(static_cast<float>(b), inv_2pow32_2pi, inv_2pow32_2pi / 2.0f);  // nvcc fuses it
  const float radius = std::sqrt(-2.0f * std::log(u));
  return {radius * std::sin(v), radius * std::cos(v)};
}

}  // namespace

TorchCudaGenerator::TorchCudaGenerator(std::uint64_t seed, CudaGpu gpu) : seed_(seed), gpu_(gpu) {}

void TorchCudaGenerator::randn(std::span<float> out) {
  // torch's launch: threads in blocks of 256, at most one full wave of them; each thread calls
  // Philox in rounds and spreads a round's four normals a grid apart.
  const std::uint64_t n = out.size();
  if (n == 0) return;
  const std::uint64_t block = 256;
  const std::uint64_t wave_blocks = std::uint64_t(gpu_.multiprocessors) * (gpu_.max_threads_per_multiprocessor / block);
  const std::uint64_t threads = std::min((n + block - 1) / block, wave_blocks) * block;
  const std::uint64_t rounds = (n - 1) / (threads * 4) + 1;
  const std::uint64_t first_counter = offset_ / 4;
  offset_ += rounds * 4;
  for (std::uint64_t thread = 0; thread < threads; ++thread) {
    for (std::uint64_t round = 0; round < rounds; ++round) {
      const std::uint64_t counter = first_counter + round;
      const Philox bits = philox({static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32),
                                  static_cast<std::uint32_t>(thread), static_cast<std::uint32_t>(thread >> 32)},
                                 seed_);
      const auto first = curand_box_muller(bits[0], bits[1]);
      const auto second = curand_box_muller(bits[2], bits[3]);
      const float normals[4] = {first[0], first[1], second[0], second[1]};
      for (std::uint64_t k = 0; k < 4; ++k) {
        const std::uint64_t i = thread + (round * 4 + k) * threads;
        if (i < n) out[i] = normals[k];
      }
    }
  }
}

PerImageNoise::PerImageNoise(std::vector<std::unique_ptr<NoiseSource>> generators)
    : generators_(std::move(generators)) {}

void PerImageNoise::randn(std::span<float> out) {
  if (out.size() % generators_.size()) fail("{} noise values do not split into {} images", out.size(), generators_.size());
  const std::size_t each = out.size() / generators_.size();
  for (std::size_t i = 0; i < generators_.size(); ++i) generators_[i]->randn(out.subspan(i * each, each));
}

std::unique_ptr<NoiseSource> make_generator(Rng rng, std::uint64_t seed) {
  if (rng == Rng::torch_cpu) return std::make_unique<TorchCpuGenerator>(seed);
  return std::make_unique<TorchCudaGenerator>(seed);
}

std::unique_ptr<NoiseSource> make_batch_noise(Rng rng, std::uint64_t seed, int batch, BatchSeeds seeds) {
  if (seeds == BatchSeeds::shared) return make_generator(rng, seed);
  std::vector<std::unique_ptr<NoiseSource>> generators;
  for (int i = 0; i < batch; ++i) generators.push_back(make_generator(rng, seed + i));
  return std::make_unique<PerImageNoise>(std::move(generators));
}

}  // namespace rf::stable_diffusion
