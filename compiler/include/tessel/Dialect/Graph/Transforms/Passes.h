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

/// What -tessel-recompute keeps for the backward pass (its `mode` option).
enum class RecomputeMode { Spec, None, Selective, Full };

/// The mode a spec's `recompute` word names (none, selective, full); nullopt for any other.
std::optional<RecomputeMode> parseRecomputeMode(llvm::StringRef word);

#define GEN_PASS_DECL
#include "tessel/Dialect/Graph/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tessel/Dialect/Graph/Transforms/Passes.h.inc"

} // namespace tessel

#endif // TESSEL_DIALECT_GRAPH_TRANSFORMS_PASSES_H
