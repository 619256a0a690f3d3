//===- GraphOps.cpp - Verifiers of the graph dialect's ops ----------------===//
//
// Every verifier states its op's shape rule by calling tessel/Shape/NamedShape.h and
// comparing the result with the op's declared result type.
//
//===----------------------------------------------------------------------===//

#include "Graph/GraphOps.h"

#include "common/KernelCatalogue.h"

#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

std::optional<NamedShape> tessel::graph::getNamedShape(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return std::nullopt;
  auto dims = dyn_cast_or_null<DimsAttr>(tensor.getEncoding());
  if (!dims || dims.getNames().size() != static_cast<size_t>(tensor.getRank()))
    return std::nullopt;
  NamedShape shape;
  for (auto [name, size] : llvm::zip(dims.getNames(), tensor.getShape()))
    shape.push_back({name.getValue().str(), size});
  return shape;
}

std::string tessel::graph::spelling(StringRef opName) {
  auto [dialect, name] = opName.split('.');
  if (name.empty())
    return ("'" + opName + "'").str();
  if (dialect == "shard")
    return ((name.starts_with("a") ? "an " : "a ") + name + " between ranks").str();
  if (dialect == "plan")
    return ("the compiled plan's " + name).str();
  if (dialect == "sched")
    return "the pipeline schedule";
  if (dialect == "func")
    return "a compiled function";
  if (dialect != "graph")
    return ("'" + opName + "'").str();
  static const llvm::StringMap<const char *> words = {
      {"add", "`+`"},
      {"sub", "`-`"},
      {"mul", "`*`"},
      {"div", "`/`"},
      {"neg", "unary `-`"},
      {"lt", "`<`"},
      {"le", "`<=`"},
      {"gt", "`>`"},
      {"ge", "`>=`"},
      {"eq", "`==`"},
      {"ne", "`!=`"},
      {"contract", "`@`"},
      {"param", "a parameter"},
      {"constant", "a constant"},
      {"broadcast", "the gradient of a sum or mean"},
      {"unary_grad", "the gradient of an elementwise function"},
      {"ce_max", "`cross_entropy` over split classes"},
      {"ce_sums", "`cross_entropy` over split classes"},
      {"ce_loss", "`cross_entropy` over split classes"},
      {"ce_grad", "the gradient of `cross_entropy` over split classes"},
      {"linear_cross_entropy", "the output head's `@` and `cross_entropy`"},
      {"linear_cross_entropy_grad",
       "the output head's `@` and `cross_entropy` and their gradients"},
      {"sum_squares", "the gradient norm"},
      {"global_norm", "the gradient norm"},
      {"assign_param", "the parameter update"},
      {"pack", "a gradient bucket"},
      {"unpack", "a gradient bucket"},
      {"tied_grad_sum", "the sum of a tied parameter's gradients"},
      {"accumulate_grad", "the gradient accumulation"},
      {"grad", "a gradient"},
      {"zero_grad", "the clearing of a gradient"},
      {"guard_finite", "the check that the gradients are finite"},
      {"clip_coefficient", "gradient clipping (train.clip)"},
      {"learning_rate", "the learning-rate schedule (train.schedule)"},
      {"adamw", "the optimizer's update (train.optimizer)"},
      {"sgd", "the optimizer's update (train.optimizer)"}};
  if (auto it = words.find(name); it != words.end())
    return it->second;
  if (name.consume_back("_grad"))
    return ("the gradient of `" + name + "`").str();
  return ("`" + name + "`").str(); // exp, mean, attention, ...: the built-in's own name.
}

RankedTensorType tessel::graph::getNamedTensorType(MLIRContext *ctx, const NamedShape &shape,
                                                   Type elementType) {
  SmallVector<int64_t> sizes;
  SmallVector<StringAttr> names;
  for (const NamedDim &d : shape) {
    sizes.push_back(d.size);
    names.push_back(StringAttr::get(ctx, d.name));
  }
  return RankedTensorType::get(sizes, elementType, DimsAttr::get(ctx, names));
}

