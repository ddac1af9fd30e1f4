#pragma once
// Running the rocmforge binary as a user does, for the CLI tests.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "run_command.h"

namespace rf::test::cli {

namespace fs = std::filesystem;

using CliRun = rf::test::CommandRun;  // stdout and stderr together

inline CliRun run(const std::string& args, const std::string& stdin_text = "") {
  const fs::path scratch = fs::path(ROCMFORGE_SCRATCH) / "cli";
  fs::create_directories(scratch);
  // ctest runs tests in parallel processes: each test gets its own input file.
  const fs::path input = scratch / (std::string(testing::UnitTest::GetInstance()->current_test_info()->name()) + ".stdin");
  std::ofstream(input, std::ios::binary) << stdin_text;
  return rf::test::run_command(std::string(ROCMFORGE_BINARY) + " " + args + " < " + input.string() + " 2>&1");
}

inline const std::string kModels = std::string(ROCMFORGE_FIXTURES) + "/models/";

inline fs::path scratch_file(const std::string& name) {
  const fs::path dir = fs::path(ROCMFORGE_SCRATCH) / "cli";
  fs::create_directories(dir);
  return dir / name;
}

// Every bad input ends with a message naming the problem and exit code 1, never a crash.
inline void expect_clean_failure(const std::string& args, const std::string& needle) {
  const CliRun r = run(args);
  EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << args << "\n" << r.output;
}

}  // namespace rf::test::cli
