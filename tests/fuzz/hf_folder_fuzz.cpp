// The JSON files of a Hugging Face folder: config.json, generation_config.json, tokenizer.json,
// tokenizer_config.json and a shard index. The first byte picks the file; the rest replaces it in
// a copy of a small fixture model (linked file by file), which is then loaded as `generate` loads it.
#include <array>

#include "fuzz_support.h"
#include "model/checkpoint.h"
#include "tokenizer/tokenizer.h"

namespace {

constexpr std::array<const char*, 5> kFiles = {"config.json", "generation_config.json", "tokenizer.json",
                                               "tokenizer_config.json", "model.safetensors.index.json"};

// The fixture's files, linked into a folder of this process; the fuzzed one is written over its link.
const std::filesystem::path& model_folder() {
  static const std::filesystem::path dir = [] {
    const auto d = rf::fuzz::scratch() / "model";
    std::filesystem::create_directories(d);
    for (const auto& entry : std::filesystem::directory_iterator(ROCMFORGE_FUZZ_MODEL)) {
      std::filesystem::create_symlink(entry.path(), d / entry.path().filename());
    }
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rf;
  if (size == 0) return -1;  // not kept in the corpus
  const auto& dir = model_folder();
  const std::string file = kFiles[data[0] % kFiles.size()];
  std::filesystem::remove(dir / file);
  fuzz::write_file(dir / file, fuzz::as_text(data + 1, size - 1));
  fuzz::expect_only_rf_errors([&] { Checkpoint::load(dir.string()); });
  fuzz::expect_only_rf_errors(
      [&] { Tokenizer::from_json_file((dir / "tokenizer.json").string()).encode("Hello, world <s>", true); });
  // The next input starts from the fixture's own file again.
  std::filesystem::remove(dir / file);
  const auto original = std::filesystem::path(ROCMFORGE_FUZZ_MODEL) / file;
  if (std::filesystem::exists(original)) std::filesystem::create_symlink(original, dir / file);
  return 0;
}
