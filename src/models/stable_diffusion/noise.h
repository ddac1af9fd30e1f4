#pragma once
// Seeded Gaussian noise for Stable Diffusion, drawn on the host so that a seed gives the same image
// on every device. Two generators reproduce torch's, the ones users' seeds refer to:
//
//   TorchCpuGenerator   torch.manual_seed(seed) then torch.randn(shape, dtype=float32): what a
//                       diffusers script passes as `generator`. Bit for bit, as torch computes it
//                       on x86-64 CPUs with AVX2 or AVX-512 (the vectorised path of sizes >= 16
//                       uses Cephes-style polynomial log/sin/cos; torch built without AVX2 and on
//                       ARM uses libm there and differs in the last bits).
//   TorchCudaGenerator  torch.randn(shape, generator=torch.Generator("cuda").manual_seed(seed),
//                       device="cuda"): A1111's and ComfyUI's GPU seeds. The Philox counters are
//                       exact; the GPU's Box-Muller uses its approximate __logf and __sincosf,
//                       which the host cannot reproduce, so values agree to about 1e-6 (see the
//                       class).
//
// Each randn() call is one torch.randn of out.size() elements: a batch drawn at once differs from
// the same batch drawn one image at a time. BatchSeeds picks which of the two a batch gets.
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <vector>

namespace rf::stable_diffusion {

// The generator a seed refers to: A1111's "RNG" setting (CPU or GPU, its default).
enum class Rng { torch_cpu, torch_cuda };

// How the images of a batch get their noise, initial latents and samplers' steps alike.
enum class BatchSeeds {
  // Image i from its own generator seeded seed + i, as A1111 does (and diffusers given a list of
  // generators): each image is the one that batch 1 at its seed makes, and its infotext says so.
  per_image,
  // The whole batch from one generator seeded seed, drawn at once, as a diffusers script passing one
  // generator: only image 1 is the image batch 1 makes (with the CPU generator, only by samplers
  // that draw no step noise: its later draws go on from the end of the whole batch's).
  shared,
};

// Where the pipeline's and the samplers' noise comes from; tests supply recorded noise through it.
class NoiseSource {
 public:
  virtual ~NoiseSource() = default;
  // Fills `out` with standard normal values: one torch.randn(out.size()) call.
  virtual void randn(std::span<float> out) = 0;
};

class TorchCpuGenerator final : public NoiseSource {
 public:
  // Like torch's, only the seed's low 32 bits reach the Mersenne Twister.
  explicit TorchCpuGenerator(std::uint64_t seed);
  void randn(std::span<float> out) override;

 private:
  float uniform_float();
  double uniform_double();
  double normal_double();

  std::mt19937 engine_;
  // torch's scalar path makes normals in pairs and keeps the second for the next draw, also
  // across randn calls.
  std::optional<double> next_normal_;
};

// torch sizes its CUDA randn launch from the GPU (blocks of 256 threads, at most as many as the
// multiprocessors hold at once), and the launch decides which Philox stream fills which element.
// Draws smaller than that many threads (270336 on an H100: every SD and SDXL latent up to a batch
// of 4) fill element i from stream i on any GPU; larger ones need the GPU's numbers.
struct CudaGpu {
  int multiprocessors = 132;  // H100 SXM
  int max_threads_per_multiprocessor = 2048;
};

class TorchCudaGenerator final : public NoiseSource {
 public:
  explicit TorchCudaGenerator(std::uint64_t seed, CudaGpu gpu = {});
  void randn(std::span<float> out) override;

 private:
  std::uint64_t seed_;
  std::uint64_t offset_ = 0;  // torch's philox_offset_per_thread: 4 a Philox call per thread
  CudaGpu gpu_;
};

// One generator per image of a batch: each randn() splits `out` into as many equal parts as there
// are generators, image i's part from generator i (torch.stack of one torch.randn per generator).
class PerImageNoise final : public NoiseSource {
 public:
  explicit PerImageNoise(std::vector<std::unique_ptr<NoiseSource>> generators);
  void randn(std::span<float> out) override;

 private:
  std::vector<std::unique_ptr<NoiseSource>> generators_;
};

// The generator `rng` seeded `seed`.
std::unique_ptr<NoiseSource> make_generator(Rng rng, std::uint64_t seed);
// A batch's noise: one generator, or one per image seeded seed, seed + 1, ... (see BatchSeeds).
std::unique_ptr<NoiseSource> make_batch_noise(Rng rng, std::uint64_t seed, int batch, BatchSeeds seeds);

}  // namespace rf::stable_diffusion
