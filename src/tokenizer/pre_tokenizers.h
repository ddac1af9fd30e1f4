#pragma once
// Pre-tokenizers (tokenizer.json "pre_tokenizer"): cut normalized text into fragments that the
// model tokenizes independently, and map their characters into the model's alphabet.
#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace rf {

struct Fragment {
  std::string text;
  bool at_text_start;  // begins where the encoded text begins (Metaspace's "first" scheme asks)
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(std::vector<Fragment>& fragments) const = 0;
};

// JSON null gives no pre-tokenizer (nullptr).
std::unique_ptr<PreTokenizer> pre_tokenizer_from_json(const nlohmann::json& config);

// Split patterns of well-known tokenizers, which GGUF files name instead of spelling out.
namespace split_patterns {
inline constexpr std::string_view kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}  // namespace split_patterns

// What becomes of the matched delimiters.
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

class SplitPreTokenizer final : public PreTokenizer {
 public:
  // invert: the pattern matches the fragments rather than the delimiters.
  SplitPreTokenizer(Regex pattern, SplitBehavior behavior, bool invert = false)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<Fragment>& fragments) const override;

 private:
  Regex pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// Maps every byte to GPT-2's byte-level alphabet, after optionally splitting with GPT-2's pattern.
class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex);
  void pre_tokenize(std::vector<Fragment>& fragments) const override;

 private:
  bool add_prefix_space_;
  std::optional<SplitPreTokenizer> gpt2_split_;
};

// SentencePiece's whitespace handling: spaces become `replacement` (U+2581 "▁"), which may also
// be prepended, and fragments may be split before each replacement.
class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  enum class Prepend { Always, First, Never };
  MetaspacePreTokenizer(std::string replacement, Prepend prepend, bool split);
  void pre_tokenize(std::vector<Fragment>& fragments) const override;

 private:
  std::string replacement_;
  Regex space_ = Regex::literal(" ");
  Prepend prepend_;
  std::optional<SplitPreTokenizer> split_;
};

class PreTokenizerSequence final : public PreTokenizer {
 public:
  explicit PreTokenizerSequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<Fragment>& fragments) const override;

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace rf
