//===- CpuAttentionKernelsTest.cpp - The CPU's attention and rope kernels -===//
//
// Attention (causal, full, grouped and multi-query, cross, sliding windows, a rank's block of the
// query heads) against a naive double-precision reference, its gradients against finite
// differences and an analytic reference, with and without the forward call's log-sum-exp; rope
// and its inverse, at every position and at given ones.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "test/unit/CpuKernelsTestSupport.h"
#include "test/unit/KernelShapes.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

using namespace tessel::cpu;

namespace {

using namespace tessel::test;

//===----------------------------------------------------------------------===//
// Attention and rope
//===----------------------------------------------------------------------===//

/// Attention in doubles; each query row's log-sum-exp goes to `lse` ([batch, seq, heads]) where
/// given.
Doubles attentionRef(const AttentionArgs &a, const Doubles &q, const Doubles &k, const Doubles &v,
                     Doubles *lse = nullptr) {
  const int64_t S = a.seq, T = a.kvSeq, H = a.heads, KH = a.kvHeads, D = a.head;
  Doubles out(q.size(), 0.0);
  if (lse)
    lse->assign(static_cast<size_t>(a.batch * S * H), 0.0);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / (H / KH);
      for (int64_t i = 0; i < S; ++i) {
        Doubles s(T, -INFINITY);
        double max = -INFINITY;
        for (int64_t j = 0; j < T; ++j) {
          if (a.causal && (j > i || (a.window > 0 && i - j >= a.window)))
            continue;
          double acc = 0;
          for (int64_t d = 0; d < D; ++d)
            acc += q[((b * S + i) * H + h) * D + d] * k[((b * T + j) * KH + kh) * D + d];
          s[j] = acc * a.scale;
          max = std::max(max, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < T; ++j)
          sum += std::exp(s[j] - max);
        if (lse)
          (*lse)[(b * S + i) * H + h] = max + std::log(sum);
        for (int64_t j = 0; j < T; ++j) {
          const double p = std::exp(s[j] - max) / sum;
          for (int64_t d = 0; d < D; ++d)
            out[((b * S + i) * H + h) * D + d] += p * v[((b * T + j) * KH + kh) * D + d];
        }
      }
    }
  return out;
}

AttentionArgs windowed(AttentionArgs a, int64_t window) {
  a.window = window;
  return a;
}

struct AttentionCase {
  const char *name;
  AttentionArgs args;
};

std::vector<AttentionCase> attentionCases() {
  return {
      {"causal", attentionOf(2, 5, 2, 5, 2, 4, true)},
      {"non-causal", attentionOf(2, 5, 2, 5, 2, 4, false)},
      {"gqa causal", attentionOf(2, 6, 4, 6, 2, 6, true)},
      {"mqa", attentionOf(1, 4, 3, 4, 1, 8, true)},
      {"cross", attentionOf(2, 3, 4, 7, 2, 5, false)},
      {"sliding window", windowed(attentionOf(2, 7, 2, 7, 1, 4, true), 3)},
  };
}

TEST(CpuKernelsAttention, ForwardMatchesReference) {
  uint32_t seed = 600;
  for (const AttentionCase &c : attentionCases()) {
    const AttentionArgs &a = c.args;
    const size_t qSize = static_cast<size_t>(a.batch * a.seq * a.heads * a.head);
    const size_t kSize = static_cast<size_t>(a.batch * a.kvSeq * a.kvHeads * a.head);
    const Floats q = randomFloats(qSize, -2, 2, seed++), k = randomFloats(kSize, -2, 2, seed++),
                 v = randomFloats(kSize, -1, 1, seed++);
    Floats out(qSize, NAN);
    attention(a, q.data(), k.data(), v.data(), out.data());
    expectClose(out, attentionRef(a, toDoubles(q), toDoubles(k), toDoubles(v)), 1e-5, 1e-6, c.name);
  }
}

TEST(CpuKernelsAttention, CausalMaskIgnoresLaterKeys) {
  // Changing the last key and value changes no output row but the last.
  AttentionArgs a = attentionOf(1, 4, 1, 4, 1, 3, true);
  const Floats q = randomFloats(12, -1, 1, 650), k = randomFloats(12, -1, 1, 651);
  Floats v = randomFloats(12, -1, 1, 652), k2 = k;
  Floats out(12), out2(12);
  attention(a, q.data(), k.data(), v.data(), out.data());
  for (int d = 9; d < 12; ++d) {
    k2[d] += 5;
    v[d] += 5;
  }
  attention(a, q.data(), k2.data(), v.data(), out2.data());
  for (int i = 0; i < 9; ++i)
    EXPECT_EQ(out[i], out2[i]) << i;
  EXPECT_NE(out[9], out2[9]);
}

TEST(CpuKernelsAttention, GradMatchesFiniteDifferences) {
  uint32_t seed = 700;
  for (const AttentionCase &c : attentionCases()) {
    const AttentionArgs &a = c.args;
    const size_t qSize = static_cast<size_t>(a.batch * a.seq * a.heads * a.head);
    const size_t kSize = static_cast<size_t>(a.batch * a.kvSeq * a.kvHeads * a.head);
    const Floats q = randomFloats(qSize, -2, 2, seed++), k = randomFloats(kSize, -2, 2, seed++),
                 v = randomFloats(kSize, -1, 1, seed++);
    const Floats dout = randomFloats(qSize, -1, 1, seed++);
    Floats dq(qSize, NAN), dk(kSize, NAN), dv(kSize, NAN);
    attentionGrad(a, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data());
    const Doubles qd = toDoubles(q), kd = toDoubles(k), vd = toDoubles(v), w = toDoubles(dout);
    const std::string name = c.name;
    expectClose(
        dq,
        numericGradient([&](const Doubles &x) { return dot(w, attentionRef(a, x, kd, vd)); }, qd),
        1e-4, 1e-5, name + " dq");
    expectClose(
        dk,
        numericGradient([&](const Doubles &x) { return dot(w, attentionRef(a, qd, x, vd)); }, kd),
        1e-4, 1e-5, name + " dk");
    expectClose(
        dv,
        numericGradient([&](const Doubles &x) { return dot(w, attentionRef(a, qd, kd, x)); }, vd),
        1e-4, 1e-5, name + " dv");
  }
}

/// dq, dk, dv of sum(w * attention(q, k, v)), analytically in double.
void attentionGradRef(const AttentionArgs &a, const Doubles &q, const Doubles &k, const Doubles &v,
                      const Doubles &w, Doubles &dq, Doubles &dk, Doubles &dv) {
  const int64_t S = a.seq, T = a.kvSeq, H = a.heads, KH = a.kvHeads, D = a.head;
  dq.assign(q.size(), 0.0);
  dk.assign(k.size(), 0.0);
  dv.assign(v.size(), 0.0);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / (H / KH);
      auto qAt = [&](int64_t i, int64_t d) { return ((b * S + i) * H + h) * D + d; };
      auto kAt = [&](int64_t j, int64_t d) { return ((b * T + j) * KH + kh) * D + d; };
      for (int64_t i = 0; i < S; ++i) {
        const int64_t keys = a.causal ? std::min(i + 1, T) : T;
        const int64_t begin = a.causal && a.window > 0 ? std::max<int64_t>(0, i - a.window + 1) : 0;
        Doubles p(keys), dp(keys);
        double max = -INFINITY, sum = 0, pdp = 0;
        for (int64_t j = begin; j < keys; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += q[qAt(i, d)] * k[kAt(j, d)];
          p[j] = s * a.scale;
          max = std::max(max, p[j]);
        }
        for (int64_t j = begin; j < keys; ++j)
          sum += (p[j] = std::exp(p[j] - max));
        for (int64_t j = begin; j < keys; ++j) {
          p[j] /= sum;
          for (int64_t d = 0; d < D; ++d)
            dp[j] += w[qAt(i, d)] * v[kAt(j, d)];
          pdp += p[j] * dp[j];
        }
        for (int64_t j = begin; j < keys; ++j) {
          const double ds = p[j] * (dp[j] - pdp) * a.scale;
          for (int64_t d = 0; d < D; ++d) {
            dq[qAt(i, d)] += ds * k[kAt(j, d)];
            dk[kAt(j, d)] += ds * q[qAt(i, d)];
            dv[kAt(j, d)] += p[j] * w[qAt(i, d)];
          }
        }
      }
    }
}

