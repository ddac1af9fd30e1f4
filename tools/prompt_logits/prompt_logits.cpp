// prompt_logits MODEL TEXT...: rocmforge's CPU logits at every position of each text (tokenized with the
// model's tokenizer, BOS added as `generate` adds it), as JSON on stdout:
//   [{"prompt": TEXT, "ids": [...], "logits": [[vocab_size floats] per position]}, ...]
// Floats are printed with 9 significant digits, which round-trips fp32. Made for
// tools/fixtures/make_quant_fixtures.py, which records these as references.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/model_runner.h"
#include "engine/perplexity.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL TEXT...\n", argv[0]);
    return 2;
  }
  try {
    rf::RunnerOptions options;
    options.device = "cpu";
    options.threads = 2;
    rf::ModelRunner runner(argv[1], options);
    const std::size_t vocab = runner.config().vocab_size;
    std::string out = "[";
    for (int a = 2; a < argc; ++a) {
      const std::vector<std::int32_t> ids = runner.tokenizer().encode(argv[a], true);
      const std::vector<float> logits = rf::prompt_logits(runner, ids);
      out += fmt::format("{}{{\"prompt\": {}, \"ids\": {}, \"logits\": [", a > 2 ? ",\n" : "",
                         nlohmann::json(argv[a]).dump(), nlohmann::json(ids).dump());
      for (std::size_t p = 0; p < ids.size(); ++p) {
        out += p > 0 ? ",\n[" : "\n[";
        for (std::size_t i = 0; i < vocab; ++i) out += fmt::format("{}{:.9g}", i > 0 ? ", " : "", logits[p * vocab + i]);
        out += "]";
      }
      out += "]}";
    }
    std::printf("%s]\n", out.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prompt_logits: %s\n", e.what());
    return 1;
  }
  return 0;
}
