//===- KernelChecks.cpp - Each compute kernel's one check -----------------===//
//
// checkKernelCall for the compute and control kernels (the collectives' checks are in
// CollectiveCalls.cpp): each derives its kernel's arguments (KernelArgs.h) from the decoded
// parameters, refusing, with a reason, sizes that are not positive, strides and ranks the
// kernels do not take, groups the plan lacks and operands too small for what the kernel would
// read or write. Every device runs the calls these accept. This file holds the table that
// dispatches to them, what they share (KernelChecks.h), the optimizer and control kernels'
// checks and the arguments a call derives at run time; ElementwiseChecks.cpp and
// AttentionChecks.cpp hold the others.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/KernelChecks.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace tessel::rt {

//===----------------------------------------------------------------------===//
// What the checks share
//===----------------------------------------------------------------------===//

int64_t checks::product(const std::vector<int64_t> &v) {
  int64_t n = 1;
  for (int64_t x : v)
    n *= x;
  return n;
}

int64_t checks::reach(const std::vector<int64_t> &shape, const std::vector<int64_t> &strides) {
  int64_t last = 0;
  for (size_t i = 0; i < shape.size(); ++i)
    last += (shape[i] - 1) * strides[i];
  return last + 1;
}

bool checks::toShape(KernelCall &c, const std::vector<int64_t> &sizes, kernels::Shape &shape) {
  if (sizes.size() > static_cast<size_t>(kernels::kMaxRank))
    return c.fail("has rank " + std::to_string(sizes.size()) + "; at most " +
                  std::to_string(kernels::kMaxRank) + " is supported");
  shape.rank = static_cast<int>(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] <= 0)
      return c.fail("has a non-positive size");
    shape.size[i] = sizes[i];
  }
  return true;
}

bool checks::toStrides(KernelCall &c, const std::vector<int64_t> &in, size_t rank,
                       kernels::Strides &out) {
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

bool checks::stridedInput(KernelCall &c, size_t k, const std::vector<int64_t> &sizes,
                          const std::vector<int64_t> &strides, kernels::Strides &out) {
  return toStrides(c, strides, sizes.size(), out) && c.needIn(k, reach(sizes, strides));
}

bool checks::blockOfDim(KernelCall &c, const std::string *name, int64_t size, int64_t &first,
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

bool checks::exponentOf(KernelCall &c, catalogue::UnaryOp op, const std::optional<double> &exponent,
                        float &out) {
  out = static_cast<float>(exponent.value_or(0.0));
  if (op == catalogue::UnaryOp::Pow && !exponent)
    return c.fail("pow needs an exponent");
  return true;
}

//===----------------------------------------------------------------------===//
// Optimizer and control
//===----------------------------------------------------------------------===//

bool check(KernelCall &c, const catalogue::GlobalNorm &, args::GlobalNorm &) {
  return c.needOut(0, 1);
}
bool check(KernelCall &c, const catalogue::SumSquares &, args::SumSquares &) {
  if (c.in.empty())
    return c.fail("needs at least one input");
  return c.needOut(0, 1);
}
bool check(KernelCall &, const catalogue::GuardFinite &, args::GuardFinite &) { return true; }

bool check(KernelCall &c, const catalogue::ClipCoefficient &p, args::ClipCoefficient &a) {
  a.max = static_cast<float>(p.max);
  return c.needIn(0, 1) && c.needOut(0, 1);
}

bool check(KernelCall &c, const catalogue::LearningRate &p, args::LearningRate &a) {
  a.schedule = p;
  return c.needOut(0, 1);
}

bool check(KernelCall &c, const catalogue::AdamW &p, args::AdamW &a) {
  a.n = p.n;
  a.hyper.beta1 = static_cast<float>(p.beta1);
  a.hyper.beta2 = static_cast<float>(p.beta2);
  a.hyper.eps = static_cast<float>(p.eps);
  a.hyper.weightDecay = static_cast<float>(p.weight_decay);
  return c.needTensors(p.n, 1, 3, 1, &a.working);
}

bool check(KernelCall &c, const catalogue::Sgd &p, args::Sgd &a) {
  a.n = p.n;
  a.momentum = static_cast<float>(p.momentum);
  a.weightDecay = static_cast<float>(p.weight_decay);
  return c.needTensors(p.n, 1, 2);
}

namespace {

/// Checks a call of the kernel whose parameters are P and whose arguments are A.
template <class P, class A>
bool checkAs(KernelCall &c, const catalogue::KernelParams &params, KernelArgs &out) {
  A a;
  if (!check(c, *std::get_if<P>(&params), a) || !c.error.empty())
    return false;
  out.value = std::move(a);
  return true;
}

} // namespace

bool checkKernelCall(KernelCall &c, const catalogue::KernelParams &params, KernelArgs &args) {
  using CheckFn = bool (*)(KernelCall &, const catalogue::KernelParams &, KernelArgs &);
  // Every kernel of the catalogue has a check: one missing fails to compile.
  static const CheckFn table[] = {
#define TESSEL_KERNEL(Id, Name, Family, Doc) &checkAs<catalogue::Id, args::Id>,
#include "common/catalogue/KernelCatalogue.def"
  };
  static_assert(sizeof(table) / sizeof(table[0]) == catalogue::kKernelCount);
  if (params.index() == 0)
    return c.fail("has no decoded parameters");
  return table[params.index() - 1](c, params, args);
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

args::CrossEntropy stepLossScale(const KernelCall &c, const args::CrossEntropy &a) {
  const double factor = c.ctx ? c.ctx->targetScale : 1.0;
  if (factor == 1.0)
    return a;
  args::CrossEntropy scaled = a;
  scaled.scaled = true;
  scaled.scale = (a.scaled ? a.scale : 1.0 / static_cast<double>(a.rows)) * factor;
  return scaled;
}

double stepLossScale(const KernelCall &c, double scale) {
  return c.ctx ? scale * c.ctx->targetScale : scale;
}

uint64_t dropoutSeed(const KernelCall &c, int64_t mask) {
  return c.ctx->seed * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(c.ctx->step) << 20 ^
         static_cast<uint64_t>(mask);
}

void dropoutPlacement(const KernelCall &c, const args::Dropout &a, std::vector<int64_t> &offset,
                      std::vector<int64_t> &whole) {
  offset = a.offset;
  whole = a.whole;
  if (a.batchDim >= 0) {
    offset[a.batchDim] += c.ctx->micro * whole[a.batchDim];
    whole[a.batchDim] *= a.microBatches;
  }
}

void placeRingBlocks(kernels::RingBlockArgs &r) {
  const int64_t half = r.attention.seq / 2;
  r.attention.headStart = r.queryPosition(0);
  r.attention.tailStart = r.queryPosition(half);
  r.attention.keyHeadStart = r.keyPosition(0);
  r.attention.keyTailStart = r.keyPosition(half);
}

} // namespace tessel::rt
