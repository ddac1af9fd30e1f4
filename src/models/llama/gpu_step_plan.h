#pragma once
// What a decoder step does besides its kernels' arithmetic: which launches fuse, where each product's
// input copies come from, where the residual adds happen. GpuForward decides it once per step shape
// (GpuForward::plan_step) and its launch loop follows the plan without deciding anything itself.
#include <vector>

#include "backend/gpu/attention/attention.h"
#include "backend/gpu/quant/activation_copies.h"

namespace rf::llama {

// The copies of a product's input that its kernel reads besides fp32 x, written by the kernel that
// makes that input: int8 blocks (the GEMV of quantized weights), a 16-bit copy (the GEMM). None: x alone.
struct InputCopies {
  gpu::QuantizedActivations rounded{};
  gpu::HalfCopy half{};
};

// Where RoPE and the KV cache append happen: their own kernel, or inside the decode attention, which
// reads k and v as arrays of their own or as rows of the stacked q/k/v product.
enum class RopeAt { OwnKernel, InAttention, InAttentionStackedRows };

// How the FFN's gate, up and SwiGLU run: one GEMV launch with SwiGLU fused; one GEMM of the stacked
// gate/up whose SwiGLU writes only down's 16-bit input; two products and SwiGLU apart. A sparse
// layer's experts (GpuForward::launch_experts): through the expert GEMV, which reads the routing on
// the device (decode steps, captured in graphs); or a GEMM per picked expert, the routing's counts
// read back first (prefill, which runs eagerly).
enum class FfnAt { GemvSwiglu, StackedGemm, Separate, ExpertGemvs, ExpertGemms };

// Where o's and down's outputs join the residual stream x: their GEMVs add into x, or they write
// `proj` and the next norm adds it. A tensor-parallel rank's all-reduce goes between a product and its
// add, so its plans take NextNorm.
enum class ResidualAt { InGemv, NextNorm };

struct LayerPlan {
  // The two norms inside the GEMVs after them (RmsNormOf): one token, float weights in every product
  // of a norm's output. Then x must be the whole residual stream at each norm: residual is InGemv.
  bool folded_norms = false;
  bool stacked_qkv = false;  // q, k and v from one GEMM of the stacked matrix
  RopeAt rope = RopeAt::OwnKernel;
  bool attention_rounds = false;  // the decode attention writes o's int8 copy (no rounding pass)
  FfnAt ffn = FfnAt::Separate;
  ResidualAt residual = ResidualAt::NextNorm;
  InputCopies qkv_in, o_in, gate_up_in, down_in;
};

struct StepPlan {
  gpu::AttentionPlan attention;
  std::vector<LayerPlan> layers;
  InputCopies output_in;  // the output head's
};

}  // namespace rf::llama
