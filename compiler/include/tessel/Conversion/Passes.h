//===- Passes.h - Tessel's conversions between dialects ---------*- C++ -*-===//
#ifndef TESSEL_CONVERSION_PASSES_H
#define TESSEL_CONVERSION_PASSES_H

#include "tessel/Dialect/Graph/IR/GraphDialect.h"
#include "tessel/Dialect/Plan/IR/PlanDialect.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace tessel {

#define GEN_PASS_DECL
#include "tessel/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tessel/Conversion/Passes.h.inc"

} // namespace tessel

#endif // TESSEL_CONVERSION_PASSES_H
