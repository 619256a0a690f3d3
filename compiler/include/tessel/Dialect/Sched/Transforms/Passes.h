//===- Passes.h - The sched dialect's passes --------------------*- C++ -*-===//
#ifndef TESSEL_DIALECT_SCHED_TRANSFORMS_PASSES_H
#define TESSEL_DIALECT_SCHED_TRANSFORMS_PASSES_H

#include "tessel/Dialect/Sched/IR/SchedDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace tessel {

#define GEN_PASS_DECL
#include "tessel/Dialect/Sched/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tessel/Dialect/Sched/Transforms/Passes.h.inc"

} // namespace tessel

#endif // TESSEL_DIALECT_SCHED_TRANSFORMS_PASSES_H
