#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend/gpu/quant/activation_copies.h"
#include "backend/gpu/norm/norm.h"
#include "backend/gpu/gemm/gemv.h"
#include "backend/gpu/gpu_test.h"
#include "backend/gpu/moe/moe.h"
#include "models/llama/moe.h"
#include "util/error.h"

namespace rf::gpu::test {
namespace {

// Random matrices of one type and column count, one per row count, each with a poisoned output: the
// products of a GEMV group.
struct ProductGroup {
  std::vector<EncodedRows> w;
  std::vector<DeviceBuffer<std::uint8_t>> w_gpu;
  std::vector<DeviceBuffer<float>> y_gpu;
  std::vector<WeightProduct> outputs;
};

class Gemv : public GpuTest {
 protected:
  ProductGroup random_group(DType type, std::span<const std::size_t> rows, std::size_t cols) {
    ProductGroup group;
    for (const std::size_t n : rows) {
      group.w.push_back(encode_rows(type, random_floats(n * cols), n, cols));
      group.w_gpu.emplace_back(group.w.back().bytes);
      group.y_gpu.emplace_back(n);
      group.y_gpu.back().poison();
      group.outputs.push_back({{type, n, cols, group.w_gpu.back().data()}, group.y_gpu.back().data()});
    }
    return group;
  }
};

// Weights decode exactly to fp32 and the products accumulate in fp32; the reference accumulates the
// same decoded weights in double. (No bf16/f16 arithmetic happens, so no wider tolerance is needed.)
constexpr double kTolerance = 1e-5;

std::string describe(DType type, std::size_t rows, std::size_t cols) {
  return std::string(dtype_name(type)) + " " + std::to_string(rows) + "x" + std::to_string(cols);
}

constexpr const auto& kTypes = kWeightDTypes;

TEST_F(Gemv, MatchesDecodedWeightsForEveryType) {
  struct Case {
    DType type;
    std::size_t rows, cols;
  };
  const Case cases[] = {
      {DType::F32, 1037, 4096},  {DType::F32, 37, 1001},  {DType::F16, 1037, 4096}, {DType::F16, 5, 333},
      {DType::BF16, 1037, 4096}, {DType::BF16, 3, 7},     {DType::Q8_0, 1037, 4096}, {DType::Q8_0, 37, 96},
      {DType::Q4_0, 1037, 4096}, {DType::Q4_0, 5, 96},    {DType::Q4_K, 1037, 4096}, {DType::Q4_K, 37, 768},
      {DType::Q6_K, 1037, 4096}, {DType::Q6_K, 37, 768},
      {DType::Q4_1, 1037, 4096}, {DType::Q4_1, 37, 96},   {DType::Q5_0, 1037, 4096}, {DType::Q5_0, 5, 96},
      {DType::Q5_1, 1037, 4096}, {DType::Q5_1, 37, 160},  {DType::IQ4_NL, 1037, 4096}, {DType::IQ4_NL, 5, 96},
      {DType::Q2_K, 1037, 4096}, {DType::Q2_K, 37, 768},  {DType::Q3_K, 1037, 4096}, {DType::Q3_K, 37, 768},
      {DType::Q5_K, 1037, 4096}, {DType::Q5_K, 37, 768},  {DType::IQ4_XS, 1037, 4096}, {DType::IQ4_XS, 37, 768},
      // Long rows, and row counts that leave a block's last rows spare.
      {DType::F32, 37, 8196},    {DType::F16, 5, 9001},   {DType::Q8_0, 3, 4160},    {DType::Q4_K, 37, 14336},
      {DType::Q6_K, 7, 4352},    {DType::Q4_0, 6, 14336}, {DType::BF16, 37, 14344}, {DType::Q3_K, 7, 14336},
      {DType::Q5_0, 6, 14336},   {DType::IQ4_XS, 3, 4352},
  };
  for (const auto& c : cases) {
    const auto w = encode_rows(c.type, random_floats(c.rows * c.cols), c.rows, c.cols);
    const auto x = random_floats(c.cols);
    DeviceBuffer<std::uint8_t> w_gpu(w.bytes);
    DeviceBuffer<float> x_gpu(x), y_gpu(c.rows);
    y_gpu.poison();
    launch_gemv({c.type, c.rows, c.cols, w_gpu.data()}, x_gpu.data(), 1, y_gpu.data(), ctx());
    synchronize();
    expect_close("gemv " + describe(c.type, c.rows, c.cols), y_gpu.download(), reference_product(w, c.rows, c.cols, x),
                 kTolerance);
  }
}

// q, k and v of a GQA layer in one launch: every output as launch_gemv alone would give it. Rows of 96
// columns are 3 quantization blocks, not a multiple of 16 bytes: split quants take the unaligned loads.
TEST_F(Gemv, GroupComputesEachProduct) {
  for (const DType type : kTypes) {
    const std::size_t block = dtype_info(type).block_elems;
    for (const std::size_t cols : {std::size_t{256}, block == 256 ? std::size_t{768} : std::size_t{96}}) {
      const std::size_t rows[] = {static_cast<std::size_t>(random_int(1, 300)), 7, 5};
      const ProductGroup group = random_group(type, rows, cols);
      const auto& [w, w_gpu, y_gpu, outputs] = group;
      const auto x = random_floats(cols);
      DeviceBuffer<float> x_gpu(x);
      launch_gemv_group(outputs, x_gpu.data(), 1, ctx());
      synchronize();
      for (std::size_t i = 0; i < w.size(); ++i) {
        expect_close("gemv group " + std::to_string(i) + " " + describe(type, rows[i], cols), y_gpu[i].download(),
                     reference_product(w[i], rows[i], cols, x), kTolerance);
      }
    }
  }
}

TEST_F(Gemv, SwigluFusesGateAndUp) {
  for (const DType type : kTypes) {
    const std::size_t rows = static_cast<std::size_t>(random_int(1, 600)), cols = 512;
    const auto gate = encode_rows(type, random_floats(rows * cols), rows, cols);
    const auto up = encode_rows(type, random_floats(rows * cols), rows, cols);
    const auto x = random_floats(cols, -2.0f, 2.0f);
    DeviceBuffer<std::uint8_t> gate_gpu(gate.bytes), up_gpu(up.bytes);
    DeviceBuffer<float> x_gpu(x), out(rows);
    out.poison();
    launch_gemv_swiglu({type, rows, cols, gate_gpu.data()}, {type, rows, cols, up_gpu.data()}, x_gpu.data(), 1, out.data(),
                       ctx());
    synchronize();
    const auto g = reference_product(gate, rows, cols, x), u = reference_product(up, rows, cols, x);
    std::vector<double> ref(rows);
    for (std::size_t r = 0; r < rows; ++r) ref[r] = g[r] / (1.0 + std::exp(-g[r])) * u[r];
    expect_close("gemv swiglu " + describe(type, rows, cols), out.download(), ref, kTolerance);
  }
}

// Several tokens in one launch (each block's token count 2, 4 or 8, and more than one block of
// tokens): every token's outputs have the bits a launch for that token alone gives, for plain
// products, groups and the SwiGLU pair. This is what makes batching invisible in the answers.
TEST_F(Gemv, EachTokenOfABatchGetsItsOwnBits) {
  for (const DType type : kTypes) {
    const std::size_t cols = dtype_info(type).block_elems == 256 ? 768 : 512;
    const std::size_t rows = static_cast<std::size_t>(random_int(1, 300));
    const auto a = encode_rows(type, random_floats(rows * cols), rows, cols);
    const auto b = encode_rows(type, random_floats(rows * cols), rows, cols);
    DeviceBuffer<std::uint8_t> a_gpu(a.bytes), b_gpu(b.bytes);
    const WeightMatrix wa{type, rows, cols, a_gpu.data()}, wb{type, rows, cols, b_gpu.data()};
    for (const int n : {2, 3, 8, 13}) {
      const auto x = random_floats(cols * n, -2.0f, 2.0f);
      DeviceBuffer<float> x_gpu(x), product(rows * n), second(rows * n), swiglu(rows * n);
      for (auto* out : {&product, &second, &swiglu}) out->poison();
      const WeightProduct group[] = {{wa, product.data()}, {wb, second.data()}};
      launch_gemv_group(group, x_gpu.data(), n, ctx());
      launch_gemv_swiglu(wa, wb, x_gpu.data(), n, swiglu.data(), ctx());
      DeviceBuffer<float> alone(rows * n), alone_second(rows * n), alone_swiglu(rows * n);
      for (int t = 0; t < n; ++t) {
        const std::size_t x_at = t * cols, y_at = t * rows;
        launch_gemv(wa, x_gpu.data() + x_at, 1, alone.data() + y_at, ctx());
        launch_gemv(wb, x_gpu.data() + x_at, 1, alone_second.data() + y_at, ctx());
        launch_gemv_swiglu(wa, wb, x_gpu.data() + x_at, 1, alone_swiglu.data() + y_at, ctx());
      }
      synchronize();
      const std::string name = describe(type, rows, cols) + " x" + std::to_string(n);
      EXPECT_EQ(bits(product.download()), bits(alone.download())) << name;
      EXPECT_EQ(bits(second.download()), bits(alone_second.download())) << name;
      EXPECT_EQ(bits(swiglu.download()), bits(alone_swiglu.download())) << name << " swiglu";
      // And the batched products are right, not just equal.
      const auto got = product.download();
      for (const int t : {0, n - 1}) {
        const std::vector<float> x_t(x.begin() + t * cols, x.begin() + (t + 1) * cols);
        const std::vector<float> y_t(got.begin() + t * rows, got.begin() + (t + 1) * rows);
        expect_close("gemv " + name + " token " + std::to_string(t), y_t, reference_product(a, rows, cols, x_t), kTolerance);
      }
    }
  }
}

// Quantized weights given x's int8 copy: the products of the weights with the values the codes stand for
// (integer sums, exact, then two scales: fp32's tolerance), within x's rounding (about 4e-3, as
// llama.cpp's) of the products with x itself, and each token's bits what it gets alone.
TEST_F(Gemv, IntegerPathMultipliesTheRoundedX) {
  constexpr double kRoundingTolerance = 1e-2;
  struct Case {
    std::size_t rows, cols;
    int tokens;
  };
  // 96 columns: rows of 3 blocks of 32, 2-byte aligned only (Q8_0, Q4_0); 768: 3 blocks of 256,
  // Q6_K's rows 2-byte aligned only; 14336: the down projection's rows, enough of them that SwiGLU's
  // outputs are not all near zero: silu(g) u moves by u times g's rounding, which against a norm of
  // only near-zero outputs read 1.4e-5 with 6 rows (seed 9688912827931577114).
  const Case cases[] = {{1037, 4096, 1}, {37, 96, 1},   {37, 768, 1},  {48, 14336, 1},
                        {300, 512, 3},   {19, 4096, 8}, {48, 14336, 3}};
  for (const DType type : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    for (const auto& c : cases) {
      if (c.cols % dtype_info(type).block_elems != 0) continue;
      const auto a = encode_rows(type, random_floats(c.rows * c.cols), c.rows, c.cols);
      const auto b = encode_rows(type, random_floats(c.rows * c.cols), c.rows, c.cols);
      const auto x = random_floats(c.cols * c.tokens, -2.0f, 2.0f);
      const RoundedValues rounded = round_to_int8(x);
      DeviceBuffer<std::uint8_t> a_gpu(a.bytes), b_gpu(b.bytes);
      const WeightMatrix wa{type, c.rows, c.cols, a_gpu.data()}, wb{type, c.rows, c.cols, b_gpu.data()};
      DeviceBuffer<float> x_gpu(x), product(c.rows * c.tokens), second(c.rows * c.tokens), swiglu(c.rows * c.tokens);
      RoundedBuffer x_rounded(c.tokens, c.cols);
      for (auto* out : {&product, &second, &swiglu}) out->poison();
      launch_quantize_activations(x_gpu.data(), c.tokens, c.cols, x_rounded.view(), ctx());
      const GemvInput input{x_gpu.data(), x_rounded.view()};
      const WeightProduct group[] = {{wa, product.data()}, {wb, second.data()}};
      launch_gemv_group(group, input, c.tokens, ctx());
      launch_gemv_swiglu(wa, wb, input, c.tokens, swiglu.data(), ctx());
      DeviceBuffer<float> alone(c.rows * c.tokens);
      // One token at a time in the order of the launch for all of them (14336 columns: a single token's
      // fastest kernel sums in another order).
      for (int t = 0; t < c.tokens; ++t) {
        const QuantizedActivations v = x_rounded.view();
        const std::size_t blocks = t * c.cols / 32;
        GemvInput token{x_gpu.data() + t * c.cols, {v.codes + t * c.cols, v.scales + blocks, v.code_sums + blocks}};
        token.fixed_order = c.tokens > 1;
        launch_gemv(wa, token, 1, alone.data() + t * c.rows, ctx());
      }
      // After the wide decode attention, one token's short rows go in fewer, larger blocks: the same sums.
      DeviceBuffer<float> after_attention(c.rows);
      after_attention.poison();
      GemvInput fewer_blocks = input;
      fewer_blocks.after_wide_attention = true;
      if (c.tokens == 1) launch_gemv(wa, fewer_blocks, 1, after_attention.data(), ctx());
      synchronize();
      const std::string name = describe(type, c.rows, c.cols) + " x" + std::to_string(c.tokens);
      EXPECT_EQ(bits(product.download()), bits(alone.download())) << name;
      if (c.tokens == 1) {
        EXPECT_EQ(bits(after_attention.download()), bits(alone.download())) << name << " after the attention";
      }
      const auto got = product.download(), got_second = second.download(), got_swiglu = swiglu.download();
      for (int t = 0; t < c.tokens; ++t) {
        auto token_of = [&](const auto& v, std::size_t n) { return std::vector<float>(v.begin() + t * n, v.begin() + (t + 1) * n); };
        const auto x_t = token_of(x, c.cols), rounded_t = token_of(rounded.values, c.cols);
        const auto y_t = token_of(got, c.rows), second_t = token_of(got_second, c.rows);
        const std::string token = name + " token " + std::to_string(t);
        expect_close("int8 gemv " + token, y_t, reference_product(a, c.rows, c.cols, rounded_t), kTolerance);
        expect_close("int8 gemv group " + token, second_t, reference_product(b, c.rows, c.cols, rounded_t), kTolerance);
        expect_close("int8 gemv " + token + " vs exact x", y_t, reference_product(a, c.rows, c.cols, x_t), kRoundingTolerance);
        const auto g = reference_product(a, c.rows, c.cols, rounded_t), u = reference_product(b, c.rows, c.cols, rounded_t);
        std::vector<double> ref(c.rows);
        for (std::size_t r = 0; r < c.rows; ++r) ref[r] = g[r] / (1.0 + std::exp(-g[r])) * u[r];
        expect_close("int8 gemv swiglu " + token, token_of(got_swiglu, c.rows), ref, kTolerance);
      }
    }
  }
}

// A sparse layer's experts, stacked as GpuWeights stacks them (expert e at e * stride), and a
// routing of n tokens to k of them each, grouped on the host (models/llama/moe.h) and uploaded in
// ExpertRoutes's layout.
struct StackedExpertsOnDevice {
  std::vector<EncodedRows> experts;
  std::size_t stride;
  DeviceBuffer<std::uint8_t> data;
  WeightMatrix first() { return {type, rows, cols, data.data()}; }
  DType type;
  std::size_t rows, cols;
};

struct RoutingOnDevice {
  llama::ExpertGroups groups;
  DeviceBuffer<std::int32_t> words;
  ExpertRoutes routes;
  int slots;
  int expert_of(int entry) const {
    return static_cast<int>(std::upper_bound(groups.begin.begin(), groups.begin.end(), entry) - groups.begin.begin()) - 1;
  }
};

class ExpertGemv : public Gemv {
 protected:
  StackedExpertsOnDevice random_experts(DType type, int n_experts, std::size_t rows, std::size_t cols) {
    StackedExpertsOnDevice s{{}, 0, {}, type, rows, cols};
    for (int e = 0; e < n_experts; ++e) s.experts.push_back(encode_rows(type, random_floats(rows * cols), rows, cols));
    s.stride = (s.experts[0].bytes.size() + 255) / 256 * 256;
    std::vector<std::uint8_t> bytes(s.stride * n_experts, 0xFF);
    for (int e = 0; e < n_experts; ++e) std::copy(s.experts[e].bytes.begin(), s.experts[e].bytes.end(), bytes.begin() + e * s.stride);
    s.data = DeviceBuffer<std::uint8_t>(bytes);
    return s;
  }

