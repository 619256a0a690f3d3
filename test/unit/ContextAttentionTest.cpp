//===- ContextAttentionTest.cpp - Attention over a head-tail split sequence ------===//
//
// Context parallelism's two attentions against the whole sequence's: each cp rank's block of
// the queries (chunks i and 2·ways − 1 − i, common/layout/HeadTail.h) attended to the gathered keys
// (AttentionArgs::headStart), and the ring, whose steps (attentionBlock) meet one rank's block
// of keys at a time and merge by log-sum-exp. Outputs and every gradient must be the whole
// attention's rows, for ways 2 and 3, grouped-query heads, causal or not.
//
//===----------------------------------------------------------------------===//

#include "common/layout/HeadTail.h"
#include "kernels/cpu/CpuKernels.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace tessel::cpu;
using tessel::test::randomFloats;

namespace {

using Floats = std::vector<float>;

struct Case {
  int64_t batch, seq, heads, kvHeads, head;
  bool causal;
};

const Case kCases[] = {{2, 8, 2, 2, 4, true}, {1, 12, 4, 2, 6, true}, {2, 8, 3, 1, 5, false}};

AttentionArgs wholeArgs(const Case &c) {
  AttentionArgs a;
  a.batch = c.batch;
  a.seq = a.kvSeq = c.seq;
  a.heads = c.heads;
  a.kvHeads = c.kvHeads;
  a.head = c.head;
  a.causal = c.causal;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head));
  return a;
}

/// Rank `index`'s head-tail block of [batch, seq, width] (width floats per position).
Floats blockOf(const Floats &whole, int64_t batch, int64_t seq, int64_t width, int64_t index,
               int64_t ways) {
  const int64_t local = seq / ways;
  Floats out(static_cast<size_t>(batch * local * width));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < local; ++i) {
      int64_t at = tessel::headtail::wholePosition(i, local, index, ways);
      std::copy_n(whole.begin() + (b * seq + at) * width, width,
                  out.begin() + (b * local + i) * width);
    }
  return out;
}

void expectNear(const Floats &got, const Floats &want, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 2e-5 + 2e-5 * std::fabs(want[i])) << what << " at " << i;
}

struct Inputs {
  Floats q, k, v, dout;
};

Inputs inputsFor(const Case &c, uint32_t seed) {
  const size_t qn = c.batch * c.seq * c.heads * c.head, kn = c.batch * c.seq * c.kvHeads * c.head;
  return {randomFloats(qn, -2, 2, seed), randomFloats(kn, -2, 2, seed + 1),
          randomFloats(kn, -1, 1, seed + 2), randomFloats(qn, -1, 1, seed + 3)};
}

