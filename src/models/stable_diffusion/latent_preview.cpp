#include "models/stable_diffusion/latent_preview.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace rf::stable_diffusion {

namespace {

constexpr int kLevels = 4;          // a channel's values in the chart: 0, 1/3, 2/3, 1
constexpr int kPatchesPerSide = 8;  // kLevels^3 = 64 colours, 8 x 8 patches
constexpr int kPatchLatents = 4;    // a patch's side in latent pixels; its centre 2 x 2 are sampled

// Patch p's colour: every combination of the levels once.
float level(int patch, int channel) {
  int index = patch;
  for (int c = 0; c < channel; ++c) index /= kLevels;
  return static_cast<float>(index % kLevels) / (kLevels - 1);
}

// Solves the n x n system a x = b (row-major a) by Gaussian elimination with partial pivoting.
std::vector<double> solve(std::vector<double> a, std::vector<double> b) {
  const std::size_t n = b.size();
  for (std::size_t col = 0; col < n; ++col) {
    std::size_t pivot = col;
    for (std::size_t r = col + 1; r < n; ++r)
      if (std::abs(a[r * n + col]) > std::abs(a[pivot * n + col])) pivot = r;
    if (std::abs(a[pivot * n + col]) < 1e-12) fail("the latent preview's fit is singular: the VAE maps colours to one latent");
    for (std::size_t k = 0; k < n; ++k) std::swap(a[col * n + k], a[pivot * n + k]);
    std::swap(b[col], b[pivot]);
    for (std::size_t r = col + 1; r < n; ++r) {
      const double f = a[r * n + col] / a[col * n + col];
      for (std::size_t k = col; k < n; ++k) a[r * n + k] -= f * a[col * n + k];
      b[r] -= f * b[col];
    }
  }
  std::vector<double> x(n);
  for (std::size_t r = n; r-- > 0;) {
    double sum = b[r];
    for (std::size_t k = r + 1; k < n; ++k) sum -= a[r * n + k] * x[k];
    x[r] = sum / a[r * n + r];
  }
  return x;
}

}  // namespace

LatentPreview::LatentPreview(const Pipeline& pipeline) : channels_(pipeline.config().vae.latent_channels) {
  const int patch = kPatchLatents * pipeline.config().vae.downscale(), side = kPatchesPerSide * patch;
  Images chart{1, side, side, std::vector<float>(static_cast<std::size_t>(side) * side * 3)};
  for (int y = 0; y < side; ++y)
    for (int x = 0; x < side; ++x)
      for (int c = 0; c < 3; ++c)
        chart.pixels[(static_cast<std::size_t>(y) * side + x) * 3 + c] = level(y / patch * kPatchesPerSide + x / patch, c);
  const std::vector<float> latents = pipeline.encode(chart);

  // Normal equations of the least-squares fit, each sample's features its channels and a 1.
  const int features = channels_ + 1, latent_side = kPatchesPerSide * kPatchLatents;
  const std::size_t plane = static_cast<std::size_t>(latent_side) * latent_side;
  std::vector<double> gram(features * features), moments(3 * features);
  std::vector<double> z(features);
  for (int p = 0; p < kPatchesPerSide * kPatchesPerSide; ++p) {
    for (int dy = 1; dy <= 2; ++dy) {
      for (int dx = 1; dx <= 2; ++dx) {
        const std::size_t at = static_cast<std::size_t>(p / kPatchesPerSide * kPatchLatents + dy) * latent_side +
                               p % kPatchesPerSide * kPatchLatents + dx;
        for (int c = 0; c < channels_; ++c) z[c] = latents[c * plane + at];
        z[channels_] = 1;
        for (int i = 0; i < features; ++i) {
          for (int j = 0; j < features; ++j) gram[i * features + j] += z[i] * z[j];
          for (int c = 0; c < 3; ++c) moments[c * features + i] += z[i] * level(p, c);
        }
      }
    }
  }
  for (int c = 0; c < 3; ++c) {
    const std::vector<double> row =
        solve(gram, std::vector<double>(moments.begin() + c * features, moments.begin() + (c + 1) * features));
    map_.insert(map_.end(), row.begin(), row.end());
  }
}

Images LatentPreview::render(std::span<const float> latents, int batch, int height, int width) const {
  const std::size_t plane = static_cast<std::size_t>(height) * width;
  if (latents.size() != batch * channels_ * plane) {
    fail("a preview of {} values for {} latents of {} channels at {}x{}", latents.size(), batch, channels_, width, height);
  }
  const int features = channels_ + 1;
  Images out{batch, width, height, std::vector<float>(batch * plane * 3)};
  for (int n = 0; n < batch; ++n) {
    const float* image = latents.data() + n * channels_ * plane;
    for (std::size_t p = 0; p < plane; ++p) {
      for (int c = 0; c < 3; ++c) {
        float v = map_[c * features + channels_];
        for (int k = 0; k < channels_; ++k) v += map_[c * features + k] * image[k * plane + p];
        out.pixels[(n * plane + p) * 3 + c] = std::clamp(v, 0.0f, 1.0f);
      }
    }
  }
  return out;
}

}  // namespace rf::stable_diffusion
