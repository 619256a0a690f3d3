//===- PagedAttention.cpp - Attention of new tokens over paged caches -----===//
//
// The decode step's attention (PagedAttentionArgs, kernels/KernelTypes.h). First every new
// token's key and value row is copied to its slot of the caches; then, once all are there, each
// token attends over its sequence's cached positions, so a prefill chunk's tokens see each
// other. A task is one token and a kv head with the query heads that read it (or a slice of
// them, where there are fewer (token, kv head) pairs than threads), so each key and value row is
// read once per task: a chunk of kChunk positions at a time, every query head scoring each key
// row while it is in cache, then adding the chunk's value rows. The softmax runs online over
// the chunks: a running maximum, sum and output per query head, rescaled when the maximum grows.
// A cache's rows of consecutive positions lie a kv head's row apart times kv_heads (across
// pages), where the hardware prefetcher does not follow, so the kernel prefetches them itself:
// with that, a long decode reads the caches at the machine's memory bandwidth.
//
// Like Attention.cpp this file is compiled once per instruction set (Isa.h), and the copies
// give the same bits: a score is Simd.h's dot16 (sixteen running sums in feature order, added
// in a fixed tree), an output feature sums its terms in position order with fused
// multiply-adds, the chunk sums are sumTerms, whatever the vector width. IsaDispatch.cpp
// calls the widest copy the CPU runs.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/FloatBuffer.h"
#include "kernels/cpu/Isa.h"
#include "kernels/cpu/Loops.h"
#include "kernels/cpu/Simd.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tessel::cpu::isa_copy::TESSEL_CPU_ISA {

using detail::FloatBuffer;
using detail::kLanes;
using detail::kParallelGrain;
using detail::kWideLanes;
using detail::loadVec;
using detail::loadWide;
using detail::mulAdd;
using detail::storeVec;
using detail::storeWide;
using detail::Vec;
using detail::WideVec;

namespace {

/// Positions scored at a time: the chunk's value rows (kChunk × head floats) stay in the first
/// cache levels between the scores and the output.
constexpr int64_t kChunk = 64;
/// Vectors of output features computed side by side, hiding the latency of the multiply-adds.
constexpr int64_t kSide = 4;

/// Key rows ahead of the one being scored that are prefetched.
constexpr int64_t kAhead = 4;

/// Asks for the cache lines of a row of n floats.
void prefetchRow(const float *row, int64_t n) {
  for (int64_t i = 0; i < n; i += 16)
    __builtin_prefetch(row + i);
}

/// The positions token `token` sees, [first, last]; false for a padding token and for one
/// whose positions reach a block index of maxBlocks or more or a block id outside [0, blocks)
/// (the caller's error, which must not read outside the caches).
bool keyRange(const PagedAttentionArgs &a, const int32_t *positions, const int32_t *table,
              int64_t token, int64_t &first, int64_t &last) {
  const int64_t p = positions[token];
  if (p < 0 || p / a.blockSize >= a.maxBlocks)
    return false;
  first = a.window > 0 ? std::max<int64_t>(0, p - a.window + 1) : 0;
  last = p;
  const int32_t *row = table + token / a.seq * a.maxBlocks;
  for (int64_t block = first / a.blockSize; block <= last / a.blockSize; ++block)
    if (row[block] < 0 || row[block] >= a.blocks)
      return false;
  return true;
}

/// The offset in a cache of kv head `kvHead` at position `pos` of the sequence whose block
/// table row is `row` (checked by keyRange).
int64_t cacheOffset(const PagedAttentionArgs &a, const int32_t *row, int64_t pos, int64_t kvHead) {
  const int64_t slot =
      static_cast<int64_t>(row[pos / a.blockSize]) * a.blockSize + pos % a.blockSize;
  return (slot * a.kvHeads + kvHead) * a.head;
}

/// out[d] += Σ_j p[j] v_j[d] for d < head, over the chunk's n value rows (values + offsets[j]),
/// in order of j for every feature.
void addValues(int64_t head, int64_t n, const float *p, const float *values, const int64_t *offsets,
               float *out) {
  int64_t d = 0;
  for (; d + kSide * kWideLanes <= head; d += kSide * kWideLanes) {
    WideVec acc[kSide];
#pragma GCC unroll 4
    for (int64_t v = 0; v < kSide; ++v)
      acc[v] = loadWide(out + d + v * kWideLanes);
    for (int64_t j = 0; j < n; ++j) {
      const float *row = values + offsets[j] + d;
#pragma GCC unroll 4
      for (int64_t v = 0; v < kSide; ++v)
        acc[v] = mulAdd(p[j], loadWide(row + v * kWideLanes), acc[v]);
    }
#pragma GCC unroll 4
    for (int64_t v = 0; v < kSide; ++v)
      storeWide(out + d + v * kWideLanes, acc[v]);
  }
  for (; d + kWideLanes <= head; d += kWideLanes) {
    WideVec acc = loadWide(out + d);
    for (int64_t j = 0; j < n; ++j)
      acc = mulAdd(p[j], loadWide(values + offsets[j] + d), acc);
    storeWide(out + d, acc);
  }
  for (; d + kLanes <= head; d += kLanes) {
    Vec acc = loadVec(out + d);
    for (int64_t j = 0; j < n; ++j)
      acc = mulAdd(p[j], loadVec(values + offsets[j] + d), acc);
    storeVec(out + d, acc);
  }
  for (; d < head; ++d) {
    float acc = out[d];
    for (int64_t j = 0; j < n; ++j)
      acc = mulAdd(p[j], values[offsets[j] + d], acc);
    out[d] = acc;
  }
}

/// Stores every new token's key and value row at its position; padding tokens and those whose
/// slot is out of range store nothing.
void storeNewTokens(const PagedAttentionArgs &a, const float *k, const float *v,
                    const int32_t *positions, const int32_t *table, float *kCache, float *vCache) {
  const int64_t tokens = a.batch * a.seq, width = a.kvHeads * a.head;
  const size_t bytes = static_cast<size_t>(width) * sizeof(float);
#pragma omp parallel for schedule(static) if (tokens * width >= kParallelGrain && tokens > 1)
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t p = positions[t];
    if (p < 0 || p / a.blockSize >= a.maxBlocks)
      continue;
    const int32_t block = table[t / a.seq * a.maxBlocks + p / a.blockSize];
    if (block < 0 || block >= a.blocks)
      continue;
    const int64_t at = (static_cast<int64_t>(block) * a.blockSize + p % a.blockSize) * width;
    std::memcpy(kCache + at, k + t * width, bytes);
    std::memcpy(vCache + at, v + t * width, bytes);
  }
}

} // namespace

