//===- GraphGradientOps.cpp - Verifiers of gradient, training and per-rank ops ===//
//
// The verifiers of the ops autodiff, the optimizer and the partition pass build
// (GraphGradientOps.td, GraphTrainOps.td, GraphParallelOps.td) and of the fused linear
// cross-entropy. Gradients have exactly their operands' types; the per-rank pieces of split
// ops state the rows and shards they work on.
//
//===----------------------------------------------------------------------===//

#include "GraphVerifiers.h"
#include "tessel/Dialect/Graph/IR/GraphOps.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;
using namespace tessel::graph::verifier;

//===----------------------------------------------------------------------===//
// Gradient and training ops
//===----------------------------------------------------------------------===//

LogicalResult BroadcastOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes) || failed(sameElementType(*this, {getInput()})))
    return failure();
  for (const NamedDim &d : shapes->operands[0]) {
    int at = findDim(shapes->result, d.name);
    if (at < 0 || shapes->result[at].size != d.size)
      return emitOpError() << "input dim '" << d.name << "' is not a dim of the result "
                           << formatShape(shapes->result);
  }
  return success();
}

LogicalResult UnaryGradOp::verify() {
  if (failed(expectNamed(*this)))
    return failure();
  if (failed(verifyExponent(*this, getFn(), getExponent())))
    return failure();
  return sameTypes(*this, getType(), {getInput(), getOutput(), getGrad()}, "operand");
}

LogicalResult SoftmaxGradOp::verify() {
  if (failed(expectNamed(*this)))
    return failure();
  if (failed(sameTypes(*this, getType(), {getOutput(), getGrad()}, "operand")))
    return failure();
  auto shape = getNamedShape(getType());
  if (!shape || findDim(*shape, getDim().str()) < 0)
    return emitOpError() << "'" << getDim() << "' is not a dim of the operands";
  return success();
}

/// The scale of a norm gradient must be a scale its input could be normalised by.
static LogicalResult verifyNormGrad(Operation *op, Value input, Value scale) {
  if (failed(expectNamed(op)))
    return failure();
  ShapeResult r = normShape(*getNamedShape(input.getType()), *getNamedShape(scale.getType()));
  if (!r.ok())
    return op->emitOpError() << r.error;
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  if (failed(sameTypes(*this, getInput().getType(), {getGrad(), getInputGrad()}, "input")) ||
      failed(sameTypes(*this, getScale().getType(), {getScaleGrad(), getBiasGrad()}, "scale")))
    return failure();
  return verifyNormGrad(*this, getInput(), getScale());
}

LogicalResult RMSNormGradOp::verify() {
  if (failed(sameTypes(*this, getInput().getType(), {getGrad(), getInputGrad()}, "input")) ||
      failed(sameTypes(*this, getScale().getType(), {getScaleGrad()}, "scale")))
    return failure();
  return verifyNormGrad(*this, getInput(), getScale());
}

