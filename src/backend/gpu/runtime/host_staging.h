#pragma once
// Page-locked host memory for a step's copies, and the events that say when a stream is done with it
// (host code only). A copy between the device and pageable memory may wait for the stream to drain
// (the runtime stages it through page-locked memory of its own); from page-locked memory it is queued
// and returns at once, which lets the host prepare the next decode step while the device runs this one.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>

#include "backend/gpu/runtime/device_buffer.h"
#include "backend/gpu/runtime/vendor.h"
#include "util/error.h"

namespace rf::gpu {

struct PinnedMemory {
  static void* allocate(std::size_t bytes) {
    void* p = nullptr;
    RF_GPU_CHECK(gpuHostAlloc(&p, bytes, 0));
    return p;
  }
  static void release(void* p) { (void)gpuFreeHost(p); }
};

// `count` elements of T in page-locked host memory, uninitialised.
template <class T>
using PinnedBuffer = Allocation<T, PinnedMemory>;

// A point in a stream that the host can wait for.
class Event {
 public:
  Event() { RF_GPU_CHECK(gpuEventCreateWithFlags(&event_, gpuEventDisableTiming)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { (void)gpuEventDestroy(event_); }

  void record(gpuStream_t stream) { RF_GPU_CHECK(gpuEventRecord(event_, stream)); }
  // Waits until the stream has passed the last record (at once if there was none).
  void synchronize() const { RF_GPU_CHECK(gpuEventSynchronize(event_)); }

 private:
  gpuEvent_t event_ = nullptr;
};

// Host-to-device copies queued without waiting, through two page-locked slots taken in turn: a slot
// is filled again only once the copy last queued from it has run.
template <class T>
class Uploads {
 public:
  // The next slot, with room for `count` elements, to fill and then pass to copy().
  T* slot(std::size_t count) {
    Slot& s = slots_[next_];
    s.copied.synchronize();
    if (s.buffer.size() < count) s.buffer = PinnedBuffer<T>(std::max(count, 2 * s.buffer.size()));
    return s.buffer.data();
  }
  // Queues the copy of the first `count` elements of the slot slot() returned to `device`.
  void copy(T* device, std::size_t count, gpuStream_t stream) {
    Slot& s = slots_[next_];
    if (count > s.buffer.size()) fail("an upload of {} elements from a staging slot of {}", count, s.buffer.size());
    if (count > 0) {
      RF_GPU_CHECK(gpuMemcpyAsync(device, s.buffer.data(), count * sizeof(T), gpuMemcpyHostToDevice, stream));
    }
    s.copied.record(stream);
    next_ = 1 - next_;
  }
  // slot() and copy() for `count` elements already in host memory.
  void upload(const T* host, std::size_t count, T* device, gpuStream_t stream) {
    if (count > 0) std::memcpy(slot(count), host, count * sizeof(T));
    copy(device, count, stream);
  }

 private:
  struct Slot {
    PinnedBuffer<T> buffer;
    Event copied;
  };
  std::array<Slot, 2> slots_;
  int next_ = 0;
};

}  // namespace rf::gpu
