//===- CollectivePatterns.cpp - Collectives to communicator kernels -------===//
//
// The partition pass's collectives (upstream shard dialect) become kernels that name their
// communicator group (the grid axes, e.g. "dp_tp") and the [outer, ways, chunk] layout around
// the split dim. A collective marked `tessel.async` runs on the communicator's stream; the
// first op that reads its result waits for its event (PlanLowering::waitFor).
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
               TiedGradSumPattern>(converter, patterns.getContext(), lowering);
}
