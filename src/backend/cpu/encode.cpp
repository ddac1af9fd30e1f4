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

// GGML's 32-element blocks of nibbles: element j's low 4 bits in the low nibble of qs[j], element
// j + 16's in the high one; where the codes have a fifth bit, element j's is bit j of qh.
void pack_nibbles(const int* q, std::uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<std::uint8_t>((q[j] & 15) | (q[j + 16] & 15) << 4);
}
void pack_fifth_bits(const int* q, std::uint8_t* qh) {
  std::uint32_t bits = 0;
  for (int j = 0; j < 32; ++j) bits |= static_cast<std::uint32_t>(q[j] >> 4 & 1) << j;
  std::memcpy(qh, &bits, sizeof(bits));
}

// GGML's reference for Q4_0 and Q5_0 (levels [0, 2n)): the value of largest magnitude maps to level 0
// exactly (d = max / -n, so d may be negative) and the opposite end clips at 2n - 1; truncating
// x / d + n + 0.5 rounds halves up. Returns d; q gets the 32 levels.
float encode_signed_max(const float* x, int n, int* q) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / static_cast<float>(-n), id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = std::min(2 * n - 1, static_cast<int>(x[j] * id + (static_cast<float>(n) + 0.5f)));
  return d;
}

// GGML's reference for Q4_1 and Q5_1 (levels [0, nmax]): m = min(x), d = (max(x) - m) / nmax, levels
// rounded half up. Returns d.
float encode_min_max(const float* x, int nmax, float& m, int* q) {
  const auto [lo, hi] = std::minmax_element(x, x + 32);
  const float d = (*hi - *lo) / static_cast<float>(nmax), id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = std::min(nmax, static_cast<int>((x[j] - *lo) * id + 0.5f));
  m = *lo;
  return d;
}

// GGML's 32-element blocks of nibbles (levels [0, levels)): with a min where the block has one
// (Q4_1, Q5_1), else signed (Q4_0, Q5_0); the fifth bits where it has them.
template <class Block>
void encode_block32(const float* x, Block* out, std::size_t blocks, int levels) {
  for (std::size_t b = 0; b < blocks; ++b, x += 32) {
    int q[32];
    if constexpr (requires(Block& blk) { blk.m; }) {
      float m;
      out[b].d = f32_to_f16(encode_min_max(x, levels - 1, m, q));
      out[b].m = f32_to_f16(m);
    } else {
      out[b].d = f32_to_f16(encode_signed_max(x, levels / 2, q));
    }
    pack_nibbles(q, out[b].qs);
    if constexpr (requires(Block& blk) { blk.qh; }) pack_fifth_bits(q, out[b].qh);
  }
}

// Q4_K and Q5_K (levels [0, nmax]): fit each sub-block of 32, quantize the 8 scales and 8 mins to 6
// bits against super-block scales chosen so the largest of each maps to 63, then assign every
// element its nearest level under the quantized parameters (q[0..256)).
template <class Block>
void encode_scale_min_k(const float* x, int nmax, Block& blk, int* q) {
  constexpr int kSubs = kQ4KBlock / kQ4KSub;
  ScaleMinFit fits[kSubs];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < kSubs; ++j) {
    fits[j] = fit_scale_min(x + kQ4KSub * j, kQ4KSub, nmax);
    max_scale = std::max(max_scale, fits[j].scale);
    max_min = std::max(max_min, fits[j].min);
  }
  blk.d = f32_to_f16(max_scale / 63.0f);
  blk.dmin = f32_to_f16(max_min / 63.0f);
  const float d = f16_to_f32(blk.d), dmin = f16_to_f32(blk.dmin);
  int sc[kSubs], mn[kSubs];
  for (int j = 0; j < kSubs; ++j) {
    sc[j] = quantize_scale(fits[j].scale, d, 0, 63);
    mn[j] = quantize_scale(fits[j].min, dmin, 0, 63);
  }
  pack_scale_min_k4(sc, mn, blk.scales);
  for (int j = 0; j < kSubs; ++j) {
    const float scale = d * static_cast<float>(sc[j]), min = dmin * static_cast<float>(mn[j]);
    for (int l = 0; l < kQ4KSub; ++l) q[kQ4KSub * j + l] = nearest_level(x[kQ4KSub * j + l] + min, scale, 0, nmax);
  }
}

