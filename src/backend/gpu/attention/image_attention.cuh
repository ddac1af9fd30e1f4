#pragma once
// What image_attention.cu's and image_attention_mma.cu's launches share.
#include <utility>

#include "backend/gpu/attention/image_attention.h"
#include "backend/gpu/common/constant_dispatch.h"

namespace rf::gpu {

// Calls f with head_dim as a constant, where the kernels are built for it.
template <class F>
bool with_image_head_dim(int head_dim, F&& f) {
  return with_constant<40, 64, 80, 128, 160>(head_dim, std::forward<F>(f));
}

// Refuses (as a launch error naming `launch`) counts below zero and head widths the kernels lack.
void check_image_attention(const ImageAttentionShape& shape, const char* launch);

}  // namespace rf::gpu
