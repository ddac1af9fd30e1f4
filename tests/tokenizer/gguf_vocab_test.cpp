// Tokenizer::from_gguf on GGUF files built from the fixtures' vocabularies: the same texts must
// encode to the same ids as with tokenizer.json.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "formats/gguf.h"
#include "tokenizer_test_support.h"
#include "util/error.h"

namespace rf::test {
namespace {

// tokenizer.ggml.token_type values.
constexpr std::int64_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6;

GgufValue string_value(std::string text) { return {GgufType::STRING, std::move(text)}; }
GgufValue uint_value(std::uint64_t value) { return {GgufType::U32, value}; }
GgufValue bool_value(bool value) { return {GgufType::BOOL, value}; }

template <typename T>
GgufValue array_value(GgufType element_type, const std::vector<T>& items) {
  auto array = std::make_shared<GgufArray>();
  array->element_type = element_type;
  for (const T& item : items) array->items.push_back({element_type, item});
  return {GgufType::ARRAY, std::move(array)};
}

// The vocabulary of a fixture's tokenizer.json as GGUF arrays.
struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<std::int64_t> types;
  std::vector<std::string> merges;  // "left right"
  nlohmann::json json;
};

Vocabulary read_vocabulary(const std::string& name) {
  Vocabulary vocab;
  std::ifstream in(tokenizer_fixture(name, "tokenizer.json"));
  vocab.json = nlohmann::json::parse(in);
  const auto& model = vocab.json.at("model");
  std::size_t size = model.at("vocab").size();
  for (const auto& added : vocab.json.at("added_tokens")) size = std::max<std::size_t>(size, added.at("id").get<std::size_t>() + 1);
  vocab.tokens.resize(size);
  vocab.types.assign(size, kNormal);
  for (const auto& [token, id] : model.at("vocab").items()) {
    vocab.tokens.at(id.get<std::size_t>()) = token;
    if (token.size() == 6 && token.starts_with("<0x")) vocab.types[id.get<std::size_t>()] = kByte;
  }
  for (const auto& added : vocab.json.at("added_tokens")) {
    const auto id = added.at("id").get<std::size_t>();
    vocab.tokens[id] = added.at("content");
    vocab.types[id] = added.at("special").get<bool>() ? kControl : kUserDefined;
  }
  for (const auto& merge : model.at("merges")) {
    vocab.merges.push_back(merge.is_string() ? merge.get<std::string>() : merge[0].get<std::string>() + " " + merge[1].get<std::string>());
  }
  return vocab;
}

GgufWriter vocabulary_writer(const Vocabulary& vocab, const std::string& model) {
  GgufWriter writer;
  writer.set("general.architecture", string_value("llama"));
  writer.set("tokenizer.ggml.model", string_value(model));
  writer.set("tokenizer.ggml.tokens", array_value(GgufType::STRING, vocab.tokens));
  writer.set("tokenizer.ggml.token_type", array_value(GgufType::I32, vocab.types));
  return writer;
}

Tokenizer load(const GgufWriter& writer, const std::string& name) {
  const std::string path = (scratch_dir("gguf_" + name) / "vocab.gguf").string();
  writer.write(path);
  return Tokenizer::from_gguf(GgufFile(path));
}

void expect_reference_encodings(const Tokenizer& tokenizer, const std::string& name) {
  int mismatches = 0;
  for (const ReferenceLine& line : read_reference(name)) {
    const auto ids = tokenizer.encode(line.text, false);
    if (ids != line.ids) ++mismatches;
    EXPECT_EQ(ids, line.ids) << "line " << line.line_number << ": " << line.text;
    // The GGUF carries no cleanup setting; compare decodings that the cleanup leaves alone.
    if (line.decoded == line.text) {
      EXPECT_EQ(tokenizer.decode(line.ids), line.text) << "line " << line.line_number;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(GgufVocabulary, Qwen3AsByteLevelBpe) {
  const Vocabulary vocab = read_vocabulary("qwen3");
  GgufWriter writer = vocabulary_writer(vocab, "gpt2");
  writer.set("tokenizer.ggml.pre", string_value("qwen2"));
  writer.set("tokenizer.ggml.merges", array_value(GgufType::STRING, vocab.merges));
  writer.set("tokenizer.ggml.eos_token_id", uint_value(151645));
  writer.set("tokenizer.ggml.padding_token_id", uint_value(151643));
  writer.set("tokenizer.ggml.add_bos_token", bool_value(false));
  const Tokenizer tokenizer = load(writer, "qwen3");

  expect_reference_encodings(tokenizer, "qwen3");
  EXPECT_EQ(tokenizer.vocab_size(), 151669u);
  EXPECT_EQ(tokenizer.bos_id(), std::nullopt);
  EXPECT_EQ(tokenizer.eos_id(), 151645);
  EXPECT_EQ(tokenizer.eog_ids(), (std::vector<TokenId>{151643, 151645}));
  EXPECT_TRUE(tokenizer.is_special(151644));
  EXPECT_FALSE(tokenizer.is_special(151657));  // <tool_call>, user-defined
  EXPECT_EQ(tokenizer.encode("hi", true), tokenizer.encode("hi", false));
}

TEST(GgufVocabulary, Llama3AsByteLevelBpe) {
  const Vocabulary vocab = read_vocabulary("llama3_1");
  GgufWriter writer = vocabulary_writer(vocab, "gpt2");
  writer.set("tokenizer.ggml.pre", string_value("llama-bpe"));
  writer.set("tokenizer.ggml.merges", array_value(GgufType::STRING, vocab.merges));
  writer.set("tokenizer.ggml.bos_token_id", uint_value(128000));
  writer.set("tokenizer.ggml.eos_token_id", uint_value(128009));
  const Tokenizer tokenizer = load(writer, "llama3_1");

  expect_reference_encodings(tokenizer, "llama3_1");
  EXPECT_EQ(tokenizer.encode("Hello", true), (std::vector<TokenId>{128000, 9906}));  // llama-bpe adds BOS by default
  EXPECT_EQ(tokenizer.decode({128000, 9906}, true), "Hello");
  EXPECT_THAT(tokenizer.eog_ids(), ::testing::Contains(128009));
}

// Mistral's merges become SentencePiece scores: a token ranks as high as the first merge that
// makes it. (Its ids would nearly do too, but "▁▁" and kin come late in the merges yet early in
// the ids.)
TEST(GgufVocabulary, MistralAsSentencePiece) {
  Vocabulary vocab = read_vocabulary("mistral");
  vocab.types[0] = kUnknown;
  std::vector<double> scores(vocab.tokens.size(), -1e9);
  const auto& token_ids = vocab.json.at("model").at("vocab");
  for (std::size_t rank = vocab.merges.size(); rank-- > 0;) {
    const std::string& merge = vocab.merges[rank];
    const std::string merged = merge.substr(0, merge.find(' ')) + merge.substr(merge.find(' ') + 1);
    scores.at(token_ids.at(merged).get<std::size_t>()) = -static_cast<double>(rank);
  }
  GgufWriter writer = vocabulary_writer(vocab, "llama");
  writer.set("tokenizer.ggml.scores", array_value(GgufType::F32, scores));
  writer.set("tokenizer.ggml.bos_token_id", uint_value(1));
  writer.set("tokenizer.ggml.eos_token_id", uint_value(2));
  writer.set("tokenizer.ggml.unknown_token_id", uint_value(0));
  const Tokenizer tokenizer = load(writer, "mistral");

  expect_reference_encodings(tokenizer, "mistral");
  EXPECT_EQ(tokenizer.encode("Hello world", true), (std::vector<TokenId>{1, 22557, 1526}));
  EXPECT_EQ(tokenizer.decode({1, 22557, 1526}, true), "Hello world");
  EXPECT_EQ(tokenizer.eog_ids(), std::vector<TokenId>{2});
}

TEST(GgufVocabulary, ErrorsNameTheFile) {
  const auto error_of = [](const GgufWriter& writer, const std::string& name) -> std::string {
    try {
      load(writer, name);
    } catch (const Error& error) {
      return error.what();
    }
    return "no error";
  };
  const Vocabulary vocab{{"a", "b", "ab"}, {kNormal, kNormal, kNormal}, {"a b"}, {}};

  GgufWriter unknown_model = vocabulary_writer(vocab, "bert");
  EXPECT_THAT(error_of(unknown_model, "bert"), ::testing::AllOf(::testing::HasSubstr("vocab.gguf"),
                                                                ::testing::HasSubstr("unsupported tokenizer.ggml.model 'bert'")));
  GgufWriter unknown_pre = vocabulary_writer(vocab, "gpt2");
  unknown_pre.set("tokenizer.ggml.merges", array_value(GgufType::STRING, vocab.merges));
  unknown_pre.set("tokenizer.ggml.pre", string_value("tekken"));
  EXPECT_THAT(error_of(unknown_pre, "pre"), ::testing::HasSubstr("unsupported tokenizer.ggml.pre 'tekken'"));
  GgufWriter bad_merge = vocabulary_writer(vocab, "gpt2");
  bad_merge.set("tokenizer.ggml.merges", array_value(GgufType::STRING, std::vector<std::string>{"a c"}));
  EXPECT_THAT(error_of(bad_merge, "merge"), ::testing::AllOf(::testing::HasSubstr("vocab.gguf"), ::testing::HasSubstr("'c'")));
  GgufWriter bad_bos = vocabulary_writer(vocab, "gpt2");
  bad_bos.set("tokenizer.ggml.merges", array_value(GgufType::STRING, vocab.merges));
  bad_bos.set("tokenizer.ggml.bos_token_id", uint_value(3));
  EXPECT_THAT(error_of(bad_bos, "bos"), ::testing::HasSubstr("tokenizer.ggml.bos_token_id is 3, but there are only 3 tokens"));
  GgufWriter no_scores = vocabulary_writer(vocab, "llama");
  EXPECT_THAT(error_of(no_scores, "scores"), ::testing::HasSubstr("tokenizer.ggml.scores"));
}

}  // namespace
}  // namespace rf::test
