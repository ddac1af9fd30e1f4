// Added tokens' flags and the post-processors, on a character-level tokenizer.json written here.
#include <gtest/gtest.h>

#include "tokenizer_test_support.h"

namespace rf::test {
namespace {

// Every character of " abcdefghijklmnopqrstuvwxyz<>" is a token (its id is its position); no merges.
constexpr std::string_view kAlphabet = " abcdefghijklmnopqrstuvwxyz<>";

nlohmann::json character_tokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  for (std::size_t i = 0; i < kAlphabet.size(); ++i) vocab[std::string(1, kAlphabet[i])] = i;
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
          {"added_tokens", nlohmann::json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", {{"type", "Fuse"}}}};
}

// Ids of the characters of `text` (added tokens aside).
std::vector<TokenId> chars(std::string_view text) {
  std::vector<TokenId> ids;
  for (const char c : text) ids.push_back(static_cast<TokenId>(kAlphabet.find(c)));
  return ids;
}

std::vector<TokenId> operator+(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void add_token(nlohmann::json& tokenizer, TokenId id, const std::string& content, nlohmann::json flags = nlohmann::json::object()) {
  flags["id"] = id;
  flags["content"] = content;
  tokenizer["added_tokens"].push_back(flags);
}

Tokenizer load(const std::string& name, const nlohmann::json& tokenizer) {
  const auto dir = scratch_dir("added_" + name);
  write_file(dir / "tokenizer.json", tokenizer.dump());
  return Tokenizer::from_json_file((dir / "tokenizer.json").string());
}

TEST(AddedTokens, LongestMatchWins) {
  auto json = character_tokenizer();
  add_token(json, 100, "<a>", {{"special", true}});
  add_token(json, 101, "<a><b>", {{"special", true}});
  const Tokenizer tokenizer = load("longest", json);
  EXPECT_EQ(tokenizer.encode("x<a><b>y<a>", false), chars("x") + std::vector<TokenId>{101} + chars("y") + std::vector<TokenId>{100});
}

TEST(AddedTokens, LstripAndRstripTakeTheWhitespace) {
  auto json = character_tokenizer();
  add_token(json, 100, "<m>", {{"special", true}, {"lstrip", true}, {"rstrip", true}});
  add_token(json, 101, "<l>", {{"special", true}, {"lstrip", true}});
  const Tokenizer tokenizer = load("strip", json);
  EXPECT_EQ(tokenizer.encode("a  <m>  b", false), chars("a") + std::vector<TokenId>{100} + chars("b"));
  EXPECT_EQ(tokenizer.encode("a \t<l> b", false), chars("a") + std::vector<TokenId>{101} + chars(" b"));
}

TEST(AddedTokens, SingleWordMatchesOnlyAlone) {
  auto json = character_tokenizer();
  add_token(json, 100, "cat", {{"single_word", true}});
  const Tokenizer tokenizer = load("single_word", json);
  EXPECT_EQ(tokenizer.encode("cat cats scat cat", false),
            std::vector<TokenId>{100} + chars(" cats scat ") + std::vector<TokenId>{100});
  EXPECT_FALSE(tokenizer.is_special(100));
}

TEST(AddedTokens, NormalizedTokensMatchNormalizedText) {
  auto json = character_tokenizer();
  json["normalizer"] = {{"type", "Lowercase"}};
  add_token(json, 100, "Dog", {{"normalized", true}});
  add_token(json, 101, "<X>", {{"normalized", false}, {"special", true}});
  const Tokenizer tokenizer = load("normalized", json);
  EXPECT_EQ(tokenizer.encode("a DOG<X>", false), chars("a ") + std::vector<TokenId>({100, 101}));
  EXPECT_EQ(tokenizer.encode("<x>", false), chars("<x>"));  // not normalized: case matters
}

TEST(AddedTokens, MetaspaceFirstSchemeOnlyPrependsAtTheStart) {
  auto json = character_tokenizer();
  json["model"]["vocab"]["\u2581"] = 50;
  json["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", false}};
  json["decoder"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", false}};
  add_token(json, 100, "<x>", {{"special", true}});
  const Tokenizer tokenizer = load("metaspace_first", json);
  EXPECT_EQ(tokenizer.encode("a b<x>c", false), (std::vector<TokenId>{50, 1, 50, 2, 100, 3}));
  EXPECT_EQ(tokenizer.decode({50, 1, 50, 2, 100, 3}), "a b<x>c");
}

TEST(PostProcessors, RobertaAndSequence) {
  auto json = character_tokenizer();
  add_token(json, 100, "<s>", {{"special", true}});
  add_token(json, 101, "</s>", {{"special", true}});
  json["post_processor"] = {{"type", "RobertaProcessing"}, {"sep", {"</s>", 101}}, {"cls", {"<s>", 100}}};
  EXPECT_EQ(load("roberta", json).encode("ab", true), (std::vector<TokenId>{100, 1, 2, 101}));

  json["post_processor"] = nlohmann::json::parse(R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": "</s>", "type_id": 0}}],
       "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [100], "tokens": ["<s>"]},
                                      "</s>": {"id": "</s>", "ids": [101], "tokens": ["</s>"]}}}]})");
  const Tokenizer tokenizer = load("sequence", json);
  EXPECT_EQ(tokenizer.encode("ab", true), (std::vector<TokenId>{100, 1, 2, 101}));
  EXPECT_EQ(tokenizer.bos_id(), 100);
  EXPECT_EQ(tokenizer.eos_id(), 101);
}

TEST(AddedTokens, NoDecoderJoinsTokensWithSpaces) {
  auto json = character_tokenizer();
  json["decoder"] = nullptr;
  EXPECT_EQ(load("no_decoder", json).decode(chars("abc")), "a b c");
}

TEST(AddedTokens, InvalidUtf8IsRepairedBeforeEncoding) {
  auto json = character_tokenizer();
  json["model"]["vocab"]["\uFFFD"] = 60;
  EXPECT_EQ(load("invalid_utf8", json).encode("a\xFF" "b", false), (std::vector<TokenId>{1, 60, 2}));
}

}  // namespace
}  // namespace rf::test
