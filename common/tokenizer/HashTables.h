//===- HashTables.h - The tokenizers' lookup tables -------------*- C++ -*-===//
//
// Encoding looks up every pre-token in the cache and, on a miss, every adjacent pair of
// symbols in the merges and every character in the vocabulary. These tables keep their keys in
// one arena and probe linearly, so a lookup allocates nothing and touches one or two cache
// lines.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_HASHTABLES_H
#define TESSEL_COMMON_TOKENIZER_HASHTABLES_H

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::tok {

/// A 64-bit hash of `bytes`, eight at a time (not for hostile keys: the tables only slow
/// down under collisions).
inline uint64_t hashBytes(std::string_view bytes) {
  const uint64_t k = 0x9E3779B97F4A7C15ull;
  uint64_t h = bytes.size() * k;
  const char *p = bytes.data();
  size_t n = bytes.size();
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * k;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * k;
    h ^= h >> 29;
  }
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 31);
}

/// Strings to ids.
class StringIdMap {
public:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;

  /// Inserts `key` → `id`; returns false, changing nothing, when `key` is there already.
  bool insert(std::string_view key, uint32_t id) {
    if ((count_ + 1) * 2 > slots_.size())
      grow();
    uint64_t h = hashBytes(key);
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      Slot &s = slots_[i];
      if (s.id == kNone) {
        s = {h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), id};
        arena_.append(key);
        ++count_;
        return true;
      }
      if (s.hash == h && keyOf(s) == key)
        return false;
    }
  }

  /// The id of `key`, or kNone.
  uint32_t find(std::string_view key) const {
    if (slots_.empty())
      return kNone;
    uint64_t h = hashBytes(key);
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot &s = slots_[i];
      if (s.id == kNone)
        return kNone;
      if (s.hash == h && keyOf(s) == key)
        return s.id;
    }
  }

  size_t size() const { return count_; }

private:
  struct Slot {
    uint64_t hash;
    uint32_t offset, length, id;
  };
  std::vector<Slot> slots_;
  std::string arena_;
  size_t count_ = 0;

  std::string_view keyOf(const Slot &s) const {
    return std::string_view(arena_).substr(s.offset, s.length);
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{0, 0, 0, kNone});
    size_t mask = slots_.size() - 1;
    for (const Slot &s : old) {
      if (s.id == kNone)
        continue;
      size_t i = s.hash & mask;
      while (slots_[i].id != kNone)
        i = (i + 1) & mask;
      slots_[i] = s;
    }
  }
};

/// Pairs of token ids to a merge: its rank and the id it makes.
class MergeMap {
public:
  struct Merge {
    uint32_t rank, id;
  };

  /// Sets the merge of (a, b), replacing an earlier one (as a map built from the list keeps
  /// the last).
  void set(uint32_t a, uint32_t b, Merge merge) {
    if ((count_ + 1) * 2 > slots_.size())
      grow();
    uint64_t key = keyOf(a, b);
    size_t mask = slots_.size() - 1;
    for (size_t i = slotOf(key, mask);; i = (i + 1) & mask) {
      Slot &s = slots_[i];
      if (s.key == kEmpty) {
        s = {key, merge};
        ++count_;
        return;
      }
      if (s.key == key) {
        s.merge = merge;
        return;
      }
    }
  }

  /// The merge of (a, b), or nullptr.
  const Merge *find(uint32_t a, uint32_t b) const {
    if (slots_.empty())
      return nullptr;
    uint64_t key = keyOf(a, b);
    size_t mask = slots_.size() - 1;
    for (size_t i = slotOf(key, mask);; i = (i + 1) & mask) {
      const Slot &s = slots_[i];
      if (s.key == key)
        return &s.merge;
      if (s.key == kEmpty)
        return nullptr;
    }
  }

  size_t size() const { return count_; }

private:
  static constexpr uint64_t kEmpty = ~0ull;
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  std::vector<Slot> slots_;
  size_t count_ = 0;

  static uint64_t keyOf(uint32_t a, uint32_t b) { return (uint64_t(a) << 32) | b; }
  static size_t slotOf(uint64_t key, size_t mask) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (h ^ (h >> 32)) & mask;
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{kEmpty, {0, 0}});
    size_t mask = slots_.size() - 1;
    for (const Slot &s : old) {
      if (s.key == kEmpty)
        continue;
      size_t i = slotOf(s.key, mask);
      while (slots_[i].key != kEmpty)
        i = (i + 1) & mask;
      slots_[i] = s;
    }
  }
};

/// Pre-tokens to the ids the model gave them, for one thread. Bounded: when full it starts
/// again empty, which costs only recomputation.
class WordCache {
public:
  /// The ids of `word` appended to `out`; false when `word` is not cached.
  bool lookup(std::string_view word, uint64_t hash, std::vector<uint32_t> &out) const {
    if (slots_.empty())
      return false;
    size_t mask = slots_.size() - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      const Slot &s = slots_[i];
      if (s.keyLength == kEmpty)
        return false;
      if (s.hash == hash && s.keyLength == word.size() &&
          std::memcmp(keys_.data() + s.keyOffset, word.data(), word.size()) == 0) {
        out.insert(out.end(), ids_.begin() + s.idsOffset, ids_.begin() + s.idsOffset + s.idsCount);
        return true;
      }
    }
  }

  void store(std::string_view word, uint64_t hash, const uint32_t *ids, size_t count) {
    if (slots_.empty())
      slots_.assign(kSlots, Slot{0, 0, kEmpty, 0, 0});
    if (count_ + 1 > kSlots / 2 || keys_.size() + word.size() > kArenaBytes ||
        ids_.size() + count > kArenaBytes / 4)
      clear();
    size_t mask = slots_.size() - 1;
    size_t i = hash & mask;
    while (slots_[i].keyLength != kEmpty)
      i = (i + 1) & mask;
    slots_[i] = {hash, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(word.size()),
                 static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(count)};
    keys_.append(word);
    ids_.insert(ids_.end(), ids, ids + count);
    ++count_;
  }

private:
  static constexpr uint32_t kEmpty = 0xFFFFFFFFu;
  static constexpr size_t kSlots = size_t(1) << 18;
  static constexpr size_t kArenaBytes = size_t(32) << 20;
  struct Slot {
    uint64_t hash;
    uint32_t keyOffset, keyLength, idsOffset, idsCount;
  };
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<uint32_t> ids_;
  size_t count_ = 0;

  void clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{0, 0, kEmpty, 0, 0});
    keys_.clear();
    ids_.clear();
    count_ = 0;
  }
};

} // namespace tessel::tok

#endif // TESSEL_COMMON_TOKENIZER_HASHTABLES_H