TEST(CpuKernelsAttention, LargerShapesMatchReference) {
  // More queries than one block (64), head sizes with a vector tail, GQA, and a key count
  // that is not a multiple of the register block.
  const AttentionCase cases[] = {
      {"causal gqa", attentionOf(2, 70, 4, 70, 2, 12, true)},
      {"non-causal", attentionOf(1, 67, 2, 67, 2, 20, false)},
      {"cross", attentionOf(1, 9, 3, 131, 1, 7, false)},
      {"window 16", windowed(attentionOf(2, 150, 4, 150, 2, 12, true), 16)},
      {"window 70, blocks straddled", windowed(attentionOf(1, 200, 2, 200, 1, 20, true), 70)},
      {"window 1", windowed(attentionOf(1, 70, 2, 70, 2, 8, true), 1)},
      {"window past the start", windowed(attentionOf(1, 40, 2, 40, 2, 8, true), 500)},
  };
  uint32_t seed = 750;
  for (const AttentionCase &c : cases) {
    const AttentionArgs &a = c.args;
    const size_t qSize = static_cast<size_t>(a.batch * a.seq * a.heads * a.head);
    const size_t kSize = static_cast<size_t>(a.batch * a.kvSeq * a.kvHeads * a.head);
    const Floats q = randomFloats(qSize, -2, 2, seed++), k = randomFloats(kSize, -2, 2, seed++),
                 v = randomFloats(kSize, -1, 1, seed++);
    const Floats dout = randomFloats(qSize, -1, 1, seed++);
    Floats out(qSize, NAN), dq(qSize, NAN), dk(kSize, NAN), dv(kSize, NAN);
    attention(a, q.data(), k.data(), v.data(), out.data());
    attentionGrad(a, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data());
    const Doubles qd = toDoubles(q), kd = toDoubles(k), vd = toDoubles(v);
    Doubles wantQ, wantK, wantV, wantLse;
    attentionGradRef(a, qd, kd, vd, toDoubles(dout), wantQ, wantK, wantV);
    const Doubles wantOut = attentionRef(a, qd, kd, vd, &wantLse);
    const std::string name = c.name;
    expectClose(out, wantOut, 1e-5, 1e-6, name + " out");
    expectClose(dq, wantQ, 1e-4, 1e-5, name + " dq");
    expectClose(dk, wantK, 1e-4, 1e-5, name + " dk");
    expectClose(dv, wantV, 1e-4, 1e-5, name + " dv");
    // The forward call that keeps each row's log-sum-exp writes the same output, and the
    // gradient that reads them computes no forward pass and gets the same gradients.
    Floats kept(qSize, NAN), lse(wantLse.size(), NAN);
    attention(a, q.data(), k.data(), v.data(), kept.data(), lse.data());
    EXPECT_EQ(kept, out) << name;
    expectClose(lse, wantLse, 1e-5, 1e-6, name + " lse");
    Floats savedQ(qSize, NAN), savedK(kSize, NAN), savedV(kSize, NAN);
    attentionGrad(a, q.data(), k.data(), v.data(), dout.data(), savedQ.data(), savedK.data(),
                  savedV.data(), kept.data(), lse.data());
    expectClose(savedQ, wantQ, 1e-4, 1e-5, name + " dq from lse");
    expectClose(savedK, wantK, 1e-4, 1e-5, name + " dk from lse");
    expectClose(savedV, wantV, 1e-4, 1e-5, name + " dv from lse");
  }
}

