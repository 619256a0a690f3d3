//===- KernelOperands.cpp - Checks of a kernel call's shapes and strides --===//

#include "runtime/device/KernelOperands.h"

#include "common/HeadTail.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace tessel::rt {

int64_t product(const std::vector<int64_t> &v) {
  int64_t n = 1;
  for (int64_t x : v)
    n *= x;
  return n;
}

int64_t reach(const std::vector<int64_t> &shape, const std::vector<int64_t> &strides) {
  int64_t last = 0;
  for (size_t i = 0; i < shape.size(); ++i)
    last += (shape[i] - 1) * strides[i];
  return last + 1;
}

bool toShape(KernelCall &c, const std::vector<int64_t> &sizes, cpu::Shape &shape) {
  if (sizes.size() > static_cast<size_t>(cpu::kMaxRank))
    return c.fail("has rank " + std::to_string(sizes.size()) + "; at most " +
                  std::to_string(cpu::kMaxRank) + " is supported");
  shape.rank = static_cast<int>(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] <= 0)
      return c.fail("has a non-positive size");
    shape.size[i] = sizes[i];
  }
  return true;
}

bool toStrides(KernelCall &c, const std::vector<int64_t> &in, size_t rank, cpu::Strides &out) {
  if (in.size() != rank)
    return c.fail("has " + std::to_string(in.size()) + " strides for " + std::to_string(rank) +
                  " dims");
  for (size_t i = 0; i < rank; ++i) {
    if (in[i] < 0)
      return c.fail("has a negative stride");
    out.stride[i] = in[i];
  }
  return true;
}

double scheduledLearningRate(const catalogue::LearningRate &p, int64_t step) {
  using catalogue::LrSchedule;
  const double lr = p.lr, minLr = p.min_lr;
  if (p.schedule == LrSchedule::Constant)
    return lr;
  const double s = static_cast<double>(step);
  if (p.warmup > 0 && s <= static_cast<double>(p.warmup))
    return lr * s / static_cast<double>(p.warmup);
  const double span = static_cast<double>(std::max<int64_t>(p.steps - p.warmup, 1));
  const double done = std::min(1.0, (s - static_cast<double>(p.warmup)) / span);
  return p.schedule == LrSchedule::Cosine
             ? minLr + 0.5 * (lr - minLr) * (1.0 + std::cos(M_PI * done))
             : lr + (minLr - lr) * done;
}

bool gemmCalls(KernelCall &c, const catalogue::Gemm &p, GemmCalls &out) {
  const auto &batch = p.batch_shape, &sa = p.a_batch_strides, &sb = p.b_batch_strides,
             &sc = p.c_batch_strides;
  cpu::GemmArgs &g = out.args;
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.transA = p.trans_a != 0;
  g.transB = p.trans_b != 0;
  g.lda = p.lda;
  g.ldb = p.ldb;
  g.ldc = p.ldc;
  g.beta = p.accumulate.value_or(false) ? 1.0f : 0.0f;
  if (sa.size() != batch.size() || sb.size() != batch.size() || sc.size() != batch.size())
    return c.fail("has batch strides that do not match its batch shape");
  if (g.m <= 0 || g.n <= 0 || g.k <= 0)
    return c.fail("has a non-positive matrix size");
  for (int64_t size : batch)
    if (size <= 0)
      return c.fail("has a non-positive batch size");
  // The extent of one matrix, then of all batches.
  const int64_t aRows = g.transA ? g.k : g.m, aCols = g.transA ? g.m : g.k;
  const int64_t bRows = g.transB ? g.n : g.k, bCols = g.transB ? g.k : g.n;
  if (g.lda < aCols || g.ldb < bCols || g.ldc < g.n)
    return c.fail("has a leading dimension smaller than its matrix");
  if (!c.needIn(0, reach(batch, sa) - 1 + (aRows - 1) * g.lda + aCols) ||
      !c.needIn(1, reach(batch, sb) - 1 + (bRows - 1) * g.ldb + bCols) ||
      !c.needOut(0, reach(batch, sc) - 1 + (g.m - 1) * g.ldc + g.n) || c.validating)
    return false;

  // All batch dims but the last are looped by the caller; the last is the kernel's strided
  // batch.
  const size_t outer = batch.empty() ? 0 : batch.size() - 1;
  g.batch = batch.empty() ? 1 : batch.back();
  g.strideA = batch.empty() ? 0 : sa.back();
  g.strideB = batch.empty() ? 0 : sb.back();
  g.strideC = batch.empty() ? 0 : sc.back();
  int64_t outerCount = 1;
  for (size_t d = 0; d < outer; ++d)
    outerCount *= batch[d];
  out.offsets.clear();
  for (int64_t o = 0; o < outerCount; ++o) {
    std::array<int64_t, 3> off = {0, 0, 0};
    int64_t rest = o;
    for (int d = static_cast<int>(outer) - 1; d >= 0; --d) {
      const int64_t i = rest % batch[d];
      rest /= batch[d];
      off[0] += i * sa[d];
      off[1] += i * sb[d];
      off[2] += i * sc[d];
    }
    out.offsets.push_back(off);
  }
  return true;
}

