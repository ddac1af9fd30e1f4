#include "engine/load_progress.h"

namespace rf {
namespace {

TEST(GpuLoadProgress, CountsEveryMatrixUploaded) { expect_load_progress_to_every_byte("auto"); }

}  // namespace
}  // namespace rf
