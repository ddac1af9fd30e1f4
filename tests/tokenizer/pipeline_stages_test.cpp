// The pipeline stages on their own, with the examples of Hugging Face's documentation where it
// gives them: pre-tokenizers, normalizers, decoders and the BPE model.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/bpe.h"
#include "tokenizer/decoders.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/pre_tokenizers.h"

namespace rf {
namespace {

using Strings = std::vector<std::string>;

Strings pre_tokenize(const PreTokenizer& pre_tokenizer, const std::string& text, bool at_text_start = true) {
  std::vector<Fragment> fragments{{text, at_text_start}};
  pre_tokenizer.pre_tokenize(fragments);
  Strings texts;
  for (const Fragment& fragment : fragments) texts.push_back(fragment.text);
  return texts;
}

std::unique_ptr<PreTokenizer> pre_tokenizer(const char* json) { return pre_tokenizer_from_json(nlohmann::json::parse(json)); }

TEST(PreTokenizers, SplitBehaviors) {
  const auto split = [](SplitBehavior behavior) {
    return pre_tokenize(SplitPreTokenizer(Regex::literal("-"), behavior), "the-final--countdown");
  };
  EXPECT_EQ(split(SplitBehavior::Removed), (Strings{"the", "final", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::Isolated), (Strings{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::MergedWithPrevious), (Strings{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::MergedWithNext), (Strings{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split(SplitBehavior::Contiguous), (Strings{"the", "-", "final", "--", "countdown"}));
}

TEST(PreTokenizers, SplitInvertedKeepsTheMatches) {
  const auto split = pre_tokenizer(R"({"type": "Split", "pattern": {"Regex": "\\w+|[^\\w\\s]+"}, "behavior": "Removed", "invert": true})");
  EXPECT_EQ(pre_tokenize(*split, "Hey man!  Good?"), (Strings{"Hey", "man", "!", "Good", "?"}));
  EXPECT_EQ(pre_tokenize(*pre_tokenizer(R"({"type": "Whitespace"})"), "Hey man!"), (Strings{"Hey", "man", "!"}));
  EXPECT_EQ(pre_tokenize(*pre_tokenizer(R"({"type": "WhitespaceSplit"})"), "Hey  man!\n"), (Strings{"Hey", "man!"}));
}

TEST(PreTokenizers, Llama3PatternWithLookaheadAndCaseInsensitiveContractions) {
  const SplitPreTokenizer split(Regex::pattern(split_patterns::kLlama3), SplitBehavior::Isolated);
  EXPECT_EQ(pre_tokenize(split, "I'M 12345 héllo   world\n\n"), (Strings{"I", "'M", " ", "123", "45", " héllo", "  ", " world", "\n\n"}));
}

TEST(PreTokenizers, Digits) {
  EXPECT_EQ(pre_tokenize(*pre_tokenizer(R"({"type": "Digits", "individual_digits": true})"), "Hey 123 friend!"),
            (Strings{"Hey ", "1", "2", "3", " friend!"}));
  EXPECT_EQ(pre_tokenize(*pre_tokenizer(R"({"type": "Digits", "individual_digits": false})"), "Hey 123 friend!"),
            (Strings{"Hey ", "123", " friend!"}));
}

TEST(PreTokenizers, Punctuation) {
  EXPECT_EQ(pre_tokenize(*pre_tokenizer(R"({"type": "Punctuation", "behavior": "Isolated"})"), "Hey friend!     How are you?!?"),
            (Strings{"Hey friend", "!", "     How are you", "?", "!", "?"}));
}

TEST(PreTokenizers, ByteLevelMapsBytesAndSplitsWithGpt2Pattern) {
  const ByteLevelPreTokenizer byte_level(true, true);
  EXPECT_EQ(pre_tokenize(byte_level, "Hello my friend, how is your day going?"),
            (Strings{"ĠHello", "Ġmy", "Ġfriend", ",", "Ġhow", "Ġis", "Ġyour", "Ġday", "Ġgoing", "?"}));
  EXPECT_EQ(pre_tokenize(ByteLevelPreTokenizer(false, false), "a\n\xC3\xA9"), (Strings{"aĊÃ©"}));
}

TEST(PreTokenizers, MetaspacePrependSchemes) {
  using Prepend = MetaspacePreTokenizer::Prepend;
  const MetaspacePreTokenizer always("▁", Prepend::Always, true);
  EXPECT_EQ(pre_tokenize(always, "Hey   friend!"), (Strings{"▁Hey", "▁", "▁", "▁friend!"}));
  EXPECT_EQ(pre_tokenize(always, "Hey", false), (Strings{"▁Hey"}));
  const MetaspacePreTokenizer first("▁", Prepend::First, false);
  EXPECT_EQ(pre_tokenize(first, "Hey friend", true), (Strings{"▁Hey▁friend"}));
  EXPECT_EQ(pre_tokenize(first, "Hey friend", false), (Strings{"Hey▁friend"}));
  EXPECT_EQ(pre_tokenize(MetaspacePreTokenizer("▁", Prepend::Never, true), "Hey friend"), (Strings{"Hey", "▁friend"}));
  // Files from before prepend_scheme existed.
  EXPECT_EQ(pre_tokenize(*pre_tokenizer(R"({"type": "Metaspace", "replacement": "▁", "add_prefix_space": false})"), "a b"),
            (Strings{"a", "▁b"}));
}

TEST(PreTokenizers, SequenceAppliesStepsInOrder) {
  const auto sequence = pre_tokenizer(R"({"type": "Sequence", "pretokenizers": [
      {"type": "WhitespaceSplit"}, {"type": "Digits", "individual_digits": true}]})");
  EXPECT_EQ(pre_tokenize(*sequence, "ab12 c3"), (Strings{"ab", "1", "2", "c", "3"}));
}

std::string normalized(const char* json, std::string text) {
  normalizer_from_json(nlohmann::json::parse(json))->normalize(text);
  return text;
}

TEST(Normalizers, UnicodeForms) {
  EXPECT_EQ(normalized(R"({"type": "NFC"})", "e\u0301 \u212B"), "\u00E9 \u00C5");
  EXPECT_EQ(normalized(R"({"type": "NFD"})", "\u00E9"), "e\u0301");
  EXPECT_EQ(normalized(R"({"type": "NFKC"})", "\uFB01 \u2460"), "fi 1");
  EXPECT_EQ(normalized(R"({"type": "NFKD"})", "\uFB01\u00E9"), "fie\u0301");
}

TEST(Normalizers, TextEdits) {
  EXPECT_EQ(normalized(R"({"type": "Lowercase"})", "HeLLo ÄÖ"), "hello äö");
  EXPECT_EQ(normalized(R"({"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "})", "a \t\n b"), "a b");
  EXPECT_EQ(normalized(R"({"type": "Replace", "pattern": {"String": "."}, "content": "!"})", "a.b"), "a!b");
  EXPECT_EQ(normalized(R"({"type": "Strip", "strip_left": true, "strip_right": true})", "\u3000 hi \n"), "hi");
  EXPECT_EQ(normalized(R"({"type": "Strip", "strip_left": false, "strip_right": true})", " hi "), " hi");
  EXPECT_EQ(normalized(R"({"type": "Prepend", "prepend": "▁"})", "hi"), "▁hi");
  EXPECT_EQ(normalized(R"({"type": "Prepend", "prepend": "▁"})", ""), "");
  EXPECT_EQ(normalized(R"({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})", "a b"), "▁a▁b");
}

std::string decoded(const char* json, Strings tokens) {
  decoder_from_json(nlohmann::json::parse(json))->decode_chain(tokens);
  std::string text;
  for (const std::string& token : tokens) text += token;
  return text;
}

TEST(Decoders, EachDecoder) {
  EXPECT_EQ(decoded(R"({"type": "ByteLevel"})", {"Hello", "Ġwor", "ld", "Ċ", "Ã©", "<|eot|>"}), "Hello world\n\u00E9<|eot|>");
  EXPECT_EQ(decoded(R"({"type": "ByteLevel"})", {"a b"}), "a b");  // a space is outside the alphabet: kept as it is
  EXPECT_EQ(decoded(R"({"type": "ByteFallback"})", {"<0x61>", "b", "<0xE2>", "<0x82>", "<0xAC>", "<0xZZ>"}), "ab\u20AC<0xZZ>");
  EXPECT_EQ(decoded(R"({"type": "ByteFallback"})", {"<0xE2>"}), "\xE2");  // repaired once decoding ends
  EXPECT_EQ(decoded(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"})", {"▁Hey", "▁friend!"}), "Hey friend!");
  EXPECT_EQ(decoded(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never"})", {"▁Hey", "▁friend!"}), " Hey friend!");
  EXPECT_EQ(decoded(R"({"type": "Strip", "content": " ", "start": 1, "stop": 1})", {"  a  ", " b"}), " a b");
  EXPECT_EQ(decoded(R"({"type": "Replace", "pattern": {"String": "▁"}, "content": " "})", {"▁a▁b"}), " a b");
  EXPECT_EQ(decoded(R"({"type": "BPEDecoder", "suffix": "</w>"})", {"hel", "lo</w>", "there</w>"}), "hello there");
  EXPECT_EQ(decoded(R"({"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})",
                    {"▁Hello", "▁", "<0xF0>", "<0x9F>", "<0x9A>", "<0x80>"}),
            "Hello \U0001F680");
}

// A vocabulary of single letters and a few merged tokens.
BpeModel small_model(BpeOptions options, const Strings& merges) {
  std::vector<std::optional<std::string>> vocab{"a", "b", "c", "ab", "bc", "abc", "<unk>", "<0xC3>", "<0xA9>", "##b", "c</w>", "ac</w>"};
  BpeModel model(std::move(vocab), std::move(options));
  for (std::uint32_t rank = 0; rank < merges.size(); ++rank) {
    const std::size_t space = merges[rank].find(' ');
    model.add_merge(merges[rank].substr(0, space), merges[rank].substr(space + 1), rank);
  }
  return model;
}

std::vector<TokenId> tokenize(const BpeModel& model, std::string_view text) {
  std::vector<TokenId> ids;
  model.tokenize(text, ids);
  return ids;
}

TEST(BpeModel, LowestRankMergesFirst) {
  EXPECT_EQ(tokenize(small_model({}, {"a b", "ab c"}), "abc"), std::vector<TokenId>{5});
  EXPECT_EQ(tokenize(small_model({}, {"b c", "ab c"}), "abc"), (std::vector<TokenId>{0, 4}));
  EXPECT_EQ(tokenize(small_model({}, {"b c", "a b", "ab c"}), "abcab"), (std::vector<TokenId>{0, 4, 3}));
  EXPECT_EQ(tokenize(small_model({}, {"a b"}), "ababab"), (std::vector<TokenId>{3, 3, 3}));
}

TEST(BpeModel, IgnoreMergesEmitsWholeTokens) {
  EXPECT_EQ(tokenize(small_model({}, {}), "abc"), (std::vector<TokenId>{0, 1, 2}));
  EXPECT_EQ(tokenize(small_model({.ignore_merges = true}, {}), "abc"), std::vector<TokenId>{5});
}

TEST(BpeModel, UnknownCharacters) {
  EXPECT_EQ(tokenize(small_model({.byte_fallback = true}, {}), "\u00E9a"), (std::vector<TokenId>{7, 8, 0}));
  EXPECT_EQ(tokenize(small_model({.unk_token = "<unk>", .fuse_unk = true}, {}), "xya\u00E9"), (std::vector<TokenId>{6, 0, 6}));
  EXPECT_EQ(tokenize(small_model({.unk_token = "<unk>"}, {}), "xya"), (std::vector<TokenId>{6, 6, 0}));
  EXPECT_EQ(tokenize(small_model({}, {}), "xa"), std::vector<TokenId>{0});  // dropped without unk_token
}

TEST(BpeModel, SubwordPrefixAndWordSuffix) {
  EXPECT_EQ(tokenize(small_model({.continuing_subword_prefix = "##"}, {"a ##b"}), "ab"), std::vector<TokenId>{3});
  EXPECT_EQ(tokenize(small_model({.end_of_word_suffix = "</w>"}, {"a c</w>"}), "ac"), std::vector<TokenId>{11});
}

}  // namespace
}  // namespace rf
