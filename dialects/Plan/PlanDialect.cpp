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
  if (from.getElementType() != to.getElementType() || from.getNumElements() != to.getNumElements())
    return emitOpError() << "cannot view " << from << " as " << to
                         << ": a view keeps the element type and count";
  return success();
}

#define GET_OP_CLASSES
#include "Plan/PlanOps.cpp.inc"
