//===- AttentionChecks.cpp - Checks of attention, position and embedding kernels ===//
//
// The checks (KernelChecks.h) of attention (sizes, head and sequence blocks under tensor and
// context parallelism, the saved output and log-sum-exp), ring attention's steps, paged
// attention and running sums over the caches, rope and the embedding lookups.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/KernelChecks.h"

#include "common/layout/HeadTail.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace tessel::rt {

using namespace checks;
using kernels::Shape;
using kernels::Strides;

//===----------------------------------------------------------------------===//
// Attention, positions, embeddings
//===----------------------------------------------------------------------===//

template <class P> bool attentionArgsOf(KernelCall &c, const P &p, kernels::AttentionArgs &a) {
  a.batch = p.batch;
  a.seq = p.seq;
  a.heads = p.heads;
  a.kvSeq = p.kv_seq;
  a.kvHeads = p.kv_heads;
  a.head = p.head;
  a.causal = p.causal != 0;
  a.scale = static_cast<float>(p.scale);
  a.window = p.window.value_or(0);
  // Under a head group this rank holds a block of the query heads and every kv head.
  int64_t wholeHeads = a.heads;
  if (!blockOfDim(c, p.head_group ? &*p.head_group : nullptr, a.heads, a.firstHead, wholeHeads))
    return false;
  if (a.window < 0 || (a.window > 0 && !a.causal))
    return c.fail("has a sliding window that is negative or without the causal mask");
  // Under a sequence group the queries are this rank's head and tail chunks of the keys'
  // whole sequence.
  int64_t wholeSeq = a.seq;
  if (p.seq_group) {
    const int64_t index = c.groupIndex(*p.seq_group), ways = c.groupSize(*p.seq_group);
    if (!c.error.empty())
      return false;
    if (ways > 1) {
      if (a.seq % 2 != 0)
        return c.fail("splits its queries head-tail into an odd block");
      wholeSeq = a.seq * ways;
      a.headStart = headtail::chunkOf(index, ways, 0) * (a.seq / 2);
      a.tailStart = headtail::chunkOf(index, ways, 1) * (a.seq / 2);
    }
  }
  if (a.batch <= 0 || a.seq <= 0 || a.heads <= 0 || a.kvSeq <= 0 || a.kvHeads <= 0 || a.head <= 0 ||
      wholeHeads % a.kvHeads != 0 || ((a.causal || a.headStart >= 0) && a.kvSeq != wholeSeq))
    return c.fail("has inconsistent attention sizes");
  a.group = wholeHeads / a.kvHeads;
  return true;
}

/// q and out of [batch, seq, heads, head], k and v of [batch, kvSeq, kvHeads, head], lse of
/// [batch, seq, heads]; the gradient reads dout after them (and the forward call's out and
/// lse, both or neither) and writes dq, dk, dv.
template <class P>
bool checkAttention(KernelCall &c, const P &p, args::Attention &args, bool grad) {
  kernels::AttentionArgs &a = args.a;
  if (!attentionArgsOf(c, p, a))
    return false;
  const int64_t rows = a.batch * a.seq * a.heads, q = rows * a.head;
  const int64_t kv = a.batch * a.kvSeq * a.kvHeads * a.head;
  if (!c.needIn(0, q) || !c.needIn(1, kv) || !c.needIn(2, kv) || !c.needOut(0, q))
    return false;
  if (!grad) {
    args.lse = c.out.size() > 1;
    return !args.lse || c.needOut(1, rows);
  }
  if (c.in.size() == 5)
    return c.fail("takes the forward call's o and lse together");
  args.lse = c.in.size() > 5;
  return c.needIn(3, q) && c.needOut(1, kv) && c.needOut(2, kv) &&
         (!args.lse || (c.needIn(4, q) && c.needIn(5, rows)));
}
bool check(KernelCall &c, const catalogue::Attention &p, args::Attention &a) {
  return checkAttention(c, p, a, false);
}
bool check(KernelCall &c, const catalogue::AttentionGrad &p, args::AttentionGrad &a) {
  return checkAttention(c, p, a, true);
}

