//===- SchedDialect.cpp - The pipeline schedule dialect -------------------===//

#include "tessel/Dialect/Sched/IR/SchedDialect.h"

#include "common/schedule/ScheduleKind.h"

#include <set>

using namespace mlir;
using namespace tessel::sched;

#include "tessel/Dialect/Sched/IR/SchedOpsDialect.cpp.inc"

void SchedDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "tessel/Dialect/Sched/IR/SchedOps.cpp.inc"
      >();
}

// Each rank appears once, every compute action names a micro-batch and chunk in range, and
// every (micro-batch, chunk) of a rank runs its forward and its backward exactly once.
LogicalResult PipelineOp::verify() {
  int64_t p = static_cast<int64_t>(getStages()), m = static_cast<int64_t>(getMicrobatches()),
          v = static_cast<int64_t>(getVirtualStages());
  // The schedules are common/schedule/Schedule.h's, which also builds their action lists.
  tessel::pipeline::ScheduleKind kind;
  if (!tessel::pipeline::parseScheduleKind(getSchedule().str(), kind))
    return emitOpError() << "unknown schedule '" << getSchedule()
                         << "'; expected one of " << tessel::pipeline::scheduleKindList();
  if (p < 1 || m < 1 || v < 1)
    return emitOpError("needs stages, microbatches and virtual of at least 1");
  std::set<int64_t> ranks;
  for (auto rank : getBody().getOps<RankOp>()) {
    int64_t r = static_cast<int64_t>(rank.getRank());
    if (r < 0 || r >= p || !ranks.insert(r).second)
      return rank.emitOpError() << "rank " << r << " is out of range or repeated";
    std::set<std::pair<int64_t, int64_t>> forward, backward, input, weight;
    for (Operation &op : rank.getBody().front()) {
      auto mb = op.getAttrOfType<IntegerAttr>("microbatch");
      auto chunk = op.getAttrOfType<IntegerAttr>("chunk");
      if (!mb || !chunk || mb.getInt() < 0 || mb.getInt() >= m || chunk.getInt() < 0 ||
          chunk.getInt() >= v)
        return op.emitOpError("names a micro-batch or chunk out of range");
      std::pair<int64_t, int64_t> key{mb.getInt(), chunk.getInt()};
      bool fresh = isa<ForwardOp>(op)          ? forward.insert(key).second
                   : isa<BackwardOp>(op)       ? backward.insert(key).second
                   : isa<BackwardInputOp>(op)  ? input.insert(key).second
                   : isa<BackwardWeightOp>(op) ? weight.insert(key).second
                                               : true;
      if (!fresh)
        return op.emitOpError() << "repeats micro-batch " << key.first << " of chunk "
                                << key.second;
    }
    size_t whole = static_cast<size_t>(m * v);
    bool split = !input.empty() || !weight.empty();
    if (forward.size() != whole ||
        (split ? input.size() != whole || weight.size() != whole || !backward.empty()
               : backward.size() != whole))
      return rank.emitOpError() << "does not run the forward and backward of every "
                                << "micro-batch of every chunk exactly once";
  }
  if (static_cast<int64_t>(ranks.size()) != p)
    return emitOpError() << "has " << ranks.size() << " ranks, not " << p;
  return success();
}

#define GET_OP_CLASSES
#include "tessel/Dialect/Sched/IR/SchedOps.cpp.inc"
