// The rocmforge binary as a user runs it: exit codes and messages for good and bad input.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

struct CliRun {
  int exit_code;
  std::string output;  // stdout and stderr together
};

CliRun run(const std::string& args, const std::string& stdin_text = "") {
  const fs::path scratch = fs::path(ROCMFORGE_SCRATCH) / "cli";
  fs::create_directories(scratch);
  // ctest runs tests in parallel processes: each test gets its own input file.
  const fs::path input = scratch / (std::string(testing::UnitTest::GetInstance()->current_test_info()->name()) + ".stdin");
  std::ofstream(input, std::ios::binary) << stdin_text;
  const std::string command = std::string(ROCMFORGE_BINARY) + " " + args + " < " + input.string() + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  std::array<char, 4096> buffer{};
  while (std::size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

const std::string kModels = std::string(ROCMFORGE_FIXTURES) + "/models/";

fs::path scratch_file(const std::string& name) {
  const fs::path dir = fs::path(ROCMFORGE_SCRATCH) / "cli";
  fs::create_directories(dir);
  return dir / name;
}

TEST(Cli, GenerateIsDeterministicForASeedAndReportsSpeed) {
  const std::string args = "generate -m " + kModels + "qwen3 -p 'Hello world' -n 12 --seed 7 --temp 0.9 --ignore-eos";
  const CliRun a = run(args), b = run(args);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output.substr(0, a.output.find("prompt:")), b.output.substr(0, b.output.find("prompt:")));
  EXPECT_NE(a.output.find("tokens/s"), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("generation: 12 tokens"), std::string::npos) << a.output;
}

TEST(Cli, TokenizeJsonlMatchesTheReference) {
  std::ifstream in(kModels + "llama3/reference.json");
  const auto ref = nlohmann::json::parse(in);
  std::string input, expected;
  for (const auto& item : ref.at("hf_encodings")) {
    input += item.at("text").dump() + "\n";
    expected += item.at("ids").dump() + "\n";
  }
  const CliRun r = run("tokenize --jsonl -m " + kModels + "llama3", input);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, expected);
}

TEST(Cli, PerplexityPrintsHowItScored) {
  const fs::path text = scratch_file("ppl.txt");
  std::ofstream(text) << "The quick brown fox jumps over the lazy dog. " << std::string(50, 'a');
  const CliRun one = run("perplexity -m " + kModels + "qwen2 -f " + text.string());
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("in one sequence"), std::string::npos) << one.output;
  const CliRun windows = run("perplexity -m " + kModels + "qwen2 --ctx 8 -f " + text.string());
  ASSERT_EQ(windows.exit_code, 0) << windows.output;
  EXPECT_NE(windows.output.find("windows of 8 tokens"), std::string::npos) << windows.output;
}

TEST(Cli, InfoDescribesAModel) {
  const CliRun r = run("info -m " + kModels + "llama3/model.q4_k_m.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("architecture: llama"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("q4_k"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("backends built: cpu"), std::string::npos) << r.output;
}

// Every bad input ends with a message naming the problem and exit code 1, never a crash.
void expect_clean_failure(const std::string& args, const std::string& needle) {
  const CliRun r = run(args);
  EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << args << "\n" << r.output;
}

TEST(Cli, BadModelPathsFailCleanly) {
  expect_clean_failure("generate -m /no/such/model -p hi", "/no/such/model");
  const fs::path garbage = scratch_file("garbage.gguf");
  std::ofstream(garbage) << "this is not a gguf file at all";
  expect_clean_failure("generate -m " + garbage.string() + " -p hi", garbage.string());
  expect_clean_failure("info -m " + garbage.string(), garbage.string());
}

TEST(Cli, TruncatedGgufFailsCleanlyAtEveryCut) {
  const fs::path original = kModels + "qwen2/model.gguf";
  std::ifstream in(original, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  ASSERT_GT(bytes.size(), 1000u);
  const fs::path cut = scratch_file("truncated.gguf");
  for (std::size_t size : {std::size_t{3}, std::size_t{20}, bytes.size() / 3, bytes.size() - 1}) {
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, size);
    expect_clean_failure("generate -m " + cut.string() + " -p hi -n 1", cut.string());
  }
}

TEST(Cli, BrokenHuggingFaceFolderFailsCleanly) {
  const fs::path folder = scratch_file("broken_hf");
  fs::remove_all(folder);
  fs::copy(kModels + "qwen2", folder);
  std::ofstream(folder / "config.json") << "{ not json";
  expect_clean_failure("generate -m " + folder.string() + " -p hi", "config.json");
  fs::copy_file(kModels + "qwen2/config.json", folder / "config.json", fs::copy_options::overwrite_existing);
  fs::resize_file(folder / "model.safetensors", 1000);
  expect_clean_failure("generate -m " + folder.string() + " -p hi", "model.safetensors");
}

TEST(Cli, BadArgumentsFailCleanly) {
  expect_clean_failure("generate -m " + kModels + "qwen2 -p hi --temp -1", "temperature");
  expect_clean_failure("generate -m " + kModels + "qwen2 -p hi --device cuda", "CUDA");
  expect_clean_failure("perplexity -m " + kModels + "qwen2 -f /no/such/text", "/no/such/text");
  const CliRun bad_line = run("tokenize --jsonl -m " + kModels + "qwen2", "\"fine\"\n{not json\n");
  EXPECT_EQ(bad_line.exit_code, 1) << bad_line.output;
  EXPECT_NE(bad_line.output.find("line 2"), std::string::npos) << bad_line.output;
}

TEST(Cli, UnknownCommandsAndMissingOptionsAreUsageErrors) {
  const CliRun unknown = run("fly");
  EXPECT_NE(unknown.exit_code, 0);
  const CliRun missing = run("perplexity -m " + kModels + "qwen2");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("--file"), std::string::npos) << missing.output;
}

TEST(Cli, GenerateWithoutAModelUsesTheDemoModel) {
  const CliRun r = run("generate -p 'In the beginning' -n 8 --temp 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("generation: 8 tokens"), std::string::npos) << r.output;
}

}  // namespace

namespace {

TEST(Cli, BenchPrintsOneJsonRowPerSetting) {
  // On the CPU: in a GPU build on a machine without a device, --device auto's notice would join the output.
  const CliRun r = run("bench --device cpu -m " + kModels + "qwen2 -p 16,32 -n 8 -b 1,3 -r 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = nlohmann::json::parse(r.output);
  ASSERT_EQ(rows.size(), 4u);  // pp16, pp32, tg8 x batch 1, tg8 x batch 3
  EXPECT_EQ(rows[0]["test"], "pp16");
  EXPECT_EQ(rows[3]["test"], "tg8");
  EXPECT_EQ(rows[3]["batch"], 3);
  for (const auto& row : rows) {
    EXPECT_EQ(row["tokens_per_second"].size(), 2u);
    EXPECT_GT(row["median"].get<double>(), 0);
    EXPECT_GT(row["bound"].get<double>(), 0);
  }
}

TEST(Cli, BenchRejectsBadSettings) {
  expect_clean_failure("bench --synthetic llama9-1t", "llama9-1t");
  expect_clean_failure("bench --synthetic llama3-1b --dtype q2_k", "q2_k");
  expect_clean_failure("bench -m " + kModels + "qwen2 --synthetic llama3-1b", "exactly one");
}

}  // namespace