/// The sizes of a ring attention step, the places of its query and key blocks, and its
/// operands: q, k, v, then (the gradient) dout, out and lse; out and lse (the gradient: dq,
/// dk, dv).
template <class P>
bool checkRingBlock(KernelCall &c, const P &p, args::AttentionBlock &args, bool grad) {
  kernels::RingBlockArgs &r = args.r;
  kernels::AttentionArgs &a = r.attention;
  args.first = p.step == 0;
  a.batch = p.batch;
  a.seq = a.kvSeq = p.seq;
  a.heads = p.heads;
  a.kvHeads = p.kv_heads;
  a.head = p.head;
  a.causal = p.causal != 0;
  a.scale = static_cast<float>(p.scale);
  int64_t wholeHeads = a.heads;
  const int64_t step = p.step;
  if (!blockOfDim(c, p.head_group ? &*p.head_group : nullptr, a.heads, a.firstHead, wholeHeads))
    return false;
  r.ways = c.groupSize(p.group);
  r.queryIndex = c.groupIndex(p.group);
  if (!c.error.empty())
    return false;
  if (a.batch <= 0 || a.seq <= 0 || a.seq % 2 != 0 || a.heads <= 0 || a.kvHeads <= 0 ||
      a.head <= 0 || wholeHeads % a.kvHeads != 0)
    return c.fail("has inconsistent attention sizes (the block of the sequence must be even)");
  if (step < 0 || step >= r.ways)
    return c.fail("has step " + std::to_string(step) + " outside its ring of " +
                  std::to_string(r.ways));
  a.group = wholeHeads / a.kvHeads;
  r.keyIndex = (r.queryIndex - step + r.ways) % r.ways;

  const int64_t q = a.batch * a.seq * a.heads * a.head, kv = a.batch * a.seq * a.kvHeads * a.head;
  if (!c.needIn(0, q) || !c.needIn(1, kv) || !c.needIn(2, kv))
    return false;
  if (!grad)
    return c.needOut(0, q) && c.needOut(1, q / a.head);
  return c.needIn(3, q) && c.needIn(4, q) && c.needIn(5, q / a.head) && c.needOut(0, q) &&
         c.needOut(1, kv) && c.needOut(2, kv);
}
bool check(KernelCall &c, const catalogue::AttentionBlock &p, args::AttentionBlock &a) {
  return checkRingBlock(c, p, a, false);
}
bool check(KernelCall &c, const catalogue::AttentionBlockGrad &p, args::AttentionBlockGrad &a) {
  return checkRingBlock(c, p, a, true);
}

/// The new tokens q, k, v, their positions and the block table; the output and the two
/// caches, which the kernel reads and writes in place.
bool check(KernelCall &c, const catalogue::PagedAttention &p, args::PagedAttention &args) {
  kernels::PagedAttentionArgs &a = args.a;
  a.batch = p.batch;
  a.seq = p.seq;
  a.heads = p.heads;
  a.kvHeads = p.kv_heads;
  a.head = p.head;
  a.blocks = p.blocks;
  a.blockSize = p.block_size;
  a.maxBlocks = p.max_blocks;
  a.scale = static_cast<float>(p.scale);
  a.window = p.window.value_or(0);
  if (a.blockSize < 1)
    return c.fail("has block_size " + std::to_string(a.blockSize) +
                  "; a cache block holds at least one position");
  if (a.batch <= 0 || a.seq <= 0 || a.heads <= 0 || a.kvHeads <= 0 || a.head <= 0 ||
      a.blocks <= 0 || a.maxBlocks <= 0)
    return c.fail("needs positive batch, seq, heads, kv_heads, head, blocks and max_blocks");
  if (a.heads % a.kvHeads != 0)
    return c.fail("has " + std::to_string(a.heads) + " query heads, not a multiple of its " +
                  std::to_string(a.kvHeads) + " kv heads");
  if (p.window && *p.window < 1)
    return c.fail("has a sliding window of " + std::to_string(*p.window) +
                  "; a window must be positive");
  if (!std::isfinite(a.scale))
    return c.fail("has a non-finite scale");
  // The kernels take positions and block ids as i32 (the operands' type): every position a
  // block table can name must fit one.
  if (a.maxBlocks > INT32_MAX / a.blockSize || a.blocks > INT32_MAX)
    return c.fail("has more cache positions than a 32-bit position or block id can name");
  const int64_t tokens = a.batch * a.seq;
  const int64_t q = tokens * a.heads * a.head, kv = tokens * a.kvHeads * a.head;
  const int64_t cache = a.blocks * a.blockSize * a.kvHeads * a.head;
  return c.needIn(0, q) && c.needIn(1, kv) && c.needIn(2, kv) && c.needIn(3, tokens) &&
         c.needIn(4, a.batch * a.maxBlocks) && c.needOut(0, q) && c.needOut(1, cache) &&
         c.needOut(2, cache);
}