namespace {

/// Named shapes of an op's operands and result, or a diagnostic on the op.
struct Shapes {
  SmallVector<NamedShape> operands;
  NamedShape result;
};

FailureOr<Shapes> namedShapes(Operation *op) {
  Shapes shapes;
  auto get = [&](Type type, StringRef what) -> FailureOr<NamedShape> {
    auto shape = getNamedShape(type);
    if (!shape) {
      op->emitOpError() << what << " type " << type
                        << " must be a ranked tensor with one #graph.dims name per dim";
      return failure();
    }
    // Checked before the sizes: a dynamic dim would be reported as "size -9223372036854775808".
    if (!cast<RankedTensorType>(type).hasStaticShape()) {
      op->emitOpError() << what << " type " << type
                        << " has a dynamic dim; graph tensors have static sizes";
      return failure();
    }
    std::string err = checkWellFormed(*shape);
    if (!err.empty()) {
      op->emitOpError() << what << ": " << err;
      return failure();
    }
    return *shape;
  };
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    auto s = get(v.getType(), "operand #" + std::to_string(i));
    if (failed(s))
      return failure();
    shapes.operands.push_back(*s);
  }
  auto r = get(op->getResult(0).getType(), "result");
  if (failed(r))
    return failure();
  shapes.result = *r;
  return shapes;
}

/// Compares a rule's result with the declared result shape.
LogicalResult expectShape(Operation *op, const ShapeResult &rule, const NamedShape &declared) {
  if (!rule.ok())
    return op->emitOpError() << rule.error;
  if (!(rule.shape == declared))
    return op->emitOpError() << "result should be " << formatShape(rule.shape) << " but is "
                             << formatShape(declared);
  return success();
}

/// Element types must agree across the named float operands and the result.
LogicalResult sameElementType(Operation *op, ValueRange values) {
  Type want = cast<ShapedType>(op->getResult(0).getType()).getElementType();
  for (Value v : values)
    if (cast<ShapedType>(v.getType()).getElementType() != want)
      return op->emitOpError() << "operand element type "
                               << cast<ShapedType>(v.getType()).getElementType()
                               << " differs from the result's " << want;
  return success();
}

std::vector<std::string> strings(ArrayAttr array) {
  std::vector<std::string> out;
  for (Attribute a : array)
    out.push_back(cast<StringAttr>(a).getValue().str());
  return out;
}

LogicalResult verifyUnary(Operation *op) {
  auto shapes = namedShapes(op);
  return failure(failed(shapes));
}

template <typename BinaryOp> LogicalResult verifyBinary(BinaryOp op) {
  auto shapes = namedShapes(op);
  if (failed(shapes) || failed(sameElementType(op, {op.getLhs(), op.getRhs()})))
    return failure();
  return expectShape(op, broadcastShapes(shapes->operands[0], shapes->operands[1]), shapes->result);
}

template <typename ReduceOp> LogicalResult verifyReduce(ReduceOp op) {
  auto shapes = namedShapes(op);
  if (failed(shapes) || failed(sameElementType(op, {op.getInput()})))
    return failure();
  return expectShape(op, reduceShape(shapes->operands[0], strings(op.getDims())), shapes->result);
}

} // namespace

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError("needs a non-empty parameter path");
  return failure(failed(namedShapes(*this)));
}

LogicalResult ConstantOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes))
    return failure();
  if (!shapes->result.empty())
    return emitOpError("produces a scalar; its type has no dims");
  return success();
}

LogicalResult AddOp::verify() { return verifyBinary(*this); }
LogicalResult SubOp::verify() { return verifyBinary(*this); }
LogicalResult MulOp::verify() { return verifyBinary(*this); }
LogicalResult DivOp::verify() { return verifyBinary(*this); }

LogicalResult LtOp::verify() { return verifyBinary(*this); }
LogicalResult LeOp::verify() { return verifyBinary(*this); }
LogicalResult GtOp::verify() { return verifyBinary(*this); }
LogicalResult GeOp::verify() { return verifyBinary(*this); }
LogicalResult EqOp::verify() { return verifyBinary(*this); }
LogicalResult NeOp::verify() { return verifyBinary(*this); }

LogicalResult WhereOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes) || failed(sameElementType(*this, (*this)->getOperands())))
    return failure();
  return expectShape(*this,
                     whereShape(shapes->operands[0], shapes->operands[1], shapes->operands[2]),
                     shapes->result);
}

LogicalResult PositionsOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes))
    return failure();
  if (shapes->result.size() != 1)
    return emitOpError() << "produces positions along one dim, not " << formatShape(shapes->result);
  return success();
}

LogicalResult RenameOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes) || failed(sameElementType(*this, {getInput()})))
    return failure();
  const NamedShape &in = shapes->operands[0], &out = shapes->result;
  if (in.size() != out.size())
    return emitOpError() << "renames dims but changes the rank: " << formatShape(in) << " -> "
                         << formatShape(out);
  for (auto [a, r] : llvm::zip(in, out))
    if (a.size != r.size)
      return emitOpError() << "renames '" << a.name << "' (size " << a.size << ") to '" << r.name
                           << "' of size " << r.size << "; sizes must agree";
  return success();
}

