#pragma once
// Decoders (tokenizer.json "decoder"): turn the tokens of a sequence back into text. Like Hugging
// Face's decode_chain, each rewrites the list of token strings and the results are concatenated.
// They work on bytes and may leave an incomplete UTF-8 sequence at the end (which the streaming
// decoder needs to see); the tokenizer repairs ill-formed UTF-8 once the text is complete.
#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/regex.h"

namespace rf {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// JSON null gives no decoder (nullptr).
std::unique_ptr<Decoder> decoder_from_json(const nlohmann::json& config);

// GPT-2's byte-level alphabet back to bytes; a token with a character outside it stays as it is.
class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override;
};

// Runs of <0xNN> tokens become the bytes they stand for.
class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override;
};

// `replacement` back to spaces; where the pre-tokenizer prepends it, the first token's is dropped.
class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string_view replacement, bool drop_from_first_token)
      : replacement_(Regex::literal(replacement)), drop_from_first_token_(drop_from_first_token) {}
  void decode_chain(std::vector<std::string>& tokens) const override;

 private:
  Regex replacement_;
  bool drop_from_first_token_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override;

 private:
  Regex pattern_;
  std::string content_;
};

// Removes up to `start` leading and `stop` trailing copies of `content` from every token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, std::size_t start, std::size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override;

 private:
  std::string content_;
  std::size_t start_, stop_;
};

// Joins all tokens into one.
class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override;
};

// end_of_word_suffix back to spaces (none after the last token).
class BpeSuffixDecoder final : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(Regex::literal(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override;

 private:
  Regex suffix_;
};

class DecoderSequence final : public Decoder {
 public:
  explicit DecoderSequence(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override;

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace rf
