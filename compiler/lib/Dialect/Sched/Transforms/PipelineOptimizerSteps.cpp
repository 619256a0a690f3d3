//===- PipelineOptimizerSteps.cpp - One optimizer step per pipeline stage -===//
//
// Under a pipeline each stage holds only its layers' parameters, so it runs its own optimizer
// step over them: @optimizer_step is cloned once per stage and each clone keeps the updates of
// the parameters that stage's pieces use (their owners, recorded while the pieces are cut).
// Evaluation and sampling may read only parameters training keeps on their stage.
//
//===----------------------------------------------------------------------===//

#include "PipelinePieces.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"
#include "tessel/Dialect/Graph/IR/GraphSharding.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;
using namespace tessel::pipeline_split;

namespace {

ArrayAttr shardingList(Builder &b, const Sharding &s) {
  return b.getArrayAttr({getShardingAttr(b.getContext(), s)});
}

/// The parameter an optimizer-step value belongs to: the `name` of the op it comes from.
StringRef parameterOf(Value v, const Owners &owners) {
  while (Operation *d = v.getDefiningOp()) {
    if (auto name = d->getAttrOfType<StringAttr>("name"); name && owners.count(name.str()))
      return name.getValue();
    if (d->getNumOperands() != 1)
      return {};
    v = d->getOperand(0);
  }
  return {};
}

} // namespace

void pipeline_split::recordOwners(func::FuncOp func, const Placement &seg, const Stages &st,
                                  Owners &owners) {
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      for (Operation *user : param->getUsers())
        if (seg.count(user))
          owners[param.getName().str()].insert(st.stageOf(seg.lookup(user).chunk));
    } else if (auto acc = dyn_cast<AccumulateGradOp>(op)) {
      owners[acc.getName().str()].insert(st.stageOf(seg.lookup(&op).chunk));
    }
  }
}

LogicalResult pipeline_split::checkOwners(func::FuncOp func, const Placement &seg, const Stages &st,
                                          const Owners &owners) {
  for (auto param : func.getBody().front().getOps<ParamOp>())
    for (Operation *user : param->getUsers()) {
      if (!seg.count(user))
        continue;
      int64_t stage = st.stageOf(seg.lookup(user).chunk);
      auto it = owners.find(param.getName().str());
      if (it == owners.end() || !it->second.count(stage))
        return user->emitOpError()
               << "reads parameter '" << param.getName() << "' on pipeline stage " << stage
               << ", where training does not keep it";
    }
  return success();
}

LogicalResult pipeline_split::splitOptimizer(ModuleOp module, func::FuncOp opt,
                                             const Owners &owners, const Stages &st,
                                             int16_t ppAxis) {
  OpBuilder b(module.getContext());
  for (int64_t r = 0; r < st.p; ++r) {
    b.setInsertionPointToEnd(module.getBody());
    auto stage = cast<func::FuncOp>(b.clone(*opt));
    stage.setSymName(("optimizer_step.stage" + std::to_string(r)));
    stage->setAttr("tessel.program", b.getStringAttr("optimizer_step"));
    stage->setAttr("tessel.stage", b.getI64IntegerAttr(r));
    Block &body = stage.getBody().front();
    auto holds = [&](StringRef name) {
      auto it = owners.find(name.str());
      return it != owners.end() && it->second.count(r);
    };
    auto counts = [&](StringRef name) {
      auto it = owners.find(name.str());
      return it != owners.end() && !it->second.empty() && *it->second.begin() == r;
    };

    for (auto grad : llvm::make_early_inc_range(body.getOps<GradOp>())) {
      auto it = owners.find(grad.getName().str());
      if (it == owners.end() || it->second.size() < 2 || !it->second.count(r))
        continue;
      b.setInsertionPointAfter(grad);
      SmallVector<int64_t> stages(it->second.begin(), it->second.end());
      auto sum = TiedGradSumOp::create(b, grad.getLoc(), grad.getType(), grad.getResult(),
                                       b.getDenseI64ArrayAttr(stages));
      if (Attribute s = grad->getAttr(kShardingAttr))
        sum->setAttr(kShardingAttr, s);
      grad.getResult().replaceAllUsesExcept(sum.getResult(), sum);
    }

    // The norm: each sum of squares is also a partial sum over the stages; its reduction
    // (or a new one) takes `pp` in too.
    for (auto ss : llvm::make_early_inc_range(body.getOps<SumSquaresOp>())) {
      SmallVector<Value> kept;
      for (Value g : ss.getInputs())
        if (counts(parameterOf(g, owners)))
          kept.push_back(g);
      b.setInsertionPoint(ss);
      Operation *part;
      if (kept.empty())
        part = ConstantOp::create(b, ss.getLoc(), ss.getType(), b.getF64FloatAttr(0.0));
      else
        part = SumSquaresOp::create(b, ss.getLoc(), ss.getType(), kept);
      Sharding reduced = recordedSharding(ss.getResult()).value_or(Sharding::replicated(0));
      Sharding partial = reduced;
      partial.addPartial("pp");
      part->setAttr(kShardingAttr, shardingList(b, partial));
      SmallVector<int16_t> axes = {ppAxis};
      auto existing =
          ss->hasOneUse() ? dyn_cast<shard::AllReduceOp>(*ss->user_begin()) : shard::AllReduceOp();
      if (existing) {
        axes.append(existing.getGridAxes().begin(), existing.getGridAxes().end());
        llvm::sort(axes);
        reduced = recordedSharding(existing.getResult()).value_or(Sharding::replicated(0));
      } else {
        b.setInsertionPointAfter(part);
      }
      if (existing)
        b.setInsertionPoint(existing);
      auto reduce = shard::AllReduceOp::create(b, ss.getLoc(), ss.getType(), kGridName, axes,
                                               part->getResult(0), shard::ReductionKind::Sum);
      reduce->setAttr(kShardingAttr, shardingList(b, reduced));
      if (existing) {
        existing.getResult().replaceAllUsesWith(reduce.getResult());
        existing.erase();
      } else {
        ss.getResult().replaceAllUsesWith(reduce.getResult());
      }
      ss.erase();
    }

    // Whatever belongs to a parameter another stage holds goes, with everything using it.
    DenseSet<Operation *> dead;
    SmallVector<Operation *> order;
    for (Operation &op : body.without_terminator()) {
      auto name = op.getAttrOfType<StringAttr>("name");
      bool gone = name && owners.count(name.str()) && !holds(name.getValue());
      for (Value x : op.getOperands())
        gone |= x.getDefiningOp() && dead.contains(x.getDefiningOp());
      if (gone) {
        dead.insert(&op);
        order.push_back(&op);
      }
    }
    for (Value x : body.getTerminator()->getOperands())
      if (x.getDefiningOp() && dead.contains(x.getDefiningOp()))
        return opt.emitOpError("returns a value of a parameter pipeline stage ")
               << r << " does not hold";
    for (Operation *op : llvm::reverse(order))
      op->erase();
  }
  opt.erase();
  return success();
}
