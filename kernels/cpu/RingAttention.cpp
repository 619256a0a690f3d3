//===- RingAttention.cpp - One step of ring attention ---------------------===//
//
// Ring attention (context parallelism with `context = ring`) meets the keys of the other cp
// ranks one block at a time: at step s a rank holds the keys and values of the rank s before
// it. Forward, each step's softmax over the block is merged into the running output by the
// log-sum-exp of each query's scores, in fp32: with m = max(lse, lse_b),
//   lse' = m + log(e^(lse − m) + e^(lse_b − m)),  o' = o e^(lse − lse') + o_b e^(lse_b − lse'),
// so no step ever holds more than one block's scores and nothing overflows. A query that sees
// no key of a block (every key later than it under the causal mask) leaves its running
// values as they are, and a block that no query here sees is skipped whole.
//
// Backward, the probabilities are recomputed from the whole attention's lse, p = e^(s − lse),
// and each block's terms added: dq += ds k, dk += dsᵀ q, dv += pᵀ do, with
// ds = p (do·v − do·o) × scale. Tasks are (batch, kv head) pairs, so the query heads sharing a
// kv head add into its dk and dv in head order and results do not depend on the threads.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Loops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tessel::cpu {

namespace {

constexpr float kNoKeys = -std::numeric_limits<float>::infinity();

int64_t groupOf(const RingBlockArgs &a) {
  return a.attention.group > 0 ? a.attention.group : a.attention.heads / a.attention.kvHeads;
}

float dot(const float *x, const float *y, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    s += x[i] * y[i];
  return s;
}

/// Whether the key at position `key` is seen by the query at position `query`.
bool sees(const RingBlockArgs &a, int64_t query, int64_t key) {
  return !a.attention.causal || key <= query;
}

/// Whether any query here sees any key of the block: the earliest key against the latest
/// query.
bool blockSeen(const RingBlockArgs &a) {
  const int64_t S = a.attention.seq;
  int64_t latestQuery = 0, earliestKey = std::numeric_limits<int64_t>::max();
  for (int64_t i : {int64_t(0), S / 2 - 1, S / 2, S - 1}) {
    latestQuery = std::max(latestQuery, a.queryPosition(i));
    earliestKey = std::min(earliestKey, a.keyPosition(i));
  }
  return sees(a, latestQuery, earliestKey);
}

} // namespace

void attentionBlock(const RingBlockArgs &a, const float *q, const float *k, const float *v,
                    bool first, float *out, float *lse) {
  const AttentionArgs &at = a.attention;
  const int64_t S = at.seq, H = at.heads, KH = at.kvHeads, D = at.head;
  const int64_t rows = at.batch * S * H;
  if (first) {
    std::fill(out, out + rows * D, 0.0f);
    std::fill(lse, lse + rows, kNoKeys);
  }
  if (!blockSeen(a))
    return;
  const int64_t group = groupOf(a);
#pragma omp parallel if (rows * S * D >= detail::kParallelGrain)
  {
    std::vector<float> scores(static_cast<size_t>(S)), block(static_cast<size_t>(D));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t b = row / (S * H), i = row / H % S, h = row % H;
      const int64_t kh = (at.firstHead + h) / group, pq = a.queryPosition(i);
      const float *qi = q + row * D;
      float max = kNoKeys;
      for (int64_t j = 0; j < S; ++j) {
        scores[j] = kNoKeys;
        if (sees(a, pq, a.keyPosition(j)))
          max = std::max(max, scores[j] = at.scale * dot(qi, k + ((b * S + j) * KH + kh) * D, D));
      }
      if (max == kNoKeys)
        continue;
      float sum = 0.0f;
      std::fill(block.begin(), block.end(), 0.0f);
      for (int64_t j = 0; j < S; ++j) {
        if (scores[j] == kNoKeys)
          continue;
        const float p = std::exp(scores[j] - max);
        sum += p;
        const float *vj = v + ((b * S + j) * KH + kh) * D;
        for (int64_t d = 0; d < D; ++d)
          block[d] += p * vj[d];
      }
      const float blockLse = max + std::log(sum);
      float *o = out + row * D;
      const float old = lse[row];
      const float m = std::max(old, blockLse);
      const float wOld = old == kNoKeys ? 0.0f : std::exp(old - m), wBlock = std::exp(blockLse - m);
      const float total = wOld + wBlock;
      for (int64_t d = 0; d < D; ++d)
        o[d] = (o[d] * wOld + block[d] / sum * wBlock) / total;
      lse[row] = m + std::log(total);
    }
  }
}

void attentionBlockGrad(const RingBlockArgs &a, const float *q, const float *k, const float *v,
                        const float *dout, const float *out, const float *lse, bool first,
                        float *dq, float *dk, float *dv) {
  const AttentionArgs &at = a.attention;
  const int64_t S = at.seq, H = at.heads, KH = at.kvHeads, D = at.head;
  if (first) {
    std::fill(dq, dq + at.batch * S * H * D, 0.0f);
    std::fill(dk, dk + at.batch * S * KH * D, 0.0f);
    std::fill(dv, dv + at.batch * S * KH * D, 0.0f);
  }
  if (!blockSeen(a))
    return;
  const int64_t group = groupOf(a), pairs = at.batch * KH;
#pragma omp parallel for schedule(static) if (pairs * S * S * D >= detail::kParallelGrain)
  for (int64_t pair = 0; pair < pairs; ++pair) {
    const int64_t b = pair / KH, kh = pair % KH;
    // The query heads here that read kv head kh.
    const int64_t hBegin = std::max<int64_t>(0, kh * group - at.firstHead);
    const int64_t hEnd = std::min<int64_t>(H, (kh + 1) * group - at.firstHead);
    for (int64_t h = hBegin; h < hEnd; ++h)
      for (int64_t i = 0; i < S; ++i) {
        const int64_t row = (b * S + i) * H + h, pq = a.queryPosition(i);
        if (lse[row] == kNoKeys)
          continue;
        const float *qi = q + row * D, *doi = dout + row * D;
        const float delta = dot(doi, out + row * D, D);
        float *dqi = dq + row * D;
        for (int64_t j = 0; j < S; ++j) {
          if (!sees(a, pq, a.keyPosition(j)))
            continue;
          const int64_t kv = ((b * S + j) * KH + kh) * D;
          const float p = std::exp(at.scale * dot(qi, k + kv, D) - lse[row]);
          const float ds = p * (dot(doi, v + kv, D) - delta) * at.scale;
          for (int64_t d = 0; d < D; ++d) {
            dqi[d] += ds * k[kv + d];
            dk[kv + d] += ds * qi[d];
            dv[kv + d] += p * doi[d];
          }
        }
      }
  }
}

} // namespace tessel::cpu
