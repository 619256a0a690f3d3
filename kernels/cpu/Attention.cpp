//===- Attention.cpp - Scaled dot-product attention -----------------------===//
//
// Attention runs one (batch, head) pair per task: the pair's keys and values are copied into
// small contiguous tiles, and blocks of up to kQueryBlock queries go through register-blocked
// products (SmallGemm.h) and a row softmax, and where asked keeps each row's log-sum-exp. The
// backward pass runs one (batch, kv head) pair per task, so the query heads that share a kv
// head add into its dk and dv in head order; it computes the probabilities again from the
// forward call's log-sum-exp (one exponential each) where the plan kept it, else exactly as
// the forward pass computed them. Causal attention
// skips the keys after each block's last query, and a sliding window those before its first
// query's window: tiles no query of a block sees are never computed. A rank may hold a block
// of the query heads with every kv head (AttentionArgs::firstHead, under tensor parallelism
// over fewer kv heads than ranks): kv heads that no query head here reads get zero gradients.
// Under context parallelism the queries are two runs of positions (AttentionArgs::headStart):
// each run goes through the same blocks with its positions shifted, which is all the causal
// mask needs.
//
// This file is compiled once per instruction set (Isa.h): its functions live in
// tessel::cpu::isa_copy::<set>, and IsaDispatch.cpp calls the widest one the CPU
// runs. Nothing here instantiates a standard-library template that is not inlined (buffers are
// FloatBuffer.h's), so no code compiled for wide vectors is shared with the baseline's.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/FloatBuffer.h"
#include "kernels/cpu/Isa.h"
#include "kernels/cpu/Loops.h"
#include "kernels/cpu/Simd.h"
#include "kernels/cpu/SmallGemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tessel::cpu::isa_copy::TESSEL_CPU_ISA {

using detail::BlockRange;
using detail::FloatBuffer;
using detail::kParallelGrain;
using detail::smallGemm;

namespace {

/// Queries per block: bounds the score buffers at kQueryBlock x kvSeq floats per thread.
constexpr int64_t kQueryBlock = 64;

void copyFloats(const float *from, int64_t n, float *to) {
  std::memcpy(to, from, static_cast<size_t>(n) * sizeof(float));
}
void zeroFloats(float *p, int64_t n) { std::memset(p, 0, static_cast<size_t>(n) * sizeof(float)); }

/// One (batch, kv head) pair's keys and values, copied out of the strided inputs: kt and vt
/// are [head, kvSeq] (transposed), kr and vr [kvSeq, head]; only the ones asked for are filled.
struct KvTile {
  FloatBuffer kt, kr, vr, vt;

