#include "util/mapped_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "util/error.h"

namespace rf {
namespace {

namespace fs = std::filesystem;

// A scratch folder of this test's own, since ctest may run tests in parallel.
fs::path scratch() {
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::path(ROCMFORGE_SCRATCH) / "util" / info->name();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The message of the rf::Error that `f` throws, or "" if it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MappedFile, MapsAFile) {
  const std::string path = (scratch() / "data.bin").string();
  std::ofstream(path, std::ios::binary) << "hello, map";
  const MappedFile file(path);
  EXPECT_EQ(file.path(), path);
  ASSERT_EQ(file.size(), 10u);
  const auto bytes = file.bytes(7, 3, "tail");
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "map");
}

TEST(MappedFile, MissingFileFailsNamingIt) {
  const std::string path = (scratch() / "absent.gguf").string();
  EXPECT_EQ(error_of([&] { MappedFile{path}; }), path + ": cannot open: No such file or directory");
}

TEST(MappedFile, FolderIsNotAFile) {
  const std::string path = scratch().string();
  EXPECT_EQ(error_of([&] { MappedFile{path}; }), path + ": not a regular file");
}

TEST(MappedFile, EmptyFileHasNoBytes) {
  const std::string path = (scratch() / "empty").string();
  std::ofstream{path};
  const MappedFile file(path);
  EXPECT_EQ(file.size(), 0u);
  EXPECT_TRUE(file.bytes(0, 0, "nothing").empty());
}

TEST(MappedFile, ReadsPastTheEndFailNamingWhat) {
  const std::string path = (scratch() / "short.bin").string();
  std::ofstream(path, std::ios::binary) << "12345678";
  const MappedFile file(path);
  EXPECT_NO_THROW(file.bytes(8, 0, "the end"));
  EXPECT_EQ(error_of([&] { file.bytes(4, 5, "tensor data"); }),
            path + ": tensor data at offset 4 with 5 bytes runs past the end of the file (8 bytes): the file is "
                   "truncated or corrupt");
  // Offsets whose sum would wrap around are past the end too.
  EXPECT_NE(error_of([&] { file.bytes(2, ~std::uint64_t{0}, "header"); }).find("header at offset 2"), std::string::npos);
}

TEST(MappedFile, MovesKeepTheMap) {
  const std::string path = (scratch() / "move.bin").string();
  std::ofstream(path, std::ios::binary) << "abc";
  MappedFile a(path);
  const auto* data = a.data();
  MappedFile b(std::move(a));
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(b.size(), 3u);
  EXPECT_EQ(a.data(), nullptr);
  a = std::move(b);
  EXPECT_EQ(a.data(), data);
  EXPECT_EQ(a.bytes(1, 2, "tail")[1], 'c');
}

}  // namespace
}  // namespace rf
