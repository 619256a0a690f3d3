//===- Passes.h - The graph dialect's passes --------------------*- C++ -*-===//
#ifndef TESSEL_DIALECT_GRAPH_TRANSFORMS_PASSES_H
#define TESSEL_DIALECT_GRAPH_TRANSFORMS_PASSES_H

#include "tessel/Dialect/Graph/IR/GraphDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>
#include <optional>

namespace tessel {

/// What -tessel-recompute keeps for the backward pass (its `mode` option): the module's
/// setting (`Spec`, #tessel.parallel's recompute) or the one named.
enum class RecomputeMode { Spec, None, Selective, Full };

#define GEN_PASS_DECL
#include "tessel/Dialect/Graph/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tessel/Dialect/Graph/Transforms/Passes.h.inc"

} // namespace tessel

#endif // TESSEL_DIALECT_GRAPH_TRANSFORMS_PASSES_H
