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

std::string Tokenizer::id_to_token(TokenId id) const {
  if (const std::string* token = impl_->id_to_token(id)) return *token;
  fail("token id {} is not in the vocabulary ({} ids)", id, impl_->vocab_size());
}

}  // namespace rf
