// Tokenizer::from_gguf: the vocabulary embedded in GGUF files (tokenizer.ggml.*), read the way
// llama.cpp reads it, into the same pipeline as tokenizer.json.
#include <algorithm>

#include "formats/gguf.h"
#include "tokenizer/file_errors.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace rf {

namespace {

// The tokenizer.ggml.token_type values that matter here (5 is unused, 6 a <0xNN> byte token).
enum TokenType : std::int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4 };

constexpr std::string_view kMetaspace = "\u2581";

struct GgufVocab {
  std::vector<std::string> tokens;
  std::vector<std::int64_t> types;  // one per token

  std::optional<TokenId> id_at_key(const GgufFile& gguf, const std::string& key) const {
    const auto id = gguf.get_uint_opt(key);
    if (!id) return std::nullopt;
    if (*id >= tokens.size()) fail("{} is {}, but there are only {} tokens", key, *id, tokens.size());
    return static_cast<TokenId>(*id);
  }
};

GgufVocab read_vocab(const GgufFile& gguf) {
  GgufVocab vocab{gguf.get_string_array("tokenizer.ggml.tokens"), {}};
  if (gguf.find("tokenizer.ggml.token_type")) {
    vocab.types = gguf.get_int_array("tokenizer.ggml.token_type");
    if (vocab.types.size() != vocab.tokens.size()) {
      fail("tokenizer.ggml.token_type has {} entries for {} tokens", vocab.types.size(), vocab.tokens.size());
    }
  } else {
    vocab.types.assign(vocab.tokens.size(), kNormal);
  }
  return vocab;
}

BpeModel bpe_model(const GgufVocab& vocab, BpeOptions options) {
  return BpeModel(std::vector<std::optional<std::string>>(vocab.tokens.begin(), vocab.tokens.end()), std::move(options));
}

// The byte-level BPE flavours that tokenizer.ggml.pre names, configured as llama.cpp does, except
// that Qwen's text is NFC-normalized as its tokenizer.json says (llama.cpp skips that).
struct ByteLevelFlavor {
  std::string_view split_pattern;  // empty: GPT-2's, applied by the ByteLevel pre-tokenizer itself
  bool nfc;
  bool ignore_merges;
  bool add_bos;
};

ByteLevelFlavor byte_level_flavor(const std::string& pre) {
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") return {split_patterns::kLlama3, false, true, true};
  if (pre == "qwen2") return {split_patterns::kQwen2, true, false, false};
  if (pre == "default" || pre == "gpt-2" || pre == "gpt2") return {{}, false, false, false};
  fail("unsupported tokenizer.ggml.pre '{}' (known: llama-bpe, llama3, qwen2, default, gpt-2)", pre);
}

// "gpt2": byte-level BPE with explicit merges.
TokenizerParts byte_level_parts(const GgufFile& gguf, const GgufVocab& vocab, bool& add_bos) {
  const ByteLevelFlavor flavor = byte_level_flavor(gguf.get_string_opt("tokenizer.ggml.pre").value_or("default"));
  add_bos = flavor.add_bos;
  BpeOptions options;
  options.ignore_merges = flavor.ignore_merges;
  TokenizerParts parts(bpe_model(vocab, std::move(options)));
  const std::vector<std::string> merges = gguf.get_string_array("tokenizer.ggml.merges");
  parts.model.reserve_merges(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [left, right] = BpeModel::split_merge(merges[rank], "tokenizer.ggml.merges:");
    parts.model.add_merge(left, right, static_cast<std::uint32_t>(rank));
  }
  if (flavor.nfc) parts.normalizer = std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFC);
  if (flavor.split_pattern.empty()) {
    parts.pre_tokenizer = std::make_unique<ByteLevelPreTokenizer>(false, true);
  } else {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    steps.push_back(std::make_unique<SplitPreTokenizer>(Regex::pattern(flavor.split_pattern), SplitBehavior::Isolated));
    steps.push_back(std::make_unique<ByteLevelPreTokenizer>(false, false));
    parts.pre_tokenizer = std::make_unique<PreTokenizerSequence>(std::move(steps));
  }
  parts.decoder = std::make_unique<ByteLevelDecoder>();
  return parts;
}

// llama.cpp's SentencePiece tokenizer merges, among adjacent symbols, the pair that forms the
// token with the highest score (leftmost among equals). As BPE merges: every split of a token
// into two tokens merges into it, ranked by the token's score, equal scores sharing a rank.
void add_merges_from_scores(BpeModel& model, const GgufVocab& vocab, const std::vector<double>& scores) {
  std::vector<TokenId> by_score;
  for (std::size_t id = 0; id < vocab.tokens.size(); ++id) {
    if (vocab.types[id] == kNormal || vocab.types[id] == kUserDefined) by_score.push_back(static_cast<TokenId>(id));
  }
  std::stable_sort(by_score.begin(), by_score.end(), [&](TokenId a, TokenId b) { return scores[a] > scores[b]; });
  std::uint32_t rank = 0;
  for (std::size_t i = 0; i < by_score.size(); ++i) {
    const TokenId merged = by_score[i];
    if (i > 0 && scores[merged] != scores[by_score[i - 1]]) ++rank;
    const std::string_view token = vocab.tokens[merged];
    for (std::size_t split = unicode::scan_utf8(token, 0).length; split < token.size(); split += unicode::scan_utf8(token, split).length) {
      const auto left = model.token_to_id(token.substr(0, split));
      const auto right = model.token_to_id(token.substr(split));
      if (left && right) model.add_merge(*left, *right, merged, rank);
    }
  }
}