// The low 4 bits of Q4_K's and Q5_K's levels: sub-block j in the low (j even) or high (j odd) nibbles
// of qs[32(j / 2), +32).
void pack_k_nibbles(const int* q, std::uint8_t* qs) {
  std::memset(qs, 0, 128);
  for (int e = 0; e < kQ4KBlock; ++e) qs[32 * (e / 64) + e % 32] |= static_cast<std::uint8_t>((q[e] & 15) << 4 * (e / 32 % 2));
}

// The index of the IQ4 value nearest to v.
int nearest_iq4(float v) {
  int best = 0;
  for (int i = 1; i < 16; ++i) {
    if (std::fabs(v - kIq4Values[i]) < std::fabs(v - kIq4Values[best])) best = i;
  }
  return best;
}

// 32 values as d * kIq4Values[code]: d maps the value of largest magnitude to -127 (the table's
// widest end). Returns d.
float fit_iq4(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max / static_cast<float>(kIq4Values[0]);
}

// The codes of 32 values under scale d, packed as BlockIQ4_NL's qs.
void encode_iq4_codes(const float* x, float d, std::uint8_t* qs) {
  int q[32];
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = nearest_iq4(x[j] * id);
  pack_nibbles(q, qs);
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

void encode_q4_0(const float* x, BlockQ4_0* out, std::size_t blocks) { encode_block32(x, out, blocks, 16); }
void encode_q5_0(const float* x, BlockQ5_0* out, std::size_t blocks) { encode_block32(x, out, blocks, 32); }
void encode_q4_1(const float* x, BlockQ4_1* out, std::size_t blocks) { encode_block32(x, out, blocks, 16); }
void encode_q5_1(const float* x, BlockQ5_1* out, std::size_t blocks) { encode_block32(x, out, blocks, 32); }

void encode_iq4_nl(const float* x, BlockIQ4_NL* out, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += 32) {
    out[b].d = f32_to_f16(fit_iq4(x));
    encode_iq4_codes(x, f16_to_f32(out[b].d), out[b].qs);
  }
}

// Each sub-block's own scale (fit_iq4) as a 6-bit multiple (-32..31) of a super-block scale that maps
// the largest magnitude to 31.
void encode_iq4_xs(const float* x, BlockIQ4_XS* out, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += 256) {
    float fits[8], max_abs = 0.0f;
    for (int c = 0; c < 8; ++c) {
      fits[c] = fit_iq4(x + 32 * c);
      max_abs = std::max(max_abs, std::fabs(fits[c]));
    }
    BlockIQ4_XS& blk = out[b];
    blk.d = f32_to_f16(max_abs / 31.0f);
    const float d = f16_to_f32(blk.d);
    blk.scales_h = 0;
    std::memset(blk.scales_l, 0, sizeof(blk.scales_l));
    for (int c = 0; c < 8; ++c) {
      const int s = quantize_scale(fits[c], d, -32, 31);
      const int u = s + 32;
      blk.scales_l[c / 2] |= static_cast<std::uint8_t>((u & 15) << 4 * (c % 2));
      blk.scales_h |= static_cast<std::uint16_t>((u >> 4) << 2 * c);
      encode_iq4_codes(x + 32 * c, d * static_cast<float>(s), blk.qs + 16 * c);
    }
  }
}

void encode_q4_k(const float* x, BlockQ4_K* out, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += kQ4KBlock) {
    int q[kQ4KBlock];
    encode_scale_min_k(x, 15, out[b], q);
    pack_k_nibbles(q, out[b].qs);
  }
}

