// The CLIP tokenizer on OpenAI's vocabulary (models/clip): every reference prompt encodes to the
// ids transformers' CLIPTokenizer gives (tools/fixtures/make_clip_fixtures.py), with and without
// SD 1.x's 77-id framing; prompts past 75 tokens are windowed, padded and truncated as documented.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "tokenizer/clip_tokenizer.h"
#include "tokenizer/file_errors.h"
#include "tokenizer_test_support.h"
#include "util/error.h"

namespace rf::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr TokenId kBos = 49406, kEos = 49407, kCat = 2368;  // "cat</w>"
constexpr std::size_t kUnlimited = std::numeric_limits<std::size_t>::max();

std::string clip_folder() { return std::string(ROCMFORGE_SOURCE_DIR) + "/models/clip"; }

const ClipTokenizer& clip() {
  static const ClipTokenizer tokenizer = ClipTokenizer::from_folder(clip_folder());
  return tokenizer;
}

std::vector<TokenId> window_ids(const ClipWindow& window) { return {window.begin(), window.end()}; }

// The prompt "cat cat ... cat": one token per word.
std::string cats(int count) {
  std::string text;
  for (int i = 0; i < count; ++i) text += "cat ";
  return text;
}

struct ClipReference {
  int line_number;
  std::string text;
  std::vector<TokenId> ids, ids_77;
  std::vector<std::string> tokens;
};

std::vector<ClipReference> read_clip_reference() {
  const std::string path = std::string(ROCMFORGE_FIXTURES) + "/clip/reference.jsonl";
  std::ifstream in(path);
  if (!in) ADD_FAILURE() << "missing " << path << " (tools/fixtures/make_clip_fixtures.py writes it)";
  std::vector<ClipReference> lines;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const auto record = nlohmann::json::parse(line);
    lines.push_back({number, record.at("text"), record.at("ids"), record.at("ids_77"), record.at("tokens")});
  }
  return lines;
}

// The vocabulary strings of `ids`, for reading a mismatch.
std::vector<std::string> pieces(const std::vector<TokenId>& ids) {
  std::vector<std::string> out;
  for (const TokenId id : ids) out.push_back(clip().id_to_token(id));
  return out;
}