LogicalResult EmbeddingGradOp::verify() {
  auto table = getNamedShape(getType());
  auto ids = getNamedShape(getIds().getType());
  auto grad = getNamedShape(getGrad().getType());
  if (!table || !ids || !grad)
    return emitOpError("operands and result need #graph.dims encodings");
  ShapeResult r = embeddingShape(*table, *ids);
  if (!r.ok())
    return emitOpError() << r.error;
  if (!(r.shape == *grad))
    return emitOpError() << "gradient should be " << formatShape(r.shape) << " but is "
                         << formatShape(*grad);
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  if (failed(sameTypes(*this, getType(), {getLogits()}, "logits")) ||
      failed(expectScalar(*this, getGrad().getType(), "the loss gradient")))
    return failure();
  auto logits = getNamedShape(getLogits().getType());
  auto targets = getNamedShape(getTargets().getType());
  if (!logits || !targets)
    return emitOpError("operands need #graph.dims encodings");
  std::string cls;
  ShapeResult r = crossEntropyShape(*logits, *targets, &cls);
  if (!r.ok())
    return emitOpError() << r.error;
  if (cls != getDim())
    return emitOpError() << "class dim is '" << cls << "', not '" << getDim() << "'";
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(sameTypes(*this, getQuery().getType(), {getGrad(), getQueryGrad()}, "query")) ||
      failed(sameTypes(*this, getKey().getType(), {getKeyGrad()}, "key")) ||
      failed(sameTypes(*this, getValue().getType(), {getValueGrad()}, "value")))
    return failure();
  auto q = getNamedShape(getQuery().getType()), k = getNamedShape(getKey().getType()),
       v = getNamedShape(getValue().getType());
  if (!q || !k || !v)
    return emitOpError("operands need #graph.dims encodings");
  ShapeResult r = attentionShape(*q, *k, *v, getHeadsOver().has_value());
  if (!r.ok())
    return emitOpError() << r.error;
  if (getScale().convertToDouble() <= 0.0)
    return emitOpError("scale must be positive");
  if (auto w = getWindow(); w && (*w <= 0 || !getCausal()))
    return emitOpError("a window must be positive and come with the causal mask");
  if (!getOut() != !getLse())
    return emitOpError("takes the forward pass's output and log-sum-exp together");
  if (getOut() && (failed(sameTypes(*this, getQuery().getType(), {getOut()}, "saved output")) ||
                   failed(verifyLse(*this, getQuery(), getLse()))))
    return failure();
  return success();
}

LogicalResult AccumulateGradOp::verify() {
  if (getName().empty())
    return emitOpError("needs a parameter name");
  return failure(failed(expectNamed(*this)));
}

LogicalResult GradOp::verify() {
  if (getName().empty())
    return emitOpError("needs a parameter name");
  return failure(failed(expectNamed(*this)));
}

/// An optimizer op either updates its named parameter in place (no `param`, no result) or
/// updates the slice `param` and returns it: then the slice, the gradient and the result
/// share one type.
static LogicalResult verifySliceUpdate(Operation *op, Value param, Value updated, Value grad) {
  if (!param && !updated)
    return success();
  if (!param || !updated)
    return op->emitOpError("takes a parameter slice and returns the updated slice, or neither");
  if (param.getType() != grad.getType() || updated.getType() != grad.getType())
    return op->emitOpError(
        "needs the parameter slice, its gradient and the result to share a type");
  return success();
}

LogicalResult SGDOp::verify() {
  if (getName().empty())
    return emitOpError("needs a parameter name");
  double m = getMomentum().convertToDouble();
  if (!(m >= 0 && m < 1) || getWeightDecay().convertToDouble() < 0)
    return emitOpError("needs momentum in [0, 1) and weight_decay >= 0");
  if (failed(expectNamed(*this)) || failed(expectScalar(*this, getLr().getType(), "lr")) ||
      failed(expectScalar(*this, getCoefficient().getType(), "the coefficient")))
    return failure();
  return verifySliceUpdate(*this, getParam(), getUpdated(), getGrad());
}

LogicalResult ZeroGradOp::verify() {
  if (getName().empty())
    return emitOpError("needs a parameter name");
  return success();
}

LogicalResult GlobalNormOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one operand");
  if (failed(expectNamed(*this)))
    return failure();
  return expectScalar(*this, getType(), "the result");
}

LogicalResult ClipCoefficientOp::verify() {
  if (!(getMax().convertToDouble() > 0.0))
    return emitOpError() << "max must be positive, not " << getMax().convertToDouble();
  return expectScalar(*this, getType(), "the result");
}

LogicalResult AdamWOp::verify() {
  if (getName().empty())
    return emitOpError("needs a parameter name");
  double b1 = getBeta1().convertToDouble(), b2 = getBeta2().convertToDouble();
  if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1))
    return emitOpError() << "betas must lie in [0, 1), not (" << b1 << ", " << b2 << ")";
  if (!(getEps().convertToDouble() > 0) || getWeightDecay().convertToDouble() < 0)
    return emitOpError("needs eps > 0 and weight_decay >= 0");
  if (failed(expectNamed(*this)) || failed(expectScalar(*this, getLr().getType(), "lr")) ||
      failed(expectScalar(*this, getCoefficient().getType(), "the coefficient")))
    return failure();
  return verifySliceUpdate(*this, getParam(), getUpdated(), getGrad());
}

