#include "backend/cpu/encode.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "util/half.h"

namespace rf::cpu {

namespace {

constexpr int kQ4KBlock = 256, kQ4KSub = 32, kQ6KBlock = 256, kQ6KSub = 16;

int nearest(float v) { return static_cast<int>(std::lround(v)); }

// The level in [lo, hi] whose value scale * level lies nearest to v.
int nearest_level(float v, float scale, int lo, int hi) {
  return std::clamp(scale == 0.0f ? 0 : nearest(v / scale), lo, hi);
}

// Squared error of x[0..n) against scale * L - min, each L the nearest level in [lo, hi].
float fit_error(const float* x, int n, float scale, float min, int lo, int hi) {
  float err = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float e = scale * static_cast<float>(nearest_level(x[i] + min, scale, lo, hi)) - min - x[i];
    err += e * e;
  }
  return err;
}

// Number of candidate grids tried around the plain range-based one, and their spacing in levels.
// Stretching the grid a little lets one outlier clip when that lowers the total error.
constexpr int kSearchSteps = 10;
constexpr float kSearchStep = 0.1f;

struct ScaleMinFit {
  float scale;
  float min;
};

// x ≈ scale * L - min with integer L in [0, nmax], scale >= 0 and min >= 0 (Q4_K can only subtract
// its min). For each candidate grid over [min(x, 0), max(x)], assign levels, then solve the least
// squares problem for (scale, min) given them; keep the pair with the lowest error.
ScaleMinFit fit_scale_min(const float* x, int n, int nmax) {
  const auto [lo_it, hi_it] = std::minmax_element(x, x + n);
  const float lo = std::min(*lo_it, 0.0f), hi = *hi_it;
  if (hi <= lo) return {0.0f, -lo};  // all values equal and <= 0: the min alone is exact
  ScaleMinFit best{(hi - lo) / static_cast<float>(nmax), -lo};
  float best_err = fit_error(x, n, best.scale, best.min, 0, nmax);
  for (int step = -kSearchSteps; step <= kSearchSteps; ++step) {
    const float inv = (static_cast<float>(nmax) + kSearchStep * static_cast<float>(step)) / (hi - lo);
    double sl = 0, sll = 0, sx = 0, slx = 0;
    for (int i = 0; i < n; ++i) {
      const double l = std::clamp(nearest(inv * (x[i] - lo)), 0, nmax);
      sl += l;
      sll += l * l;
      sx += x[i];
      slx += l * x[i];
    }
    const double det = n * sll - sl * sl;
    if (det <= 0) continue;
    double scale = (n * slx - sl * sx) / det, offset = (sll * sx - sl * slx) / det;
    if (offset > 0) {  // the constrained optimum then lies on offset = 0
      offset = 0;
      scale = slx / sll;
    }
    if (scale <= 0) continue;
    const ScaleMinFit fit{static_cast<float>(scale), static_cast<float>(-offset)};
    const float err = fit_error(x, n, fit.scale, fit.min, 0, nmax);
    if (err < best_err) {
      best = fit;
      best_err = err;
    }
  }
  return best;
}

// x ≈ scale * L with integer L in [-nneg, nneg - 1]. The scale may be negative so that the value of
// largest magnitude can use the wider negative end. Same search as fit_scale_min, without a min.
float fit_symmetric(const float* x, int n, int nneg) {
  const float extreme = *std::max_element(x, x + n, [](float a, float b) { return std::fabs(a) < std::fabs(b); });
  if (extreme == 0.0f) return 0.0f;
  float best = extreme / static_cast<float>(-nneg);
  float best_err = fit_error(x, n, best, 0.0f, -nneg, nneg - 1);
  for (int step = -kSearchSteps; step <= kSearchSteps; ++step) {
    const float inv = -(static_cast<float>(nneg) + kSearchStep * static_cast<float>(step)) / extreme;
    double sll = 0, slx = 0;
    for (int i = 0; i < n; ++i) {
      const double l = std::clamp(nearest(inv * x[i]), -nneg, nneg - 1);
      sll += l * l;
      slx += l * x[i];
    }
    if (sll == 0) continue;
    const float scale = static_cast<float>(slx / sll);
    const float err = fit_error(x, n, scale, 0.0f, -nneg, nneg - 1);
    if (err < best_err) {
      best = scale;
      best_err = err;
    }
  }
  return best;
}

// A sub-block scale as a multiple of the super-block scale d, clamped to the field's range.
int quantize_scale(float v, float d, int lo, int hi) { return d > 0.0f ? std::clamp(nearest(v / d), lo, hi) : 0; }

// Inverse of unpack_scale_min_k4 (block_formats.h).
void pack_scale_min_k4(const int* sc, const int* mn, std::uint8_t* scales) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<std::uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
    scales[j + 4] = static_cast<std::uint8_t>(mn[j] | (mn[j + 4] >> 4) << 6);
    scales[j + 8] = static_cast<std::uint8_t>((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
  }
}

}  // namespace

