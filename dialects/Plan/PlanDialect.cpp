//===- PlanDialect.cpp - The plan dialect ---------------------------------===//

#include "Plan/PlanDialect.h"

using namespace mlir;
using namespace tessel::plan;

#include "Plan/PlanOpsDialect.cpp.inc"

void PlanDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "Plan/PlanOps.cpp.inc"
      >();
}

LogicalResult ViewOp::verify() {
  auto from = getSource().getType(), to = getResult().getType();
  if (auto offset = getOffset()) {
    int64_t at = static_cast<int64_t>(*offset);
    if (from.getElementType() != to.getElementType() || at < 0 ||
        at + to.getNumElements() > from.getNumElements())
      return emitOpError() << "cannot view " << to.getNumElements() << " elements at offset "
                           << *offset << " of " << from;
    return success();
  }
  if (from.getElementType() != to.getElementType() || from.getNumElements() != to.getNumElements())
    return emitOpError() << "cannot view " << from << " as " << to
                         << ": a view keeps the element type and count";
  return success();
}

#define GET_OP_CLASSES
#include "Plan/PlanOps.cpp.inc"
