#pragma once
// RoPE's variants, apart from any model's config: the kernels of every backend take them.

namespace rf {

// Which pairs of a head's dimensions RoPE rotates together.
enum class RopeLayout {
  SplitHalves,  // (i, i + d/2): Hugging Face's rotate_half, and llama.cpp's NeoX mode
  Interleaved,  // (2i, 2i + 1): llama.cpp's normal mode, for the q/k rows its converter permuted
};

}  // namespace rf