// The catalogue's operation words and the kernels' kinds list the same operations in the
// same order, so a body step's words convert by value.
static_assert(static_cast<int>(catalogue::UnaryOp::GeluErf) ==
              static_cast<int>(cpu::UnaryKind::GeluErf));
static_assert(static_cast<int>(catalogue::UnaryOp::Pow) == static_cast<int>(cpu::UnaryKind::Pow));
static_assert(static_cast<int>(catalogue::BinaryOp::Ne) == static_cast<int>(cpu::BinaryKind::Ne));

bool fusedCall(KernelCall &c, const catalogue::FusedElementwise &p, FusedCall &out) {
  const auto &sizes = p.shape;
  const catalogue::ElementwiseBody &body = p.body;
  if (!toShape(c, sizes, out.shape))
    return false;
  const size_t nIn = c.in.size(), rank = sizes.size();
  if (static_cast<size_t>(body.inputs) > nIn)
    return c.fail("has a body that reads input x" + std::to_string(body.inputs - 1) + " of " +
                  std::to_string(nIn) + " inputs");
  if (p.x_strides.size() != nIn * rank)
    return c.fail("has " + std::to_string(p.x_strides.size()) + " x_strides for " +
                  std::to_string(nIn) + " inputs of " + std::to_string(rank) + " dims");
  if (p.outputs.size() != c.out.size())
    return c.fail("names " + std::to_string(p.outputs.size()) + " steps in 'outputs' for " +
                  std::to_string(c.out.size()) + " outputs");
  out.outSteps.clear();
  for (int64_t s : p.outputs) {
    if (s < 0 || s >= static_cast<int64_t>(body.steps.size()))
      return c.fail("has output step " + std::to_string(s) + "; the body has " +
                    std::to_string(body.steps.size()) + " steps");
    out.outSteps.push_back(static_cast<int32_t>(s));
  }
  out.strides.assign(nIn, cpu::Strides{});
  for (size_t k = 0; k < nIn; ++k) {
    std::vector<int64_t> sk(p.x_strides.begin() + k * rank, p.x_strides.begin() + (k + 1) * rank);
    if (!toStrides(c, sk, rank, out.strides[k]) || !c.needIn(k, reach(sizes, sk)))
      return false;
  }
  for (size_t o = 0; o < c.out.size(); ++o)
    if (!c.needOut(o, product(sizes)))
      return false;
  if (c.validating)
    return false;
  out.steps.clear();
  for (const catalogue::BodyStep &b : body.steps) {
    cpu::FusedStep s;
    // The two Kind enums list the same kinds in the same order.
    s.kind = static_cast<cpu::FusedStep::Kind>(b.kind);
    s.unary = static_cast<cpu::UnaryKind>(b.unary);
    s.binary = static_cast<cpu::BinaryKind>(b.binary);
    for (int k = 0; k < 3; ++k)
      s.args[k] = b.args[k].input ? b.args[k].index : static_cast<int32_t>(nIn) + b.args[k].index;
    // As `fill` and `unary` take them: the f64 of the plan rounded to float.
    s.value = static_cast<float>(b.value);
    out.steps.push_back(s);
  }
  out.ins.clear();
  out.inTypes.clear();
  for (size_t k = 0; k < nIn; ++k) {
    out.ins.push_back(c.fin(k));
    out.inTypes.push_back(c.instr ? c.instr->inputs[k].dtype : planfile::DType::F32);
  }
  out.outs.clear();
  out.outTypes.clear();
  for (size_t o = 0; o < c.out.size(); ++o) {
    out.outs.push_back(c.fout(o));
    out.outTypes.push_back(c.instr ? c.instr->outputs[o].dtype : planfile::DType::F32);
  }
  return true;
}

