// A .gguf file: its header, metadata and tensor table, the model config and tokenizer read from it,
// and the checkpoint's checks of every tensor against the config.
#include "formats/gguf.h"
#include "fuzz_support.h"
#include "model/checkpoint.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rf;
  const auto path = fuzz::write_file(fuzz::scratch() / "model.gguf", fuzz::as_text(data, size));
  fuzz::expect_only_rf_errors([&] {
    const GgufFile gguf(path);
    fuzz::expect_only_rf_errors([&] { Tokenizer::from_gguf(gguf).encode("Hello, world <s>", true); });
    Checkpoint::load(path);
  });
  return 0;
}
