#pragma once
// Shared helpers of the tokenizer tests: fixture paths, reference encodings, scratch files.
#include <nlohmann/json.hpp>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace rf::test {

inline std::string tokenizer_fixture(const std::string& name, const std::string& file) {
  return std::string(ROCMFORGE_TOKENIZERS) + "/" + name + "/" + file;
}

// Loading a 128k vocabulary takes a fraction of a second: do it once per test binary.
inline const Tokenizer& fixture_tokenizer(const std::string& name) {
  static std::map<std::string, Tokenizer> loaded;
  auto it = loaded.find(name);
  if (it == loaded.end()) it = loaded.emplace(name, Tokenizer::from_json_file(tokenizer_fixture(name, "tokenizer.json"))).first;
  return it->second;
}

struct ReferenceLine {
  int line_number;
  std::string text;
  std::vector<TokenId> ids;
  std::string decoded;
};

inline std::vector<ReferenceLine> read_reference(const std::string& name) {
  std::ifstream in(tokenizer_fixture(name, "reference.jsonl"));
  std::vector<ReferenceLine> lines;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const auto record = nlohmann::json::parse(line);
    lines.push_back({number, record.at("text"), record.at("ids"), record.at("decoded")});
  }
  return lines;
}

// Processor time, which other work on a shared test machine disturbs less than wall time.
inline double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

// A fresh directory under the scratch area for files a test writes.
inline std::filesystem::path scratch_dir(const std::string& name) {
  const auto dir = std::filesystem::path(ROCMFORGE_SCRATCH) / "tokenizer" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline void write_file(const std::filesystem::path& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary) << contents;
}

}  // namespace rf::test
