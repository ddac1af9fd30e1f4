// Stable Diffusion's files: the JSON of a diffusers folder (model_index.json, the UNet's, VAE's and
// text encoder's config.json, the scheduler's and the tokenizer's) and a single-file checkpoint's
// safetensors header. The first byte picks the file. A JSON file's replacement goes into a copy of
// the sd15 fixture's folder (linked file by file); a header goes before the fixture checkpoint's own
// tensor bytes. Each is opened as `rocmforge image` opens it: every config read, every tensor's
// name, type and shape checked, the CLIP vocabulary loaded.
#include <array>

#include "fuzz_support.h"
#include "models/stable_diffusion/checkpoint.h"
#include "util/text_file.h"

namespace {

namespace fs = std::filesystem;

constexpr std::array<const char*, 7> kFiles = {
    "model_index.json",         "unet/config.json",          "vae/config.json",
    "text_encoder/config.json", "scheduler/scheduler_config.json", "tokenizer/tokenizer_config.json",
    "checkpoint.safetensors"};  // the single file's header
const fs::path kFixture = ROCMFORGE_FUZZ_SD_MODEL;

// The fixture's folder, its files linked into a folder of this process.
const fs::path& model_folder() {
  static const fs::path dir = [] {
    const fs::path d = rf::fuzz::scratch() / "sd";
    for (const auto& entry : fs::recursive_directory_iterator(kFixture / "diffusers")) {
      const fs::path to = d / fs::relative(entry.path(), kFixture / "diffusers");
      if (entry.is_directory()) {
        fs::create_directories(to);
      } else {
        fs::create_directories(to.parent_path());
        fs::create_symlink(entry.path(), to);
      }
    }
    return d;
  }();
  return dir;
}

// The single file's tensor bytes, after its 8-byte length and header.
const std::string& checkpoint_data() {
  static const std::string data = [] {
    const std::string file = rf::read_text_file((kFixture / "checkpoint.safetensors").string());
    std::uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = header << 8 | static_cast<std::uint8_t>(file[i]);
    return file.substr(8 + header);
  }();
  return data;
}

void open_checkpoint(const fs::path& path) {
  rf::stable_diffusion::Checkpoint::open(path.string(), {.clip_vocab = ROCMFORGE_CLIP_VOCAB});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rf;
  if (size == 0) return -1;  // not kept in the corpus
  const std::string file = kFiles[data[0] % kFiles.size()];
  const std::string_view body = fuzz::as_text(data + 1, size - 1);
  if (file == "checkpoint.safetensors") {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(static_cast<std::uint64_t>(body.size()) >> (8 * i));
    const fs::path path = fuzz::scratch() / file;
    fuzz::write_file(path, bytes.append(body).append(checkpoint_data()));
    fuzz::expect_only_rf_errors([&] { open_checkpoint(path); });
    return 0;
  }
  const fs::path& dir = model_folder();
  fs::remove(dir / file);
  fuzz::write_file(dir / file, body);
  fuzz::expect_only_rf_errors([&] { open_checkpoint(dir); });
  // The next input starts from the fixture's own file again.
  fs::remove(dir / file);
  fs::create_symlink(kFixture / "diffusers" / file, dir / file);
  return 0;
}
