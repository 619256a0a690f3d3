//===- Attention.cpp - Scaled dot-product attention and rotary embedding ---===//
//
// Attention runs one (batch, head) pair per task: the pair's keys and values are copied into
// small contiguous tiles, and blocks of up to kQueryBlock queries go through register-blocked
// products (SmallGemm.h) and a row softmax. The backward pass runs one (batch, kv head) pair
// per task, so the query heads that share a kv head add into its dk and dv in head order, and
// recomputes the probabilities exactly as the forward pass computed them. Causal attention
// skips the keys after each block's last query.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Loops.h"
#include "kernels/cpu/Simd.h"
#include "kernels/cpu/SmallGemm.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessel::cpu {

using detail::BlockRange;
using detail::kParallelGrain;
using detail::smallGemm;

namespace {

/// Queries per block: bounds the score buffers at kQueryBlock x kvSeq floats per thread.
constexpr int64_t kQueryBlock = 64;

std::vector<float> buffer(int64_t n) { return std::vector<float>(static_cast<size_t>(n)); }

/// One (batch, kv head) pair's keys and values, copied out of the strided inputs: kt and vt
/// are [head, kvSeq] (transposed), kr and vr [kvSeq, head]; only the ones asked for are filled.
struct KvTile {
  std::vector<float> kt, kr, vr, vt;

  void load(const AttentionArgs &a, const float *k, const float *v, int64_t b, int64_t kh,
            bool forward) {
    const int64_t T = a.kvSeq, D = a.head, stride = a.kvHeads * D;
    const int64_t first = (b * T * a.kvHeads + kh) * D;
    kt.resize(static_cast<size_t>(T * D));
    detail::transpose(T, D, k + first, stride, kt.data(), T);
    if (forward) {
      vr.resize(static_cast<size_t>(T * D));
      for (int64_t j = 0; j < T; ++j)
        std::copy(v + first + j * stride, v + first + j * stride + D, vr.data() + j * D);
      return;
    }
    kr.resize(static_cast<size_t>(T * D));
    vt.resize(static_cast<size_t>(T * D));
    for (int64_t j = 0; j < T; ++j)
      std::copy(k + first + j * stride, k + first + j * stride + D, kr.data() + j * D);
    detail::transpose(T, D, v + first, stride, vt.data(), T);
  }
};

/// Keys that query i sees.
int64_t keysFor(const AttentionArgs &a, int64_t i) {
  return a.causal ? std::min(i + 1, a.kvSeq) : a.kvSeq;
}

/// Keys that any query of [q0 + rowBegin, q0 + rowEnd) sees: a block's column (or term) range.
int64_t keysForBlock(const AttentionArgs &a, int64_t q0, int64_t rowEnd) {
  return a.causal ? std::min(q0 + rowEnd, a.kvSeq) : a.kvSeq;
}

/// p[r][:] = softmax(scale * q[q0 + r] . k[:]) for r < rows, with the masked keys 0 (up to
/// kvSeq). q points at query q0 of the pair; p is [rows, kvSeq].
void probabilities(const AttentionArgs &a, const float *q, const float *kt, int64_t q0,
                   int64_t rows, float *p) {
  const int64_t T = a.kvSeq, D = a.head, ldq = a.heads * D;
  smallGemm<false>(rows, q, ldq, kt, T, p, T, [&](int64_t, int64_t rowEnd) {
    return BlockRange{keysForBlock(a, q0, rowEnd), 0, D};
  });
  const float scale = a.scale;
  for (int64_t r = 0; r < rows; ++r) {
    float *pr = p + r * T;
    const int64_t keys = keysFor(a, q0 + r);
    detail::mapVec(keys, pr, pr, [scale](auto v) { return v * scale; });
    const float max = detail::maxOf(keys, pr);
    detail::mapVec(keys, pr, pr, [max](auto v) { return detail::fastExp(v - max); });
    const float inv = static_cast<float>(
        1.0 / detail::sumTerms(keys, [&](int64_t j, auto t) { return detail::load(pr + j, t); }));
    detail::mapVec(keys, pr, pr, [inv](auto v) { return v * inv; });
    std::fill(pr + keys, pr + T, 0.0f);
  }
}

} // namespace

void attention(const AttentionArgs &a, const float *q, const float *k, const float *v, float *out) {
  const int64_t S = a.seq, T = a.kvSeq, D = a.head, H = a.heads, ld = H * D;
  const int64_t group = H / a.kvHeads;
  const int64_t pairs = a.batch * H;
#pragma omp parallel if (pairs * S * T * D >= kParallelGrain && pairs > 1)
  {
    KvTile tile;
    std::vector<float> p = buffer(kQueryBlock * T);
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t b = pair / H, h = pair % H;
      tile.load(a, k, v, b, h / group, true);
      for (int64_t q0 = 0; q0 < S; q0 += kQueryBlock) {
        const int64_t rows = std::min(kQueryBlock, S - q0);
        const int64_t first = ((b * S + q0) * H + h) * D;
        probabilities(a, q + first, tile.kt.data(), q0, rows, p.data());
        // out = p v, each query summing only the keys its block can see.
        smallGemm<false>(rows, p.data(), T, tile.vr.data(), D, out + first, ld,
                         [&](int64_t, int64_t rowEnd) {
                           return BlockRange{D, 0, keysForBlock(a, q0, rowEnd)};
                         });
      }
    }
  }
}

