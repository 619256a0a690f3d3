//===- PlanDialect.h - The plan dialect -------------------------*- C++ -*-===//
#ifndef TESSEL_DIALECT_PLAN_IR_PLANDIALECT_H
#define TESSEL_DIALECT_PLAN_IR_PLANDIALECT_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tessel/Dialect/Plan/IR/PlanOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "tessel/Dialect/Plan/IR/PlanOps.h.inc"

#include "common/plan/PlanFile.h"

namespace tessel::plan {

/// The plan file's element type of a memref of the plan dialect: f32, bf16, f16 or i32; a
/// failure (emitted on `op`) for any other.
mlir::FailureOr<planfile::DType> planDType(mlir::Operation *op, mlir::MemRefType type);

/// A `plan.kernel` parameter as the plan file stores it: i64, f64, string or i64 array; a
/// failure (emitted on `op`) for any other attribute.
mlir::FailureOr<planfile::Attr> planParam(mlir::Operation *op, mlir::NamedAttribute param);

/// The module's `plan.mesh`, or null where it has none.
MeshOp meshOf(mlir::ModuleOp module);

} // namespace tessel::plan

#endif // TESSEL_DIALECT_PLAN_IR_PLANDIALECT_H
