//===- LinearCrossEntropyPatterns.cpp - The fused output head in the plan -===//
//
// A fused linear cross-entropy (graph.linear_cross_entropy, and _grad in training) becomes a
// sequence of existing kernels per chunk of rows, so every backend that runs `gemm` and the
// cross-entropy kernels runs it, and under vocabulary parallelism the per-chunk reductions are
// ordinary `all_reduce` calls on the group of the classes' axis. One scratch buffer of
// chunk x classes holds a chunk's logits and then, in place, their gradient; nothing of size
// rows x classes is allocated. The weight gradient is the first chunk's product, then each
// later chunk's added by `gemm` with `accumulate`.
//
//===----------------------------------------------------------------------===//

#include "PlanLowering.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::plan_lowering;

namespace {

/// What the two fused ops share.
struct Head {
  Value input, weight, targets, lossGrad;
  std::string classDim;
  std::optional<std::string> axis;
  double scale;
  int64_t chunk;
};

/// `shape` elements of `source` from element `offset` on.
Value view(PlanEmitter &emit, Value source, int64_t offset, ArrayRef<int64_t> shape) {
  auto from = cast<MemRefType>(source.getType());
  if (offset == 0 && from.getShape() == shape)
    return source;
  return plan::ViewOp::create(emit.builder(), emit.loc(),
                              MemRefType::get(shape, from.getElementType()), source,
                              emit.builder().getI64IntegerAttr(offset));
}

/// c [m, n] (+)= op(a) op(b), dense row-major matrices with the given row strides.
void gemm(PlanEmitter &emit, Value a, Value b, Value c, int64_t m, int64_t n, int64_t k,
          bool transA, bool transB, int64_t lda, int64_t ldb, int64_t ldc, bool accumulate) {
  SmallVector<NamedAttribute> params = {emit.list("batch_shape", {}),
                                        emit.list("a_batch_strides", {}),
                                        emit.list("b_batch_strides", {}),
                                        emit.list("c_batch_strides", {}),
                                        emit.i64("m", m),
                                        emit.i64("n", n),
                                        emit.i64("k", k),
                                        emit.i64("trans_a", transA),
                                        emit.i64("trans_b", transB),
                                        emit.i64("lda", lda),
                                        emit.i64("ldb", ldb),
                                        emit.i64("ldc", ldc)};
  if (accumulate)
    params.push_back(emit.i64("accumulate", 1));
  emit.kernel("gemm", {a, b}, {c}, params);
}

LogicalResult lowerHead(Operation *op, ValueRange operands, PlanEmitter &emit) {
  Head h = TypeSwitch<Operation *, Head>(op)
               .Case([](graph::LinearCrossEntropyOp o) {
                 return Head{o.getInput(),
                             o.getWeight(),
                             o.getTargets(),
                             Value(),
                             o.getDim().str(),
                             o.getAxis() ? std::optional(o.getAxis()->str()) : std::nullopt,
                             o.getScale().convertToDouble(),
                             static_cast<int64_t>(o.getChunk())};
               })
               .Case([](graph::LinearCrossEntropyGradOp o) {
                 return Head{o.getInput(),
                             o.getWeight(),
                             o.getTargets(),
                             o.getGrad(),
                             o.getDim().str(),
                             o.getAxis() ? std::optional(o.getAxis()->str()) : std::nullopt,
                             o.getScale().convertToDouble(),
                             static_cast<int64_t>(o.getChunk())};
               });
  bool grad = static_cast<bool>(h.lossGrad);
  NamedShape ws = *graph::getNamedShape(h.weight.getType());
  NamedShape xs = *graph::getNamedShape(h.input.getType());
  const int64_t hidden = xs.back().size;
  const int64_t rows = cast<RankedTensorType>(h.targets.getType()).getNumElements();
  // The weight is [classes, hidden] (a tied embedding table) or [hidden, classes].
  const bool classesFirst = ws[0].name == h.classDim;
  const int64_t classes = ws[classesFirst ? 0 : 1].size;
  const int64_t chunk = std::min(h.chunk, rows), chunks = (rows + chunk - 1) / chunk;

  Value x = operands[0], w = operands[1], targets = operands[2];
  Value dloss = grad ? operands[3] : Value();
  Value loss = emit.define(op->getResult(0));
  Value dx = grad ? emit.define(op->getResult(1)) : Value();
  Value dw = grad ? emit.define(op->getResult(2)) : Value();

  Type f32 = emit.builder().getF32Type();
  Value scratch = emit.alloc({chunk, classes}, f32);
  // One partial loss per chunk, summed at the end (or the loss itself for one chunk).
  Value partials = chunks > 1 ? emit.alloc({chunks}, f32) : Value();
  Value max, sums, picked;
  if (h.axis) {
    max = emit.alloc({chunk}, f32);
    sums = emit.alloc({chunk}, f32);
    picked = emit.alloc({chunk}, f32);
  }
  for (int64_t i = 0; i < chunks; ++i) {
    const int64_t first = i * chunk, n = std::min(chunk, rows - first);
    Value xc = view(emit, x, first * hidden, {n, hidden});
    Value tc = view(emit, targets, first, {n});
    Value logits = view(emit, scratch, 0, {n, classes});
    Value lossc = partials ? view(emit, partials, i, {}) : loss;
    // logits = x_c w (w read as [hidden, classes]).
    gemm(emit, xc, w, logits, n, classes, hidden, false, classesFirst, hidden,
         classesFirst ? hidden : classes, classes, false);
    if (!h.axis) {
      emit.kernel("cross_entropy", {logits, tc}, {lossc},
                  {emit.i64("rows", n), emit.i64("cols", classes), emit.f64("scale", h.scale)});
      if (grad)
        emit.kernel("cross_entropy_grad", {logits, tc, dloss}, {logits},
                    {emit.i64("rows", n), emit.i64("cols", classes), emit.f64("scale", h.scale)});
    } else {
      Value m = view(emit, max, 0, {n}), s = view(emit, sums, 0, {n}),
            t = view(emit, picked, 0, {n});
      auto allReduce = [&](Value v, StringRef how) {
        emit.kernel("all_reduce", {v}, {v},
                    {emit.str("group", *h.axis), emit.str("op", how), emit.i64("n", n)});
      };
      emit.kernel("ce_max", {logits}, {m}, {emit.i64("rows", n), emit.i64("cols", classes)});
      allReduce(m, "max");
      emit.kernel("ce_sums", {logits, tc, m}, {s, t},
                  {emit.i64("rows", n), emit.i64("cols", classes), emit.str("col_group", *h.axis)});
      allReduce(s, "sum");
      allReduce(t, "sum");
      emit.kernel("ce_loss", {m, s, t}, {lossc}, {emit.i64("rows", n), emit.f64("scale", h.scale)});
      if (grad)
        emit.kernel("ce_grad", {logits, tc, m, s, dloss}, {logits},
                    {emit.i64("rows", n), emit.i64("cols", classes), emit.str("col_group", *h.axis),
                     emit.f64("scale", h.scale)});
    }
    if (!grad)
      continue;
    // The chunk's rows of dx = dlogits w (w read as [classes, hidden]).
    gemm(emit, logits, w, view(emit, dx, first * hidden, {n, hidden}), n, hidden, classes, false,
         !classesFirst, classes, classesFirst ? hidden : classes, hidden, false);
    // dw (+)= dlogitsᵀ x_c, or x_cᵀ dlogits for [hidden, classes].
    if (classesFirst)
      gemm(emit, logits, xc, dw, classes, hidden, n, true, false, classes, hidden, hidden, i > 0);
    else
      gemm(emit, xc, logits, dw, hidden, classes, n, true, false, hidden, classes, classes, i > 0);
  }
  if (partials)
    emit.kernel("reduce", {partials}, {loss},
                {emit.list("shape", {chunks}), emit.list("y_strides", {0}),
                 emit.i64("y_elements", 1), emit.f64("scale", 1.0)});
  return success();
}

template <typename OpTy> struct LinearCrossEntropyPattern : PlanPattern<OpTy> {
  using PlanPattern<OpTy>::PlanPattern;
  LogicalResult lower(OpTy op, typename OpTy::Adaptor adaptor, PlanEmitter &emit) const override {
    return lowerHead(op, adaptor.getOperands(), emit);
  }
};

} // namespace

void plan_lowering::populateLinearCrossEntropyPatterns(RewritePatternSet &patterns,
                                                       const TypeConverter &converter,
                                                       PlanLowering &lowering) {
  patterns.add<LinearCrossEntropyPattern<graph::LinearCrossEntropyOp>,
               LinearCrossEntropyPattern<graph::LinearCrossEntropyGradOp>>(
      converter, patterns.getContext(), lowering);
}
