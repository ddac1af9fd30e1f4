// Malformed tokenizer files give an rf::Error that names the file and what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tokenizer_test_support.h"
#include "util/error.h"

namespace rf::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A valid byte-level BPE tokenizer.json small enough to edit in tests.
nlohmann::json minimal_tokenizer() {
  return nlohmann::json::parse(R"({
    "version": "1.0",
    "added_tokens": [{"id": 5, "content": "<s>", "special": true, "normalized": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4}, "merges": ["a b", "Ġ ab"]}
  })");
}

std::string load_error(const std::string& test, const std::string& tokenizer_json,
                       const std::optional<std::string>& config_json = std::nullopt) {
  const auto dir = scratch_dir(test);
  write_file(dir / "tokenizer.json", tokenizer_json);
  if (config_json) write_file(dir / "tokenizer_config.json", *config_json);
  try {
    Tokenizer::from_json_file((dir / "tokenizer.json").string());
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "loading did not fail";
  return {};
}

std::string edited_error(const std::string& test, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json tokenizer = minimal_tokenizer();
  edit(tokenizer);
  return load_error(test, tokenizer.dump());
}

TEST(TokenizerLoadErrors, MinimalTokenizerLoads) {
  const auto dir = scratch_dir("minimal");
  write_file(dir / "tokenizer.json", minimal_tokenizer().dump());
  const Tokenizer tokenizer = Tokenizer::from_json_file((dir / "tokenizer.json").string());
  EXPECT_EQ(tokenizer.encode("ab ab<s>", false), (std::vector<TokenId>{2, 4, 5}));
}

TEST(TokenizerLoadErrors, MissingFile) {
  const std::string path = std::string(ROCMFORGE_SCRATCH) + "/no/such/tokenizer.json";
  try {
    Tokenizer::from_json_file(path);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), AllOf(HasSubstr(path), HasSubstr("cannot open")));
  }
}

TEST(TokenizerLoadErrors, InvalidJson) {
  EXPECT_THAT(load_error("invalid_json", R"({"model": {"vocab": )"), AllOf(HasSubstr("tokenizer.json"), HasSubstr("is not valid JSON")));
  // A number no double holds is nlohmann's out_of_range, which must not escape as another exception.
  EXPECT_THAT(load_error("huge_number", R"({"version": 1e400})"),
              AllOf(HasSubstr("tokenizer.json: the file is not valid JSON"), HasSubstr("out_of_range")));
  EXPECT_THAT(load_error("not_object", "[1, 2]"), AllOf(HasSubstr("tokenizer.json"), HasSubstr("must be a JSON object")));
}

TEST(TokenizerLoadErrors, MissingOrUnsupportedModel) {
  EXPECT_THAT(edited_error("no_model", [](auto& t) { t.erase("model"); }), HasSubstr("lacks the field 'model'"));
  EXPECT_THAT(edited_error("wordpiece", [](auto& t) { t["model"]["type"] = "WordPiece"; }),
              AllOf(HasSubstr("tokenizer.json"), HasSubstr("unsupported model type 'WordPiece'")));
  EXPECT_THAT(edited_error("no_merges", [](auto& t) { t["model"].erase("merges"); }), HasSubstr("'merges'"));
  EXPECT_THAT(edited_error("vocab_array", [](auto& t) { t["model"]["vocab"] = {1, 2}; }), HasSubstr("'vocab' must be an object"));
  EXPECT_THAT(edited_error("bad_id", [](auto& t) { t["model"]["vocab"]["c"] = -4; }), HasSubstr("-4 is not a valid token id"));
  EXPECT_THAT(edited_error("string_id", [](auto& t) { t["model"]["vocab"]["c"] = "7"; }), HasSubstr("is not a valid token id"));
}

TEST(TokenizerLoadErrors, MergesNamingUnknownTokens) {
  EXPECT_THAT(edited_error("merge_unknown", [](auto& t) { t["model"]["merges"].push_back("a zz"); }),
              AllOf(HasSubstr("tokenizer.json"), HasSubstr("'zz', which is not in the vocab")));
  EXPECT_THAT(edited_error("merge_result_unknown", [](auto& t) { t["model"]["merges"].push_back("b a"); }),
              HasSubstr("'ba', which is not in the vocab"));
  EXPECT_THAT(edited_error("merge_no_space", [](auto& t) { t["model"]["merges"].push_back("ab"); }),
              HasSubstr("not two tokens separated by a space"));
  EXPECT_THAT(edited_error("merge_number", [](auto& t) { t["model"]["merges"].push_back(3); }), HasSubstr("merge 3 is neither"));
  EXPECT_THAT(edited_error("unk_unknown", [](auto& t) { t["model"]["unk_token"] = "<unk>"; }),
              HasSubstr("unk_token '<unk>' is not in the vocab"));
}