  void load(const AttentionArgs &a, const float *k, const float *v, int64_t b, int64_t kh,
            bool forward) {
    const int64_t T = a.kvSeq, D = a.head, stride = a.kvHeads * D;
    const int64_t first = (b * T * a.kvHeads + kh) * D;
    kt.resize(T * D);
    detail::transpose(T, D, k + first, stride, kt.data(), T);
    if (forward) {
      vr.resize(T * D);
      for (int64_t j = 0; j < T; ++j)
        copyFloats(v + first + j * stride, D, vr.data() + j * D);
      return;
    }
    kr.resize(T * D);
    vt.resize(T * D);
    for (int64_t j = 0; j < T; ++j)
      copyFloats(k + first + j * stride, D, kr.data() + j * D);
    detail::transpose(T, D, v + first, stride, vt.data(), T);
  }
};

/// Query heads per kv head.
int64_t groupOf(const AttentionArgs &a) { return a.group > 0 ? a.group : a.heads / a.kvHeads; }
/// The kv head that query head `h` here reads.
int64_t kvHeadOf(const AttentionArgs &a, int64_t h) { return (a.firstHead + h) / groupOf(a); }

/// The runs of queries with consecutive positions: [begin, end) here, at position i + shift.
struct QueryRun {
  int64_t begin, end, shift;
};
int queryRuns(const AttentionArgs &a, QueryRun runs[2]) {
  if (a.headStart < 0) {
    runs[0] = {0, a.seq, 0};
    return 1;
  }
  const int64_t half = a.seq / 2;
  runs[0] = {0, half, a.headStart};
  runs[1] = {half, a.seq, a.tailStart - half};
  return 2;
}

/// Keys that the query at position i sees: [firstKey, keysFor).
int64_t keysFor(const AttentionArgs &a, int64_t i) {
  return a.causal ? std::min(i + 1, a.kvSeq) : a.kvSeq;
}
int64_t firstKey(const AttentionArgs &a, int64_t i) {
  return a.causal && a.window > 0 ? std::max<int64_t>(0, i - a.window + 1) : 0;
}

/// Keys that any query at positions [q0 + rowBegin, q0 + rowEnd) sees: a block's column (or
/// term) range.
int64_t keysForBlock(const AttentionArgs &a, int64_t q0, int64_t rowEnd) {
  return a.causal ? std::min(q0 + rowEnd, a.kvSeq) : a.kvSeq;
}

/// A query block's log-sum-exp rows in [batch, seq, heads]: row r at [r × stride] (the heads
/// lie between the rows of one head). `kept` receives them from the forward pass; `given`
/// holds the forward call's, which the backward pass reads instead of finding them again.
struct LseRows {
  float *kept = nullptr;
  const float *given = nullptr;
  int64_t stride = 0;
};

/// p[r][:] = softmax(scale * q[r] . k[:]) for r < rows, with the masked keys 0 (up to kvSeq),
/// row r being the query at position q0 + r. q points at the block's first query; p is
/// [rows, kvSeq]. With `lse.given`, p = exp(scale · s − lse): neither the maximum nor the sum
/// is found again.
void probabilities(const AttentionArgs &a, const float *q, const float *kt, int64_t q0,
                   int64_t rows, float *p, LseRows lse = {}) {
  const int64_t T = a.kvSeq, D = a.head, ldq = a.heads * D;
  smallGemm<false>(rows, q, ldq, kt, T, p, T, [&](int64_t rowBegin, int64_t rowEnd) {
    return BlockRange{keysForBlock(a, q0, rowEnd), 0, D, firstKey(a, q0 + rowBegin)};
  });
  const float scale = a.scale;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t begin = firstKey(a, q0 + r), keys = keysFor(a, q0 + r), n = keys - begin;
    float *pr = p + r * T + begin;
    if (lse.given) {
      const float l = lse.given[r * lse.stride];
      detail::mapWide(n, pr, pr, [scale, l](auto v) { return detail::fastExp(v * scale - l); });
    } else {
      detail::mapWide(n, pr, pr, [scale](auto v) { return v * scale; });
      const float max = detail::maxOf(n, pr);
      detail::mapWide(n, pr, pr, [max](auto v) { return detail::fastExp(v - max); });
      const double sum =
          detail::sumTerms(n, [&](int64_t j, auto t) { return detail::load(pr + j, t); });
      const float inv = static_cast<float>(1.0 / sum);
      detail::mapWide(n, pr, pr, [inv](auto v) { return v * inv; });
      if (lse.kept)
        lse.kept[r * lse.stride] = max + static_cast<float>(std::log(sum));
    }
    zeroFloats(p + r * T, begin);
    zeroFloats(p + r * T + keys, T - keys);
  }
}

} // namespace

void attention(const AttentionArgs &a, const float *q, const float *k, const float *v, float *out,
               float *lse) {
  const int64_t S = a.seq, T = a.kvSeq, D = a.head, H = a.heads, ld = H * D;
  const int64_t pairs = a.batch * H;
#pragma omp parallel if (pairs * S * T * D >= kParallelGrain && pairs > 1)
  {
    KvTile tile;
    FloatBuffer p(kQueryBlock * T);
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t b = pair / H, h = pair % H;
      tile.load(a, k, v, b, kvHeadOf(a, h), true);
      QueryRun runs[2];
      for (int run = 0, nRuns = queryRuns(a, runs); run < nRuns; ++run)
        for (int64_t q0 = runs[run].begin; q0 < runs[run].end; q0 += kQueryBlock) {
          const int64_t rows = std::min(kQueryBlock, runs[run].end - q0);
          const int64_t first = ((b * S + q0) * H + h) * D, p0 = q0 + runs[run].shift;
          LseRows rowsLse;
          if (lse)
            rowsLse = {lse + (b * S + q0) * H + h, nullptr, H};
          probabilities(a, q + first, tile.kt.data(), p0, rows, p.data(), rowsLse);
          // out = p v, each query summing only the keys its block can see.
          smallGemm<false>(
              rows, p.data(), T, tile.vr.data(), D, out + first, ld,
              [&](int64_t rowBegin, int64_t rowEnd) {
                return BlockRange{D, firstKey(a, p0 + rowBegin), keysForBlock(a, p0, rowEnd)};
              });
        }
    }
  }
}

