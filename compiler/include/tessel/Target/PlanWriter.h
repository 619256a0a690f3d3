//===- PlanWriter.h - From the plan dialect to a plan file ------*- C++ -*-===//
#ifndef TESSEL_TARGET_PLANWRITER_H
#define TESSEL_TARGET_PLANWRITER_H

#include "common/plan/PlanFile.h"

#include "mlir/IR/BuiltinOps.h"

namespace tessel {

/// Translates a memory-planned plan module (after -tessel-plan-memory) into the runtime's
/// plan structure, carrying the module's dims and training settings as configuration, the
/// mesh and the groups it spans. Its programs are kept once per pipeline stage, so its size
/// does not grow with dp or tp.
mlir::FailureOr<planfile::Plan> translateToPlanFile(mlir::ModuleOp module);

/// "file:line:col" of the innermost source location in `loc`, or "".
std::string formatSourceLocation(mlir::Location loc);

} // namespace tessel

#endif // TESSEL_TARGET_PLANWRITER_H
