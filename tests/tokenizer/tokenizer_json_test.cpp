// read_tokenizer_json: model.vocab and model.merges go to their tables in one pass over the file, in
// any field order and either merge form; everything else, vocab-named fields elsewhere included,
// stays in the tree.
#include "tokenizer/tokenizer_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tokenizer_test_support.h"
#include "util/error.h"

namespace rf::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using Merges = std::vector<std::pair<std::string, std::string>>;

TokenizerJson read_text(const std::string& test, const std::string& text) {
  const auto path = scratch_dir(test) / "tokenizer.json";
  write_file(path, text);
  return read_tokenizer_json(path.string());
}

std::string read_error(const std::string& test, const std::string& text) {
  try {
    read_text(test, text);
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "reading did not fail";
  return {};
}

TEST(TokenizerJson, MergesInEitherFormBeforeOrAfterTheVocab) {
  const TokenizerJson file = read_text("merges_first", R"({
    "model": {"merges": [["a b", "c"], "d e"], "type": "BPE", "vocab": {"a b": 0, "c": 2}, "unk_token": null},
    "decoder": {"type": "ByteLevel"}})");
  ASSERT_TRUE(file.merges);
  EXPECT_EQ(*file.merges, (Merges{{"a b", "c"}, {"d", "e"}}));
  ASSERT_TRUE(file.vocab);
  EXPECT_EQ(*file.vocab, (std::vector<std::optional<std::string>>{"a b", std::nullopt, "c"}));
  EXPECT_EQ(file.root, nlohmann::json::parse(R"({"model": {"type": "BPE", "unk_token": null}, "decoder": {"type": "ByteLevel"}})"));
}

TEST(TokenizerJson, OnlyTheModelsOwnVocabAndMergesComeApart) {
  const std::string text = R"({"decoder": {"model": {"vocab": {"x": 1}, "merges": ["x y"]}},
                               "model": {"vocab": [1, 2], "merges": "x y"}})";
  const TokenizerJson file = read_text("nested_model", text);
  EXPECT_FALSE(file.vocab);  // an array: left for the loader to refuse by name
  EXPECT_FALSE(file.merges);
  EXPECT_EQ(file.root, nlohmann::json::parse(text));
}

TEST(TokenizerJson, BadMergesAndBadJsonAreNamed) {
  const auto with_merges = [](const std::string& merges) {
    return R"({"model": {"vocab": {"a": 0}, "merges": )" + merges + "}}";
  };
  EXPECT_THAT(read_error("merge_one", with_merges(R"([["a"]])")), HasSubstr(R"(merge ["a"] is neither)"));
  EXPECT_THAT(read_error("merge_three", with_merges(R"([["a", "b", "c"]])")), HasSubstr(R"(merge ["a","b","c"] is neither)"));
  EXPECT_THAT(read_error("merge_object", with_merges(R"([{"a": "b"}])")), HasSubstr("merge an object is neither"));
  EXPECT_THAT(read_error("merge_nested", with_merges(R"([[["a"], "b"]])")), HasSubstr("merge an array of arrays is neither"));
  EXPECT_THAT(read_error("merge_no_space", with_merges(R"(["ab"])")), HasSubstr("'ab' is not two tokens separated by a space"));
  EXPECT_THAT(read_error("vocab_float", R"({"model": {"vocab": {"a": 0.5}}})"), HasSubstr("model: 'vocab': 0.5 is not a valid token id"));
  EXPECT_THAT(read_error("truncated", R"({"model": {"vocab": {"a": )"),
              AllOf(HasSubstr("tokenizer.json: the file is not valid JSON"), HasSubstr("parse_error")));
  EXPECT_THAT(read_error("huge", with_merges(R"(["a b", 1e400])")),
              AllOf(HasSubstr("tokenizer.json: the file is not valid JSON"), HasSubstr("out_of_range")));
}

}  // namespace
}  // namespace rf::test