TEST(CpuKernelsAttention, BlockOfQueryHeadsReadsTheirKvHeads) {
  // Tensor parallelism over more ranks than kv heads: each rank holds a block of the query
  // heads (firstHead, group) and every kv head. Its outputs and dq are its block of the whole
  // attention's, and the ranks' dk and dv add up to the whole's, each zero at the kv heads
  // its query heads do not read. 6 query heads in 2 groups over 3 ranks straddle a group.
  struct Split {
    const char *name;
    AttentionArgs whole;
    int64_t ranks;
  };
  const Split splits[] = {
      {"mqa over 2", attentionOf(2, 9, 4, 9, 1, 6, true), 2},
      {"mqa over 4", attentionOf(1, 70, 4, 70, 1, 8, true), 4},
      {"gqa 8/2 over 4", windowed(attentionOf(2, 11, 8, 11, 2, 4, true), 5), 4},
      {"gqa 6/2 over 3", attentionOf(2, 7, 6, 7, 2, 4, false), 3},
  };
  uint32_t seed = 780;
  for (const Split &c : splits) {
    const AttentionArgs &w = c.whole;
    const int64_t S = w.seq, H = w.heads, D = w.head, local = H / c.ranks;
    const size_t qSize = static_cast<size_t>(w.batch * S * H * D);
    const size_t kSize = static_cast<size_t>(w.batch * w.kvSeq * w.kvHeads * D);
    const Floats q = randomFloats(qSize, -2, 2, seed++), k = randomFloats(kSize, -2, 2, seed++),
                 v = randomFloats(kSize, -1, 1, seed++), dout = randomFloats(qSize, -1, 1, seed++);
    const Doubles wantOut = attentionRef(w, toDoubles(q), toDoubles(k), toDoubles(v));
    Doubles wantQ, wantK, wantV;
    attentionGradRef(w, toDoubles(q), toDoubles(k), toDoubles(v), toDoubles(dout), wantQ, wantK,
                     wantV);
    Doubles sumK(kSize, 0.0), sumV(kSize, 0.0);
    for (int64_t r = 0; r < c.ranks; ++r) {
      AttentionArgs a = w;
      a.heads = local;
      a.firstHead = r * local;
      a.group = H / w.kvHeads;
      // This rank's block of the query heads, [batch, seq, local, head].
      auto block = [&](const auto &x) {
        std::vector<typename std::decay_t<decltype(x)>::value_type> out;
        for (int64_t row = 0; row < w.batch * S; ++row)
          out.insert(out.end(), x.begin() + (row * H + r * local) * D,
                     x.begin() + (row * H + (r + 1) * local) * D);
        return out;
      };
      const Floats qr = block(q), doutr = block(dout);
      Floats out(qr.size(), NAN), dq(qr.size(), NAN), dk(kSize, NAN), dv(kSize, NAN);
      Floats lse(qr.size() / static_cast<size_t>(D), NAN);
      attention(a, qr.data(), k.data(), v.data(), out.data(), lse.data());
      // Odd ranks' gradients read the forward call's output and log-sum-exp.
      const bool saved = r % 2 == 1;
      attentionGrad(a, qr.data(), k.data(), v.data(), doutr.data(), dq.data(), dk.data(), dv.data(),
                    saved ? out.data() : nullptr, saved ? lse.data() : nullptr);
      const std::string name = std::string(c.name) + " rank " + std::to_string(r);
      expectClose(out, block(wantOut), 1e-5, 1e-6, name + " out");
      expectClose(dq, block(wantQ), 1e-4, 1e-5, name + " dq");
      for (size_t i = 0; i < kSize; ++i) {
        const int64_t kh = static_cast<int64_t>(i) / D % w.kvHeads;
        const bool read = kh * a.group < (r + 1) * local && (kh + 1) * a.group > r * local;
        if (!read) {
          EXPECT_EQ(dk[i], 0.0f) << name << " dk " << i;
          EXPECT_EQ(dv[i], 0.0f) << name << " dv " << i;
        }
        sumK[i] += dk[i];
        sumV[i] += dv[i];
      }
    }
    expectClose(Floats(sumK.begin(), sumK.end()), wantK, 1e-4, 1e-5, std::string(c.name) + " dk");
    expectClose(Floats(sumV.begin(), sumV.end()), wantV, 1e-4, 1e-5, std::string(c.name) + " dv");
  }
}

