//===- SchedDialect.cpp - The pipeline schedule dialect -------------------===//

#include "tessel/Dialect/Sched/IR/SchedDialect.h"

#include "common/schedule/Schedule.h"

using namespace mlir;
using namespace tessel::sched;

#include "tessel/Dialect/Sched/IR/SchedOpsDialect.cpp.inc"

void SchedDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "tessel/Dialect/Sched/IR/SchedOps.cpp.inc"
      >();
}

// The schedule is one common/schedule can build and check for these sizes; the layer runs and
// the per-rank figures have one entry per virtual stage and per rank.
LogicalResult PipelineOp::verify() {
  int64_t p = static_cast<int64_t>(getStages()), m = static_cast<int64_t>(getMicrobatches()),
          v = static_cast<int64_t>(getVirtualStages());
  tessel::pipeline::ScheduleKind kind;
  if (!tessel::pipeline::parseScheduleKind(getSchedule().str(), kind))
    return emitOpError() << "unknown schedule '" << getSchedule() << "'; expected one of "
                         << tessel::pipeline::scheduleKindList();
  if (p < 1 || m < 1 || v < 1)
    return emitOpError("needs stages, microbatches and virtual of at least 1");
  std::string why;
  auto lists = tessel::pipeline::buildSchedule(kind, static_cast<int>(p), static_cast<int>(m),
                                               static_cast<int>(v), why);
  if (lists.empty() ||
      !tessel::pipeline::checkSchedule(kind, static_cast<int>(p), static_cast<int>(m),
                                       static_cast<int>(v), lists, why))
    return emitOpError() << "the " << getSchedule() << " schedule cannot run: " << why;
  if (auto layers = getLayers(); layers && static_cast<int64_t>(layers->size()) != 2 * p * v)
    return emitOpError() << "lists " << layers->size()
                         << " layer numbers; two per virtual stage are " << 2 * p * v;
  if (auto inFlight = getInFlight(); inFlight && static_cast<int64_t>(inFlight->size()) != p)
    return emitOpError() << "gives " << inFlight->size() << " ranks micro-batches in flight, not "
                         << p;
  return success();
}

#define GET_OP_CLASSES
#include "tessel/Dialect/Sched/IR/SchedOps.cpp.inc"