void pagedAttention(const PagedAttentionArgs &a, const float *q, const float *k, const float *v,
                    const int32_t *positions, const int32_t *table, float *out, float *kCache,
                    float *vCache) {
  storeNewTokens(a, k, v, positions, table, kCache, vCache);

  const int64_t tokens = a.batch * a.seq, H = a.heads, KH = a.kvHeads, D = a.head;
  const int64_t group = H / KH;
  // The keys all tokens see, for the work the parallel region is worth.
  int64_t keys = 0;
  for (int64_t t = 0; t < tokens; ++t)
    if (positions[t] >= 0)
      keys += a.window > 0 ? std::min<int64_t>(positions[t] + 1, a.window) : positions[t] + 1;
  // Enough tasks for every thread: a kv head's query heads split into slices where there are
  // fewer (token, kv head) pairs than threads.
  const int64_t threads = omp_get_max_threads();
  int64_t slices = 1;
  while (slices < group && tokens * KH * slices < threads)
    ++slices;
  const int64_t perSlice = (group + slices - 1) / slices;
  const int64_t tasks = tokens * KH * slices;
#pragma omp parallel if (keys * H * D >= kParallelGrain && tasks > 1)
  {
    FloatBuffer scores(perSlice * kChunk), acc(perSlice * D);
    FloatBuffer running(2 * perSlice); // per head: the maximum, then the sum
    int64_t offsets[kChunk];
#pragma omp for schedule(static)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t token = task / (KH * slices), kvHead = task / slices % KH;
      const int64_t h0 = kvHead * group + task % slices * perSlice;
      const int64_t h1 = std::min(h0 + perSlice, (kvHead + 1) * group), heads = h1 - h0;
      if (heads <= 0)
        continue;
      float *o = out + (token * H + h0) * D;
      int64_t first = 0, last = -1;
      if (!keyRange(a, positions, table, token, first, last)) {
        std::memset(o, 0, static_cast<size_t>(heads * D) * sizeof(float));
        continue;
      }
      const int32_t *row = table + token / a.seq * a.maxBlocks;
      float *m = running.data(), *l = running.data() + heads;
      for (int64_t g = 0; g < heads; ++g) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
      }
      std::memset(acc.data(), 0, static_cast<size_t>(heads * D) * sizeof(float));
      for (int64_t c0 = first; c0 <= last; c0 += kChunk) {
        const int64_t n = std::min(kChunk, last + 1 - c0);
        // Every query head's scores of the chunk, key by key (each key row read once here).
        for (int64_t j = 0; j < n; ++j)
          offsets[j] = cacheOffset(a, row, c0 + j, kvHead);
        for (int64_t j = 0; j < std::min(kAhead, n); ++j)
          prefetchRow(kCache + offsets[j], D);
        for (int64_t j = 0; j < n; ++j) {
          const float *key = kCache + offsets[j];
          // Rows of consecutive positions lie a page or more apart, where the hardware does not
          // prefetch: a later key row, and this position's value row for addValues.
          if (j + kAhead < n)
            prefetchRow(kCache + offsets[j + kAhead], D);
          prefetchRow(vCache + offsets[j], D);
          for (int64_t g = 0; g < heads; ++g)
            scores.data()[g * kChunk + j] = detail::dot16(D, q + (token * H + h0 + g) * D, key);
        }
        for (int64_t g = 0; g < heads; ++g) {
          float *s = scores.data() + g * kChunk;
          const float scale = a.scale;
          detail::mapWide(n, s, s, [scale](auto x) { return x * scale; });
          const float top = std::max(m[g], detail::maxOf(n, s));
          detail::mapWide(n, s, s, [top](auto x) { return detail::fastExp(x - top); });
          const float sum = static_cast<float>(
              detail::sumTerms(n, [&](int64_t j, auto tag) { return detail::load(s + j, tag); }));
          float *accG = acc.data() + g * D;
          // A larger maximum rescales what the earlier chunks added (nothing before the first).
          if (top != m[g] && m[g] != -INFINITY) {
            const float correction = detail::fastExp(m[g] - top);
            l[g] *= correction;
            detail::mapWide(D, accG, accG, [correction](auto x) { return x * correction; });
          }
          m[g] = top;
          l[g] += sum;
          addValues(D, n, s, vCache, offsets, accG);
        }
      }
      for (int64_t g = 0; g < heads; ++g) {
        const float inverse = 1.0f / l[g];
        detail::mapWide(D, acc.data() + g * D, o + g * D,
                        [inverse](auto x) { return x * inverse; });
      }
    }
  }
}

} // namespace tessel::cpu::isa_copy::TESSEL_CPU_ISA
