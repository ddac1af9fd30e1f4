#include "model/batch.h"

#include "util/error.h"

namespace rf {

void check_batch(const Batch& batch, int vocab_size, int block_size, int n_blocks, int previous_rows) {
  for (std::size_t t = 0; t < batch.size(); ++t) {
    const std::int32_t token = batch.tokens[t];
    const bool placeholder = token < 0 && token >= previous_token(previous_rows - 1);
    if (token < 0 && !placeholder && previous_rows > 0) {
      fail("token {} stands for row {} of the step before, which sampled {} rows", token, -1 - token, previous_rows);
    }
    if (!placeholder && (token < 0 || token >= vocab_size)) {
      fail("token id {} is outside the vocabulary (0..{})", token, vocab_size - 1);
    }
    const auto& table = batch.block_tables.at(batch.sequence[t]);
    const auto block = static_cast<std::size_t>(batch.positions[t] / block_size);
    if (batch.positions[t] < 0 || block >= table.size() || table[block] < 0 || table[block] >= n_blocks) {
      fail("position {} has no KV cache block", batch.positions[t]);
    }
  }
}

}  // namespace rf
