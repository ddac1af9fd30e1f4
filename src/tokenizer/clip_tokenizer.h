#pragma once
// The CLIP tokenizer of Stable Diffusion's text encoders, read from OpenAI CLIP's vocab.json and
// merges.txt (models/clip). It encodes as transformers' CLIPTokenizer (5.x, backed by tokenizers)
// does: <|startoftext|> and <|endoftext|> written in the text are those tokens; the rest goes
// through NFC, whitespace runs to one space and lowercasing, CLIP's split pattern, byte-level
// symbols with </w> on each word's last, and BPE by merge rank.
//
// A CLIP text encoder reads 77 ids: BOS, up to 75 prompt tokens, EOS, padding. Longer prompts are
// cut into windows of 75 tokens, each framed and encoded on its own, their outputs concatenated
// (as A1111 and ComfyUI do); pipelines that do not do this use one window and drop the rest.
#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace rf {

class TokenizerImpl;

inline constexpr std::size_t kClipContextLength = 77;                   // ids a CLIP text encoder reads
inline constexpr std::size_t kClipWindowTokens = kClipContextLength - 2;  // prompt tokens between BOS and EOS
using ClipWindow = std::array<TokenId, kClipContextLength>;

// What fills a window after EOS. SD 1.x's tokenizer pads with EOS itself; SD 2.x's OpenCLIP
// encoder and SDXL's second one pad with id 0 (the token "!").
enum class ClipPadding { EndOfText, Zero };

// A prompt cut into windows.
struct ClipWindows {
  std::vector<ClipWindow> windows;  // at least one (an empty prompt gives BOS, EOS, padding)
  std::size_t prompt_tokens = 0;    // the prompt's own tokens, in and out of the windows
  std::vector<TokenId> dropped;     // the tokens past the last window allowed

  bool truncated() const { return !dropped.empty(); }
};

class ClipTokenizer {
 public:
  static ClipTokenizer from_folder(const std::string& folder);  // its vocab.json and merges.txt
  static ClipTokenizer from_files(const std::string& vocab_json_path, const std::string& merges_txt_path);
  ~ClipTokenizer();
  ClipTokenizer(ClipTokenizer&&) noexcept;
  ClipTokenizer& operator=(ClipTokenizer&&) noexcept;

  std::vector<TokenId> encode(std::string_view text) const;  // without BOS and EOS
  // The prompt in windows of 75 tokens; past `max_windows` windows its tokens are dropped.
  ClipWindows encode_windows(std::string_view text, ClipPadding padding, std::size_t max_windows) const;
  // Prompt tokens already cut into chunks of at most 75 (e.g. by emphasis runs), framed as windows.
  ClipWindows frame_chunks(const std::vector<std::vector<TokenId>>& chunks, ClipPadding padding,
                           std::size_t max_windows) const;
  // What the user should know about the windows: that the prompt took several, or that tokens
  // were dropped and which; empty for a prompt that fits one window.
  std::string window_notice(const ClipWindows& windows) const;
  std::string decode(const std::vector<TokenId>& ids) const;  // BOS and EOS left out

  TokenId bos_id() const { return bos_; }
  TokenId eos_id() const { return eos_; }
  TokenId pad_id(ClipPadding padding) const { return padding == ClipPadding::EndOfText ? eos_ : 0; }
  std::optional<TokenId> token_to_id(std::string_view token) const;
  std::string id_to_token(TokenId id) const;  // the vocabulary string, e.g. "photo</w>"

 private:
  ClipTokenizer(std::unique_ptr<TokenizerImpl> impl, TokenId bos, TokenId eos);
  ClipWindow frame(std::span<const TokenId> tokens, TokenId pad) const;

  std::unique_ptr<TokenizerImpl> impl_;
  TokenId bos_, eos_;
};

}  // namespace rf
