#pragma once
// Owning handles for device memory and streams (host code only). Copies are synchronous: they are
// for loading weights and for tests, not for the per-step path.
#include <cstddef>
#include <utility>
#include <vector>

#include "backend/gpu/vendor.h"
#include "util/error.h"

namespace rf::gpu {

// `count` elements of T in device memory, uninitialised.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    if (count > 0) RF_GPU_CHECK(gpuMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  // A copy of `count` elements at `host` (a weight in a file's memory map, say).
  DeviceBuffer(const T* host, std::size_t count) : DeviceBuffer(count) {
    if (count > 0) RF_GPU_CHECK(gpuMemcpy(data_, host, bytes(), gpuMemcpyHostToDevice));
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (data_) (void)gpuFree(data_);  // nothing useful to do with an error while unwinding
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

  // host.size() must equal size().
  void upload(const std::vector<T>& host) {
    if (host.size() != count_) fail("upload of {} elements into a device buffer of {}", host.size(), count_);
    if (count_ > 0) RF_GPU_CHECK(gpuMemcpy(data_, host.data(), bytes(), gpuMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    if (count_ > 0) RF_GPU_CHECK(gpuMemcpy(host.data(), data_, bytes(), gpuMemcpyDeviceToHost));
    return host;
  }
  void zero() {
    if (count_ > 0) RF_GPU_CHECK(gpuMemset(data_, 0, bytes()));
  }
  // Fills every byte with 0xFF: NaN for f32, f16 and bf16, so that unwritten outputs show.
  void poison() {
    if (count_ > 0) RF_GPU_CHECK(gpuMemset(data_, 0xFF, bytes()));
  }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
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
