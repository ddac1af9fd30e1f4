// Text through the real tokenizers (Llama 3's byte-level BPE, Qwen3's with an NFC normalizer,
// Mistral's SentencePiece-style BPE with byte fallback): encode, decode and the streaming decoder.
// Llama 3's tokenizer has no normalizer, so its streamed decoding must give back any valid UTF-8 text.
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

const rf::Tokenizer& tokenizer(const char* name) {
  static std::vector<std::pair<std::string, rf::Tokenizer>> loaded;
  for (auto& [n, t] : loaded) {
    if (n == name) return t;
  }
  loaded.emplace_back(name, rf::Tokenizer::from_json_file(fmt::format("{}/{}/tokenizer.json", ROCMFORGE_TOKENIZERS, name)));
  return loaded.back().second;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rf;
  const std::string_view text = fuzz::as_text(data, size);
  for (const char* name : {"llama3_1", "qwen3", "mistral"}) {
    const Tokenizer& t = tokenizer(name);
    fuzz::expect_only_rf_errors([&] {
      const auto ids = t.encode(text, true);
      (void)t.decode(ids, true);
      (void)t.decode(ids, false);
      // The stream applies no clean_up_tokenization_spaces (Llama 3.1's config asks decode() for
      // it), so it is the stream that must give back any valid UTF-8 text.
      StreamDecoder stream(t, false);
      std::string streamed;
      for (const auto id : t.encode(text, false)) streamed += stream.push(id);
      streamed += stream.flush();
      if (std::string_view(name) == "llama3_1" && unicode::is_valid_utf8(text) && streamed != text) {
        fmt::print(stderr, "llama3_1: the streamed decoding of the text's tokens differs from the text\n");
        std::abort();
      }
    });
  }
  return 0;
}