// GGML's reference: d = absmax / 127, q = round(x / d) (halves away from zero).
void encode_q8_0(const float* x, BlockQ8_0* out, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    for (int j = 0; j < 32; ++j) out[b].qs[j] = static_cast<std::int8_t>(nearest(x[j] * id));
  }
}

// GGML's reference: the value of largest magnitude maps to level -8 exactly (d = max / -8, so d may
// be negative) and the opposite end clips at +7; truncating x / d + 8.5 rounds halves up.
void encode_q4_0(const float* x, BlockQ4_0* out, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += 32) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    for (int j = 0; j < 16; ++j) {
      const int lo = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int hi = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
      out[b].qs[j] = static_cast<std::uint8_t>(lo | hi << 4);
    }
  }
}

// Fit each sub-block, quantize the 8 scales and 8 mins to 6 bits against super-block scales chosen
// so the largest of each maps to 63, then assign every element its nearest level under the
// quantized parameters.
void encode_q4_k(const float* x, BlockQ4_K* out, std::size_t blocks) {
  constexpr int kSubs = kQ4KBlock / kQ4KSub;
  for (std::size_t b = 0; b < blocks; ++b, x += kQ4KBlock) {
    ScaleMinFit fits[kSubs];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < kSubs; ++j) {
      fits[j] = fit_scale_min(x + kQ4KSub * j, kQ4KSub, 15);
      max_scale = std::max(max_scale, fits[j].scale);
      max_min = std::max(max_min, fits[j].min);
    }
    BlockQ4_K& blk = out[b];
    blk.d = f32_to_f16(max_scale / 63.0f);
    blk.dmin = f32_to_f16(max_min / 63.0f);
    const float d = f16_to_f32(blk.d), dmin = f16_to_f32(blk.dmin);
    int sc[kSubs], mn[kSubs];
    for (int j = 0; j < kSubs; ++j) {
      sc[j] = quantize_scale(fits[j].scale, d, 0, 63);
      mn[j] = quantize_scale(fits[j].min, dmin, 0, 63);
    }
    pack_scale_min_k4(sc, mn, blk.scales);
    std::memset(blk.qs, 0, sizeof(blk.qs));
    for (int j = 0; j < kSubs; ++j) {
      const float scale = d * static_cast<float>(sc[j]), min = dmin * static_cast<float>(mn[j]);
      for (int l = 0; l < kQ4KSub; ++l) {
        const int q = nearest_level(x[kQ4KSub * j + l] + min, scale, 0, 15);
        blk.qs[32 * (j / 2) + l] |= static_cast<std::uint8_t>(q << 4 * (j % 2));
      }
    }
  }
}

// Fit each 16-element sub-block, quantize the 16 scales to int8 against a super-block scale
// chosen so the largest magnitude maps to 127, then assign levels under the quantized scales.
void encode_q6_k(const float* x, BlockQ6_K* out, std::size_t blocks) {
  constexpr int kSubs = kQ6KBlock / kQ6KSub;
  for (std::size_t b = 0; b < blocks; ++b, x += kQ6KBlock) {
    float fits[kSubs];
    float max_abs = 0.0f;
    for (int j = 0; j < kSubs; ++j) {
      fits[j] = fit_symmetric(x + kQ6KSub * j, kQ6KSub, 32);
      max_abs = std::max(max_abs, std::fabs(fits[j]));
    }
    BlockQ6_K& blk = out[b];
    blk.d = f32_to_f16(max_abs / 127.0f);
    const float d = f16_to_f32(blk.d);
    for (int j = 0; j < kSubs; ++j) blk.scales[j] = static_cast<std::int8_t>(quantize_scale(fits[j], d, -127, 127));
    std::memset(blk.ql, 0, sizeof(blk.ql));
    std::memset(blk.qh, 0, sizeof(blk.qh));
    // Element e = 128h + 32k + l: layout in block_formats.h.
    for (int e = 0; e < kQ6KBlock; ++e) {
      const int q = nearest_level(x[e], d * blk.scales[e / kQ6KSub], -32, 31) + 32;
      const int h = e / 128, k = e / 32 % 4, l = e % 32;
      blk.ql[64 * h + 32 * (k & 1) + l] |= static_cast<std::uint8_t>((q & 15) << 4 * (k >> 1));
      blk.qh[32 * h + l] |= static_cast<std::uint8_t>((q >> 4) << 2 * k);
    }
  }
}

}  // namespace rf::cpu
