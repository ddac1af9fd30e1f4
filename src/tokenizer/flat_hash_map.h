#pragma once
// An open-addressing hash map (linear probing, no erase) for the big, build-once tables of the
// BPE model: hundreds of thousands of entries looked up in the encoding hot loop, where
// std::unordered_map's node per entry costs a cache miss and an allocation each.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rf {

template <typename Key, typename Value, typename Hash>
class FlatHashMap {
 public:
  void reserve(std::size_t count) {
    if (count > slots_.size() / 4 * 3) rehash(std::bit_ceil(count + count / 3 + 1));
  }

  void insert_or_assign(const Key& key, Value value) {
    reserve(size_ + 1);
    Slot& slot = slots_[slot_index(key)];
    if (!slot.used) ++size_;
    slot = {key, std::move(value), true};
  }

  const Value* find(const Key& key) const {
    if (slots_.empty()) return nullptr;
    const Slot& slot = slots_[slot_index(key)];
    return slot.used ? &slot.value : nullptr;
  }

  std::size_t size() const { return size_; }

 private:
  struct Slot {
    Key key{};
    Value value{};
    bool used = false;
  };

  // The slot holding `key`, or the empty slot where it belongs. The table is at most 3/4 full,
  // so probing ends quickly.
  std::size_t slot_index(const Key& key) const {
    const std::size_t mask = slots_.size() - 1;
    // Fibonacci hashing spreads hashes whose low bits are poor (e.g. identity hashes of ints).
    std::size_t index = (static_cast<std::uint64_t>(Hash{}(key)) * 0x9E3779B97F4A7C15ull) >> shift_;
    while (slots_[index].used && !(slots_[index].key == key)) index = (index + 1) & mask;
    return index;
  }

  void rehash(std::size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    shift_ = 64 - std::countr_zero(capacity);
    for (Slot& slot : old) {
      if (slot.used) slots_[slot_index(slot.key)] = std::move(slot);
    }
  }

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
  int shift_ = 64;
};

}  // namespace rf
