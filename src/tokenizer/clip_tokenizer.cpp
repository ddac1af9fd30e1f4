#include "tokenizer/clip_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "tokenizer/file_errors.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/tokenizer_impl.h"
#include "util/error.h"

namespace rf {

namespace {

constexpr std::string_view kStartOfText = "<|startoftext|>";
constexpr std::string_view kEndOfText = "<|endoftext|>";
constexpr std::string_view kEndOfWord = "</w>";

// CLIP's words: letter runs, single digits, runs of other non-space characters, contractions.
constexpr std::string_view kClipSplit =
    R"(<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+)";

BpeModel read_bpe_model(const std::string& vocab_path, const std::string& merges_path) {
  BpeOptions options;
  options.unk_token = std::string(kEndOfText);
  options.end_of_word_suffix = std::string(kEndOfWord);
  BpeModel model = with_path_in_errors(vocab_path, [&] {
    return BpeModel(json_fields::parse_vocab(read_text_file(vocab_path), "vocab.json"), std::move(options));
  });

  with_path_in_errors(merges_path, [&] {
    const std::string text = read_text_file(merges_path);
    model.reserve_merges(static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')));
    std::uint32_t rank = 0;
    std::size_t line_number = 0;
    for (std::size_t begin = 0; begin < text.size();) {
      const std::size_t end = std::min(text.find('\n', begin), text.size());
      std::string_view line = std::string_view(text).substr(begin, end - begin);
      begin = end + 1;
      ++line_number;
      if (line.ends_with('\r')) line.remove_suffix(1);
      // The first line is "#version: 0.2"; a merge never starts with "#version".
      if (line.empty() || line.starts_with("#version")) continue;
      try {
        model.add_merge(line, rank++);
      } catch (const Error& error) {
        fail("line {}: {}", line_number, error.what());
      }
    }
  });
  return model;
}

// The stages of transformers' CLIPTokenizer, as its tokenizers backend assembles them.
TokenizerParts clip_parts(BpeModel model, TokenId bos, TokenId eos) {
  TokenizerParts parts(std::move(model));
  std::vector<std::unique_ptr<Normalizer>> normalizers;
  normalizers.push_back(std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFC));
  normalizers.push_back(std::make_unique<ReplaceNormalizer>(Regex::pattern(R"(\s+)"), " "));
  normalizers.push_back(std::make_unique<LowercaseNormalizer>());
  parts.normalizer = std::make_unique<NormalizerSequence>(std::move(normalizers));

  // Removed, inverted: the pattern's matches are the words, and whatever lies between (spaces) goes.
  std::vector<std::unique_ptr<PreTokenizer>> pre_tokenizers;
  pre_tokenizers.push_back(std::make_unique<SplitPreTokenizer>(Regex::pattern(kClipSplit), SplitBehavior::Removed, true));
  pre_tokenizers.push_back(std::make_unique<ByteLevelPreTokenizer>(false, true));
  parts.pre_tokenizer = std::make_unique<PreTokenizerSequence>(std::move(pre_tokenizers));

  // Word ends become spaces, and the last word's is dropped, as CLIPTokenizer.decode does.
  std::vector<std::unique_ptr<Decoder>> decoders;
  decoders.push_back(std::make_unique<ByteLevelDecoder>());
  decoders.push_back(std::make_unique<ReplaceDecoder>(Regex::literal(kEndOfWord), " "));
  decoders.push_back(std::make_unique<StripDecoder>(" ", 0, 1));
  parts.decoder = std::make_unique<DecoderSequence>(std::move(decoders));

  parts.added_tokens = {AddedToken{.id = bos, .content = std::string(kStartOfText), .special = true},
                        AddedToken{.id = eos, .content = std::string(kEndOfText), .special = true}};
  parts.bos = bos;
  parts.eos = eos;
  return parts;
}

}  // namespace

ClipTokenizer ClipTokenizer::from_folder(const std::string& folder) {
  const std::filesystem::path dir(folder);
  return from_files((dir / "vocab.json").string(), (dir / "merges.txt").string());
}

ClipTokenizer ClipTokenizer::from_files(const std::string& vocab_json_path, const std::string& merges_txt_path) {
  BpeModel model = read_bpe_model(vocab_json_path, merges_txt_path);
  const auto special_id = [&](std::string_view token) {
    const auto id = model.token_to_id(token);
    if (!id) fail("{}: lacks the CLIP token {}", vocab_json_path, token);
    return *id;
  };
  const TokenId bos = special_id(kStartOfText), eos = special_id(kEndOfText);
  return ClipTokenizer(std::make_unique<TokenizerImpl>(clip_parts(std::move(model), bos, eos)), bos, eos);
}

ClipTokenizer::ClipTokenizer(std::unique_ptr<TokenizerImpl> impl, TokenId bos, TokenId eos)
    : impl_(std::move(impl)), bos_(bos), eos_(eos) {}
ClipTokenizer::~ClipTokenizer() = default;
ClipTokenizer::ClipTokenizer(ClipTokenizer&&) noexcept = default;
ClipTokenizer& ClipTokenizer::operator=(ClipTokenizer&&) noexcept = default;

std::vector<TokenId> ClipTokenizer::encode(std::string_view text) const { return impl_->encode(text, false); }

ClipWindows ClipTokenizer::encode_windows(std::string_view text, ClipPadding padding, std::size_t max_windows) const {
  const std::vector<TokenId> tokens = encode(text);
  std::vector<std::vector<TokenId>> chunks;
  for (std::size_t begin = 0; begin < tokens.size(); begin += kClipWindowTokens) {
    const std::size_t end = std::min(begin + kClipWindowTokens, tokens.size());
    chunks.emplace_back(tokens.begin() + static_cast<std::ptrdiff_t>(begin), tokens.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return frame_chunks(chunks, padding, max_windows);
}

ClipWindows ClipTokenizer::frame_chunks(const std::vector<std::vector<TokenId>>& chunks, ClipPadding padding,
                                        std::size_t max_windows) const {
  if (max_windows == 0) fail("a CLIP prompt needs at least one window");
  ClipWindows result;
  for (const std::vector<TokenId>& chunk : chunks) {
    if (chunk.size() > kClipWindowTokens) fail("a CLIP window holds {} tokens, not {}", kClipWindowTokens, chunk.size());
    result.prompt_tokens += chunk.size();
    if (result.windows.size() < max_windows) {
      result.windows.push_back(frame(chunk, pad_id(padding)));
    } else {
      result.dropped.insert(result.dropped.end(), chunk.begin(), chunk.end());
    }
  }
  if (result.windows.empty()) result.windows.push_back(frame({}, pad_id(padding)));
  return result;
}

ClipWindow ClipTokenizer::frame(std::span<const TokenId> tokens, TokenId pad) const {
  ClipWindow window;
  window.fill(pad);
  window[0] = bos_;
  std::copy(tokens.begin(), tokens.end(), window.begin() + 1);
  window[tokens.size() + 1] = eos_;
  return window;
}

std::string ClipTokenizer::window_notice(const ClipWindows& windows) const {
  if (windows.truncated()) {
    return fmt::format("the prompt has {} CLIP tokens; {} past the {} allowed window(s) of {} are ignored: \"{}\"",
                       windows.prompt_tokens, windows.dropped.size(), windows.windows.size(), kClipWindowTokens,
                       decode(windows.dropped));
  }
  if (windows.windows.size() > 1) {
    return fmt::format("the prompt has {} CLIP tokens, encoded in {} windows of up to {}", windows.prompt_tokens,
                       windows.windows.size(), kClipWindowTokens);
  }
  return {};
}

std::string ClipTokenizer::decode(const std::vector<TokenId>& ids) const { return impl_->decode(ids, true); }

std::optional<TokenId> ClipTokenizer::token_to_id(std::string_view token) const { return impl_->token_to_id(token); }

std::string ClipTokenizer::id_to_token(TokenId id) const {
  if (const std::string* token = impl_->id_to_token(id)) return *token;
  fail("token id {} is not in the CLIP vocabulary ({} ids)", id, impl_->vocab_size());
}

}  // namespace rf
