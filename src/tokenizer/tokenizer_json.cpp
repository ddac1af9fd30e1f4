#include "tokenizer/tokenizer_json.h"

#include "tokenizer/bpe.h"
#include "tokenizer/json_fields.h"
#include "util/error.h"
#include "util/text_file.h"

namespace rf {

namespace {

using nlohmann::json;
using Sax = nlohmann::json_sax<json>;

// model.merges: "left right" strings or, since tokenizers 0.20, ["left", "right"] pairs.
class MergesReader final : public Sax {
 public:
  std::vector<std::pair<std::string, std::string>> merges;

  bool start_array(std::size_t) override {
    if (++depth_ > 2) not_a_merge("an array of arrays");
    pair_.clear();
    return true;
  }
  bool end_array() override {
    if (depth_-- == 2) {
      if (pair_.size() != 2) not_a_merge(json(pair_).dump());
      merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
    }
    return true;
  }
  bool string(string_t& value) override {
    if (depth_ == 1) {
      const auto [left, right] = BpeModel::split_merge(value, "model: merge");
      merges.emplace_back(left, right);
    } else {
      pair_.push_back(std::move(value));
      if (pair_.size() > 2) not_a_merge(json(pair_).dump());
    }
    return true;
  }
  bool null() override { not_a_merge("null"); }
  bool boolean(bool value) override { not_a_merge(value ? "true" : "false"); }
  bool number_integer(number_integer_t value) override { not_a_merge(std::to_string(value)); }
  bool number_unsigned(number_unsigned_t value) override { not_a_merge(std::to_string(value)); }
  bool number_float(number_float_t, const string_t& text) override { not_a_merge(text); }
  bool binary(binary_t&) override { not_a_merge("binary data"); }
  bool start_object(std::size_t) override { not_a_merge("an object"); }
  bool end_object() override { not_a_merge("an object"); }
  bool key(string_t&) override { not_a_merge("an object"); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) override {
    fail("invalid JSON: {}", error.what());
  }

 private:
  [[noreturn]] static void not_a_merge(std::string_view merge) {
    fail("model: merge {} is neither \"left right\" nor [\"left\", \"right\"]", merge);
  }

  std::vector<std::string> pair_;
  int depth_ = 0;
};

// Builds the tree, handing model.vocab and model.merges (every event from the value's start to its
// end) to their readers instead.
class TokenizerJsonReader final : public Sax {
 public:
  explicit TokenizerJsonReader(std::string_view path) : path_(path) {}
  TokenizerJson result;

  bool null() override { return diverted_ ? diverted_->null() : put(nullptr); }
  bool boolean(bool value) override { return diverted_ ? diverted_->boolean(value) : put(value); }
  bool number_integer(number_integer_t value) override { return diverted_ ? diverted_->number_integer(value) : put(value); }
  bool number_unsigned(number_unsigned_t value) override { return diverted_ ? diverted_->number_unsigned(value) : put(value); }
  bool number_float(number_float_t value, const string_t& text) override {
    return diverted_ ? diverted_->number_float(value, text) : put(value);
  }
  bool string(string_t& value) override { return diverted_ ? diverted_->string(value) : put(std::move(value)); }
  bool binary(binary_t& value) override { return diverted_ ? diverted_->binary(value) : put(std::move(value)); }
  bool key(string_t& key) override {
    if (diverted_) return diverted_->key(key);
    key_ = std::move(key);
    return true;
  }
  bool start_object(std::size_t size) override {
    if (!diverted_ && in_model() && key_ == "vocab") diverted_ = &vocab_;
    if (diverted_) return ++diverted_depth_, diverted_->start_object(size);
    const bool model = open_.size() == 1 && open_.back()->is_object() && key_ == "model";
    open(json::object());
    if (model) model_ = open_.back();
    return true;
  }
  bool start_array(std::size_t size) override {
    if (!diverted_ && in_model() && key_ == "merges") diverted_ = &merges_;
    if (diverted_) return ++diverted_depth_, diverted_->start_array(size);
    return open(json::array());
  }
  bool end_object() override {
    if (!diverted_) return close();
    diverted_->end_object();
    return leave();
  }
  bool end_array() override {
    if (!diverted_) return close();
    diverted_->end_array();
    return leave();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) override {
    fail("{}: the file is not valid JSON: {}", path_, error.what());
  }

 private:
  bool in_model() const { return !open_.empty() && open_.back() == model_; }

  // Puts `value` where the tree is at: the root, the open array's next element or the open object's
  // field (the last of equal keys wins, as in nlohmann's own tree).
  json* place(json value) {
    if (open_.empty()) return &(result.root = std::move(value));
    json& parent = *open_.back();
    if (parent.is_array()) return &parent.emplace_back(std::move(value));
    return &(parent[key_] = std::move(value));
  }
  bool put(json value) {
    place(std::move(value));
    return true;
  }
  bool open(json container) {
    open_.push_back(place(std::move(container)));
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  // After a diverted container's end event: at the diverted value's end, its reader's table is the result's.
  bool leave() {
    if (--diverted_depth_ > 0) return true;
    if (diverted_ == &vocab_) result.vocab = std::move(vocab_.tokens);
    if (diverted_ == &merges_) result.merges = std::move(merges_.merges);
    diverted_ = nullptr;
    return true;
  }

  std::string_view path_;
  std::vector<json*> open_;  // the open containers, outermost first
  std::string key_;          // the open object's current field
  const json* model_ = nullptr;
  json_fields::VocabReader vocab_{"model: 'vocab'"};
  MergesReader merges_;
  Sax* diverted_ = nullptr;
  int diverted_depth_ = 0;
};

}  // namespace

TokenizerJson read_tokenizer_json(const std::string& path) {
  const std::string text = read_text_file(path);
  TokenizerJsonReader reader(path);
  try {
    json::sax_parse(text, &reader);
  } catch (const json::exception& error) {
    fail("{}: the file is not valid JSON: {}", path, error.what());
  }
  return std::move(reader.result);
}

}  // namespace rf