LogicalResult LearningRateOp::verify() {
  if (static_cast<int64_t>(getWarmup()) < 0 || static_cast<int64_t>(getSteps()) < 1)
    return emitOpError("needs warmup >= 0 and steps >= 1");
  return expectScalar(*this, getType(), "the result");
}

//===----------------------------------------------------------------------===//
// Per-rank pieces of split ops
//===----------------------------------------------------------------------===//

/// `rows` must be `logits` without its class dim `dim`.
static LogicalResult expectRowsOf(Operation *op, Type logits, StringRef dim, Type rows,
                                  StringRef what) {
  auto l = getNamedShape(logits), r = getNamedShape(rows);
  if (!l || !r)
    return op->emitOpError("needs tensors with named dims");
  int at = findDim(*l, dim.str());
  if (at < 0)
    return op->emitOpError() << "class dim '" << dim << "' is not a dim of the logits";
  NamedShape expect = *l;
  expect.erase(expect.begin() + at);
  if (expect != *r)
    return op->emitOpError() << what << " must be " << formatShape(expect) << ", not "
                             << formatShape(*r);
  return success();
}

LogicalResult CEMaxOp::verify() {
  return expectRowsOf(*this, getLogits().getType(), getDim(), getType(), "the result");
}

LogicalResult CESumsOp::verify() {
  Type l = getLogits().getType();
  if (failed(expectRowsOf(*this, l, getDim(), getTargets().getType(), "the targets")) ||
      failed(expectRowsOf(*this, l, getDim(), getMax().getType(), "the maxima")) ||
      failed(expectRowsOf(*this, l, getDim(), getSums().getType(), "the sums")) ||
      failed(expectRowsOf(*this, l, getDim(), getPicked().getType(), "the target logits")))
    return failure();
  return success();
}

LogicalResult CELossOp::verify() {
  if (getMax().getType() != getSums().getType() || getMax().getType() != getPicked().getType())
    return emitOpError("needs the maxima, sums and target logits to share a type");
  return expectScalar(*this, getType(), "the result");
}

LogicalResult CEGradOp::verify() {
  Type l = getLogits().getType();
  if (getType() != l)
    return emitOpError("needs the result to have the logits' type");
  if (failed(expectRowsOf(*this, l, getDim(), getTargets().getType(), "the targets")) ||
      failed(expectRowsOf(*this, l, getDim(), getMax().getType(), "the maxima")) ||
      failed(expectRowsOf(*this, l, getDim(), getSums().getType(), "the sums")))
    return failure();
  return expectScalar(*this, getGrad().getType(), "the loss gradient");
}

LogicalResult SumSquaresOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one operand");
  return expectScalar(*this, getType(), "the result");
}

LogicalResult AssignParamOp::verify() {
  if (getName().empty())
    return emitOpError("needs a parameter name");
  return success();
}

LogicalResult TiedGradSumOp::verify() {
  ArrayRef<int64_t> stages = getStages();
  if (stages.size() < 2)
    return emitOpError("needs at least two stages");
  for (size_t i = 0; i < stages.size(); ++i)
    if (stages[i] < 0 || (i > 0 && stages[i] <= stages[i - 1]))
      return emitOpError("needs distinct stages in ascending order");
  return success();
}

static int64_t elementCount(Type t) { return cast<RankedTensorType>(t).getNumElements(); }