TEST(ClipTokenizer, MatchesTransformersOnEveryReferencePrompt) {
  const auto lines = read_clip_reference();
  ASSERT_GE(lines.size(), 250u);
  int mismatches = 0;
  for (const ClipReference& line : lines) {
    std::vector<TokenId> ids = clip().encode(line.text);
    ids.insert(ids.begin(), kBos);
    ids.push_back(kEos);
    if (ids != line.ids) {
      ++mismatches;
      ADD_FAILURE() << fmt::format("line {}: encode({:?})\n  expected {}\n           {}\n  got      {}\n           {}",
                                   line.line_number, line.text, line.ids, line.tokens, ids, pieces(ids));
    }
    const auto ids_77 = window_ids(clip().encode_windows(line.text, ClipPadding::EndOfText, 1).windows.front());
    if (ids_77 != line.ids_77) {
      ++mismatches;
      ADD_FAILURE() << fmt::format("line {}: 77 ids of {:?}\n  expected {}\n  got      {}", line.line_number, line.text,
                                   line.ids_77, ids_77);
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << lines.size() << " prompts";
}

TEST(ClipTokenizer, EncodesKnownIds) {
  EXPECT_EQ(clip().encode("a photo of a cat"), (std::vector<TokenId>{320, 1125, 539, 320, 2368}));
  EXPECT_EQ(clip().encode("  A   PHOTO\tof a\nCat "), clip().encode("a photo of a cat"));
  EXPECT_EQ(clip().encode(""), std::vector<TokenId>{});
  EXPECT_EQ(clip().encode("cat<|endoftext|>"), (std::vector<TokenId>{kCat, kEos}));
  EXPECT_EQ(clip().bos_id(), kBos);
  EXPECT_EQ(clip().eos_id(), kEos);
  EXPECT_EQ(clip().pad_id(ClipPadding::EndOfText), kEos);
  EXPECT_EQ(clip().pad_id(ClipPadding::Zero), 0);
  EXPECT_EQ(clip().token_to_id("!"), 0);
  EXPECT_EQ(clip().id_to_token(1125), "photo</w>");
  EXPECT_EQ(clip().id_to_token(kEos), "<|endoftext|>");
  EXPECT_THROW(clip().id_to_token(49408), Error);
}

TEST(ClipTokenizer, DecodesWordsWithSpaces) {
  EXPECT_EQ(clip().decode(clip().encode("A photo of an Astronaut, riding a horse!")), "a photo of an astronaut , riding a horse !");
  EXPECT_EQ(clip().decode({kBos, 320, 1125, kEos}), "a photo");
  EXPECT_EQ(clip().decode(clip().encode("café 猫")), "café 猫");
}

TEST(ClipTokenizer, ShortPromptFillsOneWindowWithPadding) {
  for (const ClipPadding padding : {ClipPadding::EndOfText, ClipPadding::Zero}) {
    const ClipWindows result = clip().encode_windows("a photo of a cat", padding, 1);
    ASSERT_EQ(result.windows.size(), 1u);
    const ClipWindow& window = result.windows.front();
    EXPECT_EQ(std::vector<TokenId>(window.begin(), window.begin() + 7),
              (std::vector<TokenId>{kBos, 320, 1125, 539, 320, 2368, kEos}));
    const TokenId pad = padding == ClipPadding::EndOfText ? kEos : 0;
    for (std::size_t i = 7; i < kClipContextLength; ++i) ASSERT_EQ(window[i], pad) << "position " << i;
    EXPECT_EQ(result.prompt_tokens, 5u);
    EXPECT_FALSE(result.truncated());
    EXPECT_EQ(clip().window_notice(result), "");
  }
}

TEST(ClipTokenizer, EmptyPromptIsBosEosAndPadding) {
  const ClipWindows result = clip().encode_windows("", ClipPadding::Zero, 3);
  ASSERT_EQ(result.windows.size(), 1u);
  std::vector<TokenId> expected(kClipContextLength, 0);
  expected[0] = kBos;
  expected[1] = kEos;
  EXPECT_EQ(window_ids(result.windows.front()), expected);
}

TEST(ClipTokenizer, SeventyFiveTokensFitOneWindowWithoutPadding) {
  const ClipWindows result = clip().encode_windows(cats(75), ClipPadding::Zero, kUnlimited);
  ASSERT_EQ(result.windows.size(), 1u);
  const ClipWindow& window = result.windows.front();
  EXPECT_EQ(window.front(), kBos);
  EXPECT_EQ(window.back(), kEos);
  for (std::size_t i = 1; i <= kClipWindowTokens; ++i) ASSERT_EQ(window[i], kCat) << "position " << i;
  EXPECT_EQ(clip().window_notice(result), "");
}

TEST(ClipTokenizer, LongPromptIsCutIntoWindowsOf75) {
  const std::string prompt = cats(160) + "a photo";
  const std::vector<TokenId> tokens = clip().encode(prompt);
  ASSERT_EQ(tokens.size(), 162u);
  const ClipWindows result = clip().encode_windows(prompt, ClipPadding::EndOfText, kUnlimited);
  ASSERT_EQ(result.windows.size(), 3u);
  EXPECT_EQ(result.prompt_tokens, 162u);
  EXPECT_FALSE(result.truncated());
  for (std::size_t w = 0; w < 3; ++w) {
    const ClipWindow& window = result.windows[w];
    EXPECT_EQ(window.front(), kBos);
    for (std::size_t i = 0; i < kClipWindowTokens; ++i) {
      const std::size_t token = w * kClipWindowTokens + i;
      ASSERT_EQ(window[i + 1], token < tokens.size() ? tokens[token] : kEos) << "window " << w << " position " << i + 1;
    }
    EXPECT_EQ(window.back(), kEos);
  }
  EXPECT_EQ(result.windows[2][12], 1125);  // "photo", the 162nd token
  EXPECT_EQ(clip().window_notice(result), "the prompt has 162 CLIP tokens, encoded in 3 windows of up to 75");
}

TEST(ClipTokenizer, TokensPastTheLastWindowAreDroppedWithANotice) {
  const std::string prompt = cats(80) + "riding a horse";
  const ClipWindows one = clip().encode_windows(prompt, ClipPadding::EndOfText, 1);
  ASSERT_EQ(one.windows.size(), 1u);
  EXPECT_TRUE(one.truncated());
  EXPECT_EQ(one.prompt_tokens, 83u);
  EXPECT_EQ(one.dropped.size(), 8u);
  EXPECT_EQ(clip().decode(one.dropped), "cat cat cat cat cat riding a horse");
  EXPECT_EQ(clip().window_notice(one),
            "the prompt has 83 CLIP tokens; 8 past the 1 allowed window(s) of 75 are ignored: \"cat cat cat cat cat riding a horse\"");
  // transformers' truncation=True keeps the first 75 tokens and ends with EOS.
  std::vector<TokenId> expected(kClipContextLength, kCat);
  expected.front() = kBos;
  expected.back() = kEos;
  EXPECT_EQ(window_ids(one.windows.front()), expected);

  const ClipWindows two = clip().encode_windows(prompt, ClipPadding::EndOfText, 2);
  EXPECT_EQ(two.windows.size(), 2u);
  EXPECT_FALSE(two.truncated());
}

TEST(ClipTokenizer, FramesChunksGivenByTheCaller) {
  const ClipWindows result = clip().frame_chunks({{kCat}, {}, {320, kCat}}, ClipPadding::Zero, 2);
  ASSERT_EQ(result.windows.size(), 2u);
  EXPECT_EQ(std::vector<TokenId>(result.windows[0].begin(), result.windows[0].begin() + 4),
            (std::vector<TokenId>{kBos, kCat, kEos, 0}));
  EXPECT_EQ(std::vector<TokenId>(result.windows[1].begin(), result.windows[1].begin() + 3), (std::vector<TokenId>{kBos, kEos, 0}));
  EXPECT_EQ(result.dropped, (std::vector<TokenId>{320, kCat}));
  EXPECT_EQ(result.prompt_tokens, 3u);
  EXPECT_THROW(clip().frame_chunks({std::vector<TokenId>(76, kCat)}, ClipPadding::Zero, 1), Error);
  EXPECT_THROW(clip().encode_windows("cat", ClipPadding::Zero, 0), Error);
}

// Fresh loads encode alike; their time is printed for the record (speed is a benchmark's to judge,
// not a test's on a shared machine).
TEST(ClipTokenizer, FreshLoadsEncodeAlike) {
  double fastest = 1e9;
  for (int round = 0; round < 3; ++round) {
    const double start = cpu_seconds();
    const ClipTokenizer tokenizer = ClipTokenizer::from_folder(clip_folder());
    fastest = std::min(fastest, cpu_seconds() - start);
    EXPECT_EQ(tokenizer.encode("a photo of a cat"), clip().encode("a photo of a cat"));
  }
  std::cout << fmt::format("CLIP vocab and merges: load {:.1f} ms (fastest of 3)\n", fastest * 1e3);
  RecordProperty("load_ms", std::to_string(fastest * 1e3));
}

// Copies of the real files, one of them edited, must fail naming the file (and the line).
std::string load_error(const std::string& test, const std::string& vocab, const std::string& merges) {
  const auto dir = scratch_dir(test);
  write_file(dir / "vocab.json", vocab);
  write_file(dir / "merges.txt", merges);
  try {
    ClipTokenizer::from_folder(dir.string());
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "loading did not fail";
  return {};
}

TEST(ClipTokenizerErrors, NameTheFileAndWhatIsWrong) {
  const std::string vocab = read_text_file(clip_folder() + "/vocab.json");
  const std::string merges = read_text_file(clip_folder() + "/merges.txt");
  EXPECT_THAT(load_error("bad_merge", vocab, merges + "nospace\n"),
              AllOf(HasSubstr("merges.txt"), HasSubstr("line 48896"), HasSubstr("'nospace' is not two tokens")));
  EXPECT_THAT(load_error("unknown_merge", vocab, "#version: 0.2\ni n\nzzz q\n"),
              AllOf(HasSubstr("merges.txt: line 3"), HasSubstr("'zzz'")));
  EXPECT_THAT(load_error("not_json", "{\"a\": ", merges), AllOf(HasSubstr("vocab.json"), HasSubstr("invalid JSON")));
  EXPECT_THAT(load_error("no_eos", R"({"a": 0, "a</w>": 1})", "#version: 0.2\n"),
              AllOf(HasSubstr("vocab.json"), HasSubstr("<|endoftext|>")));
  EXPECT_THAT(load_error("bad_id", R"({"a": -1})", merges), AllOf(HasSubstr("vocab.json"), HasSubstr("-1 is not a valid token id")));
  try {
    ClipTokenizer::from_folder(clip_folder() + "/missing");
    ADD_FAILURE() << "loading did not fail";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), AllOf(HasSubstr("missing/vocab.json"), HasSubstr("cannot open")));
  }
}

}  // namespace
}  // namespace rf::test