bool packInputs(KernelCall &c, const catalogue::Pack &p, std::vector<const float *> &inputs) {
  const int64_t ways = p.ways;
  const auto &outers = p.outers, &chunks = p.chunks;
  if (!c.error.empty())
    return false;
  if (c.in.empty() || outers.size() != c.in.size() || chunks.size() != c.in.size())
    return c.fail("needs one 'outers' and one 'chunks' entry per input, and an input");
  if (ways <= 0)
    return c.fail("needs a positive 'ways'");
  int64_t part = 0;
  for (size_t k = 0; k < c.in.size(); ++k) {
    if (outers[k] <= 0 || chunks[k] <= 0)
      return c.fail("has a non-positive outer or chunk size");
    if (!c.needIn(k, outers[k] * ways * chunks[k]))
      return false;
    part += outers[k] * chunks[k];
  }
  if (!c.needOut(0, ways * part) || c.validating)
    return false;
  inputs.clear();
  for (size_t k = 0; k < c.in.size(); ++k)
    inputs.push_back(c.fin(k));
  return true;
}

bool blockOfDim(KernelCall &c, const std::string *name, int64_t size, int64_t &first,
                int64_t &whole) {
  first = 0;
  whole = size;
  if (!name)
    return true;
  const CommGroup *g = c.group(*name);
  if (!g)
    return false;
  first = static_cast<int64_t>(g->index) * size;
  whole = size * g->size();
  return true;
}

