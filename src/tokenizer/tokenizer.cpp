#include "tokenizer/tokenizer.h"

#include "tokenizer/tokenizer_impl.h"
#include "util/error.h"

namespace rf {

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special) const { return impl_->encode(text, add_special); }

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool skip_special) const {
  return impl_->decode(ids, skip_special);
}

std::size_t Tokenizer::vocab_size() const { return impl_->vocab_size(); }
std::optional<TokenId> Tokenizer::bos_id() const { return impl_->bos_id(); }
std::optional<TokenId> Tokenizer::eos_id() const { return impl_->eos_id(); }
std::vector<TokenId> Tokenizer::eog_ids() const { return impl_->eog_ids(); }
bool Tokenizer::is_special(TokenId id) const { return impl_->is_special(id); }
std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const { return impl_->token_to_id(token); }

std::vector<std::string> Tokenizer::token_pieces() const {
  // Decoded after an ordinary token, so that decoders which treat the first token differently
  // (SentencePiece's dropped leading space) show each token as it reads mid-text.
  const auto anchor_ids = encode("a", false);
  const TokenId anchor = anchor_ids.empty() ? 0 : anchor_ids.front();
  const std::string prefix = impl_->decode_bytes({anchor}, false);
  std::vector<std::string> pieces(impl_->vocab_size());
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const auto id = static_cast<TokenId>(i);
    if (is_special(id) || impl_->id_to_token(id) == nullptr) continue;
    std::string text = impl_->decode_bytes({anchor, id}, false);
    pieces[i] = text.starts_with(prefix) ? text.substr(prefix.size()) : impl_->decode_bytes({id}, false);
  }
  return pieces;
}

std::string Tokenizer::id_to_token(TokenId id) const {
  if (const std::string* token = impl_->id_to_token(id)) return *token;
  fail("token id {} is not in the vocabulary ({} ids)", id, impl_->vocab_size());
}

}  // namespace rf