void attentionGrad(const AttentionArgs &a, const float *q, const float *k, const float *v,
                   const float *dout, float *dq, float *dk, float *dv) {
  const int64_t S = a.seq, T = a.kvSeq, D = a.head, H = a.heads, KH = a.kvHeads, ld = H * D;
  const int64_t group = H / KH;
  const int64_t pairs = a.batch * KH;
#pragma omp parallel if (a.batch * H * S * T * D >= kParallelGrain && pairs > 1)
  {
    KvTile tile;
    std::vector<float> p = buffer(kQueryBlock * T), ds = buffer(kQueryBlock * T);
    std::vector<float> pt = buffer(T * kQueryBlock), dst = buffer(T * kQueryBlock);
    std::vector<float> dkAcc = buffer(T * D), dvAcc = buffer(T * D);
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t b = pair / KH, kh = pair % KH;
      tile.load(a, k, v, b, kh, false);
      std::fill(dkAcc.begin(), dkAcc.end(), 0.0f);
      std::fill(dvAcc.begin(), dvAcc.end(), 0.0f);
      for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
        for (int64_t q0 = 0; q0 < S; q0 += kQueryBlock) {
          const int64_t rows = std::min(kQueryBlock, S - q0);
          const int64_t first = ((b * S + q0) * H + h) * D;
          probabilities(a, q + first, tile.kt.data(), q0, rows, p.data());
          auto causalCols = [&](int64_t, int64_t rowEnd) {
            return BlockRange{keysForBlock(a, q0, rowEnd), 0, D};
          };
          // dp = dout v^T, then ds = p (dp - sum(p dp)) * scale, row by row.
          smallGemm<false>(rows, dout + first, ld, tile.vt.data(), T, ds.data(), T, causalCols);
          for (int64_t r = 0; r < rows; ++r) {
            const float *pr = p.data() + r * T;
            float *dsr = ds.data() + r * T;
            const int64_t keys = keysFor(a, q0 + r);
            const float dot = static_cast<float>(detail::sumTerms(keys, [&](int64_t j, auto t) {
              return detail::load(pr + j, t) * detail::load(dsr + j, t);
            }));
            const float scale = a.scale;
            detail::mapVec2(keys, pr, dsr, dsr,
                            [dot, scale](auto pv, auto dpv) { return pv * (dpv - dot) * scale; });
            std::fill(dsr + keys, dsr + T, 0.0f);
          }
          // dq = ds k.
          smallGemm<false>(rows, ds.data(), T, tile.kr.data(), D, dq + first, ld,
                           [&](int64_t, int64_t rowEnd) {
                             return BlockRange{D, 0, keysForBlock(a, q0, rowEnd)};
                           });
          // dk += ds^T q and dv += p^T dout, over the keys this block sees; key j only meets
          // the queries from j on when causal.
          const int64_t keys = keysForBlock(a, q0, rows);
          detail::transpose(rows, keys, ds.data(), T, dst.data(), kQueryBlock);
          detail::transpose(rows, keys, p.data(), T, pt.data(), kQueryBlock);
          auto queriesFor = [&](int64_t keyBegin, int64_t) {
            return BlockRange{D, a.causal ? std::max<int64_t>(0, keyBegin - q0) : 0, rows};
          };
          smallGemm<true>(keys, dst.data(), kQueryBlock, q + first, ld, dkAcc.data(), D,
                          queriesFor);
          smallGemm<true>(keys, pt.data(), kQueryBlock, dout + first, ld, dvAcc.data(), D,
                          queriesFor);
        }
      }
      const int64_t stride = KH * D;
      for (int64_t j = 0; j < T; ++j) {
        const int64_t row = (b * T + j) * stride + kh * D;
        std::copy(dkAcc.data() + j * D, dkAcc.data() + (j + 1) * D, dk + row);
        std::copy(dvAcc.data() + j * D, dvAcc.data() + (j + 1) * D, dv + row);
      }
    }
  }
}

void rope(int64_t batch, int64_t seq, int64_t heads, int64_t head, float theta, bool inverse,
          const float *x, float *y) {
  const int64_t half = head / 2;
  // cos and sin of pos * theta^(-2i/head), computed in double and rounded once.
  std::vector<float> cosines(static_cast<size_t>(seq * half)), sines(cosines.size());
  for (int64_t pos = 0; pos < seq; ++pos)
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(pos) *
          std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / head);
      cosines[pos * half + i] = static_cast<float>(std::cos(angle));
      sines[pos * half + i] = static_cast<float>(inverse ? -std::sin(angle) : std::sin(angle));
    }
  const int64_t rows = batch * seq;
#pragma omp parallel for schedule(static) if (rows * heads * head >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = r % seq;
    const float *c = cosines.data() + pos * half;
    const float *s = sines.data() + pos * half;
    for (int64_t h = 0; h < heads; ++h) {
      const float *xh = x + (r * heads + h) * head;
      float *yh = y + (r * heads + h) * head;
      for (int64_t i = 0; i < half; ++i) {
        const float lo = xh[i], hi = xh[i + half];
        yh[i] = lo * c[i] - hi * s[i];
        yh[i + half] = hi * c[i] + lo * s[i];
      }
    }
  }
}

} // namespace tessel::cpu