namespace {

template <class P> bool attentionArgsOf(KernelCall &c, const P &p, cpu::AttentionArgs &a) {
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
  if (!c.error.empty())
    return false;
  if (a.window < 0 || (a.window > 0 && !a.causal))
    return c.fail("has a sliding window that is negative or without the causal mask");
  // Under a sequence group the queries are this rank's head and tail chunks of the keys'
  // whole sequence.
  int64_t wholeSeq = a.seq;
  if (p.seq_group) {
    int64_t index = c.groupIndex(*p.seq_group), ways = c.groupSize(*p.seq_group);
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

} // namespace

bool attentionArgs(KernelCall &c, const catalogue::Attention &p, cpu::AttentionArgs &a) {
  return attentionArgsOf(c, p, a);
}
bool attentionArgs(KernelCall &c, const catalogue::AttentionGrad &p, cpu::AttentionArgs &a) {
  return attentionArgsOf(c, p, a);
}

namespace {

/// The sizes of a ring attention step and the places of its query and key blocks.
template <class P> bool ringBlockArgsOf(KernelCall &c, const P &p, cpu::RingBlockArgs &r) {
  cpu::AttentionArgs &a = r.attention;
  a.batch = p.batch;
  a.seq = a.kvSeq = p.seq;
  a.heads = p.heads;
  a.kvHeads = p.kv_heads;
  a.head = p.head;
  a.causal = p.causal != 0;
  a.scale = static_cast<float>(p.scale);
  int64_t wholeHeads = a.heads, step = p.step;
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
  return true;
}

} // namespace

bool ringBlockArgs(KernelCall &c, const catalogue::AttentionBlock &p, cpu::RingBlockArgs &r) {
  return ringBlockArgsOf(c, p, r);
}
bool ringBlockArgs(KernelCall &c, const catalogue::AttentionBlockGrad &p, cpu::RingBlockArgs &r) {
  return ringBlockArgsOf(c, p, r);
}

bool needRingOperands(KernelCall &c, const cpu::RingBlockArgs &r, bool grad) {
  const cpu::AttentionArgs &a = r.attention;
  const int64_t q = a.batch * a.seq * a.heads * a.head, kv = a.batch * a.seq * a.kvHeads * a.head;
  if (!c.needIn(0, q) || !c.needIn(1, kv) || !c.needIn(2, kv))
    return false;
  if (!grad)
    return c.needOut(0, q) && c.needOut(1, q / a.head);
  return c.needIn(3, q) && c.needIn(4, q) && c.needIn(5, q / a.head) && c.needOut(0, q) &&
         c.needOut(1, kv) && c.needOut(2, kv);
}

void placeRingBlocks(cpu::RingBlockArgs &r) {
  const int64_t half = r.attention.seq / 2;
  r.attention.headStart = r.queryPosition(0);
  r.attention.tailStart = r.queryPosition(half);
  r.attention.keyHeadStart = r.keyPosition(0);
  r.attention.keyTailStart = r.keyPosition(half);
}

bool ropePositions(KernelCall &c, const catalogue::Rope &p, int64_t &headStart,
                   int64_t &tailStart) {
  headStart = tailStart = -1;
  if (!p.seq_group)
    return true;
  const int64_t index = c.groupIndex(*p.seq_group), ways = c.groupSize(*p.seq_group);
  if (!c.error.empty())
    return false;
  if (ways > 1 && p.seq % 2 != 0)
    return c.fail("splits its positions head-tail into an odd block");
  if (ways > 1) {
    headStart = headtail::chunkOf(index, ways, 0) * (p.seq / 2);
    tailStart = headtail::chunkOf(index, ways, 1) * (p.seq / 2);
  }
  return true;
}

bool shardSliceView(KernelCall &c, const catalogue::ShardSlice &p, const CommGroup &g,
                    cpu::Shape &shape, cpu::Strides &x, int64_t &offset) {
  const int64_t outer = p.outer, chunk = p.chunk, ways = g.size();
  if (headtail::isHeadTail(p.group) && ways > 1) {
    // A head-tail dim: y[o, h, :] = chunk headtail::chunkOf(me, ways, h) of x[o], for the
    // head (h = 0) and the tail (h = 1) halves of this rank's block.
    if (chunk % 2 != 0)
      return c.fail("splits a dim head-tail but its chunk of " + std::to_string(chunk) +
                    " elements is odd");
    const int64_t half = chunk / 2, me = g.index;
    const int64_t head = headtail::chunkOf(me, ways, 0), tail = headtail::chunkOf(me, ways, 1);
    shape.rank = 3;
    shape.size[0] = outer;
    shape.size[1] = 2;
    shape.size[2] = half;
    x.stride[0] = ways * chunk;
    x.stride[1] = (tail - head) * half;
    x.stride[2] = 1;
    offset = head * half;
    return true;
  }
  // y[o, :] = x[o, me, :]: a strided copy of [outer, chunk] starting at block `me`.
  shape.rank = 2;
  shape.size[0] = outer;
  shape.size[1] = chunk;
  x.stride[0] = ways * chunk;
  x.stride[1] = 1;
  offset = static_cast<int64_t>(g.index) * chunk;
  return true;
}

uint64_t dropoutSeed(const KernelCall &c, int64_t mask) {
  return c.ctx->seed * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(c.ctx->step) << 20 ^
         static_cast<uint64_t>(mask);
}

bool dropoutBlock(KernelCall &c, const catalogue::Dropout &p, std::vector<int64_t> &offset,
                  std::vector<int64_t> &tail, std::vector<int64_t> &whole, int64_t &n) {
  const std::vector<int64_t> &shape = p.shape;
  const std::string &groups = p.groups;
  const int64_t batchDim = p.batch_dim, microBatches = p.micro_batches;
  const double rate = p.rate;
  if (!c.error.empty())
    return false;
  std::vector<std::string> names(1);
  for (char ch : groups) {
    if (ch == ',')
      names.emplace_back();
    else
      names.back().push_back(ch);
  }
  if (shape.empty() && names.size() == 1 && names[0].empty())
    names.clear();
  if (names.size() != shape.size())
    return c.fail("groups names " + std::to_string(names.size()) + " dims, shape " +
                  std::to_string(shape.size()));
  if (batchDim < -1 || batchDim >= static_cast<int64_t>(shape.size()) || microBatches < 1)
    return c.fail("batch_dim must name a dim (or be -1) and micro_batches be positive");
  offset.assign(shape.size(), 0);
  tail.assign(shape.size(), -1);
  whole = shape;
  n = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] <= 0)
      return c.fail("shape sizes must be positive");
    n *= shape[d];
    if (names[d].empty())
      continue;
    int64_t index = c.groupIndex(names[d]), size = c.groupSize(names[d]);
    if (!c.error.empty())
      return false;
    offset[d] = index * shape[d];
    whole[d] = size * shape[d];
    if (headtail::isHeadTail(names[d]) && size > 1) {
      if (shape[d] % 2 != 0)
        return c.fail("splits dim " + std::to_string(d) + " head-tail into an odd block");
      offset[d] = headtail::chunkOf(index, size, 0) * (shape[d] / 2);
      tail[d] = headtail::chunkOf(index, size, 1) * (shape[d] / 2);
    }
  }
  if (!c.needIn(0, n) || !c.needOut(0, n))
    return false;
  if (!(rate >= 0 && rate < 1))
    return c.fail("rate must lie in [0, 1)");
  if (!c.validating && batchDim >= 0) {
    offset[batchDim] += c.ctx->micro * whole[batchDim];
    whole[batchDim] *= microBatches;
  }
  return true;
}

bool topKMaskArgs(KernelCall &c, const catalogue::TopKMask &p, int64_t &rows, int64_t &cols) {
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needOut(0, rows * cols))
    return false;
  if (p.k < 1 || p.k > cols)
    return c.fail("chooses k = " + std::to_string(p.k) + " of " + std::to_string(cols) +
                  " columns");
  return true;
}

} // namespace tessel::rt
