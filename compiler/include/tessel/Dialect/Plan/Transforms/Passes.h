//===- Passes.h - The plan dialect's passes ---------------------*- C++ -*-===//
#ifndef TESSEL_DIALECT_PLAN_TRANSFORMS_PASSES_H
#define TESSEL_DIALECT_PLAN_TRANSFORMS_PASSES_H

#include "tessel/Dialect/Plan/IR/PlanDialect.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace tessel {

#define GEN_PASS_DECL
#include "tessel/Dialect/Plan/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tessel/Dialect/Plan/Transforms/Passes.h.inc"

} // namespace tessel

#endif // TESSEL_DIALECT_PLAN_TRANSFORMS_PASSES_H