  // Each token picks k distinct random experts (in random order, as route() returns them by probability).
  RoutingOnDevice random_routing(int n, int n_experts, int k) {
    std::vector<llama::ExpertChoice> choices;
    for (int t = 0; t < n; ++t) {
      std::vector<int> order(n_experts);
      std::iota(order.begin(), order.end(), 0);
      for (int i = n_experts - 1; i > 0; --i) std::swap(order[i], order[random_int(0, i)]);
      for (int j = 0; j < k; ++j) choices.push_back({order[j], random_floats(1, 0.0f, 1.0f)[0]});
    }
    RoutingOnDevice r;
    llama::group_by_expert(choices, n, k, n_experts, r.groups);
    std::vector<std::int32_t> words(expert_routes_words(n, n_experts, k), -1);
    const ExpertRoutes host = expert_routes_at(words.data(), n, n_experts, k);
    r.slots = active_slots(n, n_experts, k);
    for (int e = 0, slot = 0; e < n_experts; ++e) {
      if (r.groups.begin[e + 1] > r.groups.begin[e]) host.active[slot++] = e;
    }
    std::copy(r.groups.begin.begin(), r.groups.begin.end(), host.begin);
    std::copy(r.groups.tokens.begin(), r.groups.tokens.end(), host.token);
    r.words = DeviceBuffer<std::int32_t>(words);
    r.routes = expert_routes_at(r.words.data(), n, n_experts, k);
    return r;
  }
};

// Each entry (a token's pick) gets its expert's product with its token's x (gate and up, and SwiGLU of
// both) or with its own row (down), exactly as one matrix's GEMV: the integer path's products of
// quantized experts with x's int8 copy, the others' with x, checked against the decoded weights.
TEST_F(ExpertGemv, MultipliesEachEntryByItsExpert) {
  constexpr int kExperts = 6;
  struct Case {
    int tokens, k;
    std::size_t rows, cols;
  };
  // One token (its k experts' blocks alone), a few, and more than a block's 8 tokens for an expert.
  const Case cases[] = {{1, 2, 37, 256}, {5, 2, 64, 512}, {20, 3, 19, 768}};
  for (const DType type : {DType::F32, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    for (const Case& c : cases) {
      if (c.cols % dtype_info(type).block_elems != 0) continue;
      const std::string name = describe(type, c.rows, c.cols) + fmt::format(", {} tokens, {} of {} experts", c.tokens, c.k, kExperts);
      auto gate = random_experts(type, kExperts, c.rows, c.cols), up = random_experts(type, kExperts, c.rows, c.cols);
      auto down = random_experts(type, kExperts, c.rows, c.cols);
      const RoutingOnDevice routing = random_routing(c.tokens, kExperts, c.k);
      const int entries = c.tokens * c.k;
      const bool integer = gemv_reads_rounded(type);
      // x: the tokens' inputs; h: each entry's own (down's input).
      const auto x = random_floats(c.tokens * c.cols, -2.0f, 2.0f), h = random_floats(entries * c.cols, -2.0f, 2.0f);
      DeviceBuffer<float> x_gpu(x), h_gpu(h);
      RoundedBuffer x_rounded(c.tokens, c.cols), h_rounded(entries, c.cols);
      launch_quantize_activations(x_gpu.data(), c.tokens, c.cols, x_rounded.view(), ctx());
      launch_quantize_activations(h_gpu.data(), entries, c.cols, h_rounded.view(), ctx());
      const GemvInput x_in = integer ? GemvInput{x_gpu.data(), x_rounded.view()} : GemvInput{x_gpu.data()};
      const GemvInput h_in = integer ? GemvInput{h_gpu.data(), h_rounded.view()} : GemvInput{h_gpu.data()};
      DeviceBuffer<float> y(entries * c.rows), swiglu(entries * c.rows), y_down(entries * c.rows);
      for (auto* out : {&y, &swiglu, &y_down}) out->poison();
      const ExpertProducts of_tokens{gate.stride, routing.routes.active, routing.slots, routing.routes.begin,
                                     routing.routes.token, c.tokens};
      launch_expert_gemv(gate.first(), of_tokens, x_in, y.data(), ctx());
      launch_expert_gemv_swiglu(gate.first(), up.first(), of_tokens, x_in, swiglu.data(), ctx());
      ExpertProducts of_entries = of_tokens;
      of_entries.x_row = nullptr;
      launch_expert_gemv(down.first(), of_entries, h_in, y_down.data(), ctx());
      synchronize();
      const std::vector<float> x_used = integer ? x_rounded.download().values : x;
      const std::vector<float> h_used = integer ? h_rounded.download().values : h;
      const auto got = y.download(), got_swiglu = swiglu.download(), got_down = y_down.download();
      for (int i = 0; i < entries; ++i) {
        const int e = routing.expert_of(i), t = routing.groups.tokens[i];
        auto row_of = [&](const auto& v, std::size_t width, int r) {
          return std::vector<float>(v.begin() + r * width, v.begin() + (r + 1) * width);
        };
        const auto x_t = row_of(x_used, c.cols, t);
        const std::string what = name + fmt::format(", entry {} (token {}, expert {})", i, t, e);
        const auto g = reference_product(gate.experts[e], c.rows, c.cols, x_t);
        const auto u = reference_product(up.experts[e], c.rows, c.cols, x_t);
        expect_close("expert gemv " + what, row_of(got, c.rows, i), g, kTolerance);
        std::vector<double> ref(c.rows);
        for (std::size_t r = 0; r < c.rows; ++r) ref[r] = g[r] / (1.0 + std::exp(-g[r])) * u[r];
        expect_close("expert gemv swiglu " + what, row_of(got_swiglu, c.rows, i), ref, kTolerance);
        expect_close("expert gemv down " + what, row_of(got_down, c.rows, i),
                     reference_product(down.experts[e], c.rows, c.cols, row_of(h_used, c.cols, i)), kTolerance);
      }
    }
  }
}

// x / rms(x) * weight in double, as launch_rms_norm defines it. (Not cpu::rms_norm: its fp32 sum of
// 4096 squares in order typically rounds by a few 1e-6, and by up to 2e-4, against the 1e-5 these
// tests allow.)
std::vector<float> reference_norm(const std::vector<float>& x, const std::vector<float>& weight, float eps) {
  double sum_sq = 0.0;
  for (const float v : x) sum_sq += static_cast<double>(v) * v;
  const double scale = 1.0 / std::sqrt(sum_sq / static_cast<double>(x.size()) + eps);
  std::vector<float> normed(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) normed[i] = static_cast<float>(x[i] * scale * weight[i]);
  return normed;
}

// A single token's GEMV folds the RMSNorm of x (the residual stream, far from unit scale) into its
// product: plain products, groups (q, k, v) and the SwiGLU pair, every type through the float path,
// with rows whose columns leave a tail past the last 16-byte slice. The reference rounds the normed x
// to fp32 once, which the kernel never forms, so the tolerance allows the fp32 rounding of the norm.
TEST_F(Gemv, FoldsTheNormOfItsInput) {
  const float eps = 1e-5f;
  for (const DType type : kTypes) {
    const std::size_t block = dtype_info(type).block_elems;
    const std::size_t cols = block == 1 ? 333 : 4096;
    const std::size_t rows[] = {static_cast<std::size_t>(random_int(1, 300)), 7, 5};
    const ProductGroup group = random_group(type, rows, cols);
    const auto& [w, w_gpu, y_gpu, outputs] = group;
    const auto up = encode_rows(type, random_floats(rows[1] * cols), rows[1], cols);
    const auto x = random_floats(cols, -20.0f, 20.0f), weight = random_floats(cols, 0.5f, 2.0f);
    DeviceBuffer<std::uint8_t> up_gpu(up.bytes);
    DeviceBuffer<float> x_gpu(x), weight_gpu(weight), swiglu_out(rows[1]);
    swiglu_out.poison();
    const GemvInput input{x_gpu.data(), RmsNormOf{weight_gpu.data(), eps}};
    launch_gemv_group(outputs, input, 1, ctx());
    launch_gemv_swiglu(outputs[1].w, {type, rows[1], cols, up_gpu.data()}, input, 1, swiglu_out.data(), ctx());
    synchronize();
    const auto normed = reference_norm(x, weight, eps);
    for (std::size_t i = 0; i < w.size(); ++i) {
      expect_close("gemv, norm folded, " + std::to_string(i) + " " + describe(type, rows[i], cols), y_gpu[i].download(),
                   reference_product(w[i], rows[i], cols, normed), 1e-5);
    }
    const auto g = reference_product(w[1], rows[1], cols, normed), u = reference_product(up, rows[1], cols, normed);
    std::vector<double> ref(rows[1]);
    double largest_gate = 0;
    for (std::size_t r = 0; r < rows[1]; ++r) {
      ref[r] = g[r] / (1.0 + std::exp(-g[r])) * u[r];
      largest_gate = std::max(largest_gate, std::abs(g[r]));
    }
    // Where the gate is far below zero, silu(g) ~ g exp(g), whose relative error is g's absolute one:
    // up to |g| times the products' 1e-6 relative.
    expect_close("gemv swiglu, norm folded, " + describe(type, rows[1], cols), swiglu_out.download(), ref,
                 1e-5 + 1e-6 * largest_gate);
  }
}

// With `accumulate`, the product is added to what y holds (the residual stream's update).
TEST_F(Gemv, AccumulateAddsTheProductToY) {
  for (const DType type : {DType::BF16, DType::Q4_0}) {
    const std::size_t rows = static_cast<std::size_t>(random_int(1, 600)), cols = 512;
    const auto w = encode_rows(type, random_floats(rows * cols), rows, cols);
    const auto x = random_floats(cols), y = random_floats(rows, -5.0f, 5.0f);
    DeviceBuffer<std::uint8_t> w_gpu(w.bytes);
    DeviceBuffer<float> x_gpu(x), y_gpu(y);
    launch_gemv({type, rows, cols, w_gpu.data()}, x_gpu.data(), 1, y_gpu.data(), ctx(), true);
    synchronize();
    auto ref = reference_product(w, rows, cols, x);
    for (std::size_t r = 0; r < rows; ++r) ref[r] += y[r];
    expect_close("gemv accumulated " + describe(type, rows, cols), y_gpu.download(), ref, kTolerance);
  }
}

TEST_F(Gemv, RejectsAFoldedNormItCannotApply) {
  DeviceBuffer<float> x(2 * 256), weight(256), y(2 * 4);
  DeviceBuffer<std::uint8_t> w(4 * 1024);
  const GemvInput norm{x.data(), RmsNormOf{weight.data(), 1e-5f}};
  EXPECT_THROW(launch_gemv({DType::F16, 4, 256, w.data()}, norm, 2, y.data(), ctx()), Error);
  GemvInput rounded_and_norm = norm;
  RoundedBuffer rounded(1, 256);
  rounded_and_norm.rounded = rounded.view();
  EXPECT_THROW(launch_gemv({DType::Q8_0, 4, 256, w.data()}, rounded_and_norm, 1, y.data(), ctx()), Error);
}

TEST_F(Gemv, RejectsMixedTypesInOneLaunch) {
  DeviceBuffer<float> x(256), y(4);
  DeviceBuffer<std::uint8_t> w(4 * 1024);
  const WeightMatrix q8{DType::Q8_0, 2, 256, w.data()}, f16{DType::F16, 2, 256, w.data()};
  EXPECT_THROW(launch_gemv_swiglu(q8, f16, x.data(), 1, y.data(), ctx()), Error);
  const WeightProduct outputs[] = {{q8, y.data()}, {f16, y.data() + 2}};
  EXPECT_THROW(launch_gemv_group(outputs, x.data(), 1, ctx()), Error);
}

TEST_F(Gemv, RejectsRowsOfPartialBlocks) {
  DeviceBuffer<float> x(100), y(2);
  DeviceBuffer<std::uint8_t> w(2 * 1024);
  EXPECT_THROW(launch_gemv({DType::Q4_K, 2, 100, w.data()}, x.data(), 1, y.data(), ctx()), Error);
}

// A second token's x would start off the 16-byte alignment its vector loads need.
TEST_F(Gemv, RejectsSeveralTokensOfUnalignedRows) {
  DeviceBuffer<float> x(2 * 333), y(2 * 5);
  DeviceBuffer<std::uint8_t> w(5 * 333 * 4);
  EXPECT_THROW(launch_gemv({DType::F32, 5, 333, w.data()}, x.data(), 2, y.data(), ctx()), Error);
}

}  // namespace
}  // namespace rf::gpu::test