Doubles ropeRef(int64_t batch, int64_t seq, int64_t heads, int64_t head, double theta, bool inverse,
                const Doubles &x) {
  Doubles y(x.size());
  const int64_t half = head / 2;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t p = 0; p < seq; ++p)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const double angle = (inverse ? -1 : 1) * p * std::pow(theta, -2.0 * i / head);
          const int64_t base = ((b * seq + p) * heads + h) * head;
          const double lo = x[base + i], hi = x[base + i + half];
          y[base + i] = lo * std::cos(angle) - hi * std::sin(angle);
          y[base + i + half] = hi * std::cos(angle) + lo * std::sin(angle);
        }
  return y;
}

TEST(CpuKernelsAttention, Rope) {
  const int64_t batch = 2, seq = 9, heads = 3, head = 8;
  const float theta = 10000.0f;
  const Floats x = randomFloats(batch * seq * heads * head, -1, 1, 800);
  Floats y(x.size()), back(x.size());
  rope(batch, seq, heads, head, theta, false, x.data(), y.data());
  expectClose(y, ropeRef(batch, seq, heads, head, theta, false, toDoubles(x)), 1e-5, 1e-6, "rope");
  rope(batch, seq, heads, head, theta, true, y.data(), back.data());
  expectClose(back, toDoubles(x), 1e-5, 1e-6, "rope inverse undoes rope");
  // The inverse is the transpose: <rope(x), w> == <x, rope^-1(w)>, so it is the gradient.
  const Floats w = randomFloats(x.size(), -1, 1, 801);
  Floats wBack(x.size());
  rope(batch, seq, heads, head, theta, true, w.data(), wBack.data());
  EXPECT_NEAR(dot(toDoubles(y), toDoubles(w)), dot(toDoubles(x), toDoubles(wBack)), 1e-4);
  // In place.
  Floats inPlace = x;
  rope(batch, seq, heads, head, theta, false, inPlace.data(), inPlace.data());
  EXPECT_EQ(inPlace, y);
}

