//===- GraphGradients.cpp - Gradient rules of the graph dialect's ops -----===//
//
// Each forward op's DifferentiableOpInterface implementation. A rule sees the gradient of
// its result and emits graph ops for the gradients of its operands. Broadcasting is undone
// by summing over the dims an operand lacks; dim order is restored with a permute, so every
// gradient has exactly its operand's type.
//
//===----------------------------------------------------------------------===//

#include "tessel/Dialect/Graph/IR/GraphOps.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

#include "tessel/Dialect/Graph/IR/GraphInterfaces.cpp.inc"

namespace {

NamedShape shapeOf(Value v) { return *getNamedShape(v.getType()); }

Type elementTypeOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

RankedTensorType tensorType(Value like, const NamedShape &shape) {
  return getNamedTensorType(like.getContext(), shape, elementTypeOf(like));
}

ArrayAttr stringArray(Builder &b, ArrayRef<std::string> names) {
  SmallVector<Attribute> attrs;
  for (const std::string &n : names)
    attrs.push_back(b.getStringAttr(n));
  return b.getArrayAttr(attrs);
}

/// `v` with its dims reordered to those of `type` (which names the same dims).
Value permuteTo(OpBuilder &b, Location loc, Value v, Type type) {
  if (v.getType() == type)
    return v;
  return PermuteOp::create(b, loc, type, v);
}

/// The gradient of a broadcast operand: sums `grad` over the dims `type` lacks, then orders
/// the rest as `type` does.
Value reduceTo(OpBuilder &b, Location loc, Value grad, Type type) {
  NamedShape target = *getNamedShape(type), have = shapeOf(grad);
  std::vector<std::string> extra;
  NamedShape kept;
  for (const NamedDim &d : have) {
    if (findDim(target, d.name) < 0)
      extra.push_back(d.name);
    else
      kept.push_back(d);
  }
  if (!extra.empty())
    grad = SumOp::create(b, loc, tensorType(grad, kept), grad, stringArray(b, extra));
  return permuteTo(b, loc, grad, type);
}

template <typename OpTy> Value broadcasting(OpBuilder &b, Location loc, Value lhs, Value rhs) {
  ShapeResult r = broadcastShapes(shapeOf(lhs), shapeOf(rhs));
  assert(r.ok() && "gradient operands broadcast by construction");
  return OpTy::create(b, loc, tensorType(lhs, r.shape), lhs, rhs);
}

Value scalar(OpBuilder &b, Location loc, Value like, double value) {
  return ConstantOp::create(b, loc, tensorType(like, {}), b.getF64FloatAttr(value));
}

/// Contracts `lhs` with `rhs` over `sum`, or multiplies them when there is nothing to sum
/// (an outer product along their distinct dims), into a value of type `type`. The operand
/// order decides the result's dim order, so the order that gives `type` directly is used
/// and a permute only when neither does.
Value contractTo(OpBuilder &b, Location loc, Value lhs, Value rhs,
                 const std::vector<std::string> &sum, Type type) {
  auto resultShape = [&](Value x, Value y) {
    return sum.empty() ? broadcastShapes(shapeOf(x), shapeOf(y))
                       : contractShapes(shapeOf(x), shapeOf(y), sum);
  };
  NamedShape want = *getNamedShape(type);
  if (resultShape(lhs, rhs).shape != want && resultShape(rhs, lhs).shape == want)
    std::swap(lhs, rhs);
  ShapeResult r = resultShape(lhs, rhs);
  assert(r.ok() && "gradient contraction is well formed by construction");
  Value v = sum.empty() ? MulOp::create(b, loc, tensorType(lhs, r.shape), lhs, rhs).getResult()
                        : ContractOp::create(b, loc, tensorType(lhs, r.shape), lhs, rhs,
                                             stringArray(b, sum))
                              .getResult();
  return permuteTo(b, loc, v, type);
}

/// The dims of `a` that `b` lacks.
std::vector<std::string> dimsOnlyIn(const NamedShape &a, const NamedShape &b) {
  std::vector<std::string> out;
  for (const NamedDim &d : a)
    if (findDim(b, d.name) < 0)
      out.push_back(d.name);
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// Leaves
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::buildGradients(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &) {
  return success();
}

LogicalResult ConstantOp::buildGradients(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &) {
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &dx) {
  dx.push_back(reduceTo(b, getLoc(), dy[0], getLhs().getType()));
  dx.push_back(reduceTo(b, getLoc(), dy[0], getRhs().getType()));
  return success();
}

LogicalResult SubOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &dx) {
  dx.push_back(reduceTo(b, getLoc(), dy[0], getLhs().getType()));
  Value neg = UnaryOp::create(b, getLoc(), dy[0].getType(), UnaryFn::Neg, dy[0]);
  dx.push_back(reduceTo(b, getLoc(), neg, getRhs().getType()));
  return success();
}

LogicalResult MulOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &dx) {
  dx.push_back(
      reduceTo(b, getLoc(), broadcasting<MulOp>(b, getLoc(), dy[0], getRhs()), getLhs().getType()));
  dx.push_back(
      reduceTo(b, getLoc(), broadcasting<MulOp>(b, getLoc(), dy[0], getLhs()), getRhs().getType()));
  return success();
}

