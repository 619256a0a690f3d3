//===- BucketGradients.cpp - Data-parallel gradient buckets ---------------===//
//
// After partitioning, each gradient reaches its accumulator through its own reduction over
// the data axes (dp, and ep, whose ranks take different tokens too), all of them at the end
// of the backward pass. This pass packs them, in the order the
// backward pass finishes them, into buckets of at most `bucket_bytes`, and moves each
// bucket's single collective up to the point where its last gradient is final. The plan
// lowering starts the collective asynchronously and waits for it only where the gradients
// are accumulated, so the reduction runs while the rest of the backward pass computes.
// With `overlap = false` the buckets are the same but reduced one after another once the
// whole backward pass is done, each collective waited for as it is issued (what
// Megatron-LM's local data parallelism of 2021 did, all-reducing after the pipeline flush).
//
//===----------------------------------------------------------------------===//

#include "tessel/Dialect/Graph/Transforms/Passes.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace tessel {
#define GEN_PASS_DEF_BUCKETGRADIENTS
#include "tessel/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

namespace {

/// One gradient's reduction: the collective, its gradient operand and what it scatters along.
struct Reduction {
  Operation *collective;
  Value grad;
  std::string scatterDim; ///< "" for an all-reduce.
  int64_t bytes;
  size_t ready; ///< Position of the op that computes the gradient.
};

int64_t bytesOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getNumElements() * ((t.getElementTypeBitWidth() + 7) / 8);
}

Type bucketType(MLIRContext *ctx, int64_t elements, Type element) {
  return getNamedTensorType(ctx, {{"bucket", elements}}, element);
}

ArrayAttr shardings(Builder &b, ArrayRef<Sharding> list) {
  SmallVector<Attribute> attrs;
  for (const Sharding &s : list)
    attrs.push_back(getShardingAttr(b.getContext(), s));
  return b.getArrayAttr(attrs);
}

/// Packs `members` after `after` into one collective (asynchronous when `async`) and unpacks
/// it; returns the unpack.
Operation *bucket(func::FuncOp func, const MeshLayout &mesh, ArrayRef<Reduction> members,
                  ArrayRef<int16_t> gridAxes, int64_t ways, Operation *after, bool async) {
  OpBuilder b(func.getContext());
  b.setInsertionPointAfter(after);
  Location loc = members.front().collective->getLoc();
  Type element = cast<RankedTensorType>(members.front().grad.getType()).getElementType();
  SmallVector<Value> grads;
  SmallVector<Attribute> dims;
  int64_t elements = 0;
  Sharding packed = Sharding::replicated(1);
  for (const Reduction &r : members) {
    grads.push_back(r.grad);
    dims.push_back(b.getStringAttr(r.scatterDim));
    elements += cast<RankedTensorType>(r.grad.getType()).getNumElements();
  }
  for (int16_t a : gridAxes)
    packed.addPartial(mesh.axes()[a].first);
  auto pack = PackOp::create(b, loc, bucketType(b.getContext(), elements, element), grads,
                             b.getArrayAttr(dims), b.getI64IntegerAttr(ways));
  pack->setAttr(kShardingAttr, shardings(b, {packed}));
  Sharding reduced = Sharding::replicated(1);
  Operation *collective;
  if (ways == 1) {
    collective = shard::AllReduceOp::create(b, loc, pack.getType(), kGridName, gridAxes, pack,
                                            shard::ReductionKind::Sum);
  } else {
    reduced.axes[0] = packed.partial.front();
    collective = shard::ReduceScatterOp::create(
        b, loc, bucketType(b.getContext(), elements / ways, element),
        FlatSymbolRefAttr::get(b.getContext(), kGridName), b.getDenseI16ArrayAttr(gridAxes), pack,
        shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum),
        b.getIndexAttr(0));
  }
  collective->setAttr(kShardingAttr, shardings(b, {reduced}));
  if (async)
    collective->setAttr("tessel.async", b.getUnitAttr());
  SmallVector<Type> types;
  SmallVector<Sharding> parts;
  for (const Reduction &r : members) {
    types.push_back(r.collective->getResult(0).getType());
    parts.push_back(*recordedSharding(r.collective->getResult(0)));
  }
  auto unpack = UnpackOp::create(b, loc, types, collective->getResult(0));
  unpack->setAttr(kShardingAttr, shardings(b, parts));
  for (auto [r, part] : llvm::zip(members, unpack.getResults())) {
    r.collective->getResult(0).replaceAllUsesWith(part);
    r.collective->erase();
  }
  return unpack;
}