LogicalResult NegOp::verify() { return verifyUnary(*this); }
LogicalResult ExpOp::verify() { return verifyUnary(*this); }
LogicalResult LogOp::verify() { return verifyUnary(*this); }
LogicalResult SqrtOp::verify() { return verifyUnary(*this); }
LogicalResult RsqrtOp::verify() { return verifyUnary(*this); }
LogicalResult TanhOp::verify() { return verifyUnary(*this); }
LogicalResult GeluOp::verify() { return verifyUnary(*this); }
LogicalResult SiluOp::verify() { return verifyUnary(*this); }
LogicalResult ReluOp::verify() { return verifyUnary(*this); }
LogicalResult SigmoidOp::verify() { return verifyUnary(*this); }
LogicalResult SquareOp::verify() { return verifyUnary(*this); }
LogicalResult GeluErfOp::verify() { return verifyUnary(*this); }
LogicalResult PowOp::verify() {
  if (!std::isfinite(getExponent().convertToDouble()))
    return emitOpError("exponent must be finite");
  return verifyUnary(*this);
}

LogicalResult DropoutOp::verify() {
  double rate = getRate().convertToDouble();
  if (rate < 0.0 || rate >= 1.0)
    return emitOpError() << "rate must lie in [0, 1), not " << rate;
  return verifyUnary(*this);
}

/// The body must be one the plan's `fused_elementwise` runs (the same parser), its results
/// one type, and each input a broadcast of it by dim name.
LogicalResult FusedElementwiseOp::verify() {
  if (getResults().empty())
    return emitOpError("has no results");
  Type type = getResult(0).getType();
  for (Value r : getResults())
    if (r.getType() != type)
      return emitOpError() << "results must share one type; " << r.getType() << " is not " << type;
  auto shape = getNamedShape(type);
  if (!shape)
    return emitOpError() << "result type " << type << " must have named dims";
  for (auto [i, v] : llvm::enumerate(getInputs())) {
    auto in = getNamedShape(v.getType());
    if (!in)
      return emitOpError() << "input #" << i << " type must have named dims";
    for (const NamedDim &d : *in) {
      int at = findDim(*shape, d.name);
      if (at < 0 || (*shape)[at].size != d.size)
        return emitOpError() << "input #" << i << " has dim " << d.name << " of size " << d.size
                             << ", which the results do not have";
    }
  }
  catalogue::ElementwiseBody body;
  std::string why;
  if (!catalogue::parseElementwiseBody(getBody().str(), body, why))
    return emitOpError() << "body: " << why;
  if (body.inputs > static_cast<int32_t>(getInputs().size()))
    return emitOpError() << "body reads x" << body.inputs - 1 << " of " << getInputs().size()
                         << " inputs";
  if (getOutputs().size() != getNumResults())
    return emitOpError() << "has " << getOutputs().size() << " outputs for " << getNumResults()
                         << " results";
  for (int64_t o : getOutputs())
    if (o < 0 || o >= static_cast<int64_t>(body.steps.size()))
      return emitOpError() << "output step " << o << " is not a step of the body ("
                           << body.steps.size() << " steps)";
  return success();
}

LogicalResult ContractOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes) || failed(sameElementType(*this, {getLhs(), getRhs()})))
    return failure();
  std::vector<std::string> sum = strings(getSum());
  if (sum.empty())
    return emitOpError("sums over no dim; list the contracted dims");
  return expectShape(*this, contractShapes(shapes->operands[0], shapes->operands[1], sum),
                     shapes->result);
}

LogicalResult SumOp::verify() { return verifyReduce(*this); }
LogicalResult MeanOp::verify() { return verifyReduce(*this); }

LogicalResult SoftmaxOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes))
    return failure();
  if (findDim(shapes->result, getDim().str()) < 0)
    return emitOpError() << "'" << getDim() << "' is not a dim of " << formatShape(shapes->result);
  return success();
}

LogicalResult TopKOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes))
    return failure();
  int at = findDim(shapes->result, getDim().str());
  if (at < 0)
    return emitOpError() << "'" << getDim() << "' is not a dim of " << formatShape(shapes->result);
  if (static_cast<int64_t>(getK()) < 1 || static_cast<int64_t>(getK()) > shapes->result[at].size)
    return emitOpError() << "k = " << getK() << " is not in [1, " << shapes->result[at].size
                         << "], the size of '" << getDim() << "'";
  return success();
}