TEST(TokenizerLoadErrors, UnknownPipelineStages) {
  EXPECT_THAT(edited_error("normalizer", [](auto& t) { t["normalizer"] = {{"type", "Precompiled"}}; }),
              HasSubstr("unsupported normalizer type 'Precompiled'"));
  EXPECT_THAT(edited_error("pre_tokenizer", [](auto& t) { t["pre_tokenizer"] = {{"type", "Bert"}}; }),
              HasSubstr("unsupported pre_tokenizer type 'Bert'"));
  EXPECT_THAT(edited_error("decoder", [](auto& t) { t["decoder"] = {{"type", "CTC"}}; }), HasSubstr("unsupported decoder type 'CTC'"));
  EXPECT_THAT(edited_error("post_processor", [](auto& t) { t["post_processor"] = {{"type", "Magic"}}; }),
              HasSubstr("unsupported post_processor type 'Magic'"));
  EXPECT_THAT(edited_error("untyped", [](auto& t) { t["decoder"] = {{"kind", "ByteLevel"}}; }),
              HasSubstr("decoder lacks the field 'type'"));
}

TEST(TokenizerLoadErrors, MalformedStages) {
  EXPECT_THAT(edited_error("bad_regex", [](auto& t) {
                t["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
              }),
              AllOf(HasSubstr("tokenizer.json"), HasSubstr("invalid regex '(unclosed'")));
  EXPECT_THAT(edited_error("bad_behavior", [](auto& t) {
                t["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Sideways"}};
              }),
              HasSubstr("unknown behavior 'Sideways'"));
  EXPECT_THAT(edited_error("bad_pattern", [](auto& t) {
                t["normalizer"] = {{"type", "Replace"}, {"pattern", "x"}, {"content", "y"}};
              }),
              HasSubstr("'pattern' must be"));
  EXPECT_THAT(edited_error("bad_flag", [](auto& t) { t["pre_tokenizer"]["add_prefix_space"] = "yes"; }),
              HasSubstr("'add_prefix_space' must be true or false"));
  EXPECT_THAT(edited_error("template_unknown_token", [](auto& t) {
                t["post_processor"] = nlohmann::json::parse(R"({"type": "TemplateProcessing",
                  "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                  "special_tokens": {}})");
              }),
              HasSubstr("special token '<bos>' is not in special_tokens"));
  EXPECT_THAT(edited_error("template_bad_id", [](auto& t) {
                t["post_processor"] = nlohmann::json::parse(R"({"type": "TemplateProcessing",
                  "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                  "special_tokens": {"<s>": {"id": "<s>", "ids": [99], "tokens": ["<s>"]}}})");
              }),
              HasSubstr("post-processor id 99 is not in the vocabulary"));
  EXPECT_THAT(edited_error("added_no_content", [](auto& t) { t["added_tokens"][0].erase("content"); }),
              HasSubstr("added_tokens entry lacks the field 'content'"));
}

TEST(TokenizerLoadErrors, BadTokenizerConfigNamesThatFile) {
  const std::string tokenizer = minimal_tokenizer().dump();
  EXPECT_THAT(load_error("config_json", tokenizer, "{oops"), AllOf(HasSubstr("tokenizer_config.json"), HasSubstr("is not valid JSON")));
  EXPECT_THAT(load_error("config_huge_number", tokenizer, R"({"model_max_length": 1e400})"),
              HasSubstr("tokenizer_config.json: the file is not valid JSON"));
  EXPECT_THAT(load_error("config_bos", tokenizer, R"({"bos_token": "<nope>"})"),
              AllOf(HasSubstr("tokenizer_config.json"), HasSubstr("bos_token '<nope>' is not in the vocabulary")));
  EXPECT_THAT(load_error("config_add_eos", tokenizer, R"({"add_eos_token": true})"),
              AllOf(HasSubstr("tokenizer_config.json"), HasSubstr("add_eos_token is true but there is no eos_token")));
}

TEST(TokenizerLoadErrors, TokenizerConfigSetsBosAndEos) {
  const auto dir = scratch_dir("config_ok");
  write_file(dir / "tokenizer.json", minimal_tokenizer().dump());
  write_file(dir / "tokenizer_config.json",
             R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "ab", "add_bos_token": true, "add_eos_token": true})");
  const Tokenizer tokenizer = Tokenizer::from_json_file((dir / "tokenizer.json").string());
  EXPECT_EQ(tokenizer.bos_id(), 5);
  EXPECT_EQ(tokenizer.eos_id(), 2);
  EXPECT_EQ(tokenizer.encode("b", true), (std::vector<TokenId>{5, 1, 2}));
}

}  // namespace
}  // namespace rf::test