TEST(CpuKernelsAttention, RopeAtGivenPositionsTurnsAsRopeOverTheWholeSequence) {
  // Rows at positions 6 .. 10 of a sequence (batch 0) and 2 .. 6 (batch 1) turn as those rows
  // of rope over 11 positions, to the bit; a negative position turns by 0.
  const int64_t batch = 2, seq = 5, whole = 11, heads = 3, head = 10;
  const int64_t row = heads * head;
  const Floats longer = randomFloats(batch * whole * row, -1, 1, 820);
  for (bool inverse : {false, true}) {
    Floats turned(longer.size());
    rope(batch, whole, heads, head, 10000.0f, inverse, longer.data(), turned.data());
    const int64_t shifts[] = {6, 2};
    Floats x(batch * seq * row), want(x.size());
    std::vector<int32_t> positions;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t from = (b * whole + shifts[b] + s) * row, to = (b * seq + s) * row;
        std::copy(longer.begin() + from, longer.begin() + from + row, x.begin() + to);
        std::copy(turned.begin() + from, turned.begin() + from + row, want.begin() + to);
        positions.push_back(static_cast<int32_t>(shifts[b] + s));
      }
    Floats y(x.size());
    rope(batch, seq, heads, head, 10000.0f, inverse, x.data(), y.data(), -1, -1, {},
         positions.data());
    EXPECT_EQ(y, want) << (inverse ? "inverse" : "forward");
  }
  // A padding slot (negative position) is left as it is.
  const Floats x = randomFloats(row, -1, 1, 821);
  const std::vector<int32_t> padding = {-3};
  Floats y(row);
  rope(1, 1, heads, head, 10000.0f, false, x.data(), y.data(), -1, -1, {}, padding.data());
  EXPECT_EQ(y, x);
}

} // namespace
