#pragma once
// The activation functions Stable Diffusion's networks use, named for every backend's kernels.

namespace rf {

// SiLU (x * sigmoid(x)), exact GELU (erf) and QuickGELU (x * sigmoid(1.702 x), OpenAI CLIP's).
enum class Activation { silu, gelu, quick_gelu };

}  // namespace rf
