#include "backend/gpu/attention/attention_setup.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/half.h"

namespace rf::gpu::test {

AttentionProblem::AttentionProblem(HeadShape shape, int block_size, const std::vector<SequenceChunk>& chunks,
                                   const RandomFloats& random_floats, const RandomInt& random_int)
    : shape(shape), block_size(block_size) {
  const int kv_dim = shape.n_kv_heads * shape.head_dim;
  int max_blocks = 0, total_blocks = 0, max_positions = 0;
  for (const SequenceChunk& c : chunks) {
    const int length = c.context + c.tokens;
    max_blocks = std::max(max_blocks, (length + block_size - 1) / block_size);
    total_blocks += (length + block_size - 1) / block_size;
    max_positions = std::max(max_positions, length);
  }
  total_blocks += 3;  // spare blocks nobody uses
  std::vector<std::int32_t> free_blocks(total_blocks);
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  for (int i = total_blocks - 1; i > 0; --i) std::swap(free_blocks[i], free_blocks[random_int(0, i)]);

  const std::size_t slots = static_cast<std::size_t>(total_blocks) * block_size;
  keys.assign(slots * kv_dim, 0xFFFF);  // f16 NaN
  values.assign(slots * kv_dim, 0xFFFF);
  block_tables.assign(chunks.size() * max_blocks, -1);
  for (std::size_t s = 0; s < chunks.size(); ++s) {
    const int length = chunks[s].context + chunks[s].tokens;
    for (int b = 0; b * block_size < length; ++b) block_tables[s * max_blocks + b] = free_blocks.back(), free_blocks.pop_back();
    for (int p = 0; p < length; ++p) {
      const std::size_t slot = static_cast<std::size_t>(block_tables[s * max_blocks + p / block_size]) * block_size + p % block_size;
      const auto k = random_floats(kv_dim, -1.0f, 1.0f), v = random_floats(kv_dim, -1.0f, 1.0f);
      for (int i = 0; i < kv_dim; ++i) {
        keys[slot * kv_dim + i] = f32_to_f16(k[i]);
        values[slot * kv_dim + i] = f32_to_f16(v[i]);
      }
    }
    for (int i = 0; i < chunks[s].tokens; ++i) {
      positions.push_back(chunks[s].context + i);
      seq.push_back(static_cast<std::int32_t>(s));
    }
  }
  q = random_floats(positions.size() * shape.n_heads * shape.head_dim, -2.0f, 2.0f);

  q_gpu = DeviceBuffer<float>(q);
  keys_gpu_ = DeviceBuffer<std::uint16_t>(keys);
  values_gpu_ = DeviceBuffer<std::uint16_t>(values);
  positions_gpu_ = DeviceBuffer<std::int32_t>(positions);
  seq_gpu_ = DeviceBuffer<std::int32_t>(seq);
  block_tables_gpu_ = DeviceBuffer<std::int32_t>(block_tables);
  batch_ = {positions_gpu_.data(), seq_gpu_.data(), block_tables_gpu_.data(), static_cast<int>(positions.size()),
            max_blocks,           block_size,      max_positions};
  cache_ = {keys_gpu_.data(), values_gpu_.data()};
}

float AttentionProblem::scale() const { return 1.0f / std::sqrt(static_cast<float>(shape.head_dim)); }

AttentionBatch AttentionProblem::batch() const {
  AttentionBatch b = batch_;
  b.window = window;
  b.softcap = softcap;
  return b;
}

std::vector<double> AttentionProblem::reference() const {
  const int group = shape.n_heads / shape.n_kv_heads, head_dim = shape.head_dim;
  const int q_dim = shape.n_heads * head_dim, kv_dim = shape.n_kv_heads * head_dim;
  std::vector<double> out(q.size(), 0.0), scores;
  for (std::size_t t = 0; t < positions.size(); ++t) {
    const int length = positions[t] + 1;
    const int first = window > 0 ? std::max(0, length - window) : 0;
    auto row = [&](int p) {
      const int block = block_tables[seq[t] * batch_.max_blocks + p / block_size];
      return (static_cast<std::size_t>(block) * block_size + p % block_size) * kv_dim;
    };
    for (int h = 0; h < shape.n_heads; ++h) {
      const float* q_head = &q[t * q_dim + h * head_dim];
      const int kv_offset = h / group * head_dim;
      scores.assign(length, 0.0);
      double largest = -INFINITY;
      for (int p = first; p < length; ++p) {
        for (int d = 0; d < head_dim; ++d) scores[p] += q_head[d] * static_cast<double>(f16_to_f32(keys[row(p) + kv_offset + d]));
        scores[p] *= scale();
        if (softcap > 0) scores[p] = softcap * std::tanh(scores[p] / softcap);
        largest = std::max(largest, scores[p]);
      }
      double sum = 0.0;
      for (int p = first; p < length; ++p) sum += scores[p] = std::exp(scores[p] - largest);
      double* o = &out[t * q_dim + h * head_dim];
      for (int p = first; p < length; ++p) {
        for (int d = 0; d < head_dim; ++d) o[d] += scores[p] / sum * f16_to_f32(values[row(p) + kv_offset + d]);
      }
    }
  }
  return out;
}

}  // namespace rf::gpu::test
