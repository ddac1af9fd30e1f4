#pragma once
// Reading fields of tokenizer.json with errors that say which object and field are wrong.
// `what` names the object being read, e.g. "normalizer Replace".
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"

namespace rf::json_fields {

using nlohmann::json;

const json& require_object(const json& value, std::string_view what);
const json& require(const json& object, const char* key, std::string_view what);
const json& require_array(const json& object, const char* key, std::string_view what);
const std::string& require_string(const json& object, const char* key, std::string_view what);
std::optional<std::string> optional_string(const json& object, const char* key, std::string_view what);  // absent or null
bool bool_or(const json& object, const char* key, bool fallback, std::string_view what);
std::int64_t int_or(const json& object, const char* key, std::int64_t fallback, std::string_view what);
TokenId require_token_id(const json& value, std::string_view what);
// A vocab object mapping tokens to ids: the token of every id (nullopt for ids it skips).
std::vector<std::optional<std::string>> require_vocab(const json& vocab, std::string_view what);
// The same from the text of a vocab.json, read without building a JSON tree (faster by half).
std::vector<std::optional<std::string>> parse_vocab(std::string_view text, std::string_view what);

// The SAX events of a vocab object into the token of every id; anything but {"token": id, ...} is an
// error naming `what`. parse_vocab runs it over a vocab.json, read_tokenizer_json over model.vocab.
class VocabReader final : public nlohmann::json_sax<json> {
 public:
  explicit VocabReader(std::string_view what) : what_(what) {}
  std::vector<std::optional<std::string>> tokens;

  bool start_object(std::size_t) override;
  bool end_object() override;
  bool key(string_t& key) override;
  bool number_integer(number_integer_t id) override;
  bool number_unsigned(number_unsigned_t id) override;
  bool null() override;
  bool boolean(bool value) override;
  bool number_float(number_float_t value, const string_t&) override;
  bool string(string_t& value) override;
  bool binary(binary_t&) override;
  bool start_array(std::size_t) override;
  bool end_array() override;
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) override;

 private:
  [[noreturn]] void not_an_id(std::string_view value) const;

  std::string_view what_;
  std::string key_;
  int depth_ = 0;
};
// A pattern object: {"String": literal} or {"Regex": expression}.
Regex require_pattern(const json& object, const char* key, std::string_view what);
// The "type" field that selects an implementation.
const std::string& type_of(const json& object, std::string_view what);

}  // namespace rf::json_fields
