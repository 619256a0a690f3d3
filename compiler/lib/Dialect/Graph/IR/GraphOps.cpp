//===- GraphOps.cpp - Verifiers of the graph dialect's forward ops --------===//
//
// Every verifier states its op's shape rule by calling tessel/Shape/NamedShape.h and
// comparing the result with the op's declared result type. This file holds the forward ops'
// (GraphOps.td) and what every verifier shares (GraphVerifiers.h); the gradient, training and
// per-rank ops' are in GraphGradientOps.cpp, the decoding ops' in GraphDecodeOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "tessel/Dialect/Graph/IR/GraphOps.h"
#include "GraphVerifiers.h"

#include "common/catalogue/KernelCatalogue.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/IR/OpImplementation.h"

#include <cmath>

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;
using namespace tessel::graph::verifier;

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
      {"unary", "an elementwise function"},
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

std::string tessel::graph::spelling(Operation *op) {
  auto unary = dyn_cast<UnaryOp>(op);
  if (!unary)
    return spelling(op->getName().getStringRef());
  if (unary.getFn() == UnaryFn::Neg)
    return "unary `-`";
  std::string_view word = tessel::catalogue::wordOf(unary.getFn());
  return "`" + std::string(word) + "`";
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

//===----------------------------------------------------------------------===//
// What the verifiers share (GraphVerifiers.h)
//===----------------------------------------------------------------------===//

FailureOr<verifier::Shapes> verifier::namedShapes(Operation *op) {
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

LogicalResult verifier::expectShape(Operation *op, const ShapeResult &rule,
                                    const NamedShape &declared) {
  if (!rule.ok())
    return op->emitOpError() << rule.error;
  if (!(rule.shape == declared))
    return op->emitOpError() << "result should be " << formatShape(rule.shape) << " but is "
                             << formatShape(declared);
  return success();
}

LogicalResult verifier::sameElementType(Operation *op, ValueRange values) {
  Type want = cast<ShapedType>(op->getResult(0).getType()).getElementType();
  for (Value v : values)
    if (cast<ShapedType>(v.getType()).getElementType() != want)
      return op->emitOpError() << "operand element type "
                               << cast<ShapedType>(v.getType()).getElementType()
                               << " differs from the result's " << want;
  return success();
}

std::vector<std::string> tessel::graph::stringsOf(ArrayAttr array) {
  std::vector<std::string> out;
  for (Attribute a : array)
    out.push_back(cast<StringAttr>(a).getValue().str());
  return out;
}

LogicalResult verifier::sameTypes(Operation *op, Type like, ValueRange values, StringRef what) {
  for (Value v : values)
    if (v.getType() != like)
      return op->emitOpError() << what << " type " << v.getType() << " must be " << like;
  return success();
}

LogicalResult verifier::expectScalar(Operation *op, Type type, StringRef what) {
  auto shape = getNamedShape(type);
  if (!shape || !shape->empty())
    return op->emitOpError() << what << " must be a scalar tensor, not " << type;
  return success();
}

LogicalResult verifier::verifyExponent(Operation *op, UnaryFn fn, std::optional<APFloat> exponent) {
  bool pow = fn == UnaryFn::Pow;
  if (pow != exponent.has_value())
    return op->emitOpError(pow ? "of pow needs the exponent" : "carries an exponent only for pow");
  return success();
}

LogicalResult verifier::expectNamed(Operation *op) {
  for (Type t : op->getOperandTypes())
    if (!getNamedShape(t))
      return op->emitOpError() << "operand type " << t << " needs a #graph.dims encoding";
  for (Type t : op->getResultTypes())
    if (!getNamedShape(t))
      return op->emitOpError() << "result type " << t << " needs a #graph.dims encoding";
  return success();
}

LogicalResult verifier::verifyLse(Operation *op, Value query, Value lse) {
  auto q = getNamedShape(query.getType()), l = getNamedShape(lse.getType());
  if (!q || !l)
    return op->emitOpError("lse needs a #graph.dims encoding");
  NamedShape want(q->begin(), q->end() - 1);
  if (!(*l == want) || !cast<ShapedType>(lse.getType()).getElementType().isF32())
    return op->emitOpError() << "lse should be f32 " << formatShape(want) << " but is "
                             << lse.getType();
  return success();
}

LogicalResult verifier::verifyRotation(Operation *op, APFloat theta,
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

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

namespace {

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
  return expectShape(op, reduceShape(shapes->operands[0], stringsOf(op.getDims())), shapes->result);
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

LogicalResult UnaryOp::verify() {
  if (failed(verifyExponent(*this, getFn(), getExponent())))
    return failure();
  if (getExponent() && !std::isfinite(getExponent()->convertToDouble()))
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
  std::vector<std::string> sum = stringsOf(getSum());
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
  std::vector<std::string> parts = stringsOf(getDims());
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
#include "tessel/Dialect/Graph/IR/GraphOps.cpp.inc"