TEST(ContextAttention, HeadTailQueriesAgainstGatheredKeys) {
  uint32_t seed = 900;
  for (const Case &c : kCases)
    for (int64_t ways : {2, 3}) {
      if (c.seq % (2 * ways) != 0)
        continue;
      const AttentionArgs whole = wholeArgs(c);
      const Inputs in = inputsFor(c, seed += 4);
      const int64_t qw = c.heads * c.head, local = c.seq / ways;
      Floats out(in.q.size()), dq(in.q.size()), dk(in.k.size()), dv(in.v.size());
      Floats lse(in.q.size() / c.head);
      attention(whole, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
      attentionGrad(whole, in.q.data(), in.k.data(), in.v.data(), in.dout.data(), dq.data(),
                    dk.data(), dv.data());
      Floats dkSum(dk.size(), 0.0f), dvSum(dv.size(), 0.0f);
      for (int64_t r = 0; r < ways; ++r) {
        std::string what = "ways " + std::to_string(ways) + " rank " + std::to_string(r);
        AttentionArgs a = whole;
        a.seq = local;
        a.headStart = tessel::headtail::chunkOf(r, ways, 0) * (local / 2);
        a.tailStart = tessel::headtail::chunkOf(r, ways, 1) * (local / 2);
        Floats q = blockOf(in.q, c.batch, c.seq, qw, r, ways);
        Floats dout = blockOf(in.dout, c.batch, c.seq, qw, r, ways);
        Floats o(q.size()), rdq(q.size()), rdk(in.k.size()), rdv(in.v.size());
        Floats rlse(q.size() / c.head);
        attention(a, q.data(), in.k.data(), in.v.data(), o.data(), rlse.data());
        expectNear(o, blockOf(out, c.batch, c.seq, qw, r, ways), what + " output");
        expectNear(rlse, blockOf(lse, c.batch, c.seq, c.heads, r, ways), what + " lse");
        // Odd ranks' gradients read the forward call's output and log-sum-exp.
        const bool saved = r % 2 == 1;
        attentionGrad(a, q.data(), in.k.data(), in.v.data(), dout.data(), rdq.data(), rdk.data(),
                      rdv.data(), saved ? o.data() : nullptr, saved ? rlse.data() : nullptr);
        expectNear(rdq, blockOf(dq, c.batch, c.seq, qw, r, ways), what + " dq");
        for (size_t i = 0; i < dk.size(); ++i)
          dkSum[i] += rdk[i], dvSum[i] += rdv[i];
      }
      // Each rank's key and value gradients are its addends: they sum to the whole's.
      expectNear(dkSum, dk, "ways " + std::to_string(ways) + " dk");
      expectNear(dvSum, dv, "ways " + std::to_string(ways) + " dv");
    }
}

TEST(ContextAttention, RingStepsMatchWholeAttention) {
  uint32_t seed = 950;
  for (const Case &c : kCases)
    for (int64_t ways : {2, 3}) {
      if (c.seq % (2 * ways) != 0)
        continue;
      const AttentionArgs whole = wholeArgs(c);
      const Inputs in = inputsFor(c, seed += 4);
      const int64_t qw = c.heads * c.head, kw = c.kvHeads * c.head, local = c.seq / ways;
      Floats out(in.q.size()), dq(in.q.size()), dk(in.k.size()), dv(in.v.size());
      Floats lse(in.q.size() / c.head);
      attention(whole, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
      attentionGrad(whole, in.q.data(), in.k.data(), in.v.data(), in.dout.data(), dq.data(),
                    dk.data(), dv.data());
      std::vector<Floats> ks, vs, dks(ways), dvs(ways);
      for (int64_t r = 0; r < ways; ++r) {
        ks.push_back(blockOf(in.k, c.batch, c.seq, kw, r, ways));
        vs.push_back(blockOf(in.v, c.batch, c.seq, kw, r, ways));
        dks[r].assign(ks[r].size(), 0.0f);
        dvs[r].assign(vs[r].size(), 0.0f);
      }
      for (int64_t r = 0; r < ways; ++r) {
        std::string what = "ways " + std::to_string(ways) + " rank " + std::to_string(r);
        RingBlockArgs a;
        a.attention = whole;
        a.attention.seq = a.attention.kvSeq = local;
        a.queryIndex = r;
        a.ways = ways;
        Floats q = blockOf(in.q, c.batch, c.seq, qw, r, ways);
        Floats dout = blockOf(in.dout, c.batch, c.seq, qw, r, ways);
        Floats o(q.size(), NAN), lse(q.size() / c.head, NAN);
        for (int64_t step = 0; step < ways; ++step) {
          a.keyIndex = (r - step + ways) % ways;
          attentionBlock(a, q.data(), ks[a.keyIndex].data(), vs[a.keyIndex].data(), step == 0,
                         o.data(), lse.data());
        }
        expectNear(o, blockOf(out, c.batch, c.seq, qw, r, ways), what + " output");
        // The backward steps: dq accumulates on the rank (zeroed at step 0); each block's key
        // and value gradients are summed over the ranks that met it.
        Floats rdq(q.size(), NAN);
        for (int64_t step = 0; step < ways; ++step) {
          a.keyIndex = (r - step + ways) % ways;
          Floats dkStep(ks[0].size(), NAN), dvStep(vs[0].size(), NAN), dqStep(q.size(), 0.0f);
          Floats &dqInto = step == 0 ? rdq : dqStep;
          attentionBlockGrad(a, q.data(), ks[a.keyIndex].data(), vs[a.keyIndex].data(), dout.data(),
                             o.data(), lse.data(), /*first=*/true, dqInto.data(), dkStep.data(),
                             dvStep.data());
          for (size_t i = 0; step > 0 && i < q.size(); ++i)
            rdq[i] += dqStep[i];
          for (size_t i = 0; i < dkStep.size(); ++i)
            dks[a.keyIndex][i] += dkStep[i], dvs[a.keyIndex][i] += dvStep[i];
        }
        expectNear(rdq, blockOf(dq, c.batch, c.seq, qw, r, ways), what + " dq");
      }
      for (int64_t r = 0; r < ways; ++r) {
        std::string what = "ways " + std::to_string(ways) + " block " + std::to_string(r);
        expectNear(dks[r], blockOf(dk, c.batch, c.seq, kw, r, ways), what + " dk");
        expectNear(dvs[r], blockOf(dv, c.batch, c.seq, kw, r, ways), what + " dv");
      }
    }
}

} // namespace

namespace {

// Rope on a rank's head-tail block turns each position as rope on the whole sequence does.
TEST(ContextAttention, RopeOnHeadTailBlock) {
  const int64_t batch = 2, seq = 12, heads = 3, head = 8, width = heads * head;
  const Floats x = randomFloats(batch * seq * width, -1, 1, 990);
  for (bool inverse : {false, true})
    for (int64_t ways : {2, 3}) {
      Floats whole(x.size());
      rope(batch, seq, heads, head, 10000.0f, inverse, x.data(), whole.data());
      const int64_t local = seq / ways;
      for (int64_t r = 0; r < ways; ++r) {
        Floats block = blockOf(x, batch, seq, width, r, ways), out(block.size());
        rope(batch, local, heads, head, 10000.0f, inverse, block.data(), out.data(),
             tessel::headtail::chunkOf(r, ways, 0) * (local / 2),
             tessel::headtail::chunkOf(r, ways, 1) * (local / 2));
        expectNear(out, blockOf(whole, batch, seq, width, r, ways),
                   "rope ways " + std::to_string(ways) + " rank " + std::to_string(r));
      }
    }
}

} // namespace
