#include "grammar/token_constraint.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <random>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace rf::grammar {
namespace {

// The mask worked out token by token, without the trie or the cache: each token's bytes run
// through a fresh recognizer after `text`.
std::size_t mask_mismatches(const Grammar& grammar, const VocabTrie& vocabulary, const std::string& text,
                            const TokenMask& mask) {
  GrammarStacks stacks(grammar);
  const auto state = stacks.advance(stacks.initial(), text);
  std::size_t wrong = 0;
  for (std::size_t id = 0; id < vocabulary.vocab_size(); ++id) {
    const auto token = static_cast<std::int32_t>(id);
    bool expected = false;
    if (vocabulary.is_stop(token)) {
      expected = stacks.accepts(state);
    } else if (!vocabulary.piece(token).empty()) {
      expected = stacks.advance(state, vocabulary.piece(token)) != GrammarStacks::kDead;
    }
    wrong += expected != mask.allows(token);
  }
  return wrong;
}

TEST(TokenConstraint, MasksMatchTokenByTokenChecks) {
  const std::vector<std::string> pieces = {"{", "}", "\"", "a", "ab", "\"}", " ", "\xC3", "\xA9", "\xC3\xA9", "{\"", "", "b\"", "x"};
  auto vocabulary = std::make_shared<VocabTrie>(pieces, std::vector<std::int32_t>{11});
  auto grammar = std::make_shared<TokenGrammar>(parse_gbnf(R"(root ::= "{" "\"" [a-bé]* "\"" "}")"), vocabulary);
  TokenConstraint constraint(grammar);
  std::string text;
  for (const std::int32_t token : {10, 4, 7, 8, 9, 5}) {
    const auto mask = constraint.allowed();
    const auto wrong = mask_mismatches(grammar->grammar(), *vocabulary, text, *mask);
    std::printf("after '%s': %zu tokens wrongly masked (tolerance 0)\n", text.c_str(), wrong);
    EXPECT_EQ(wrong, 0u);
    ASSERT_TRUE(mask->allows(token)) << "token " << token << " after '" << text << "'";
    constraint.accept(token);
    text += pieces[token];
  }
  EXPECT_TRUE(constraint.complete());
  const auto last = constraint.allowed();
  EXPECT_TRUE(last->allows(11));
  EXPECT_FALSE(last->allows(1));
  EXPECT_THROW(constraint.accept(13), Error);
}

TEST(TokenConstraint, StopTokenOnlyWhereTheGrammarMayEnd) {
  auto vocabulary = std::make_shared<VocabTrie>(std::vector<std::string>{"a", "b", ""}, std::vector<std::int32_t>{2});
  TokenConstraint constraint(std::make_shared<TokenGrammar>(parse_gbnf(R"(root ::= "a" "b"?)"), vocabulary));
  EXPECT_THROW(constraint.accept(2), Error);
  constraint.accept(0);
  EXPECT_FALSE(constraint.complete());
  const auto mask = constraint.allowed();
  EXPECT_TRUE(mask->allows(1));
  EXPECT_TRUE(mask->allows(2));
  constraint.accept(2);
}

// A random walk over Llama 3.1's real vocabulary under a JSON schema: every mask on the way
// agrees with the token-by-token check, and the text at the end is JSON with the schema's shape
// (read back by nlohmann's parser).
TEST(TokenConstraint, RandomWalksOverARealVocabularyGiveValidJson) {
  const auto tokenizer = Tokenizer::from_json_file(std::string(ROCMFORGE_TOKENIZERS) + "/llama3_1/tokenizer.json");
  auto vocabulary = std::make_shared<VocabTrie>(tokenizer.token_pieces(), tokenizer.eog_ids());
  const auto schema = nlohmann::ordered_json::parse(R"({"type": "object", "additionalProperties": false,
    "required": ["name", "tags", "score", "kind"], "properties": {
      "name": {"type": "string", "maxLength": 12}, "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
      "score": {"type": "number"}, "kind": {"enum": ["a", "b", "ünï"]}, "ok": {"type": "boolean"}}})");
  auto grammar = std::make_shared<TokenGrammar>(parse_gbnf(json_schema_to_gbnf(schema)), vocabulary);
  std::mt19937 rng(42);
  for (int walk = 0; walk < 4; ++walk) {
    TokenConstraint constraint(grammar);
    std::vector<std::int32_t> ids;
    std::string text;
    std::size_t wrong = 0;
    while (ids.size() < 400) {
      const auto mask = constraint.allowed();
      if (walk == 0 && ids.size() < 12) wrong += mask_mismatches(grammar->grammar(), *vocabulary, text, *mask);
      std::vector<std::int32_t> allowed;
      for (std::size_t id = 0; id < mask->tokens(); ++id) {
        if (mask->allows(static_cast<std::int32_t>(id))) allowed.push_back(static_cast<std::int32_t>(id));
      }
      const auto stop = std::find_if(allowed.begin(), allowed.end(), [&](auto id) { return vocabulary->is_stop(id); });
      if (stop != allowed.end()) break;  // the JSON is whole
      const auto token = allowed[std::uniform_int_distribution<std::size_t>(0, allowed.size() - 1)(rng)];
      constraint.accept(token);
      ids.push_back(token);
      text += vocabulary->piece(token);
    }
    std::printf("walk %d: %zu tokens, %zu wrongly masked (tolerance 0): %s\n", walk, ids.size(), wrong, text.c_str());
    EXPECT_EQ(wrong, 0u);
    ASSERT_LT(ids.size(), 400u) << "the walk did not end: " << text;
    StreamDecoder decoder(tokenizer);
    std::string streamed;
    for (auto id : ids) streamed += decoder.push(id);
    EXPECT_EQ(streamed + decoder.flush(), text);
    const auto value = nlohmann::json::parse(text);
    EXPECT_TRUE(value["name"].is_string() && value["name"].get<std::string>().size() <= 4 * 12);
    EXPECT_TRUE(value["tags"].is_array() && value["tags"].size() <= 3);
    EXPECT_TRUE(value["score"].is_number());
    EXPECT_TRUE(value["kind"] == "a" || value["kind"] == "b" || value["kind"] == "ünï");
  }
}

}  // namespace
}  // namespace rf::grammar