LogicalResult LayerNormOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes) || failed(sameElementType(*this, (*this)->getOperands())))
    return failure();
  if (!(shapes->operands[1] == shapes->operands[2]))
    return emitOpError() << "bias " << formatShape(shapes->operands[2])
                         << " must have the scale's shape " << formatShape(shapes->operands[1]);
  return expectShape(*this, normShape(shapes->operands[0], shapes->operands[1]), shapes->result);
}

LogicalResult RMSNormOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes) || failed(sameElementType(*this, (*this)->getOperands())))
    return failure();
  return expectShape(*this, normShape(shapes->operands[0], shapes->operands[1]), shapes->result);
}

LogicalResult EmbeddingOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes) || failed(sameElementType(*this, {getTable()})))
    return failure();
  return expectShape(*this, embeddingShape(shapes->operands[0], shapes->operands[1]),
                     shapes->result);
}

LogicalResult CrossEntropyOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes))
    return failure();
  std::string cls;
  ShapeResult r = crossEntropyShape(shapes->operands[0], shapes->operands[1], &cls);
  if (failed(expectShape(*this, r, shapes->result)))
    return failure();
  if (cls != getDim())
    return emitOpError() << "class dim is '" << cls << "', not '" << getDim() << "'";
  return success();
}

/// An attention's log-sum-exp: f32, over the query's dims without its last (`head`).
static LogicalResult verifyLse(Operation *op, Value query, Value lse) {
  auto q = getNamedShape(query.getType()), l = getNamedShape(lse.getType());
  if (!q || !l)
    return op->emitOpError("lse needs a #graph.dims encoding");
  NamedShape want(q->begin(), q->end() - 1);
  if (!(*l == want) || !cast<ShapedType>(lse.getType()).getElementType().isF32())
    return op->emitOpError() << "lse should be f32 " << formatShape(want) << " but is "
                             << lse.getType();
  return success();
}

LogicalResult AttentionOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes) || failed(sameElementType(*this, (*this)->getOperands())))
    return failure();
  if (getScale().convertToDouble() <= 0.0)
    return emitOpError("scale must be positive");
  if (auto w = getWindow(); w && (*w <= 0 || !getCausal()))
    return emitOpError("a window must be positive and come with the causal mask");
  if (getLse() && failed(verifyLse(*this, getQuery(), getLse())))
    return failure();
  return expectShape(*this,
                     attentionShape(shapes->operands[0], shapes->operands[1], shapes->operands[2],
                                    getHeadsOver().has_value()),
                     shapes->result);
}

/// rope's and rope_at's frequencies: a positive base, and Llama 3.1's scaling if given.
static LogicalResult verifyRotation(Operation *op, APFloat theta,
                                    std::optional<ArrayRef<double>> scaling) {
  if (theta.convertToDouble() <= 0.0)
    return op->emitOpError("theta must be positive");
  if (const std::optional<ArrayRef<double>> &s = scaling)
    if (s->size() != 4 || !((*s)[0] > 0) || !((*s)[1] > 0) || !((*s)[2] > (*s)[1]) ||
        !((*s)[3] > 0))
      return op->emitOpError("scaling is [factor, low_freq_factor, high_freq_factor, "
                             "original_context], positive, with low_freq_factor < "
                             "high_freq_factor");
  return success();
}

LogicalResult RopeOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes))
    return failure();
  if (failed(verifyRotation(*this, getTheta(), getScaling())))
    return failure();
  return expectShape(*this, ropeShape(shapes->operands[0]), shapes->result);
}

LogicalResult SplitOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes) || failed(sameElementType(*this, (*this)->getOperands())))
    return failure();
  const NamedShape &in = shapes->operands[0], &out = shapes->result;
  int at = findDim(in, getDim().str());
  if (at < 0)
    return emitOpError() << "'" << getDim() << "' is not a dim of " << formatShape(in);
  size_t parts = out.size() + 1 - in.size();
  if (out.size() < in.size() + 1)
    return emitOpError("the result must have more dims than the input");
  NamedShape partDims(out.begin() + at, out.begin() + at + parts);
  return expectShape(*this, splitShape(in, getDim().str(), partDims), out);
}