LogicalResult PackOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one operand");
  if (getDims().size() != getInputs().size())
    return emitOpError("needs one split dim (or \"\") per operand");
  if (getWays() < 1)
    return emitOpError("needs ways >= 1");
  int64_t total = 0;
  for (auto [in, dimAttr] : llvm::zip(getInputs(), getDims())) {
    StringRef dim = cast<StringAttr>(dimAttr).getValue();
    auto shape = getNamedShape(in.getType());
    if (!shape)
      return emitOpError("needs tensors with named dims");
    if (!dim.empty()) {
      int at = findDim(*shape, dim.str());
      if (at < 0 || (*shape)[at].size % getWays() != 0)
        return emitOpError() << "dim '" << dim << "' of " << formatShape(*shape)
                             << " cannot be split " << getWays() << " ways";
    } else if (getWays() != 1) {
      return emitOpError("needs a split dim for every operand when ways > 1");
    }
    total += elementCount(in.getType());
  }
  auto r = getNamedShape(getType());
  if (!r || r->size() != 1 || (*r)[0].size != total)
    return emitOpError() << "needs a one-dim result of " << total << " elements";
  return success();
}

LogicalResult UnpackOp::verify() {
  int64_t total = 0;
  for (Value r : getResults())
    total += elementCount(r.getType());
  auto in = getNamedShape(getInput().getType());
  if (!in || in->size() != 1 || (*in)[0].size != total)
    return emitOpError() << "needs a one-dim operand of " << total
                         << " elements, the results' total";
  return success();
}

//===----------------------------------------------------------------------===//
// Fused linear cross-entropy
//===----------------------------------------------------------------------===//

/// The shape rule of both linear cross-entropy ops: input [rows..., K] (f32), weight holding
/// K and the classes `dim` in either order (f32), targets [rows...], a positive chunk and a
/// finite positive scale.
static LogicalResult verifyLinearCrossEntropy(Operation *op, Value input, Value weight,
                                              Value targets, StringRef dim, int64_t chunk,
                                              double scale) {
  auto x = getNamedShape(input.getType());
  auto w = getNamedShape(weight.getType());
  auto t = getNamedShape(targets.getType());
  if (!x || !w || !t)
    return op->emitOpError("operands need #graph.dims encodings");
  for (Value v : {input, weight})
    if (!cast<RankedTensorType>(v.getType()).getElementType().isF32())
      return op->emitOpError("needs f32 input and weight (the weight gradient accumulates in f32)");
  if (x->empty())
    return op->emitOpError("needs an input with a contracted last dim");
  const NamedDim &k = x->back();
  if (w->size() != 2 || k.name == dim.str() || findDim(*w, k.name) < 0 ||
      findDim(*w, dim.str()) < 0)
    return op->emitOpError() << "needs a weight with the dims '" << k.name << "' and '" << dim
                             << "', not " << formatShape(*w);
  if ((*w)[findDim(*w, k.name)].size != k.size)
    return op->emitOpError() << "contracts '" << k.name << "' of size " << k.size
                             << " with a weight " << formatShape(*w);
  NamedShape rows(x->begin(), x->end() - 1);
  if (!(rows == *t))
    return op->emitOpError() << "targets must be " << formatShape(rows)
                             << ", the input's rows, not " << formatShape(*t);
  if (chunk <= 0)
    return op->emitOpError("needs a positive chunk");
  if (!std::isfinite(scale) || scale <= 0)
    return op->emitOpError("needs a finite positive scale");
  return success();
}

LogicalResult LinearCrossEntropyOp::verify() {
  if (failed(expectScalar(*this, getType(), "the result")))
    return failure();
  return verifyLinearCrossEntropy(*this, getInput(), getWeight(), getTargets(), getDim(),
                                  getChunk(), getScale().convertToDouble());
}

LogicalResult LinearCrossEntropyGradOp::verify() {
  if (failed(expectScalar(*this, getLoss().getType(), "the loss")) ||
      failed(expectScalar(*this, getGrad().getType(), "the loss gradient")) ||
      failed(sameTypes(*this, getInput().getType(), {getInputGrad()}, "input gradient")) ||
      failed(sameTypes(*this, getWeight().getType(), {getWeightGrad()}, "weight gradient")))
    return failure();
  return verifyLinearCrossEntropy(*this, getInput(), getWeight(), getTargets(), getDim(),
                                  getChunk(), getScale().convertToDouble());
}
