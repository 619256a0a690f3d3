//===- ParameterClasses.h - What each parameter is, by its use --*- C++ -*-===//
//
// Weight decay, as nanoGPT and llm.c apply it, falls on the matrices of a model and not on its
// biases or its norms' gains. In a .model file parameters carry named dims rather than a rank
// that tells them apart (an attention bias is [heads, head], two dims), so a parameter's class
// is read from how the forward pass uses it:
//
//   weights     contracted with an activation (`x @ w`)
//   embeddings  a table embedding() reads, or a parameter added to an embedding's rows
//               (learned positions: `embedding(wte, tokens) + wpe`)
//   gains       multiplied in (a norm's scale: layernorm's and rmsnorm's, or `* g` by hand)
//   biases      added in (`+ b`, layernorm's bias), and any other use
//
// The first of those that applies decides, in that order: a tied embedding that is also the
// output head is an embedding. The spellings are the spec language's (`decay = (weights,
// gains)`, docs/language.md).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_DIALECT_GRAPH_TRANSFORMS_PARAMETERCLASSES_H
#define TESSEL_DIALECT_GRAPH_TRANSFORMS_PARAMETERCLASSES_H

#include "llvm/ADT/StringMap.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace tessel {

enum class ParameterClass { Weights, Embeddings, Gains, Biases };

/// The class's word in the spec language: "weights", "embeddings", "gains", "biases".
llvm::StringRef parameterClassName(ParameterClass c);
std::optional<ParameterClass> parseParameterClass(llvm::StringRef word);

/// The class of every parameter `forward` declares, by name.
llvm::StringMap<ParameterClass> classifyParameters(mlir::func::FuncOp forward);

} // namespace tessel

#endif // TESSEL_DIALECT_GRAPH_TRANSFORMS_PARAMETERCLASSES_H
