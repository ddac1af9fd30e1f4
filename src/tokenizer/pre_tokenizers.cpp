#include "tokenizer/pre_tokenizers.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "tokenizer/json_fields.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace rf {

namespace {

struct Span {
  std::size_t begin, end;
  bool is_delimiter;
};

// The text cut into matches and the stretches between them, as Hugging Face's
// NormalizedString::split does before applying the behavior.
std::vector<Span> delimit(std::string_view text, const Regex& pattern, bool invert) {
  std::vector<Span> spans;
  std::size_t previous_end = 0;
  for (const Regex::Match& match : pattern.find_all(text)) {
    if (match.begin > previous_end) spans.push_back({previous_end, match.begin, invert});
    spans.push_back({match.begin, match.end, !invert});
    previous_end = match.end;
  }
  if (previous_end < text.size()) spans.push_back({previous_end, text.size(), invert});
  return spans;
}

// The spans that survive `behavior`, delimiters merged into neighbours where it says so.
std::vector<Span> apply_behavior(const std::vector<Span>& spans, SplitBehavior behavior) {
  std::vector<Span> kept;
  bool previous_is_delimiter = false;
  switch (behavior) {
    case SplitBehavior::Removed:
      for (const Span& span : spans) {
        if (!span.is_delimiter) kept.push_back(span);
      }
      break;
    case SplitBehavior::Isolated:
      kept = spans;
      break;
    case SplitBehavior::Contiguous:
      for (const Span& span : spans) {
        if (!kept.empty() && span.is_delimiter == previous_is_delimiter) {
          kept.back().end = span.end;
        } else {
          kept.push_back(span);
        }
        previous_is_delimiter = span.is_delimiter;
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const Span& span : spans) {
        if (!kept.empty() && span.is_delimiter && !previous_is_delimiter) {
          kept.back().end = span.end;
        } else {
          kept.push_back(span);
        }
        previous_is_delimiter = span.is_delimiter;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (auto span = spans.rbegin(); span != spans.rend(); ++span) {
        if (!kept.empty() && span->is_delimiter && !previous_is_delimiter) {
          kept.back().begin = span->begin;
        } else {
          kept.push_back(*span);
        }
        previous_is_delimiter = span->is_delimiter;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  return kept;
}

SplitBehavior split_behavior_from_name(const std::string& name) {
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  fail("pre_tokenizer Split: unknown behavior '{}'", name);
}

MetaspacePreTokenizer::Prepend metaspace_prepend_from_json(const nlohmann::json& config) {
  using namespace json_fields;
  const auto scheme = optional_string(config, "prepend_scheme", "pre_tokenizer Metaspace");
  if (!scheme) {  // files written before prepend_scheme existed say add_prefix_space
    const bool add_prefix_space = bool_or(config, "add_prefix_space", true, "pre_tokenizer Metaspace");
    return add_prefix_space ? MetaspacePreTokenizer::Prepend::Always : MetaspacePreTokenizer::Prepend::Never;
  }
  if (*scheme == "always") return MetaspacePreTokenizer::Prepend::Always;
  if (*scheme == "first") return MetaspacePreTokenizer::Prepend::First;
  if (*scheme == "never") return MetaspacePreTokenizer::Prepend::Never;
  fail("pre_tokenizer Metaspace: unknown prepend_scheme '{}'", *scheme);
}

}  // namespace

void SplitPreTokenizer::pre_tokenize(std::vector<Fragment>& fragments) const {
  std::vector<Fragment> split;
  split.reserve(fragments.size());
  for (const Fragment& fragment : fragments) {
    for (const Span& span : apply_behavior(delimit(fragment.text, pattern_, invert_), behavior_)) {
      if (span.end == span.begin) continue;
      split.push_back({fragment.text.substr(span.begin, span.end - span.begin), fragment.at_text_start && span.begin == 0});
    }
  }
  fragments = std::move(split);
}

ByteLevelPreTokenizer::ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
  if (use_regex) gpt2_split_.emplace(Regex::pattern(split_patterns::kGpt2), SplitBehavior::Isolated);
}

void ByteLevelPreTokenizer::pre_tokenize(std::vector<Fragment>& fragments) const {
  if (add_prefix_space_) {
    for (Fragment& fragment : fragments) {
      if (!fragment.text.starts_with(' ')) fragment.text.insert(fragment.text.begin(), ' ');
    }
  }
  if (gpt2_split_) gpt2_split_->pre_tokenize(fragments);
  const auto& alphabet = unicode::byte_level_alphabet();
  for (Fragment& fragment : fragments) {
    std::string mapped;
    mapped.reserve(fragment.text.size() * 2);
    for (const char byte : fragment.text) mapped += alphabet[static_cast<unsigned char>(byte)];
    fragment.text = std::move(mapped);
  }
}

MetaspacePreTokenizer::MetaspacePreTokenizer(std::string replacement, Prepend prepend, bool split)
    : replacement_(std::move(replacement)), prepend_(prepend) {
  if (split) split_.emplace(Regex::literal(replacement_), SplitBehavior::MergedWithNext);
}

void MetaspacePreTokenizer::pre_tokenize(std::vector<Fragment>& fragments) const {
  for (Fragment& fragment : fragments) {
    fragment.text = space_.replace_all(fragment.text, replacement_);
    const bool prepend = prepend_ == Prepend::Always || (prepend_ == Prepend::First && fragment.at_text_start);
    if (prepend && !fragment.text.starts_with(replacement_)) fragment.text.insert(0, replacement_);
  }
  if (split_) split_->pre_tokenize(fragments);
}

void PreTokenizerSequence::pre_tokenize(std::vector<Fragment>& fragments) const {
  for (const auto& step : steps_) step->pre_tokenize(fragments);
}

std::unique_ptr<PreTokenizer> pre_tokenizer_from_json(const nlohmann::json& config) {
  using namespace json_fields;
  if (config.is_null()) return nullptr;
  const std::string& type = type_of(config, "pre_tokenizer");
  const std::string what = "pre_tokenizer " + type;
  if (type == "Split") {
    return std::make_unique<SplitPreTokenizer>(require_pattern(config, "pattern", what),
                                               split_behavior_from_name(require_string(config, "behavior", what)),
                                               bool_or(config, "invert", false, what));
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(bool_or(config, "add_prefix_space", true, what),
                                                   bool_or(config, "use_regex", true, what));
  }
  if (type == "Metaspace") {
    const std::string replacement = optional_string(config, "replacement", what).value_or("\u2581");
    return std::make_unique<MetaspacePreTokenizer>(replacement, metaspace_prepend_from_json(config),
                                                   bool_or(config, "split", true, what));
  }
  if (type == "Digits") {
    const bool individual = bool_or(config, "individual_digits", false, what);
    return std::make_unique<SplitPreTokenizer>(Regex::pattern(R"(\p{N})"),
                                               individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous);
  }
  if (type == "Punctuation") {  // Rust's char::is_ascii_punctuation or a Unicode punctuation category
    const auto behavior = optional_string(config, "behavior", what).value_or("Isolated");
    return std::make_unique<SplitPreTokenizer>(Regex::pattern(R"([\p{P}\x{21}-\x{2F}\x{3A}-\x{40}\x{5B}-\x{60}\x{7B}-\x{7E}])"),
                                               split_behavior_from_name(behavior));
  }
  if (type == "Whitespace") {  // words and runs of other non-space characters
    return std::make_unique<SplitPreTokenizer>(Regex::pattern(R"(\w+|[^\w\s]+)"), SplitBehavior::Removed, true);
  }
  if (type == "CharDelimiterSplit") {
    return std::make_unique<SplitPreTokenizer>(Regex::literal(require_string(config, "delimiter", what)), SplitBehavior::Removed);
  }
  if (type == "WhitespaceSplit") return std::make_unique<SplitPreTokenizer>(Regex::pattern(R"(\s+)"), SplitBehavior::Removed);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const auto& step : require_array(config, "pretokenizers", what)) {
      if (auto pre_tokenizer = pre_tokenizer_from_json(step)) steps.push_back(std::move(pre_tokenizer));
    }
    return std::make_unique<PreTokenizerSequence>(std::move(steps));
  }
  fail("unsupported pre_tokenizer type '{}'", type);
}

}  // namespace rf
