#pragma once
// Mixture-of-experts routing (Mixtral, Qwen3-MoE), as transformers' MixtralSparseMoeBlock /
// Qwen3MoeSparseMoeBlock and llama.cpp's build_moe_ffn compute it, in this order:
//   1. logits = W_router x, one per expert;
//   2. p = softmax(logits) over all the experts (transformers in fp32, as here);
//   3. the k experts of the largest p, largest first (torch.topk, ggml_top_k);
//   4. their weights are their p, divided by the sum of the k p's when renormalising (Mixtral
//      always; Qwen3-MoE with norm_topk_prob, true in the released models; llama.cpp always).
// A layer's output is then sum_k weight_k * expert_k(x), the experts taken in index order (the
// order transformers adds them in). Ties: torch.topk does not define which of equal values comes
// first; here the lower expert index does (a stable descending sort), also where a tie straddles
// the k-th place.
#include <vector>

namespace rf::llama {

struct ExpertChoice {
  int expert;
  float weight;
};

// The k experts (and their weights) that `logits` (n_experts values) route a token to, largest
// probability first.
void route(const float* logits, int n_experts, int k, bool renormalize, ExpertChoice* out);

// The tokens a batch routes to each expert, grouped so that each expert's matrices are multiplied
// once for all its tokens: for expert e, tokens[begin[e] .. begin[e + 1]) with their weights.
// Tokens stay in batch order within an expert.
struct ExpertGroups {
  std::vector<int> begin;   // n_experts + 1 offsets
  std::vector<int> tokens;  // n_tokens * k token indices
  std::vector<float> weights;
};

// `choices`: k per token, n_tokens * k in all.
void group_by_expert(const std::vector<ExpertChoice>& choices, int n_tokens, int k, int n_experts, ExpertGroups& out);

}  // namespace rf::llama
