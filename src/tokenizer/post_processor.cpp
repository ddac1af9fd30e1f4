#include "tokenizer/post_processor.h"

#include <nlohmann/json.hpp>

#include "tokenizer/json_fields.h"
#include "util/error.h"

namespace rf {

namespace {

std::vector<TokenId> ids_of(const nlohmann::json& ids, std::string_view what) {
  std::vector<TokenId> result;
  for (const auto& id : ids) {
    if (!id.is_number_integer()) fail("{}: token ids must be integers, not {}", what, id.type_name());
    result.push_back(id.get<TokenId>());
  }
  return result;
}

// The "single" template: special tokens around the sequence "A".
SpecialTokenTemplate template_processing(const nlohmann::json& config) {
  using namespace json_fields;
  const char* what = "post_processor TemplateProcessing";
  const nlohmann::json& special_tokens = require(config, "special_tokens", what);
  SpecialTokenTemplate result;
  bool seen_sequence = false;
  for (const auto& piece : require_array(config, "single", what)) {
    if (piece.is_object() && piece.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    if (!piece.is_object() || !piece.contains("SpecialToken")) fail("{}: a piece of 'single' is neither a SpecialToken nor a Sequence", what);
    const std::string& name = require_string(piece["SpecialToken"], "id", what);
    if (!special_tokens.contains(name)) fail("{}: special token '{}' is not in special_tokens", what, name);
    const std::vector<TokenId> ids = ids_of(require_array(special_tokens[name], "ids", what), what);
    auto& side = seen_sequence ? result.suffix : result.prefix;
    side.insert(side.end(), ids.begin(), ids.end());
  }
  if (!seen_sequence) fail("{}: 'single' lacks the sequence", what);
  return result;
}

// {"cls": ["<s>", 0], "sep": ["</s>", 2]}: cls before, sep after.
SpecialTokenTemplate cls_sep_processing(const nlohmann::json& config, std::string_view what) {
  const auto id_of = [&](const char* key) {
    const nlohmann::json& pair = json_fields::require(config, key, what);
    if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number_integer()) fail("{}: '{}' must be [token, id]", what, key);
    return pair[1].get<TokenId>();
  };
  return {{id_of("cls")}, {id_of("sep")}};
}

}  // namespace

void SpecialTokenTemplate::apply(std::vector<TokenId>& ids) const {
  ids.insert(ids.begin(), prefix.begin(), prefix.end());
  ids.insert(ids.end(), suffix.begin(), suffix.end());
}

SpecialTokenTemplate post_processor_from_json(const nlohmann::json& config) {
  using namespace json_fields;
  if (config.is_null()) return {};
  const std::string& type = type_of(config, "post_processor");
  if (type == "TemplateProcessing") return template_processing(config);
  if (type == "RobertaProcessing" || type == "BertProcessing") return cls_sep_processing(config, "post_processor " + type);
  if (type == "ByteLevel") return {};  // it only adjusts offsets
  if (type == "Sequence") {
    // Each processor wraps what the ones before it produced.
    SpecialTokenTemplate combined;
    for (const auto& step : require_array(config, "processors", "post_processor Sequence")) {
      SpecialTokenTemplate outer = post_processor_from_json(step);
      combined.prefix.insert(combined.prefix.begin(), outer.prefix.begin(), outer.prefix.end());
      combined.suffix.insert(combined.suffix.end(), outer.suffix.begin(), outer.suffix.end());
    }
    return combined;
  }
  fail("unsupported post_processor type '{}'", type);
}

}  // namespace rf
