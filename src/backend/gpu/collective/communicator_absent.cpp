// A build without a collectives library (HIP where CMake found no RCCL): one GPU at a time.
#include "backend/gpu/collective/communicator.h"

#include "util/error.h"

namespace rf::gpu {

std::vector<std::unique_ptr<Communicator>> Communicator::local_group(std::span<const int> devices) {
  fail("tensor parallelism over {} GPUs needs RCCL, which this build was made without (install RCCL's "
       "development package and configure again)",
       devices.size());
}

Communicator::~Communicator() = default;

void Communicator::all_reduce_sum(float*, std::size_t, const DeviceContext&) const {
  fail("this build has no collectives library");
}

void Communicator::abort() {}

std::string collectives_library() { return ""; }

}  // namespace rf::gpu
