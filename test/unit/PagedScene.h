//===- PagedScene.h - Calls of paged_attention for kernel tests -*- C++ -*-===//
//
// The inputs of one paged_attention call on random values, for the CPU kernel's test against a
// dense reference (PagedAttentionTest.cpp) and the CUDA kernels' tests against the CPU kernel:
// sequences with different numbers of positions already cached and of new tokens, padding slots
// among the new tokens, and each sequence's blocks drawn from a shuffled pool that holds spare
// blocks no sequence uses.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TEST_UNIT_PAGEDSCENE_H
#define TESSEL_TEST_UNIT_PAGEDSCENE_H

#include "kernels/KernelTypes.h"
#include "test/unit/RandomValues.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace tessel::test {

/// A call's shape: sequence b holds cached[b] positions before the call and gets fresh[b] new
/// tokens (at most seq) at the next positions; the other slots of its seq are padding, placed
/// after its tokens (b % 3 == 0), before them (b % 3 == 1) or between them (b % 3 == 2: even
/// slots first, then odd ones).
struct PagedSpec {
  const char *name;
  int64_t heads, kvHeads, head, blockSize, seq, window;
  std::vector<int64_t> cached, fresh;
};

struct PagedScene {
  kernels::PagedAttentionArgs args;
  std::vector<float> q, k, v, kCache, vCache;
  std::vector<int32_t> positions, table;
};

/// The slots of a sequence's new tokens in the call, as PagedSpec places them.
inline std::vector<int64_t> slotOrder(int64_t b, int64_t seq, int64_t fresh) {
  std::vector<int64_t> slots;
  if (b % 3 == 0)
    for (int64_t i = 0; i < fresh; ++i)
      slots.push_back(i);
  else if (b % 3 == 1)
    for (int64_t i = 0; i < fresh; ++i)
      slots.push_back(seq - fresh + i);
  else
    for (int64_t parity : {0, 1})
      for (int64_t i = parity; i < seq && static_cast<int64_t>(slots.size()) < fresh; i += 2)
        slots.push_back(i);
  return slots;
}

inline PagedScene pagedScene(const PagedSpec &s, uint32_t seed) {
  PagedScene x;
  kernels::PagedAttentionArgs &a = x.args;
  a.batch = static_cast<int64_t>(s.cached.size());
  a.seq = s.seq;
  a.heads = s.heads;
  a.kvHeads = s.kvHeads;
  a.head = s.head;
  a.blockSize = s.blockSize;
  a.window = s.window;
  a.scale = 1.0f / std::sqrt(static_cast<float>(s.head));
  // Blocks each sequence needs; one more table entry than the longest needs, left unnamed (-1).
  std::vector<int64_t> needed(a.batch);
  int64_t total = 0;
  for (int64_t b = 0; b < a.batch; ++b) {
    needed[b] = (s.cached[b] + s.fresh[b] + a.blockSize - 1) / a.blockSize;
    total += needed[b];
    a.maxBlocks = std::max(a.maxBlocks, needed[b] + 1);
  }
  a.blocks = total + 3;
  std::vector<int32_t> pool(static_cast<size_t>(a.blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(seed));
  x.table.assign(static_cast<size_t>(a.batch * a.maxBlocks), -1);
  size_t next = 0;
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t i = 0; i < needed[b]; ++i)
      x.table[b * a.maxBlocks + i] = pool[next++];
  x.positions.assign(static_cast<size_t>(a.batch * a.seq), -1);
  for (int64_t b = 0; b < a.batch; ++b) {
    const std::vector<int64_t> slots = slotOrder(b, a.seq, s.fresh[b]);
    for (size_t i = 0; i < slots.size(); ++i)
      x.positions[b * a.seq + slots[i]] = static_cast<int32_t>(s.cached[b] + i);
  }
  const size_t tokens = static_cast<size_t>(a.batch * a.seq);
  const size_t cache = static_cast<size_t>(a.blocks * a.blockSize * a.kvHeads * a.head);
  x.q = randomFloats(tokens * a.heads * a.head, -1, 1, seed + 1);
  x.k = randomFloats(tokens * a.kvHeads * a.head, -1, 1, seed + 2);
  x.v = randomFloats(tokens * a.kvHeads * a.head, -1, 1, seed + 3);
  x.kCache = randomFloats(cache, -1, 1, seed + 4);
  x.vCache = randomFloats(cache, -1, 1, seed + 5);
  return x;
}

/// The offset in a cache of kv head `kvHead` at position `pos` of sequence b (whose block must
/// be named).
inline int64_t cacheOffset(const PagedScene &x, int64_t b, int64_t pos, int64_t kvHead) {
  const kernels::PagedAttentionArgs &a = x.args;
  const int64_t block = x.table[b * a.maxBlocks + pos / a.blockSize];
  return ((block * a.blockSize + pos % a.blockSize) * a.kvHeads + kvHead) * a.head;
}

/// A scene's sizes, for a failure's message.
inline std::string describe(const PagedSpec &s) {
  return std::string(s.name) + " (heads " + std::to_string(s.heads) + ", kv heads " +
         std::to_string(s.kvHeads) + ", head " + std::to_string(s.head) + ", block " +
         std::to_string(s.blockSize) + ", seq " + std::to_string(s.seq) + ", window " +
         std::to_string(s.window) + ")";
}

/// The cases both devices' tests run: MHA, GQA and MQA, decode (seq 1) and prefill chunks with
/// padding, sliding windows, blocks of one position and of several, odd head sizes, a sequence
/// with no new token, and caches long enough that the CUDA kernels split the positions.
inline std::vector<PagedSpec> pagedSpecs() {
  return {
      {"mha decode", 4, 4, 8, 4, 1, 0, {5, 0, 13}, {1, 1, 0}},
      {"gqa prefill", 4, 2, 16, 4, 5, 0, {3, 0, 8}, {5, 3, 2}},
      {"mqa prefill window", 4, 1, 12, 4, 5, 4, {6, 2, 0}, {4, 5, 3}},
      {"block size 1", 4, 2, 13, 1, 5, 0, {2, 7, 0}, {3, 5, 4}},
      {"block size 1 decode window", 4, 1, 8, 1, 1, 3, {9, 1, 4}, {1, 1, 1}},
      {"long caches", 4, 2, 36, 16, 1, 0, {300, 70, 129}, {1, 1, 1}},
      {"long caches window", 8, 2, 64, 16, 2, 200, {517, 0, 260}, {2, 2, 1}},
  };
}

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_PAGEDSCENE_H
