#include <algorithm>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace rf {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special, std::vector<TokenId> shown_special)
    : tokenizer_(tokenizer), skip_special_(skip_special), shown_special_(std::move(shown_special)) {}

// A skipped token adds nothing to the decoding of the ones around it, so it is never kept: every
// id in the window is visible.
bool StreamDecoder::hidden(TokenId id) const {
  return skip_special_ && tokenizer_.is_special(id) &&
         std::find(shown_special_.begin(), shown_special_.end(), id) == shown_special_.end();
}

std::string StreamDecoder::push(TokenId id) {
  if (hidden(id)) return {};
  ids_.push_back(id);
  const std::string text = tokenizer_.impl_->decode_bytes(ids_, false);
  const std::size_t complete = unicode::truncated_tail_start(text);
  if (complete <= emitted_bytes_) return {};
  std::string piece = unicode::to_valid_utf8(std::string_view(text).substr(emitted_bytes_, complete - emitted_bytes_));
  emitted_bytes_ = complete;
  if (complete == text.size()) restart_window();
  return piece;
}

std::string StreamDecoder::flush() {
  const std::string text = tokenizer_.impl_->decode_bytes(ids_, false);
  if (text.size() <= emitted_bytes_) return {};
  std::string rest = unicode::to_valid_utf8(std::string_view(text).substr(emitted_bytes_));
  emitted_bytes_ = text.size();
  restart_window();
  return rest;
}

// Once everything is emitted, only the last token needs keeping: decoders that drop the leading
// space of the first token (Metaspace, Strip) must go on seeing that token first, so that later
// tokens keep theirs. Decoding stays proportional to the window, not the stream.
void StreamDecoder::restart_window() {
  if (ids_.size() <= 1) return;
  ids_.erase(ids_.begin(), ids_.end() - 1);
  emitted_bytes_ = tokenizer_.impl_->decode_bytes(ids_, false).size();
}

}  // namespace rf