/// The new tokens' values, positions and block table; the sums and the totals, which the
/// kernel reads and writes in place.
bool check(KernelCall &c, const catalogue::RunningSum &p, args::RunningSum &args) {
  kernels::RunningSumArgs &a = args.a;
  a.batch = p.batch;
  a.seq = p.seq;
  a.width = p.width;
  a.blocks = p.blocks;
  a.maxBlocks = p.max_blocks;
  a.inclusive = p.inclusive.value_or(false);
  if (a.batch <= 0 || a.seq <= 0 || a.width <= 0 || a.blocks <= 0 || a.maxBlocks <= 0)
    return c.fail("needs positive batch, seq, width, blocks and max_blocks");
  const int64_t tokens = a.batch * a.seq;
  return c.needIn(0, tokens * a.width) && c.needIn(1, tokens) &&
         c.needIn(2, a.batch * a.maxBlocks) && c.needOut(0, tokens * a.width) &&
         c.needOut(1, a.blocks * a.width);
}

bool check(KernelCall &c, const catalogue::Rope &p, args::Rope &a) {
  a.batch = p.batch;
  a.seq = p.seq;
  a.heads = p.heads;
  a.head = p.head;
  a.theta = static_cast<float>(p.theta);
  a.inverse = p.inverse != 0;
  a.positions = c.in.size() > 1;
  if (a.head % 2 != 0 || a.batch <= 0 || a.seq <= 0 || a.heads <= 0 || a.head <= 0)
    return c.fail("needs positive sizes and an even head size");
  if (c.in.size() > 2)
    return c.fail("has " + std::to_string(c.in.size() - 1) +
                  " positions operands; it takes at most one");
  if (a.positions && p.seq_group)
    return c.fail("turns by given positions and by a sequence group's head-tail positions; it "
                  "takes one or the other");
  if (p.scaling_factor) {
    if (!p.low_freq_factor || !p.high_freq_factor || !p.original_context)
      return c.fail("scales its frequencies without low_freq_factor, high_freq_factor and "
                    "original_context");
    a.scaling = {*p.scaling_factor, *p.low_freq_factor, *p.high_freq_factor, *p.original_context};
    if (!(a.scaling.factor > 0) || !(a.scaling.lowFreqFactor > 0) ||
        !(a.scaling.highFreqFactor > a.scaling.lowFreqFactor) || !(a.scaling.originalContext > 0))
      return c.fail("needs a positive scaling factor and original context and "
                    "0 < low_freq_factor < high_freq_factor");
  }
  // Under a sequence group the positions here are a head-tail block of the whole.
  if (p.seq_group) {
    const int64_t index = c.groupIndex(*p.seq_group), ways = c.groupSize(*p.seq_group);
    if (!c.error.empty())
      return false;
    if (ways > 1 && p.seq % 2 != 0)
      return c.fail("splits its positions head-tail into an odd block");
    if (ways > 1) {
      a.headStart = headtail::chunkOf(index, ways, 0) * (p.seq / 2);
      a.tailStart = headtail::chunkOf(index, ways, 1) * (p.seq / 2);
    }
  }
  const int64_t n = a.batch * a.seq * a.heads * a.head;
  return c.needIn(0, n) && (!a.positions || c.needIn(1, a.batch * a.seq)) && c.needOut(0, n);
}

template <class P> bool embeddingOf(KernelCall &c, const P &p, args::Embedding &a) {
  a.n = p.n;
  a.rows = p.rows;
  a.cols = p.cols;
  return blockOfDim(c, p.row_group ? &*p.row_group : nullptr, a.rows, a.first, a.vocab) &&
         c.needIn(1, a.n);
}
bool check(KernelCall &c, const catalogue::Embedding &p, args::Embedding &a) {
  return embeddingOf(c, p, a) && c.needIn(0, a.rows * a.cols) && c.needOut(0, a.n * a.cols);
}
bool check(KernelCall &c, const catalogue::EmbeddingGrad &p, args::EmbeddingGrad &a) {
  return embeddingOf(c, p, a) && c.needIn(0, a.n * a.cols) && c.needOut(0, a.rows * a.cols);
}

} // namespace tessel::rt
