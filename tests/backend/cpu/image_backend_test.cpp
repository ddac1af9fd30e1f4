// CpuImageBackend's checks of its inputs (its arithmetic is image_ops_test.cpp's and, composed into
// the networks, tests/models/stable_diffusion's against diffusers).
#include <gtest/gtest.h>

#include "backend/cpu/image_backend.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace rf::cpu {
namespace {

TEST(CpuImageBackend, RefusesShapesItCannotTake) {
  ThreadPool pool(1);
  CpuImageBackend b(pool);
  const Tensor odd = b.upload(std::vector<float>(2 * 7), {2, 7});
  EXPECT_THROW(b.geglu(odd), Error);
  const Tensor even = b.upload(std::vector<float>(2 * 8), {2, 8});
  EXPECT_EQ(b.geglu(even).dims(), (std::vector<int>{2, 4}));
  EXPECT_THROW(b.add(odd, even), Error);
  EXPECT_THROW(b.upload(std::vector<float>(3), {2, 2}), Error);
  EXPECT_THROW(b.to_image(even.reshaped({1, 2, 8}), 3, 3), Error);
}

}  // namespace
}  // namespace rf::cpu
