#pragma once
// Embeddings of decoder models: the final hidden states of a text's tokens (after the model's
// last norm) pooled into one vector (the last token's, the tokens' mean, or the first token's),
// then L2-normalised where the checkpoint says so. The checkpoint names its pooling in its
// sentence-transformers files (modules.json, the Pooling module's config.json, a Normalize module)
// or its GGUF metadata ({arch}.pooling_type); a checkpoint that names none is pooled as vLLM pools
// decoder models: the last token, normalised.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/checkpoint.h"

namespace rf {

enum class Pooling { Last, Mean, First };
const char* to_string(Pooling pooling);

struct EmbeddingStyle {
  Pooling pooling = Pooling::Last;
  bool normalize = true;
  // Trained for shorter vectors (Matryoshka: config.json's matryoshka_dimensions or
  // is_matryoshka), so a request may keep a leading part of each vector.
  bool truncatable = false;
};

// Throws rf::Error for a pooling the engine lacks (max, weighted mean, a GGUF's rank or none).
EmbeddingStyle embedding_style(const Checkpoint& checkpoint);

// Pools a text's hidden states as they come, a prompt chunk at a time.
class EmbeddingPooler {
 public:
  EmbeddingPooler(Pooling pooling, std::size_t hidden, std::size_t tokens);
  // Whether the pooling reads token i's hidden state.
  bool wants(std::size_t token) const;
  void add(std::span<const float> row);  // the next wanted token's, in order
  std::vector<float> result(bool normalize) const;

 private:
  Pooling pooling_;
  std::size_t tokens_;
  std::vector<double> sum_;
  std::size_t rows_ = 0;
};

// Scales `vector` to unit length (a zero vector stays zero).
void normalize_l2(std::span<float> vector);

}  // namespace rf