LogicalResult MergeOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes) || failed(sameElementType(*this, (*this)->getOperands())))
    return failure();
  const NamedShape &in = shapes->operands[0], &out = shapes->result;
  std::vector<std::string> parts = strings(getDims());
  int at = parts.empty() ? -1 : findDim(in, parts[0]);
  if (at < 0 || at >= static_cast<int>(out.size()))
    return emitOpError() << "the merged dims must start with a dim of " << formatShape(in);
  return expectShape(*this, mergeShape(in, parts, out[at]), out);
}

LogicalResult PermuteOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes) || failed(sameElementType(*this, (*this)->getOperands())))
    return failure();
  std::vector<std::string> order;
  for (const NamedDim &d : shapes->result)
    order.push_back(d.name);
  return expectShape(*this, permuteShape(shapes->operands[0], order), shapes->result);
}

#define GET_OP_CLASSES
#include "Graph/GraphOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Gradient and training ops
//===----------------------------------------------------------------------===//

namespace {

/// Every value in `values` must have exactly the type of `like`.
LogicalResult sameTypes(Operation *op, Type like, ValueRange values, StringRef what) {
  for (Value v : values)
    if (v.getType() != like)
      return op->emitOpError() << what << " type " << v.getType() << " must be " << like;
  return success();
}

LogicalResult expectScalar(Operation *op, Type type, StringRef what) {
  auto shape = getNamedShape(type);
  if (!shape || !shape->empty())
    return op->emitOpError() << what << " must be a scalar tensor, not " << type;
  return success();
}

} // namespace

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

/// Gradient ops compute on named tensors like the ops they differentiate.
static LogicalResult expectNamed(Operation *op) {
  for (Type t : op->getOperandTypes())
    if (!getNamedShape(t))
      return op->emitOpError() << "operand type " << t << " needs a #graph.dims encoding";
  for (Type t : op->getResultTypes())
    if (!getNamedShape(t))
      return op->emitOpError() << "result type " << t << " needs a #graph.dims encoding";
  return success();
}

LogicalResult UnaryGradOp::verify() {
  if (failed(expectNamed(*this)))
    return failure();
  if ((getFn() == UnaryFn::Pow) != getExponent().has_value())
    return emitOpError(getFn() == UnaryFn::Pow ? "of pow needs the exponent"
                                               : "carries an exponent only for pow");
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

//===----------------------------------------------------------------------===//
// Decoding
//===----------------------------------------------------------------------===//

namespace {

/// `shape`'s dims are `names` ("" for any name), or a diagnostic naming `what`.
LogicalResult expectDims(Operation *op, StringRef what, const NamedShape &shape,
                         ArrayRef<StringRef> names) {
  bool ok = shape.size() == names.size();
  for (size_t i = 0; ok && i < names.size(); ++i)
    ok = names[i].empty() || shape[i].name == names[i];
  if (ok)
    return success();
  std::string want = "[";
  for (size_t i = 0; i < names.size(); ++i)
    want += (i ? ", " : "") + (names[i].empty() ? std::string("_") : names[i].str());
  return op->emitOpError() << what << " must be " << want << "], not " << formatShape(shape);
}

} // namespace

LogicalResult KvCacheOp::verify() {
  if (getName().empty())
    return emitOpError("needs a name");
  auto shapes = namedShapes(*this);
  if (failed(shapes))
    return failure();
  return expectDims(*this, "a cache", shapes->result, {"cache_blocks", "block_slot", "", ""});
}

LogicalResult PagedAttentionOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes) ||
      failed(sameElementType(*this, {getQuery(), getKey(), getValue(), getKeyCache(),
                                     getValueCache()})))
    return failure();
  if (getScale().convertToDouble() <= 0.0)
    return emitOpError("scale must be positive");
  if (auto w = getWindow(); w && *w <= 0)
    return emitOpError("a window must be positive");
  const SmallVector<NamedShape> &in = shapes->operands;
  const NamedShape &q = in[0], &k = in[1];
  if (q.size() != 4)
    return emitOpError() << "the query must be [batch, seq, heads, head], not " << formatShape(q);
  ShapeResult r = attentionShape(q, k, in[2], /*blockOfHeads=*/false);
  if (!r.ok())
    return emitOpError() << r.error;
  StringRef batch = q[0].name, seq = q[1].name;
  if (failed(expectDims(*this, "positions", in[3], {batch, seq})) ||
      failed(expectDims(*this, "the block table", in[4], {batch, ""})) ||
      failed(expectDims(*this, "the key cache", in[5],
                        {"cache_blocks", "block_slot", k[2].name, k[3].name})))
    return failure();
  if (!(in[3][0] == q[0]) || !(in[3][1] == q[1]) || !(in[4][0] == q[0]))
    return emitOpError() << "positions " << formatShape(in[3]) << " and the block table "
                         << formatShape(in[4]) << " must have the queries' " << batch << " and "
                         << seq;
  if (!(in[5] == in[6]))
    return emitOpError() << "the key cache " << formatShape(in[5]) << " and the value cache "
                         << formatShape(in[6]) << " must have the same shape";
  if (!(in[5][2] == k[2]) || !(in[5][3] == k[3]))
    return emitOpError() << "the caches " << formatShape(in[5]) << " must hold the keys' "
                         << formatShape(k) << " heads";
  return expectShape(*this, r, shapes->result);
}

