#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace rf {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string StreamDecoder::push(TokenId id) {
  ids_.push_back(id);
  const std::string text = tokenizer_.impl_->decode_bytes(ids_, skip_special_);
  const std::size_t complete = unicode::truncated_tail_start(text);
  if (complete <= emitted_bytes_) return {};
  std::string piece = unicode::to_valid_utf8(std::string_view(text).substr(emitted_bytes_, complete - emitted_bytes_));
  emitted_bytes_ = complete;
  if (complete == text.size()) restart_window();
  return piece;
}

std::string StreamDecoder::flush() {
  const std::string text = tokenizer_.impl_->decode_bytes(ids_, skip_special_);
  if (text.size() <= emitted_bytes_) return {};
  std::string rest = unicode::to_valid_utf8(std::string_view(text).substr(emitted_bytes_));
  emitted_bytes_ = text.size();
  restart_window();
  return rest;
}

// Once everything is emitted, only the last visible token needs keeping: decoders that drop the
// leading space of the first token (Metaspace, Strip) must go on seeing that token first, so
// that later tokens keep theirs. Decoding stays proportional to the window, not the stream.
void StreamDecoder::restart_window() {
  auto last_visible = ids_.end();
  for (auto it = ids_.begin(); it != ids_.end(); ++it) {
    if (!skip_special_ || !tokenizer_.is_special(*it)) last_visible = it;
  }
  if (last_visible == ids_.end()) {  // nothing visible yet: the next visible token is the first
    ids_.clear();
    emitted_bytes_ = 0;
    return;
  }
  ids_.erase(ids_.begin(), last_visible);
  emitted_bytes_ = tokenizer_.impl_->decode_bytes(ids_, skip_special_).size();
}

}  // namespace rf
