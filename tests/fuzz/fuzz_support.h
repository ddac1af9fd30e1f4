#pragma once
// What the fuzz targets share. Each is a libFuzzer entry point over one input surface; its rule is
// that bad input may end only in rf::Error (the message a user sees). Any other exception escapes
// to libFuzzer, which reports it as a crash, as it does ASan's and UBSan's findings.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "util/error.h"

namespace rf::fuzz {

// A scratch folder of this process (in memory where /dev/shm exists): loaders read files, as users
// hand them files, so inputs are written out.
inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    const std::filesystem::path shm = "/dev/shm";
    const auto root = std::filesystem::is_directory(shm) ? shm : std::filesystem::temp_directory_path();
    auto d = root / ("rocmforge-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::string write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path.string();
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `step`; rf::Error is the answer to bad input, anything else escapes.
template <typename Step>
void expect_only_rf_errors(Step&& step) {
  try {
    step();
  } catch (const rf::Error&) {
  }
}

}  // namespace rf::fuzz