LogicalResult DivOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &dx) {
  // d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b.
  Value dyOverB = broadcasting<DivOp>(b, getLoc(), dy[0], getRhs());
  dx.push_back(reduceTo(b, getLoc(), dyOverB, getLhs().getType()));
  Value t = broadcasting<MulOp>(b, getLoc(), dyOverB, getResult());
  Value neg = UnaryOp::create(b, getLoc(), t.getType(), UnaryFn::Neg, t);
  dx.push_back(reduceTo(b, getLoc(), neg, getRhs().getType()));
  return success();
}

// -x is linear: its gradient is -dy, a unary op itself. Every other function's is the
// function's own unary_grad, which reads x and y.
LogicalResult UnaryOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                      SmallVectorImpl<Value> &dx) {
  if (getFn() == UnaryFn::Neg) {
    dx.push_back(UnaryOp::create(b, getLoc(), dy[0].getType(), UnaryFn::Neg, dy[0]));
    return success();
  }
  dx.push_back(UnaryGradOp::create(b, getLoc(), getType(), getFnAttr(), getInput(), getResult(),
                                   dy[0], getExponentAttr()));
  return success();
}

// Comparisons are piecewise constant: their operands take no gradient through them.
#define TESSEL_NO_GRADIENT(Op)                                                                     \
  LogicalResult Op::buildGradients(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &dx) {     \
    dx.append(getOperation()->getNumOperands(), Value());                                          \
    return success();                                                                              \
  }
TESSEL_NO_GRADIENT(LtOp)
TESSEL_NO_GRADIENT(TopKOp)
TESSEL_NO_GRADIENT(LeOp)
TESSEL_NO_GRADIENT(GtOp)
TESSEL_NO_GRADIENT(GeOp)
TESSEL_NO_GRADIENT(EqOp)
TESSEL_NO_GRADIENT(NeOp)
TESSEL_NO_GRADIENT(PositionsOp)
#undef TESSEL_NO_GRADIENT

LogicalResult WhereOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                      SmallVectorImpl<Value> &dx) {
  // d where(c, a, b) / da = where(c, 1, 0), / db = where(c, 0, 1); `cond` takes none.
  Location loc = getLoc();
  Value zero = scalar(b, loc, dy[0], 0.0);
  Type type = dy[0].getType();
  Value toLhs = WhereOp::create(b, loc, type, getCond(), dy[0], zero);
  Value toRhs = WhereOp::create(b, loc, type, getCond(), zero, dy[0]);
  dx.push_back(Value());
  dx.push_back(reduceTo(b, loc, toLhs, getLhs().getType()));
  dx.push_back(reduceTo(b, loc, toRhs, getRhs().getType()));
  return success();
}

LogicalResult RenameOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                       SmallVectorImpl<Value> &dx) {
  dx.push_back(RenameOp::create(b, getLoc(), getInput().getType(), dy[0]));
  return success();
}

LogicalResult DropoutOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                        SmallVectorImpl<Value> &dx) {
  if (!getMask())
    return emitOpError("needs a mask number before it can be differentiated");
  dx.push_back(
      DropoutOp::create(b, getLoc(), dy[0].getType(), dy[0], getRateAttr(), getMaskAttr()));
  return success();
}

//===----------------------------------------------------------------------===//
// Contraction and reductions
//===----------------------------------------------------------------------===//

LogicalResult ContractOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                         SmallVectorImpl<Value> &dx) {
  // With A = lhs, B = rhs and G = dy: dA sums G * B over the dims only B contributed to G,
  // dB sums A * G over the dims only A contributed.
  NamedShape a = shapeOf(getLhs()), bs = shapeOf(getRhs());
  dx.push_back(contractTo(b, getLoc(), dy[0], getRhs(), dimsOnlyIn(bs, a), getLhs().getType()));
  dx.push_back(contractTo(b, getLoc(), getLhs(), dy[0], dimsOnlyIn(a, bs), getRhs().getType()));
  return success();
}