// "llama": SentencePiece BPE with scores, byte fallback and "▁" for spaces.
TokenizerParts sentencepiece_parts(const GgufFile& gguf, const GgufVocab& vocab, bool& add_bos) {
  add_bos = true;
  const std::vector<double> scores = gguf.get_float_array("tokenizer.ggml.scores");
  if (scores.size() != vocab.tokens.size()) fail("tokenizer.ggml.scores has {} entries for {} tokens", scores.size(), vocab.tokens.size());

  BpeOptions options;
  options.byte_fallback = true;
  options.fuse_unk = true;
  auto unk_id = vocab.id_at_key(gguf, "tokenizer.ggml.unknown_token_id");
  if (!unk_id) {
    const auto it = std::find(vocab.types.begin(), vocab.types.end(), kUnknown);
    if (it != vocab.types.end()) unk_id = static_cast<TokenId>(it - vocab.types.begin());
  }
  if (unk_id) options.unk_token = vocab.tokens[*unk_id];
  TokenizerParts parts(bpe_model(vocab, std::move(options)));
  add_merges_from_scores(parts.model, vocab, scores);

  // As llama.cpp (and Hugging Face's "legacy" Llama tokenizer): "▁" for every space, and one
  // more at the start of each stretch of text between special tokens.
  const bool add_space_prefix = gguf.get_bool_opt("tokenizer.ggml.add_space_prefix").value_or(true);
  std::vector<std::unique_ptr<Normalizer>> normalizers;
  if (add_space_prefix) normalizers.push_back(std::make_unique<PrependNormalizer>(std::string(kMetaspace)));
  normalizers.push_back(std::make_unique<ReplaceNormalizer>(Regex::literal(" "), std::string(kMetaspace)));
  parts.normalizer = std::make_unique<NormalizerSequence>(std::move(normalizers));

  std::vector<std::unique_ptr<Decoder>> decoders;
  decoders.push_back(std::make_unique<ReplaceDecoder>(Regex::literal(kMetaspace), " "));
  decoders.push_back(std::make_unique<ByteFallbackDecoder>());
  decoders.push_back(std::make_unique<FuseDecoder>());
  if (add_space_prefix) decoders.push_back(std::make_unique<StripDecoder>(" ", 1, 0));
  parts.decoder = std::make_unique<DecoderSequence>(std::move(decoders));
  return parts;
}

// Unknown and control tokens are special; user-defined ones are matched in text but are not.
std::vector<AddedToken> added_tokens(const GgufVocab& vocab) {
  std::vector<AddedToken> added;
  for (std::size_t id = 0; id < vocab.tokens.size(); ++id) {
    const std::int64_t type = vocab.types[id];
    if (type != kUnknown && type != kControl && type != kUserDefined) continue;
    added.push_back({.id = static_cast<TokenId>(id), .content = vocab.tokens[id], .special = type != kUserDefined});
  }
  return added;
}

TokenizerParts parts_from_gguf(const GgufFile& gguf) {
  const GgufVocab vocab = read_vocab(gguf);
  const std::string model = gguf.get_string("tokenizer.ggml.model");
  bool add_bos = false;
  TokenizerParts parts = [&] {
    if (model == "gpt2") return byte_level_parts(gguf, vocab, add_bos);
    if (model == "llama") return sentencepiece_parts(gguf, vocab, add_bos);
    fail("unsupported tokenizer.ggml.model '{}' (known: gpt2, llama)", model);
  }();
  parts.added_tokens = added_tokens(vocab);
  parts.bos = vocab.id_at_key(gguf, "tokenizer.ggml.bos_token_id");
  parts.eos = vocab.id_at_key(gguf, "tokenizer.ggml.eos_token_id");
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (const auto id = vocab.id_at_key(gguf, key)) parts.end_of_generation.push_back(*id);
  }
  add_bos = gguf.get_bool_opt("tokenizer.ggml.add_bos_token").value_or(add_bos);
  const bool add_eos = gguf.get_bool_opt("tokenizer.ggml.add_eos_token").value_or(false);
  if (add_bos && parts.bos) parts.post_processor.prefix.push_back(*parts.bos);
  if (add_eos && parts.eos) parts.post_processor.suffix.push_back(*parts.eos);
  return parts;
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& gguf) {
  return Tokenizer(with_path_in_errors(gguf.path(), [&] { return std::make_unique<TokenizerImpl>(parts_from_gguf(gguf)); }));
}

}  // namespace rf
