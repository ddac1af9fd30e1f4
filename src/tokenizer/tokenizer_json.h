#pragma once
// tokenizer.json in one pass. The model's vocab and merges, hundreds of thousands of entries in
// today's vocabularies, go straight into their tables; the rest (normalizer, pre-tokenizer, added
// tokens, ...) into a JSON tree. A tree of the whole file cost more than parsing it.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rf {

struct TokenizerJson {
  // The file, less model.vocab where it is an object and model.merges where it is an array: a field
  // absent or of another type stays here, for the loader's checks to refuse.
  nlohmann::json root;
  std::optional<std::vector<std::optional<std::string>>> vocab;            // the token of every id
  std::optional<std::vector<std::pair<std::string, std::string>>> merges;  // by rank
};

// Errors name the file.
TokenizerJson read_tokenizer_json(const std::string& path);

}  // namespace rf