/// Buckets the gradient reductions over the data axes `data` (grid axis indices) of one
/// function (the training step, or with a pipeline each stage's backward): each bucket right
/// after its last gradient and started asynchronously when `overlap`, else all of them after
/// the last gradient of the function, synchronous.
void bucketFunction(func::FuncOp func, const MeshLayout &mesh, ArrayRef<int16_t> data, int64_t cap,
                    bool overlap) {
  DenseMap<Operation *, size_t> position;
  for (auto [i, op] : llvm::enumerate(func.getBody().front()))
    position[&op] = i;
  // Buckets hold reductions of one kind over the same axes.
  std::map<std::pair<SmallVector<int16_t>, bool>, std::vector<Reduction>> kinds;
  func.walk([&](AccumulateGradOp acc) {
    Operation *c = acc.getGrad().getDefiningOp();
    if (!c || !c->hasOneUse() || !isa<shard::AllReduceOp, shard::ReduceScatterOp>(c))
      return;
    SmallVector<int16_t> axes;
    std::string dim;
    if (auto ar = dyn_cast<shard::AllReduceOp>(c)) {
      axes.assign(ar.getGridAxes().begin(), ar.getGridAxes().end());
    } else {
      auto rs = cast<shard::ReduceScatterOp>(c);
      axes.assign(rs.getGridAxes().begin(), rs.getGridAxes().end());
      auto shape = getNamedShape(rs.getInput().getType());
      dim = (*shape)[rs.getScatterAxis().getZExtValue()].name;
    }
    if (llvm::none_of(axes, [&](int16_t a) { return llvm::is_contained(data, a); }))
      return;
    Value grad = c->getOperand(0);
    Operation *producer = grad.getDefiningOp();
    // The last step of a chain of collectives (a router's gradient reduce-scattered over ep,
    // then all-reduced over dp) stays where the chain is, beside its accumulation.
    if (isa_and_nonnull<shard::ReduceScatterOp, shard::AllReduceOp>(producer))
      return;
    size_t ready = producer ? position[producer] : 0;
    kinds[{axes, !dim.empty()}].push_back({c, grad, dim, bytesOf(grad), ready});
  });
  // Without overlap every bucket waits for the backward pass's last gradient.
  Operation *lastGradient = nullptr;
  size_t lastReady = 0;
  for (auto &[kind, reductions] : kinds)
    for (const Reduction &r : reductions)
      if (Operation *p = r.grad.getDefiningOp(); p && (!lastGradient || r.ready > lastReady))
        lastGradient = p, lastReady = r.ready;
  Operation *end = nullptr; // the last bucket placed without overlap: the next goes after it
  for (auto &[kind, reductions] : kinds) {
    llvm::stable_sort(reductions,
                      [](const Reduction &a, const Reduction &b) { return a.ready < b.ready; });
    // A reduce-scatter (ZeRO's over dp, a router's onto its experts over ep) is over one axis.
    int64_t ways = kind.second ? mesh.axes()[kind.first.front()].second : 1;
    size_t start = 0;
    int64_t bytes = 0;
    for (size_t i = 0; i <= reductions.size(); ++i) {
      bool flush = i == reductions.size() || (i > start && bytes + reductions[i].bytes > cap);
      if (flush && i > start) {
        ArrayRef<Reduction> members(reductions.data() + start, i - start);
        Operation *last = members.back().grad.getDefiningOp();
        Operation *after = last ? last : &func.getBody().front().front();
        if (!overlap && lastGradient)
          after = end ? end : lastGradient;
        Operation *unpack = bucket(func, mesh, members, kind.first, ways, after, overlap);
        if (!overlap)
          end = unpack;
        start = i;
        bytes = 0;
      }
      if (i < reductions.size())
        bytes += reductions[i].bytes;
    }
  }
}

struct BucketGradients : tessel::impl::BucketGradientsBase<BucketGradients> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MeshLayout mesh = MeshLayout::fromModule(module);
    SmallVector<int16_t> data;
    for (StringRef axis : {"dp", "ep"})
      if (int a = mesh.axisIndex(axis); a >= 0)
        data.push_back(static_cast<int16_t>(a));
    if (data.empty())
      return;
    settings::ParallelAttr parallel = settings::parallelOf(module);
    int64_t cap = parallel.getBucketBytes();
    bool overlap = parallel.getOverlap();
    for (auto func : module.getOps<func::FuncOp>())
      bucketFunction(func, mesh, data, cap, overlap);
  }
};

} // namespace
