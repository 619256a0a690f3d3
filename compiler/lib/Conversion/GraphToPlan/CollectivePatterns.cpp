//===- CollectivePatterns.cpp - Collectives to communicator kernels -------===//
//
// The partition pass's collectives (upstream shard dialect) become kernels that name their
// communicator group (the grid axes, e.g. "dp_tp") and the [outer, ways, chunk] layout around
// the split dim; an all-to-all also transposes its blocks into and out of that layout. A collective
// marked `tessel.async` runs on the communicator's stream; the first op that reads its result waits
// for its event (PlanLowering::waitFor).
//
//===----------------------------------------------------------------------===//

#include "PlanLowering.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::plan_lowering;

namespace {

/// The elements of `s` before dim `d`, and from dim `d` on.
int64_t outerOf(const NamedShape &s, uint64_t d) {
  int64_t n = 1;
  for (uint64_t i = 0; i < d; ++i)
    n *= s[i].size;
  return n;
}
int64_t chunkOf(const NamedShape &block, uint64_t d) {
  int64_t n = 1;
  for (uint64_t i = d; i < block.size(); ++i)
    n *= block[i].size;
  return n;
}

template <typename OpTy> struct CollectivePattern : PlanPattern<OpTy> {
  using PlanPattern<OpTy>::PlanPattern;

  LogicalResult lower(OpTy op, typename OpTy::Adaptor adaptor, PlanEmitter &emit) const override {
    const graph::MeshLayout &mesh = this->lowering.mesh();
    Value in = op->getOperand(0), out = op->getResult(0);
    NamedShape is = shapeOf(in), os = shapeOf(out);
    StringRef name;
    SmallVector<NamedAttribute> params;
    if constexpr (std::is_same_v<OpTy, shard::AllReduceOp>) {
      name = "all_reduce";
      params = {emit.str("group", mesh.groupName(op.getGridAxes())),
                emit.str("op", op.getReduction() == shard::ReductionKind::Max ? "max" : "sum"),
                emit.i64("n", numElements(is))};
    } else if constexpr (std::is_same_v<OpTy, shard::ReduceScatterOp>) {
      uint64_t d = op.getScatterAxis().getZExtValue();
      name = "reduce_scatter";
      params = {emit.str("group", mesh.groupName(op.getGridAxes())),
                emit.i64("outer", outerOf(is, d)), emit.i64("chunk", chunkOf(os, d))};
    } else if constexpr (std::is_same_v<OpTy, shard::AllGatherOp>) {
      uint64_t d = op.getGatherAxis().getZExtValue();
      name = "all_gather";
      params = {emit.str("group", mesh.groupName(op.getGridAxes())),
                emit.i64("outer", outerOf(os, d)), emit.i64("chunk", chunkOf(is, d))};
    } else {
      static_assert(std::is_same_v<OpTy, shard::AllSliceOp>);
      uint64_t d = op.getSliceAxis().getZExtValue();
      name = "shard_slice";
      params = {emit.str("group", mesh.groupName(op.getGridAxes())),
                emit.i64("outer", outerOf(is, d)), emit.i64("chunk", chunkOf(os, d))};
    }
    Value input = adaptor.getOperands()[0];
    Value r = emit.define(out);
    if (op->hasAttr("tessel.async")) {
      int64_t event = this->lowering.nextEvent();
      params.push_back(emit.i64("event", event));
      this->lowering.recordAsync(out, event, {input, r});
    }
    emit.kernel(name, {input}, {r}, params);
    return success();
  }
};

/// A split moving from dim `concat_axis` (i) to dim `split_axis` (j) over a group of W ranks.
/// The `all_to_all` kernel exchanges x [outer, W, chunk] (block r of the middle goes to rank
/// r) into y [outer, W, chunk] (block r came from rank r); outer is the dims before both i
/// and j. When j comes first, the input is already [outer, W (j's blocks), ...] and what
/// arrives is [outer, W (i's blocks), j', ..., i', ...], which a transpose puts back as
/// [outer, j', ..., W × i', ...]. When i comes first, the input is first transposed to
/// [outer, W (j's blocks), i', ..., j', ...], and what arrives is the result's own layout. The
/// transposes are `copy` relayouts: at most one per exchange, none when only dims of size 1
/// lie between.
struct AllToAllPattern : PlanPattern<shard::AllToAllOp> {
  using PlanPattern::PlanPattern;

