//===- CudaAttentionKernelsTest.cpp - The CUDA attention and rope kernels -===//
//
// Attention forward and backward (causal, full, sliding windows, the largest head, a block of
// the query heads, head-tail queries, ring steps), attention over paged caches, and rope at
// every position and at given ones, against the CPU kernels on the same random inputs.
//
// Built only where CMake found the CUDA toolkit; on a machine without a GPU every test is
// skipped with "skipped: no CUDA device" and the reason, never passed.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cuda/CudaKernels.h"
#include "test/unit/CudaKernelsTestSupport.h"
#include "test/unit/DeviceArray.h"
#include "test/unit/KernelShapes.h"
#include "test/unit/PagedScene.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace cpu = tessel::cpu;
namespace cuda = tessel::cuda;

namespace {

using namespace tessel::test;

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, RopeAndItsInverseMatchCpu) {
  const int64_t batch = 3, seq = 37, heads = 5, head = 22, n = batch * seq * heads * head;
  const Floats x = randomFloats(n, -2, 2, 420);
  for (bool inverse : {false, true}) {
    Floats y(n);
    cpu::rope(batch, seq, heads, head, 10000.0f, inverse, x.data(), y.data());
    DeviceArray<float> gx(x), gy(n);
    ASSERT_EQ(cuda::rope(batch, seq, heads, head, 10000.0f, inverse, gx.get(), gy.get(), stream),
              cudaSuccess);
    expectClose(y, gy.host(), inverse ? "rope inverse" : "rope", 1e-6f, 1e-6f);
  }
  // A head-tail block: positions 8..25 and 56..73 of a longer sequence (seq 36 here).
  {
    const int64_t s2 = 36, n2 = batch * s2 * heads * head;
    const Floats x2 = randomFloats(n2, -2, 2, 421);
    Floats y2(n2);
    cpu::rope(batch, s2, heads, head, 10000.0f, false, x2.data(), y2.data(), 8, 56);
    DeviceArray<float> gx2(x2), gy2(n2);
    ASSERT_EQ(
        cuda::rope(batch, s2, heads, head, 10000.0f, false, gx2.get(), gy2.get(), stream, 8, 56),
        cudaSuccess);
    expectClose(y2, gy2.host(), "rope head-tail", 1e-6f, 1e-6f);
  }
  DeviceArray<float> gx(x), gy(n);
  EXPECT_EQ(cuda::rope(batch, seq, heads, 7, 10000.0f, false, gx.get(), gy.get(), stream),
            cudaErrorInvalidValue);
}

TEST_F(CudaKernels, RopeAtGivenPositionsMatchesCpu) {
  // Each row at its own position, padding slots (negative) among them.
  const int64_t batch = 3, seq = 7, heads = 5, head = 22, n = batch * seq * heads * head;
  std::mt19937 rng(430);
  std::vector<int32_t> positions(batch * seq);
  for (int32_t &p : positions)
    p = static_cast<int32_t>(rng() % 500) - 50;
  positions[4] = -1;
  const Floats x = randomFloats(n, -2, 2, 431);
  DeviceArray<int32_t> gpositions(positions);
  for (bool inverse : {false, true}) {
    Floats y(n);
    cpu::rope(batch, seq, heads, head, 10000.0f, inverse, x.data(), y.data(), -1, -1, {},
              positions.data());
    DeviceArray<float> gx(x), gy(n);
    ASSERT_EQ(cuda::rope(batch, seq, heads, head, 10000.0f, inverse, gx.get(), gy.get(), stream, -1,
                         -1, {}, gpositions.get()),
              cudaSuccess);
    expectClose(y, gy.host(), inverse ? "rope at positions, inverse" : "rope at positions", 1e-6f,
                1e-6f);
  }
}

//===----------------------------------------------------------------------===//
// Attention over paged caches
//===----------------------------------------------------------------------===//

/// The CUDA kernels against the CPU kernel on one call: the output and both caches (copies:
/// the same bits).
void checkPaged(const tessel::test::PagedScene &x, const std::string &what) {
  const cpu::PagedAttentionArgs &a = x.args;
  Floats out(x.q.size()), kCache = x.kCache, vCache = x.vCache;
  cpu::pagedAttention(a, x.q.data(), x.k.data(), x.v.data(), x.positions.data(), x.table.data(),
                      out.data(), kCache.data(), vCache.data());
  DeviceArray<float> gq(x.q), gk(x.k), gv(x.v), gout(Floats(x.q.size(), NAN)), gkCache(x.kCache),
      gvCache(x.vCache), work(static_cast<size_t>(cuda::pagedAttentionWorkspace(a)));
  DeviceArray<int32_t> gpositions(x.positions), gtable(x.table);
  ASSERT_EQ(cuda::pagedAttention(a, gq.get(), gk.get(), gv.get(), gpositions.get(), gtable.get(),
                                 gout.get(), gkCache.get(), gvCache.get(), work.get(), nullptr),
            cudaSuccess)
      << what;
  expectClose(out, gout.host(), "out of " + what, 2e-5f, 1e-4f);
  expectClose(kCache, gkCache.host(), "key cache of " + what, 0, 0);
  expectClose(vCache, gvCache.host(), "value cache of " + what, 0, 0);
}

