#pragma once
// A read-only memory map of a whole file. Every read goes through bytes(), which checks the
// range against the file size, so a corrupt header can never make us read past the map.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace rf {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws rf::Error naming the path
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const std::string& path() const { return path_; }
  std::size_t size() const { return size_; }
  const std::uint8_t* data() const { return data_; }

  // The bytes [offset, offset + length); throws rf::Error (naming what) if out of range.
  std::span<const std::uint8_t> bytes(std::uint64_t offset, std::uint64_t length, const char* what) const;

 private:
  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

// Reads [data, data + bytes) into memory now, a page at a time, as llama.cpp's MAP_POPULATE does:
// a mapped file's weights then come from disk while the model loads, not during the first request.
void read_in(const void* data, std::size_t bytes);

}  // namespace rf
