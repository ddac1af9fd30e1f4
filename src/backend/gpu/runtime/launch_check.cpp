#include "backend/gpu/runtime/launch_check.h"

#include "util/error.h"

namespace rf::gpu {

void throw_bad_launch(const char* launch, const char* problem) { fail("{}: {}", launch, problem); }

}  // namespace rf::gpu