LogicalResult RunningTotalsOp::verify() {
  if (getName().empty())
    return emitOpError("needs a name");
  auto shapes = namedShapes(*this);
  if (failed(shapes))
    return failure();
  if (!cast<RankedTensorType>(getType()).getElementType().isF32())
    return emitOpError("totals are f32");
  const NamedShape &t = shapes->result;
  if (t.empty() || t[0].name != "cache_blocks")
    return emitOpError() << "totals must be [cache_blocks, ...], not " << formatShape(t);
  return success();
}

LogicalResult RunningSumOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes) || failed(sameElementType(*this, {getInput()})))
    return failure();
  const SmallVector<NamedShape> &in = shapes->operands;
  const NamedShape &x = in[0], &totals = in[3];
  if (x.size() < 2)
    return emitOpError() << "the input must be [batch, seq, ...], not " << formatShape(x);
  if (failed(expectDims(*this, "positions", in[1], {x[0].name, x[1].name})) ||
      failed(expectDims(*this, "the block table", in[2], {x[0].name, ""})))
    return failure();
  if (!(in[1][0] == x[0]) || !(in[1][1] == x[1]) || !(in[2][0] == x[0]))
    return emitOpError() << "positions " << formatShape(in[1]) << " and the block table "
                         << formatShape(in[2]) << " must have the input's " << x[0].name
                         << " and " << x[1].name;
  NamedShape want{{"cache_blocks", totals.empty() ? 0 : totals[0].size}};
  want.insert(want.end(), x.begin() + 2, x.end());
  if (!(totals == want))
    return emitOpError() << "the totals must be " << formatShape(want) << ", not "
                         << formatShape(totals);
  if (!(shapes->result == x))
    return emitOpError() << "the result must be " << formatShape(x) << ", not "
                         << formatShape(shapes->result);
  return success();
}

LogicalResult SliceOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes) || failed(sameElementType(*this, {getInput()})))
    return failure();
  const NamedShape &x = shapes->operands[0], &y = shapes->result;
  const int at = findDim(x, getDim().str());
  if (at < 0)
    return emitOpError() << "the input " << formatShape(x) << " has no dim '" << getDim() << "'";
  bool same = x.size() == y.size();
  for (size_t i = 0; same && i < x.size(); ++i)
    same = x[i].name == y[i].name && (static_cast<int>(i) == at || x[i].size == y[i].size);
  if (!same)
    return emitOpError() << "the result " << formatShape(y) << " must be the input "
                         << formatShape(x) << " with '" << getDim() << "' resized";
  const int64_t start = getStart(), n = y[at].size;
  if (start < 0 || n < 1 || start + n > x[at].size)
    return emitOpError() << "positions [" << start << ", " << start + n << ") are not within '"
                         << getDim() << "' of size " << x[at].size;
  return success();
}

LogicalResult RopeAtOp::verify() {
  auto shapes = namedShapes(*this);
  if (failed(shapes) || failed(sameElementType(*this, {getInput()})))
    return failure();
  if (failed(verifyRotation(*this, getTheta(), getScaling())))
    return failure();
  const NamedShape &x = shapes->operands[0];
  if (x.size() != 4)
    return emitOpError() << "rope_at needs [batch, seq, heads, head], not " << formatShape(x);
  if (failed(expectDims(*this, "positions", shapes->operands[1], {x[0].name, x[1].name})))
    return failure();
  if (!(shapes->operands[1][0] == x[0]) || !(shapes->operands[1][1] == x[1]))
    return emitOpError() << "positions " << formatShape(shapes->operands[1])
                         << " must have the input's sizes " << formatShape(x);
  return expectShape(*this, ropeShape(x), shapes->result);
}
