#pragma once
// Owning handles for device memory and streams (host code only). Copies are synchronous: they are
// for loading weights and for tests, not for the per-step path (host_staging.h's are).
#include <cstddef>
#include <utility>
#include <vector>

#include "backend/gpu/runtime/vendor.h"
#include "util/error.h"

namespace rf::gpu {

// `count` elements of T from Memory (allocate(bytes) and release(pointer)), uninitialised: the owner
// of device and of page-locked host memory alike.
template <class T, class Memory>
class Allocation {
 public:
  Allocation() = default;
  explicit Allocation(std::size_t count) : count_(count) {
    if (count > 0) data_ = static_cast<T*>(Memory::allocate(count * sizeof(T)));
  }
  Allocation(Allocation&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  Allocation& operator=(Allocation&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  ~Allocation() {
    if (data_) Memory::release(data_);  // nothing useful to do with an error while unwinding
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

// Device memory on the current device, counted against its MemoryBound (devices.h).
struct DeviceMemory {
  // Out of memory or past the bound, throws rf::Error saying what was asked, held and free.
  static void* allocate(std::size_t bytes);
  // nullptr where allocate would throw for lack of room.
  static void* try_allocate(std::size_t bytes);
  static void release(void* p);
};

// `count` elements of T in device memory, uninitialised.
template <class T>
class DeviceBuffer : public Allocation<T, DeviceMemory> {
 public:
  using Allocation<T, DeviceMemory>::Allocation;
  using Allocation<T, DeviceMemory>::data;
  using Allocation<T, DeviceMemory>::size;
  using Allocation<T, DeviceMemory>::bytes;
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  // A copy of `count` elements at `host` (a weight in a file's memory map, say).
  DeviceBuffer(const T* host, std::size_t count) : DeviceBuffer(count) {
    if (count > 0) RF_GPU_CHECK(gpuMemcpy(data(), host, bytes(), gpuMemcpyHostToDevice));
  }

  // host.size() must equal size().
  void upload(const std::vector<T>& host) {
    if (host.size() != size()) fail("upload of {} elements into a device buffer of {}", host.size(), size());
    if (size() > 0) RF_GPU_CHECK(gpuMemcpy(data(), host.data(), bytes(), gpuMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(size());
    if (size() > 0) RF_GPU_CHECK(gpuMemcpy(host.data(), data(), bytes(), gpuMemcpyDeviceToHost));
    return host;
  }
  void zero() {
    if (size() > 0) RF_GPU_CHECK(gpuMemset(data(), 0, bytes()));
  }
  // Fills every byte with 0xFF: NaN for f32, f16 and bf16, so that unwritten outputs show.
  void poison() {
    if (size() > 0) RF_GPU_CHECK(gpuMemset(data(), 0xFF, bytes()));
  }
};

class Stream {
 public:
  Stream() { RF_GPU_CHECK(gpuStreamCreate(&stream_)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { (void)gpuStreamDestroy(stream_); }

  gpuStream_t get() const { return stream_; }
  void synchronize() const { RF_GPU_CHECK(gpuStreamSynchronize(stream_)); }

 private:
  gpuStream_t stream_ = nullptr;
};

}  // namespace rf::gpu
