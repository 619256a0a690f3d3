//===- PlanDialect.h - The plan dialect -------------------------*- C++ -*-===//
#ifndef TESSEL_DIALECT_PLAN_PLANDIALECT_H
#define TESSEL_DIALECT_PLAN_PLANDIALECT_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "Plan/PlanOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "Plan/PlanOps.h.inc"

#endif // TESSEL_DIALECT_PLAN_PLANDIALECT_H
