#include "models/llama/moe.h"

#include <algorithm>
#include <numeric>

#include "backend/cpu/ops.h"

namespace rf::llama {

void route(const float* logits, int n_experts, int k, bool renormalize, ExpertChoice* out) {
  std::vector<float> p(logits, logits + n_experts);
  cpu::softmax(p.data(), p.size());
  std::vector<int> order(n_experts);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  float chosen = 0.0f;
  for (int i = 0; i < k; ++i) chosen += p[order[i]];
  for (int i = 0; i < k; ++i) out[i] = {order[i], renormalize ? p[order[i]] / chosen : p[order[i]]};
}

void group_by_expert(const std::vector<ExpertChoice>& choices, int n_tokens, int k, int n_experts, ExpertGroups& out) {
  out.begin.assign(n_experts + 1, 0);
  for (int i = 0; i < n_tokens * k; ++i) ++out.begin[choices[i].expert + 1];
  std::partial_sum(out.begin.begin(), out.begin.end(), out.begin.begin());
  out.tokens.resize(n_tokens * k);
  out.weights.resize(n_tokens * k);
  std::vector<int> next(out.begin.begin(), out.begin.end() - 1);
  for (int t = 0; t < n_tokens; ++t) {
    for (int j = 0; j < k; ++j) {
      const ExpertChoice& c = choices[t * k + j];
      const int at = next[c.expert]++;
      out.tokens[at] = t;
      out.weights[at] = c.weight;
    }
  }
}

}  // namespace rf::llama