void encode_q5_k(const float* x, BlockQ5_K* out, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, x += kQ4KBlock) {
    int q[kQ4KBlock];
    encode_scale_min_k(x, 31, out[b], q);
    pack_k_nibbles(q, out[b].qs);
    std::memset(out[b].qh, 0, sizeof(out[b].qh));
    for (int e = 0; e < kQ4KBlock; ++e) out[b].qh[e % 32] |= static_cast<std::uint8_t>((q[e] >> 4) << e / 32);
  }
}

// Fit each 16-element group with a scale and min (2-bit levels), quantize both to 4 bits against
// super-block scales that map the largest of each to 15, then assign levels.
void encode_q2_k(const float* x, BlockQ2_K* out, std::size_t blocks) {
  constexpr int kGroups = 16, kGroup = 16;
  for (std::size_t b = 0; b < blocks; ++b, x += 256) {
    ScaleMinFit fits[kGroups];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int g = 0; g < kGroups; ++g) {
      fits[g] = fit_scale_min(x + kGroup * g, kGroup, 3);
      max_scale = std::max(max_scale, fits[g].scale);
      max_min = std::max(max_min, fits[g].min);
    }
    BlockQ2_K& blk = out[b];
    blk.d = f32_to_f16(max_scale / 15.0f);
    blk.dmin = f32_to_f16(max_min / 15.0f);
    const float d = f16_to_f32(blk.d), dmin = f16_to_f32(blk.dmin);
    std::memset(blk.qs, 0, sizeof(blk.qs));
    for (int g = 0; g < kGroups; ++g) {
      const int sc = quantize_scale(fits[g].scale, d, 0, 15), mn = quantize_scale(fits[g].min, dmin, 0, 15);
      blk.scales[g] = static_cast<std::uint8_t>(sc | mn << 4);
      const float scale = d * static_cast<float>(sc), min = dmin * static_cast<float>(mn);
      for (int i = 0; i < kGroup; ++i) {
        const int e = kGroup * g + i;  // = 128h + 32k + l: layout in block_formats.h
        const int q = nearest_level(x[e] + min, scale, 0, 3);
        blk.qs[32 * (e / 128) + e % 32] |= static_cast<std::uint8_t>(q << 2 * (e / 32 % 4));
      }
    }
  }
}

// Fit each 16-element group with a signed scale (levels -4..3), quantize the scales to 6 bits
// (-32..31) against a super-block scale that maps the largest magnitude to 31, then assign levels.
void encode_q3_k(const float* x, BlockQ3_K* out, std::size_t blocks) {
  constexpr int kGroups = 16, kGroup = 16;
  for (std::size_t b = 0; b < blocks; ++b, x += 256) {
    float fits[kGroups], max_abs = 0.0f;
    for (int g = 0; g < kGroups; ++g) {
      fits[g] = fit_symmetric(x + kGroup * g, kGroup, 4);
      max_abs = std::max(max_abs, std::fabs(fits[g]));
    }
    BlockQ3_K& blk = out[b];
    blk.d = f32_to_f16(max_abs / 31.0f);
    const float d = f16_to_f32(blk.d);
    std::memset(blk.scales, 0, sizeof(blk.scales));
    std::memset(blk.qs, 0, sizeof(blk.qs));
    std::memset(blk.hmask, 0, sizeof(blk.hmask));
    for (int g = 0; g < kGroups; ++g) {
      const int s = quantize_scale(fits[g], d, -32, 31), u = s + 32;  // packing: unpack_scales_q3_k
      blk.scales[g % 8] |= static_cast<std::uint8_t>((u & 15) << 4 * (g / 8));
      blk.scales[8 + g % 4] |= static_cast<std::uint8_t>((u >> 4) << 2 * (g / 4));
      for (int i = 0; i < kGroup; ++i) {
        const int e = kGroup * g + i;  // = 128h + 32k + l
        const int q = nearest_level(x[e], d * static_cast<float>(s), -4, 3) + 4;
        blk.qs[32 * (e / 128) + e % 32] |= static_cast<std::uint8_t>((q & 3) << 2 * (e / 32 % 4));
        blk.hmask[e % 32] |= static_cast<std::uint8_t>((q >> 2) << e / 32);
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
