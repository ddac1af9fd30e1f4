#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "util/error.h"

namespace rf {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: not a regular file", path);
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      fail("{}: cannot map: {}", path, std::strerror(err));
    }
    data_ = static_cast<const std::uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(const_cast<std::uint8_t*>(data_), size_);
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

std::span<const std::uint8_t> MappedFile::bytes(std::uint64_t offset, std::uint64_t length, const char* what) const {
  if (offset > size_ || length > size_ - offset) {
    fail("{}: {} at offset {} with {} bytes runs past the end of the file ({} bytes): the file is truncated or corrupt",
         path_, what, offset, length, size_);
  }
  return {data_ + offset, static_cast<std::size_t>(length)};
}

}  // namespace rf

namespace rf {

void read_in(const void* data, std::size_t bytes) {
  if (bytes == 0) return;
  const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(data), end = begin + bytes;
  const std::uintptr_t first = begin / page * page;
  // Read-ahead starts at once for the whole range; the loop then waits for each page in turn.
  ::madvise(reinterpret_cast<void*>(first), end - first, MADV_WILLNEED);
  unsigned char sum = 0;
  for (std::uintptr_t at = begin; at < end; at = (at / page + 1) * page) {
    sum ^= *reinterpret_cast<const volatile unsigned char*>(at);
  }
  (void)sum;
}

}  // namespace rf
