//===- LowerLinearCrossEntropy.cpp - The fused output head in the plan ----===//
//
// A fused linear cross-entropy becomes a sequence of existing kernels per chunk of rows, so
// every backend that runs `gemm` and the cross-entropy kernels runs it, and under vocabulary
// parallelism the per-chunk reductions are ordinary `all_reduce` calls on the group of the
// classes' axis. One scratch buffer of chunk x classes holds a chunk's logits and then, in
// place, their gradient; nothing of size rows x classes is allocated. The weight gradient is
// the first chunk's product, then each later chunk's added by `gemm` with `accumulate` (f32).
//
//===----------------------------------------------------------------------===//

#include "LowerLinearCrossEntropy.h"

#include "Graph/GraphOps.h"
#include "Plan/PlanDialect.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tessel;

namespace {

/// What the two fused ops share.
struct Head {
  Value input, weight, targets, lossGrad;
  std::string classDim;
  std::optional<std::string> axis;
  double scale;
  int64_t chunk;
};

class Emitter {
public:
  Emitter(OpBuilder &b, Location loc) : b_(b), loc_(loc) {}

  Value alloc(ArrayRef<int64_t> shape, Type element) {
    return plan::AllocOp::create(b_, loc_, MemRefType::get(shape, element), IntegerAttr());
  }
  /// `shape` elements of `source` from element `offset` on.
  Value view(Value source, int64_t offset, ArrayRef<int64_t> shape) {
    auto from = cast<MemRefType>(source.getType());
    if (offset == 0 && from.getShape() == shape)
      return source;
    return plan::ViewOp::create(b_, loc_, MemRefType::get(shape, from.getElementType()), source,
                                b_.getI64IntegerAttr(offset));
  }
  void kernel(StringRef name, ValueRange ins, ValueRange outs, ArrayRef<NamedAttribute> params) {
    plan::KernelOp::create(b_, loc_, b_.getStringAttr(name), ins, outs,
                           b_.getDictionaryAttr(params));
  }
  /// c [m, n] (+)= op(a) op(b), dense row-major matrices with the given row strides.
  void gemm(Value a, Value bm, Value c, int64_t m, int64_t n, int64_t k, bool transA, bool transB,
            int64_t lda, int64_t ldb, int64_t ldc, bool accumulate) {
    SmallVector<NamedAttribute> params = {list("batch_shape", {}),
                                          list("a_batch_strides", {}),
                                          list("b_batch_strides", {}),
                                          list("c_batch_strides", {}),
                                          i64("m", m),
                                          i64("n", n),
                                          i64("k", k),
                                          i64("trans_a", transA),
                                          i64("trans_b", transB),
                                          i64("lda", lda),
                                          i64("ldb", ldb),
                                          i64("ldc", ldc)};
    if (accumulate)
      params.push_back(i64("accumulate", 1));
    kernel("gemm", {a, bm}, {c}, params);
  }
  NamedAttribute i64(StringRef k, int64_t v) { return b_.getNamedAttr(k, b_.getI64IntegerAttr(v)); }
  NamedAttribute f64(StringRef k, double v) { return b_.getNamedAttr(k, b_.getF64FloatAttr(v)); }
  NamedAttribute str(StringRef k, StringRef v) { return b_.getNamedAttr(k, b_.getStringAttr(v)); }
  NamedAttribute list(StringRef k, ArrayRef<int64_t> v) {
    return b_.getNamedAttr(k, b_.getDenseI64ArrayAttr(v));
  }

private:
  OpBuilder &b_;
  Location loc_;
};

} // namespace

LogicalResult tessel::lowerLinearCrossEntropy(OpBuilder &b, Operation *op, ValueRange operands,
                                              ValueRange results) {
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
  Value loss = results[0], dx = grad ? results[1] : Value(), dw = grad ? results[2] : Value();

  Emitter e(b, op->getLoc());
  Type f32 = b.getF32Type();
  Value scratch = e.alloc({chunk, classes}, f32);
  // One partial loss per chunk, summed at the end (or the loss itself for one chunk).
  Value partials = chunks > 1 ? e.alloc({chunks}, f32) : Value();
  Value max, sums, picked;
  if (h.axis) {
    max = e.alloc({chunk}, f32);
    sums = e.alloc({chunk}, f32);
    picked = e.alloc({chunk}, f32);
  }
  for (int64_t i = 0; i < chunks; ++i) {
    const int64_t first = i * chunk, n = std::min(chunk, rows - first);
    Value xc = e.view(x, first * hidden, {n, hidden});
    Value tc = e.view(targets, first, {n});
    Value logits = e.view(scratch, 0, {n, classes});
    Value lossc = partials ? e.view(partials, i, {}) : loss;
    // logits = x_c w (w read as [hidden, classes]).
    e.gemm(xc, w, logits, n, classes, hidden, false, classesFirst, hidden,
           classesFirst ? hidden : classes, classes, false);
    if (!h.axis) {
      e.kernel("cross_entropy", {logits, tc}, {lossc},
               {e.i64("rows", n), e.i64("cols", classes), e.f64("scale", h.scale)});
      if (grad)
        e.kernel("cross_entropy_grad", {logits, tc, dloss}, {logits},
                 {e.i64("rows", n), e.i64("cols", classes), e.f64("scale", h.scale)});
    } else {
      Value m = e.view(max, 0, {n}), s = e.view(sums, 0, {n}), t = e.view(picked, 0, {n});
      auto allReduce = [&](Value v, StringRef how) {
        e.kernel("all_reduce", {v}, {v},
                 {e.str("group", *h.axis), e.str("op", how), e.i64("n", n)});
      };
      e.kernel("ce_max", {logits}, {m}, {e.i64("rows", n), e.i64("cols", classes)});
      allReduce(m, "max");
      e.kernel("ce_sums", {logits, tc, m}, {s, t},
               {e.i64("rows", n), e.i64("cols", classes), e.str("col_group", *h.axis)});
      allReduce(s, "sum");
      allReduce(t, "sum");
      e.kernel("ce_loss", {m, s, t}, {lossc}, {e.i64("rows", n), e.f64("scale", h.scale)});
      if (grad)
        e.kernel("ce_grad", {logits, tc, m, s, dloss}, {logits},
                 {e.i64("rows", n), e.i64("cols", classes), e.str("col_group", *h.axis),
                  e.f64("scale", h.scale)});
    }
    if (!grad)
      continue;
    // The chunk's rows of dx = dlogits w (w read as [classes, hidden]).
    e.gemm(logits, w, e.view(dx, first * hidden, {n, hidden}), n, hidden, classes, false,
           !classesFirst, classes, classesFirst ? hidden : classes, hidden, false);
    // dw (+)= dlogitsᵀ x_c, or x_cᵀ dlogits for [hidden, classes].
    if (classesFirst)
      e.gemm(logits, xc, dw, classes, hidden, n, true, false, classes, hidden, hidden, i > 0);
    else
      e.gemm(xc, logits, dw, hidden, classes, n, true, false, hidden, classes, classes, i > 0);
  }
  if (partials)
    e.kernel("reduce", {partials}, {loss},
             {e.list("shape", {chunks}), e.list("y_strides", {0}), e.i64("y_elements", 1),
              e.f64("scale", 1.0)});
  return success();
}
