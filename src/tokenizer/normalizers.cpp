#include "tokenizer/normalizers.h"

#include <nlohmann/json.hpp>

#include "tokenizer/json_fields.h"
#include "util/error.h"

namespace rf {

void UnicodeNormalizer::normalize(std::string& text) const { text = unicode::normalize(text, form_); }

void LowercaseNormalizer::normalize(std::string& text) const { text = unicode::to_lower(text); }

void ReplaceNormalizer::normalize(std::string& text) const { text = pattern_.replace_all(text, content_); }

void PrependNormalizer::normalize(std::string& text) const {
  if (!text.empty()) text.insert(0, prefix_);
}

void StripNormalizer::normalize(std::string& text) const {
  std::size_t begin = 0, end = text.size(), length = 0;
  if (left_) {
    while (begin < end && unicode::is_whitespace(unicode::decode_utf8(text, begin, length))) begin += length;
  }
  if (right_) {
    while (end > begin && unicode::is_whitespace(unicode::decode_utf8_before(text, end, length))) end -= length;
  }
  text = text.substr(begin, end - begin);
}

void NormalizerSequence::normalize(std::string& text) const {
  for (const auto& step : steps_) step->normalize(text);
}

std::unique_ptr<Normalizer> normalizer_from_json(const nlohmann::json& config) {
  using namespace json_fields;
  if (config.is_null()) return nullptr;
  const std::string& type = type_of(config, "normalizer");
  const std::string what = "normalizer " + type;
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFKD);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(require_pattern(config, "pattern", what), require_string(config, "content", what));
  }
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(require_string(config, "prepend", what));
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(bool_or(config, "strip_left", true, what), bool_or(config, "strip_right", true, what));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const auto& step : require_array(config, "normalizers", what)) {
      if (auto normalizer = normalizer_from_json(step)) steps.push_back(std::move(normalizer));
    }
    return std::make_unique<NormalizerSequence>(std::move(steps));
  }
  fail("unsupported normalizer type '{}'", type);
}

}  // namespace rf
