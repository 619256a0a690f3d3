//===- ParameterClasses.cpp - What each parameter is, by its use ----------===//

#include "tessel/Dialect/Graph/Transforms/ParameterClasses.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

llvm::StringRef tessel::parameterClassName(ParameterClass c) {
  switch (c) {
  case ParameterClass::Weights:
    return "weights";
  case ParameterClass::Embeddings:
    return "embeddings";
  case ParameterClass::Gains:
    return "gains";
  case ParameterClass::Biases:
    return "biases";
  }
  return "biases";
}

std::optional<ParameterClass> tessel::parseParameterClass(llvm::StringRef word) {
  for (ParameterClass c : {ParameterClass::Weights, ParameterClass::Embeddings,
                           ParameterClass::Gains, ParameterClass::Biases})
    if (parameterClassName(c) == word)
      return c;
  return std::nullopt;
}

namespace {

/// Ops that only rename or reorder a tensor's dims: a parameter seen through them is used as
/// itself.
bool isRelabelling(Operation *op) { return isa<RenameOp, PermuteOp>(op); }

/// Whether `v` is an embedding's rows, possibly relabelled.
bool isEmbeddingRows(Value v) {
  Operation *def = v.getDefiningOp();
  while (def && isRelabelling(def))
    def = def->getOperand(0).getDefiningOp();
  return def && isa<EmbeddingOp>(def);
}

/// The uses of `v`, looking through relabelling ops.
void collectUses(Value v, SmallVectorImpl<OpOperand *> &uses) {
  for (OpOperand &use : v.getUses()) {
    if (isRelabelling(use.getOwner()))
      collectUses(use.getOwner()->getResult(0), uses);
    else
      uses.push_back(&use);
  }
}

ParameterClass classify(ParamOp param) {
  SmallVector<OpOperand *> uses;
  collectUses(param.getResult(), uses);
  bool embedding = false, contracted = false, multiplied = false;
  for (OpOperand *use : uses) {
    Operation *user = use->getOwner();
    if (auto lookup = dyn_cast<EmbeddingOp>(user))
      embedding |= use->get() == lookup.getTable();
    else if (auto add = dyn_cast<AddOp>(user))
      embedding |= isEmbeddingRows(use->getOperandNumber() == 0 ? add.getRhs() : add.getLhs());
    else if (isa<ContractOp>(user))
      contracted = true;
    else if (isa<MulOp>(user))
      multiplied = true;
    else if (auto norm = dyn_cast<LayerNormOp>(user))
      multiplied |= use->get() == norm.getScale();
    else if (auto norm = dyn_cast<RMSNormOp>(user))
      multiplied |= use->get() == norm.getScale();
  }
  if (embedding)
    return ParameterClass::Embeddings;
  if (contracted)
    return ParameterClass::Weights;
  if (multiplied)
    return ParameterClass::Gains;
  return ParameterClass::Biases;
}

} // namespace

llvm::StringMap<ParameterClass> tessel::classifyParameters(func::FuncOp forward) {
  llvm::StringMap<ParameterClass> classes;
  forward.walk([&](ParamOp param) { classes[param.getName()] = classify(param); });
  return classes;
}
