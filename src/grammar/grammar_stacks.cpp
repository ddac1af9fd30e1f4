#include "grammar/grammar_stacks.h"

#include <algorithm>

#include "util/error.h"

namespace rf::grammar {

namespace {
// Beyond these a grammar is refused rather than let to exhaust memory: a state this wide comes
// from an ambiguous grammar, and this deep from text nested without end.
constexpr std::size_t kMostStacks = 4096;
constexpr std::size_t kMostNodes = std::size_t{1} << 22;
}  // namespace

GrammarStacks::GrammarStacks(const Grammar& grammar) : grammar_(grammar) {
  nodes_.push_back({0, kEmpty});
  std::vector<std::uint32_t> stacks;
  for (auto start : grammar_.alternatives(grammar_.root())) {
    if (grammar_.at(start).kind == Element::Kind::End) {
      stacks.push_back(kEmpty);
    } else {
      expand(push(kEmpty, start), stacks);
    }
  }
  initial_ = intern(std::move(stacks));
}

std::uint32_t GrammarStacks::push(std::uint32_t parent, std::uint32_t position) {
  const std::uint64_t key = (std::uint64_t{parent} << 32) | position;
  const auto [it, added] = node_ids_.emplace(key, static_cast<std::uint32_t>(nodes_.size()));
  if (added) {
    if (nodes_.size() >= kMostNodes) fail("the grammar's parse grew beyond {} stack entries", kMostNodes);
    nodes_.push_back({position, parent});
  }
  return it->second;
}

std::uint32_t GrammarStacks::after(std::uint32_t parent, std::uint32_t position) {
  return grammar_.at(position + 1).kind == Element::Kind::End ? parent : push(parent, position + 1);
}

void GrammarStacks::expand(std::uint32_t stack, std::vector<std::uint32_t>& out) {
  if (stack == kEmpty || grammar_.at(nodes_[stack].position).kind == Element::Kind::Bytes) {
    out.push_back(stack);
    return;
  }
  // Left recursion is refused when the grammar is built, so this ends; the depth guards the stack.
  if (++depth_ > 10000) fail("the grammar nests rules more than 10000 deep without consuming a byte");
  const Node top = nodes_[stack];
  const std::uint32_t rest = after(top.parent, top.position);
  for (auto start : grammar_.alternatives(grammar_.at(top.position).index)) {
    expand(grammar_.at(start).kind == Element::Kind::End ? rest : push(rest, start), out);
  }
  --depth_;
}

GrammarStacks::State GrammarStacks::intern(std::vector<std::uint32_t> stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > kMostStacks) fail("the grammar is too ambiguous: {} parses alive at once", stacks.size());
  const auto [it, added] = state_ids_.emplace(stacks, static_cast<State>(states_.size()));
  if (added) {
    states_.push_back(std::move(stacks));
    transitions_.resize(transitions_.size() + 256, kUnknown);
  }
  return it->second;
}

GrammarStacks::State GrammarStacks::advance(State state, std::uint8_t byte) {
  State& known = transitions_[std::size_t{state} * 256 + byte];
  if (known != kUnknown) return known;
  std::vector<std::uint32_t> next;
  for (const auto stack : states_[state]) {
    if (stack == kEmpty) continue;
    const Node top = nodes_[stack];
    if (grammar_.bytes(grammar_.at(top.position).index).test(byte)) expand(after(top.parent, top.position), next);
  }
  const State result = next.empty() ? kDead : intern(std::move(next));
  transitions_[std::size_t{state} * 256 + byte] = result;  // `known` may dangle: intern() grew the table
  return result;
}

GrammarStacks::State GrammarStacks::advance(State state, std::string_view bytes) {
  for (const char c : bytes) {
    state = advance(state, static_cast<std::uint8_t>(c));
    if (state == kDead) break;
  }
  return state;
}

bool GrammarStacks::accepts(State state) const {
  const auto& stacks = states_[state];
  return !stacks.empty() && stacks.front() == kEmpty;
}

bool GrammarStacks::continues(State state) const { return !states_[state].empty() && states_[state].back() != kEmpty; }

std::vector<std::uint32_t> GrammarStacks::canonical(State state) const {
  std::vector<std::vector<std::uint32_t>> stacks;
  for (auto stack : states_[state]) {
    auto& positions = stacks.emplace_back();
    for (; stack != kEmpty; stack = nodes_[stack].parent) positions.push_back(nodes_[stack].position);
  }
  std::sort(stacks.begin(), stacks.end());
  std::vector<std::uint32_t> key;
  for (const auto& positions : stacks) {
    key.insert(key.end(), positions.begin(), positions.end());
    key.push_back(0xFFFFFFFF);
  }
  return key;
}

}  // namespace rf::grammar