TEST_F(CudaKernels, PagedAttentionMatchesCpu) {
  // The longer caches are split over several blocks per (token, head), the others not.
  uint32_t seed = 600;
  for (const tessel::test::PagedSpec &spec : tessel::test::pagedSpecs())
    checkPaged(tessel::test::pagedScene(spec, seed += 10), describe(spec));
}

TEST_F(CudaKernels, PagedAttentionSkipsTokensReachingBlocksOutOfRange) {
  // As the CPU test: sequence 0's first block unnamed, sequence 1's past the caches, a token of
  // sequence 2 past its table row; once with one part per (token, head), once split.
  for (size_t spec : {size_t(1), size_t(6)}) {
    tessel::test::PagedScene x = tessel::test::pagedScene(tessel::test::pagedSpecs()[spec], 690);
    const cpu::PagedAttentionArgs &a = x.args;
    x.table[0] = -1;
    x.table[a.maxBlocks] = static_cast<int32_t>(a.blocks);
    x.positions[2 * a.seq] = static_cast<int32_t>(a.maxBlocks * a.blockSize);
    checkPaged(x, "blocks out of range, " + describe(tessel::test::pagedSpecs()[spec]));
  }
}

TEST_F(CudaKernels, PagedAttentionRefusesWhatItCannotTake) {
  const tessel::test::PagedScene x = tessel::test::pagedScene(tessel::test::pagedSpecs()[5], 695);
  DeviceArray<float> buffer(x.kCache.size());
  DeviceArray<int32_t> ids(x.table.size());
  cpu::PagedAttentionArgs a = x.args;
  // Its caches are split, and no workspace is given.
  ASSERT_GT(cuda::pagedAttentionWorkspace(a), 0);
  EXPECT_EQ(cuda::pagedAttention(a, buffer.get(), buffer.get(), buffer.get(), ids.get(), ids.get(),
                                 buffer.get(), buffer.get(), buffer.get(), nullptr, stream),
            cudaErrorInvalidValue);
  a.head = cuda::kMaxAttentionHead + 2;
  EXPECT_EQ(cuda::pagedAttention(a, buffer.get(), buffer.get(), buffer.get(), ids.get(), ids.get(),
                                 buffer.get(), buffer.get(), buffer.get(), buffer.get(), stream),
            cudaErrorInvalidValue);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// Forward and backward on both backends from the same random q, k, v and dout.
void checkAttention(const cpu::AttentionArgs &a, uint32_t seed) {
  const int64_t nq = a.batch * a.seq * a.heads * a.head;
  const int64_t nkv = a.batch * a.kvSeq * a.kvHeads * a.head;
  const Floats q = randomFloats(nq, -1, 1, seed), k = randomFloats(nkv, -1, 1, seed + 1),
               v = randomFloats(nkv, -1, 1, seed + 2), dout = randomFloats(nq, -1, 1, seed + 3);
  const int64_t rows = a.batch * a.seq * a.heads;
  Floats out(nq), lse(rows), dq(nq), dk(nkv), dv(nkv);
  cpu::attention(a, q.data(), k.data(), v.data(), out.data(), lse.data());
  cpu::attentionGrad(a, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data());
  DeviceArray<float> gq(q), gk(k), gv(v), gdout(dout), gout(nq), glse(rows), gdq(nq),
      gdk(Floats(nkv, 5.0f)), gdv(Floats(nkv, 5.0f)),
      work(cuda::attentionGradWorkspace(a, /*saved=*/false));
  ASSERT_EQ(cuda::attention(a, gq.get(), gk.get(), gv.get(), gout.get(), glse.get(), nullptr),
            cudaSuccess)
      << describe(a);
  ASSERT_EQ(cuda::attentionGrad(a, gq.get(), gk.get(), gv.get(), gdout.get(), nullptr, nullptr,
                                gdq.get(), gdk.get(), gdv.get(), work.get(), nullptr),
            cudaSuccess)
      << describe(a);
  expectClose(out, gout.host(), "out of " + describe(a), 2e-5f, 1e-4f);
  expectClose(lse, glse.host(), "lse of " + describe(a), 2e-5f, 1e-4f);
  const Floats gotQ = gdq.host(), gotK = gdk.host(), gotV = gdv.host();
  expectClose(dq, gotQ, "dq of " + describe(a), 2e-5f, 1e-3f);
  expectClose(dk, gotK, "dk of " + describe(a), 2e-5f, 1e-3f);
  expectClose(dv, gotV, "dv of " + describe(a), 2e-5f, 1e-3f);
  // From the forward call's output and lse, the forward pass is not run again: the rows it
  // would recompute are those bits, so the gradients are the same bits.
  // Its workspace holds only the rows' statistics.
  DeviceArray<float> sdq(nq), sdk(Floats(nkv, 5.0f)), sdv(Floats(nkv, 5.0f)),
      savedWork(cuda::attentionGradWorkspace(a, /*saved=*/true));
  ASSERT_EQ(cuda::attentionGrad(a, gq.get(), gk.get(), gv.get(), gdout.get(), gout.get(),
                                glse.get(), sdq.get(), sdk.get(), sdv.get(), savedWork.get(),
                                nullptr),
            cudaSuccess)
      << describe(a);
  EXPECT_TRUE(sdq.host() == gotQ && sdk.host() == gotK && sdv.host() == gotV)
      << describe(a) << ": the gradients from the saved lse differ from the recomputed ones";
}

TEST_F(CudaKernels, AttentionMatchesCpuCausalAndFull) {
  // Causal over several tiles, a ragged last tile, grouped kv heads.
  checkAttention(attentionOf(2, 77, 4, 77, 2, 24, true, 0), 500);
  // Full attention over fewer keys than queries, one kv head per head.
  checkAttention(attentionOf(1, 45, 3, 70, 3, 64, false, 0), 510);
  // One query, one key.
  checkAttention(attentionOf(1, 1, 1, 1, 1, 8, true, 0), 520);
  // An odd head size.
  checkAttention(attentionOf(2, 33, 2, 33, 1, 13, true, 0), 530);
}

TEST_F(CudaKernels, AttentionMatchesCpuWithASlidingWindow) {
  checkAttention(attentionOf(2, 99, 2, 99, 1, 32, true, 5), 540);
  checkAttention(attentionOf(1, 70, 4, 70, 4, 16, true, 40), 550);
}

TEST_F(CudaKernels, AttentionMatchesCpuAtTheLargestHead) {
  checkAttention(attentionOf(1, 65, 2, 65, 2, 128, true, 0), 560);
  checkAttention(attentionOf(1, 40, 1, 50, 1, 128, false, 0), 570);
}

TEST_F(CudaKernels, AttentionMatchesCpuOnABlockOfQueryHeads) {
  // Heads 2 and 3 of 8 over 2 kv heads (4 query heads each): both read kv head 0, and kv head
  // 1's gradients are zero here.
  cpu::AttentionArgs a = attentionOf(2, 41, 2, 41, 2, 16, true, 0);
  a.firstHead = 2;
  a.group = 4;
  checkAttention(a, 580);
  // Heads 3 and 4 of 8: they straddle the two kv heads.
  a.firstHead = 3;
  checkAttention(a, 590);
}

TEST_F(CudaKernels, AttentionMatchesCpuOnHeadTailQueries) {
  // Context parallelism, rank 1 of 2: 24 queries, chunks 1 and 2 (positions 12..23 and 24..35)
  // of a 48-long key sequence.
  cpu::AttentionArgs a = attentionOf(2, 24, 2, 48, 1, 16, true, 0);
  a.headStart = 12;
  a.tailStart = 24;
  checkAttention(a, 595);
  // Rank 0 of 2: chunks 0 and 3, with a sliding window.
  a.headStart = 0;
  a.tailStart = 36;
  a.window = 7;
  checkAttention(a, 597);
}

/// Step `step` of rank `me` in a ring of `ways`: the CPU's RingBlockArgs, the CUDA kernels'
/// AttentionArgs with both blocks placed, and the random keys and values of the block's rank.
struct RingStep {
  cpu::RingBlockArgs r;
  cuda::AttentionArgs a;
  Floats k, v;
  std::string what;
};

RingStep ringStep(const cpu::AttentionArgs &shape, int64_t ways, int64_t me, int64_t step,
                  uint32_t seed) {
  RingStep s;
  s.r.attention = shape;
  s.r.ways = ways;
  s.r.queryIndex = me;
  s.r.keyIndex = (me - step + ways) % ways;
  const int64_t S = shape.seq, nkv = shape.batch * S * shape.kvHeads * shape.head;
  s.k = randomFloats(nkv, -1, 1, seed + 100 + static_cast<uint32_t>(s.r.keyIndex));
  s.v = randomFloats(nkv, -1, 1, seed + 200 + static_cast<uint32_t>(s.r.keyIndex));
  s.a = shape;
  s.a.headStart = s.r.queryPosition(0);
  s.a.tailStart = s.r.queryPosition(S / 2);
  s.a.keyHeadStart = s.r.keyPosition(0);
  s.a.keyTailStart = s.r.keyPosition(S / 2);
  s.what = "ring of " + std::to_string(ways) + ", rank " + std::to_string(me) + " step " +
           std::to_string(step) + ": " + describe(s.a);
  return s;
}

/// One ring of `ways` ranks over random q, k, v (each rank's blocks head-tail; kvSeq = seq):
/// each rank's steps 0 .. ways - 1 forward and backward on both backends. Each step starts from
/// the CPU's state before it, so every step is checked on its own.
void checkRing(const cpu::AttentionArgs &shape, int64_t ways, uint32_t seed) {
  const int64_t nq = shape.batch * shape.seq * shape.heads * shape.head;
  const int64_t nkv = shape.batch * shape.seq * shape.kvHeads * shape.head, rows = nq / shape.head;
  for (int64_t me = 0; me < ways; ++me) {
    const uint32_t mine = seed + 10 * static_cast<uint32_t>(me);
    const Floats q = randomFloats(nq, -1, 1, mine), dout = randomFloats(nq, -1, 1, mine + 1);
    Floats out(nq), lse(rows), dq(nq), dk(nkv), dv(nkv);
    for (int64_t step = 0; step < ways; ++step) {
      const RingStep s = ringStep(shape, ways, me, step, seed);
      DeviceArray<float> gq(q), gk(s.k), gv(s.v), gout(out), glse(lse),
          work(cuda::attentionBlockWorkspace(s.a));
      ASSERT_EQ(cuda::attentionBlock(s.a, gq.get(), gk.get(), gv.get(), step == 0, gout.get(),
                                     glse.get(), work.get(), nullptr),
                cudaSuccess)
          << s.what;
      cpu::attentionBlock(s.r, q.data(), s.k.data(), s.v.data(), step == 0, out.data(), lse.data());
      expectClose(out, gout.host(), "out of " + s.what, 2e-5f, 1e-4f);
      expectClose(lse, glse.host(), "lse of " + s.what, 2e-5f, 1e-5f);
    }
    // Backward from the whole attention's output and log-sum-exp; stale values in the
    // gradients at step 0 must be zeroed.
    for (int64_t step = 0; step < ways; ++step) {
      const RingStep s = ringStep(shape, ways, me, step, seed);
      DeviceArray<float> gq(q), gk(s.k), gv(s.v), gdout(dout), gout(out), glse(lse),
          gdq(step == 0 ? Floats(nq, 5.0f) : dq), gdk(step == 0 ? Floats(nkv, 5.0f) : dk),
          gdv(step == 0 ? Floats(nkv, 5.0f) : dv), work(cuda::attentionBlockGradWorkspace(s.a));
      ASSERT_EQ(cuda::attentionBlockGrad(s.a, gq.get(), gk.get(), gv.get(), gdout.get(), gout.get(),
                                         glse.get(), step == 0, gdq.get(), gdk.get(), gdv.get(),
                                         work.get(), nullptr),
                cudaSuccess)
          << s.what;
      cpu::attentionBlockGrad(s.r, q.data(), s.k.data(), s.v.data(), dout.data(), out.data(),
                              lse.data(), step == 0, dq.data(), dk.data(), dv.data());
      expectClose(dq, gdq.host(), "dq of " + s.what, 2e-5f, 1e-3f);
      expectClose(dk, gdk.host(), "dk of " + s.what, 2e-5f, 1e-3f);
      expectClose(dv, gdv.host(), "dv of " + s.what, 2e-5f, 1e-3f);
    }
  }
}

TEST_F(CudaKernels, RingAttentionStepsMatchCpu) {
  // Two ranks, causal, grouped kv heads, blocks of 2 x 20 positions (a ragged tile).
  checkRing(attentionOf(2, 40, 4, 40, 2, 16, true, 0), 2, 600);
  // Three ranks, causal: blocks no query of a rank sees, and queries that see none of a block.
  checkRing(attentionOf(1, 18, 2, 18, 2, 24, true, 0), 3, 610);
  // Not causal, the largest head.
  checkRing(attentionOf(1, 34, 2, 34, 1, 128, false, 0), 2, 620);
}

TEST_F(CudaKernels, AttentionRefusesHeadsItCannotTake) {
  DeviceArray<float> x(1024);
  EXPECT_EQ(cuda::attention(attentionOf(1, 2, 1, 2, 1, 129, true, 0), x.get(), x.get(), x.get(),
                            x.get(), nullptr, stream),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::attention(attentionOf(1, 2, 1, 3, 1, 8, true, 0), x.get(), x.get(), x.get(),
                            x.get(), nullptr, stream),
            cudaErrorInvalidValue);
}

} // namespace