void attentionGrad(const AttentionArgs &a, const float *q, const float *k, const float *v,
                   const float *dout, float *dq, float *dk, float *dv, const float *out,
                   const float *lse) {
  const int64_t S = a.seq, T = a.kvSeq, D = a.head, H = a.heads, KH = a.kvHeads, ld = H * D;
  const int64_t group = groupOf(a);
  const int64_t pairs = a.batch * KH;
#pragma omp parallel if (a.batch * H * S * T * D >= kParallelGrain && pairs > 1)
  {
    KvTile tile;
    FloatBuffer p(kQueryBlock * T), ds(kQueryBlock * T);
    FloatBuffer dkAcc(T * D), dvAcc(T * D);
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t b = pair / KH, kh = pair % KH;
      tile.load(a, k, v, b, kh, false);
      zeroFloats(dkAcc.data(), T * D);
      zeroFloats(dvAcc.data(), T * D);
      // The query heads here that read kv head kh (none leaves its dk and dv zero).
      const int64_t hBegin = std::max<int64_t>(0, kh * group - a.firstHead);
      const int64_t hEnd = std::min<int64_t>(H, (kh + 1) * group - a.firstHead);
      QueryRun runs[2];
      const int nRuns = queryRuns(a, runs);
      for (int64_t h = hBegin; h < hEnd; ++h) {
        for (int run = 0; run < nRuns; ++run)
          for (int64_t q0 = runs[run].begin; q0 < runs[run].end; q0 += kQueryBlock) {
            const int64_t rows = std::min(kQueryBlock, runs[run].end - q0);
            const int64_t first = ((b * S + q0) * H + h) * D, p0 = q0 + runs[run].shift;
            LseRows rowsLse;
            if (lse)
              rowsLse = {nullptr, lse + (b * S + q0) * H + h, H};
            probabilities(a, q + first, tile.kt.data(), p0, rows, p.data(), rowsLse);
            auto causalCols = [&](int64_t rowBegin, int64_t rowEnd) {
              return BlockRange{keysForBlock(a, p0, rowEnd), 0, D, firstKey(a, p0 + rowBegin)};
            };
            // dp = dout v^T, then ds = p (dp - sum(p dp)) * scale, row by row.
            smallGemm<false>(rows, dout + first, ld, tile.vt.data(), T, ds.data(), T, causalCols);
            for (int64_t r = 0; r < rows; ++r) {
              const int64_t begin = firstKey(a, p0 + r), keys = keysFor(a, p0 + r);
              const int64_t n = keys - begin;
              const float *pr = p.data() + r * T + begin;
              float *dsr = ds.data() + r * T + begin;
              // Σ p · dp over the row's keys, which is Σ dout · out over its head.
              const float *dor = dout + first + r * ld, *outr = out ? out + first + r * ld : nullptr;
              const float dot = static_cast<float>(
                  outr ? detail::sumTerms(D, [&](int64_t d, auto t) {
                    return detail::load(dor + d, t) * detail::load(outr + d, t);
                  })
                       : detail::sumTerms(n, [&](int64_t j, auto t) {
                           return detail::load(pr + j, t) * detail::load(dsr + j, t);
                         }));
              const float scale = a.scale;
              detail::mapWide2(n, pr, dsr, dsr, [dot, scale](auto pv, auto dpv) {
                return pv * (dpv - dot) * scale;
              });
              zeroFloats(ds.data() + r * T, begin);
              zeroFloats(ds.data() + r * T + keys, T - keys);
            }
            // dq = ds k.
            smallGemm<false>(
                rows, ds.data(), T, tile.kr.data(), D, dq + first, ld,
                [&](int64_t rowBegin, int64_t rowEnd) {
                  return BlockRange{D, firstKey(a, p0 + rowBegin), keysForBlock(a, p0, rowEnd)};
                });
            // dk += ds^T q and dv += p^T dout, over the keys [kb, ke) this block sees; key j
            // only meets the queries from j on when causal, and with a window those before
            // j + window.
            const int64_t kb = firstKey(a, p0), ke = keysForBlock(a, p0, rows);
            auto queriesFor = [&](int64_t keyBegin, int64_t keyEnd) {
              if (!a.causal)
                return BlockRange{D, 0, rows};
              const int64_t first = std::max<int64_t>(0, kb + keyBegin - p0);
              const int64_t last =
                  a.window > 0 ? std::min(rows, kb + keyEnd - 1 + a.window - p0) : rows;
              return BlockRange{D, first, std::max(first, last)};
            };
            // ds and p read transposed, in place.
            smallGemm<true, decltype(queriesFor), /*TransA=*/true>(
                ke - kb, ds.data() + kb, T, q + first, ld, dkAcc.data() + kb * D, D, queriesFor);
            smallGemm<true, decltype(queriesFor), /*TransA=*/true>(
                ke - kb, p.data() + kb, T, dout + first, ld, dvAcc.data() + kb * D, D, queriesFor);
          }
      }
      const int64_t stride = KH * D;
      for (int64_t j = 0; j < T; ++j) {
        const int64_t row = (b * T + j) * stride + kh * D;
        copyFloats(dkAcc.data() + j * D, D, dk + row);
        copyFloats(dvAcc.data() + j * D, D, dv + row);
      }
    }
  }
}

} // namespace tessel::cpu::isa_copy::TESSEL_CPU_ISA
