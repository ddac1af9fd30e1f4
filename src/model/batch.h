#pragma once
// One forward step's input, for any backend: the tokens of one or more sequences flattened
// into a single list (prefill chunks and decode tokens mixed), vLLM-style. Each sequence's
// keys and values live in a paged cache: position p of sequence s is slot p % block_size of
// block block_tables[s][p / block_size].
#include <cstdint>
#include <vector>

namespace rf {

struct Batch {
  std::vector<std::int32_t> tokens;
  std::vector<std::int32_t> positions;   // per token: its position in its sequence
  std::vector<std::int32_t> sequence;    // per token: index into block_tables
  std::vector<std::vector<std::int32_t>> block_tables;
  std::vector<std::int32_t> logit_rows;  // which tokens' logits to return, in this order

  std::size_t size() const { return tokens.size(); }
  // Appends `count` tokens of sequence `seq` starting at `start_pos`; the last one's logits are
  // requested if `want_last_logits`, every one's if `want_all_logits`.
  void add_sequence(std::int32_t seq, const std::int32_t* ids, std::size_t count, std::int32_t start_pos,
                    bool want_last_logits, bool want_all_logits = false) {
    for (std::size_t i = 0; i < count; ++i) {
      if (want_all_logits || (want_last_logits && i + 1 == count)) logit_rows.push_back(static_cast<std::int32_t>(tokens.size()));
      tokens.push_back(ids[i]);
      positions.push_back(start_pos + static_cast<std::int32_t>(i));
      sequence.push_back(seq);
    }
  }
};

// A token of a batch queued to decode ahead (ForwardPass::queue_sample) that the host does not know
// yet: the token the step queued just before it samples for its logit row `row`.
constexpr std::int32_t previous_token(int row) { return -1 - row; }

// Throws rf::Error for a token outside the vocabulary (or, with previous_rows, a previous_token(r)
// with r >= previous_rows) or a position without a KV cache block (each backend checks on the host
// before it runs the step).
void check_batch(const Batch& batch, int vocab_size, int block_size, int n_blocks, int previous_rows = 0);

}  // namespace rf