  LogicalResult lower(shard::AllToAllOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    const graph::MeshLayout &mesh = lowering.mesh();
    if (op->hasAttr("tessel.async"))
      return op.emitOpError("cannot run asynchronously: its transposes would need the result");
    NamedShape is = shapeOf(op.getInput()), os = shapeOf(op.getResult());
    uint64_t i = op.getConcatAxis().getZExtValue(), j = op.getSplitAxis().getZExtValue();
    int64_t ways = os[i].size / is[i].size;
    uint64_t first = std::min(i, j);
    // The input and the exchanged buffer, each with its blocks' index as a dim of its own.
    NamedDim blocks{"<blocks>", ways};
    NamedShape sent = is, arrived = os;
    sent[j].size /= ways;
    sent.insert(sent.begin() + j, blocks);
    arrived[i].size /= ways;
    arrived.insert(arrived.begin() + i, blocks);
    auto inFront = [&](NamedShape s, uint64_t at) {
      NamedDim d = s[at];
      s.erase(s.begin() + at);
      s.insert(s.begin() + first, d);
      return s;
    };
    // Only dims of more than one element decide whether a transpose moves anything.
    auto sameOrder = [](const NamedShape &a, const NamedShape &b) {
      auto big = [](const NamedShape &s) {
        SmallVector<std::string> names;
        for (const NamedDim &d : s)
          if (d.size > 1)
            names.push_back(d.name);
        return names;
      };
      return big(a) == big(b);
    };
    Type element = cast<RankedTensorType>(op.getType()).getElementType();
    Value x = adaptor.getInput(), r = emit.define(op.getResult());
    NamedShape exchanged = inFront(sent, j);
    if (!sameOrder(sent, exchanged))
      x = emit.relayout(x, sent, exchanged, element);
    NamedShape received = inFront(arrived, i);
    bool transposeBack = !sameOrder(received, arrived);
    Value y = transposeBack ? emit.alloc(sizesOf(received), element) : r;
    emit.kernel("all_to_all", {x}, {y},
                {emit.str("group", mesh.groupName(op.getGridAxes())),
                 emit.i64("outer", outerOf(is, first)),
                 emit.i64("chunk", numElements(is) / (outerOf(is, first) * ways))});
    if (transposeBack)
      emit.kernel("copy", {y}, {r},
                  {emit.list("shape", sizesOf(arrived)),
                   emit.list("x_strides", stridesIn(received, arrived))});
    return success();
  }
};

/// The gradient of a parameter tied across pipeline stages (embedding and output head):
/// summed over the pp ranks of the stages that use it.
struct TiedGradSumPattern : PlanPattern<graph::TiedGradSumOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::TiedGradSumOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    int pp = lowering.mesh().axisIndex("pp");
    if (pp < 0)
      return op.emitOpError("needs a 'pp' axis in the mesh");
    Value r = emit.define(op.getResult());
    emit.kernel("all_reduce", {adaptor.getInput()}, {r},
                {emit.str("group", lowering.mesh().groupName({static_cast<int16_t>(pp)})),
                 emit.str("op", "sum"),
                 emit.i64("n", cast<RankedTensorType>(op.getType()).getNumElements()),
                 emit.list("members", op.getStages())});
    return success();
  }
};

} // namespace

void plan_lowering::populateCollectivePatterns(RewritePatternSet &patterns,
                                               const TypeConverter &converter,
                                               PlanLowering &lowering) {
  patterns.add<CollectivePattern<shard::AllReduceOp>, CollectivePattern<shard::AllGatherOp>,
               CollectivePattern<shard::ReduceScatterOp>, CollectivePattern<shard::AllSliceOp>,
               AllToAllPattern, TiedGradSumPattern>(converter, patterns.getContext(), lowering);
}
