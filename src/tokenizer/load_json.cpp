// Tokenizer::from_json_file: Hugging Face tokenizer.json, plus tokenizer_config.json beside it.
#include <nlohmann/json.hpp>

#include <filesystem>

#include "tokenizer/file_errors.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/tokenizer_json.h"
#include "util/error.h"

namespace rf {

namespace {

using nlohmann::json;
using namespace json_fields;

// `config` is the tree's "model"; `file` holds its vocab and merges where they came apart from it.
BpeModel bpe_model_from_json(const json& config, TokenizerJson& file) {
  const char* what = "model";
  // Files from before the "type" field existed hold BPE models.
  const std::string type = optional_string(config, "type", what).value_or("BPE");
  if (type != "BPE") fail("unsupported model type '{}' (only BPE is implemented)", type);

  std::vector<std::optional<std::string>> vocab =
      file.vocab ? std::move(*file.vocab) : require_vocab(require(config, "vocab", what), "model: 'vocab'");

  BpeOptions options;
  options.unk_token = optional_string(config, "unk_token", what);
  options.fuse_unk = bool_or(config, "fuse_unk", false, what);
  options.byte_fallback = bool_or(config, "byte_fallback", false, what);
  options.ignore_merges = bool_or(config, "ignore_merges", false, what);
  options.continuing_subword_prefix = optional_string(config, "continuing_subword_prefix", what).value_or("");
  options.end_of_word_suffix = optional_string(config, "end_of_word_suffix", what).value_or("");
  BpeModel model(std::move(vocab), std::move(options));

  if (!file.merges) require_array(config, "merges", what);  // absent or not an array: this throws
  model.reserve_merges(file.merges.value().size());
  std::uint32_t rank = 0;
  for (const auto& [left, right] : *file.merges) model.add_merge(left, right, rank++);
  return model;
}

std::vector<AddedToken> added_tokens_from_json(const json& tokens) {
  if (tokens.is_null()) return {};
  if (!tokens.is_array()) fail("added_tokens must be an array");
  std::vector<AddedToken> added;
  for (const json& token : tokens) {
    const char* what = "added_tokens entry";
    AddedToken entry;
    entry.id = require_token_id(require(token, "id", what), what);
    entry.content = require_string(token, "content", what);
    entry.special = bool_or(token, "special", false, what);
    entry.lstrip = bool_or(token, "lstrip", false, what);
    entry.rstrip = bool_or(token, "rstrip", false, what);
    entry.single_word = bool_or(token, "single_word", false, what);
    entry.normalized = bool_or(token, "normalized", !entry.special, what);
    added.push_back(std::move(entry));
  }
  return added;
}

// Sets `id` from bos_token or the like when the config names one: a string or {"content": string}.
void read_special_token(const TokenizerParts& parts, const json& config, const char* key, std::optional<TokenId>& id) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return;
  const std::string& name = it->is_string() ? it->get_ref<const std::string&>() : require_string(*it, "content", key);
  id = parts.token_to_id(name);
  if (!id) fail("{} '{}' is not in the vocabulary of tokenizer.json", key, name);
}

// tokenizer_config.json: which tokens are BOS/EOS, whether encoding adds them (which, as in
// transformers' Llama tokenizers, overrides the post-processor), and the decoding cleanup.
void apply_tokenizer_config(const json& config, TokenizerParts& parts) {
  const char* what = "tokenizer_config.json";
  require_object(config, what);
  read_special_token(parts, config, "bos_token", parts.bos);
  read_special_token(parts, config, "eos_token", parts.eos);
  const bool has_add_bos = config.contains("add_bos_token"), has_add_eos = config.contains("add_eos_token");
  if (has_add_bos || has_add_eos) {
    const bool add_bos = bool_or(config, "add_bos_token", false, what), add_eos = bool_or(config, "add_eos_token", false, what);
    if (add_bos && !parts.bos) fail("add_bos_token is true but there is no bos_token");
    if (add_eos && !parts.eos) fail("add_eos_token is true but there is no eos_token");
    parts.post_processor = {};
    if (add_bos) parts.post_processor.prefix.push_back(*parts.bos);
    if (add_eos) parts.post_processor.suffix.push_back(*parts.eos);
  }
  parts.clean_up_tokenization_spaces = bool_or(config, "clean_up_tokenization_spaces", false, what);
}

TokenizerParts parts_from_tokenizer_json(TokenizerJson& file) {
  const json& root = require_object(file.root, "tokenizer.json");
  TokenizerParts parts(bpe_model_from_json(require(root, "model", "tokenizer.json"), file));
  const auto stage = [&root](const char* key) -> const json& {
    static const json null;
    const auto it = root.find(key);
    return it == root.end() ? null : *it;
  };
  parts.normalizer = normalizer_from_json(stage("normalizer"));
  parts.pre_tokenizer = pre_tokenizer_from_json(stage("pre_tokenizer"));
  parts.decoder = decoder_from_json(stage("decoder"));
  parts.post_processor = post_processor_from_json(stage("post_processor"));
  parts.added_tokens = added_tokens_from_json(stage("added_tokens"));
  // Without tokenizer_config.json, the post-processor's tokens are the best guess at BOS/EOS.
  if (!parts.post_processor.prefix.empty()) parts.bos = parts.post_processor.prefix.front();
  if (!parts.post_processor.suffix.empty()) parts.eos = parts.post_processor.suffix.back();
  return parts;
}

}  // namespace

Tokenizer Tokenizer::from_json_file(const std::string& tokenizer_json_path) {
  TokenizerParts parts = with_path_in_errors(tokenizer_json_path, [&] {
    TokenizerJson file = read_tokenizer_json(tokenizer_json_path);
    return parts_from_tokenizer_json(file);
  });
  const std::string config_path = (std::filesystem::path(tokenizer_json_path).parent_path() / "tokenizer_config.json").string();
  if (std::error_code error; std::filesystem::exists(config_path, error)) {
    const json config = read_json_file(config_path);
    with_path_in_errors(config_path, [&] { apply_tokenizer_config(config, parts); });
  }
  return Tokenizer(with_path_in_errors(tokenizer_json_path, [&] { return std::make_unique<TokenizerImpl>(std::move(parts)); }));
}

}  // namespace rf
