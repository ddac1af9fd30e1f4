#pragma once
// Tokenizers of Llama-family checkpoints: Hugging Face tokenizer.json (BPE; byte-level as in
// Llama 3 and Qwen, or SentencePiece-style with byte fallback as in Mistral and Llama 2) and the
// vocabulary embedded in GGUF files (tokenizer.ggml.model "llama" or "gpt2").
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rf {

class GgufFile;
class TokenizerImpl;

using TokenId = std::int32_t;

class Tokenizer {
 public:
  // tokenizer.json; tokenizer_config.json beside it is read when present (bos/eos, add_bos_token).
  static Tokenizer from_json_file(const std::string& tokenizer_json_path);
  static Tokenizer from_gguf(const GgufFile& gguf);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // add_special: apply the post-processor (BOS/EOS as the checkpoint configures them).
  // Special/added tokens written in the text are always recognised, as transformers does.
  std::vector<TokenId> encode(std::string_view text, bool add_special) const;
  // skip_special: drop special tokens from the output (transformers' skip_special_tokens).
  // Like transformers, applies clean_up_tokenization_spaces when tokenizer_config.json sets it.
  std::string decode(const std::vector<TokenId>& ids, bool skip_special = false) const;

  std::size_t vocab_size() const;
  std::optional<TokenId> bos_id() const;
  std::optional<TokenId> eos_id() const;
  // Every id that ends generation (eos plus end-of-turn tokens such as <|eot_id|>, <|im_end|>).
  std::vector<TokenId> eog_ids() const;
  bool is_special(TokenId id) const;
  std::optional<TokenId> token_to_id(std::string_view token) const;
  std::string id_to_token(TokenId id) const;  // the raw vocabulary string
  // The bytes each id adds to a text it continues (a leading space is kept, as mid-text; a byte
  // token is its byte, maybe part of a character); empty for special tokens. For constrained
  // decoding, which must know each token's text before it is chosen.
  std::vector<std::string> token_pieces() const;

 private:
  friend class StreamDecoder;  // decodes to bytes, before repairing cut characters
  explicit Tokenizer(std::unique_ptr<TokenizerImpl> impl);
  std::unique_ptr<TokenizerImpl> impl_;
};

// Turns a stream of ids into text pieces without ever emitting a broken UTF-8 sequence: bytes
// of an incomplete character are held back until the character completes (or flush()).
// The pieces add up to decode(ids) as the decoder produces it; transformers' optional cleanup of
// spaces before punctuation (clean_up_tokenization_spaces) is not applied while streaming.
class StreamDecoder {
 public:
  // skip_special: drop special tokens but those in `shown_special` (the markers of tool calls).
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = true, std::vector<TokenId> shown_special = {});
  std::string push(TokenId id);  // the newly completed text, possibly empty
  std::string flush();           // whatever is left (invalid bytes become U+FFFD)

 private:
  bool hidden(TokenId id) const;
  void restart_window();

  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<TokenId> shown_special_;
  std::vector<TokenId> ids_;  // the recent ids, decoded together on every push
  std::size_t emitted_bytes_ = 0;  // of the decoding of ids_
};

}  // namespace rf
