#include "model/batch.h"

#include "util/error.h"

namespace rf {

void check_batch(const Batch& batch, int vocab_size, int block_size, int n_blocks) {
  for (std::size_t t = 0; t < batch.size(); ++t) {
    if (batch.tokens[t] < 0 || batch.tokens[t] >= vocab_size) {
      fail("token id {} is outside the vocabulary (0..{})", batch.tokens[t], vocab_size - 1);
    }
    const auto& table = batch.block_tables.at(batch.sequence[t]);
    const auto block = static_cast<std::size_t>(batch.positions[t] / block_size);
    if (batch.positions[t] < 0 || block >= table.size() || table[block] < 0 || table[block] >= n_blocks) {
      fail("position {} has no KV cache block", batch.positions[t]);
    }
  }
}

}  // namespace rf
