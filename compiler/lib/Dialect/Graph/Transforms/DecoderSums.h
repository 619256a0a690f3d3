//===- DecoderSums.h - Sums along the sequence in decode programs -*- C++ -*-===//
//
// Private to -tessel-derive-decoder. Besides attention, two things in a model read along the
// sequence and still decode exactly from a cache (a mixture of experts' capacity counting is
// both): a sum over each token's earlier tokens, which becomes a running sum carried across
// decode programs in per-sequence totals; and a contraction over the sequence that routes
// every token to slots no other token of its sequence takes, whose result comes back to the
// tokens only at their own slots, which decodes on the new tokens alone.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_DIALECT_GRAPH_TRANSFORMS_DECODERSUMS_H
#define TESSEL_DIALECT_GRAPH_TRANSFORMS_DECODERSUMS_H

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <string>

namespace tessel::decoder {

/// Whether `t`, a tensor with named dims, has a dim `name`.
bool hasDim(mlir::Type t, llvm::StringRef name);

/// What the rewrite of running sums needs of the decode program being derived.
struct SumSite {
  std::string batch, seq;          ///< The sequence and token dims.
  mlir::Value positions, blockTable; ///< The program's arguments.
  int64_t cacheBlocks = 0;         ///< Rows of each running sum's totals.
};

/// Rewrites each contraction of a sequence's values with the mask of its earlier positions,
/// `contract(rename(x, seq = s), positions(s) < positions(seq), sum [s])` (or <=), where x is
/// [batch, seq, ...], into `running_sum` over new per-sequence totals ("sum.<i>"), created
/// after `lastState` (the function's start when null), which is left at the last of them.
/// Returns how many it rewrote.
int rewriteRunningSums(mlir::func::FuncOp f, const SumSite &site, mlir::OpBuilder &b,
                       mlir::Operation *&lastState);

/// Whether `c`, a contraction over the sequence alone, is proven to decode on the new tokens
/// alone: one operand is a slot mask `m * (slot == positions(capacity))` with m a 0/1 mask
/// (top_k or a comparison) and slot m's running count (so no two tokens of a sequence share a
/// slot, and a padding slot takes none); every op its result feeds keeps the mask's dims
/// other than the sequence and sums over none of them, until a contraction over exactly those
/// dims with the mask (or the mask times a value) brings it back to the tokens.
bool routesTokensToOwnSlots(graph::ContractOp c, llvm::StringRef batch, llvm::StringRef seq);

} // namespace tessel::decoder

#endif // TESSEL_DIALECT_GRAPH_TRANSFORMS_DECODERSUMS_H