LogicalResult SumOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &dx) {
  dx.push_back(BroadcastOp::create(b, getLoc(), getInput().getType(), dy[0]));
  return success();
}

LogicalResult MeanOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &dx) {
  NamedShape in = shapeOf(getInput());
  double count = 1;
  for (Attribute a : getDims())
    count *= in[findDim(in, cast<StringAttr>(a).str())].size;
  Value spread = BroadcastOp::create(b, getLoc(), getInput().getType(), dy[0]);
  dx.push_back(broadcasting<MulOp>(b, getLoc(), spread, scalar(b, getLoc(), dy[0], 1 / count)));
  return success();
}

//===----------------------------------------------------------------------===//
// Composite ops
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                        SmallVectorImpl<Value> &dx) {
  dx.push_back(SoftmaxGradOp::create(b, getLoc(), getType(), getResult(), dy[0], getDimAttr()));
  return success();
}

LogicalResult LayerNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                          SmallVectorImpl<Value> &dx) {
  auto grad =
      LayerNormGradOp::create(b, getLoc(), getInput().getType(), getScale().getType(),
                              getBias().getType(), getInput(), getScale(), dy[0], getEpsAttr());
  dx.append({grad.getInputGrad(), grad.getScaleGrad(), grad.getBiasGrad()});
  return success();
}

LogicalResult RMSNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                        SmallVectorImpl<Value> &dx) {
  auto grad = RMSNormGradOp::create(b, getLoc(), getInput().getType(), getScale().getType(),
                                    getInput(), getScale(), dy[0], getEpsAttr());
  dx.append({grad.getInputGrad(), grad.getScaleGrad()});
  return success();
}

LogicalResult EmbeddingOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                          SmallVectorImpl<Value> &dx) {
  dx.push_back(EmbeddingGradOp::create(b, getLoc(), getTable().getType(), dy[0], getIds(),
                                       /*row_axis=*/StringAttr()));
  dx.push_back(Value());
  return success();
}

LogicalResult CrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                             SmallVectorImpl<Value> &dx) {
  dx.push_back(CrossEntropyGradOp::create(b, getLoc(), getLogits().getType(), getLogits(),
                                          getTargets(), dy[0], getDimAttr(),
                                          /*scale=*/FloatAttr()));
  dx.push_back(Value());
  return success();
}

LogicalResult AttentionOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                          SmallVectorImpl<Value> &dx) {
  auto grad = AttentionGradOp::create(b, getLoc(), getQuery().getType(), getKey().getType(),
                                      getValue().getType(), getQuery(), getKey(), getValue(), dy[0],
                                      /*out=*/Value(), /*lse=*/Value(), getCausalAttr(), getScaleAttr(), getWindowAttr(),
                                      getHeadsOverAttr(), getSeqOverAttr());
  dx.append({grad.getQueryGrad(), grad.getKeyGrad(), grad.getValueGrad()});
  return success();
}

LogicalResult RopeOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &dx) {
  dx.push_back(RopeOp::create(b, getLoc(), getType(), dy[0], getThetaAttr(),
                              getInverse() ? UnitAttr() : b.getUnitAttr(), getSeqOverAttr(),
                              getScalingAttr()));
  return success();
}

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

LogicalResult SplitOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                      SmallVectorImpl<Value> &dx) {
  // The parts replace `dim` in place: they start where it stood.
  NamedShape in = shapeOf(getInput()), out = shapeOf(getResult());
  int at = findDim(in, getDim().str());
  std::vector<std::string> parts;
  for (size_t i = 0; i < out.size() + 1 - in.size(); ++i)
    parts.push_back(out[at + i].name);
  dx.push_back(MergeOp::create(b, getLoc(), getInput().getType(), dy[0], stringArray(b, parts)));
  return success();
}

LogicalResult MergeOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                      SmallVectorImpl<Value> &dx) {
  NamedShape in = shapeOf(getInput()), out = shapeOf(getResult());
  int at = findDim(in, cast<StringAttr>(getDims()[0]).str());
  dx.push_back(
      SplitOp::create(b, getLoc(), getInput().getType(), dy[0], b.getStringAttr(out[at].name)));
  return success();
}

LogicalResult PermuteOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                        SmallVectorImpl<Value> &dx) {
  dx.push_back(PermuteOp::create(b, getLoc(), getInput().getType(), dy[0]));
  return success();
}
