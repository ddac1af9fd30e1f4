#pragma once
// Shared by the format tests: a scratch folder per test, raw byte files, and error checks.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace rf::test {

// Gives each test a fresh folder of its own, since ctest may run tests in parallel.
class ScratchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(ROCMFORGE_SCRATCH) / "formats" /
           (std::string(info->test_suite_name()) + "." + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

inline void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline void write_text(const std::string& path, std::string_view text) {
  write_bytes(path, {text.begin(), text.end()});
}

inline std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A view of tensor data; empty tensors may have a null pointer, which memcmp must not see.
inline std::span<const std::uint8_t> bytes_at(const void* data, std::size_t size) {
  return {static_cast<const std::uint8_t*>(data), size};
}

inline std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> bytes(n);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  return bytes;
}

// Little-endian byte assembly for hand-made files; Self lets format-specific builders chain.
template <typename Self>
class ByteBuilder {
 public:
  template <typename T>
  Self& put(T value) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof value);
    return self();
  }
  Self& raw(std::string_view s) {
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return self();
  }
  Self& zeros(std::size_t n) {
    bytes_.resize(bytes_.size() + n);
    return self();
  }
  Self& pad_to(std::size_t alignment) { return zeros((alignment - bytes_.size() % alignment) % alignment); }
  const std::vector<std::uint8_t>& bytes() const { return bytes_; }
  void save(const std::string& path) const { write_bytes(path, bytes_); }

 private:
  Self& self() { return static_cast<Self&>(*this); }
  std::vector<std::uint8_t> bytes_;
};

class Bytes : public ByteBuilder<Bytes> {};

// Runs `f`, which must throw rf::Error with a message that starts with `prefix` (the file or
// folder) and contains every one of `parts`.
template <typename F>
void expect_error(F&& f, const std::string& prefix, std::initializer_list<std::string_view> parts) {
  try {
    f();
  } catch (const rf::Error& e) {
    const std::string message = e.what();
    EXPECT_TRUE(message.starts_with(prefix + ":")) << "message does not start with \"" << prefix << ":\": " << message;
    for (const auto part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "no \"" << part << "\" in: " << message;
    }
    return;
  }
  ADD_FAILURE() << "no rf::Error was thrown";
}

}  // namespace rf::test

// Reports failures at the line of the check rather than inside expect_error.
#define EXPECT_RF_ERROR(statement, prefix, ...)                          \
  do {                                                                   \
    SCOPED_TRACE(#statement);                                            \
    ::rf::test::expect_error([&] { statement; }, prefix, {__VA_ARGS__}); \
  } while (0)
