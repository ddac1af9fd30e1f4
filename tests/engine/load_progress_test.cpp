#include "engine/load_progress.h"

namespace rf {
namespace {

TEST(LoadProgress, CpuCountsEveryMatrixReadIn) { expect_load_progress_to_every_byte("cpu"); }

}  // namespace
}  // namespace rf
