//===- DataMovementPatterns.cpp - Views, copies, reductions, lookups ------===//
//
// Splits, merges and renames keep the bytes and only change the names: views. Permutes,
// broadcasts and slices are strided copies; sums and means reduce a dense input onto the strides of
// their result. Pack/unpack gather a bucket of gradients into one buffer and name its parts.
//
//===----------------------------------------------------------------------===//

#include "PlanLowering.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::plan_lowering;

namespace {

/// split, merge, rename: the same bytes under another type.
template <typename OpTy> struct ViewPattern : PlanPattern<OpTy> {
  using PlanPattern<OpTy>::PlanPattern;
  LogicalResult lower(OpTy op, typename OpTy::Adaptor adaptor, PlanEmitter &emit) const override {
    Value r = op->getResult(0);
    emit.bind(r,
              plan::ViewOp::create(emit.builder(), emit.loc(), PlanEmitter::memrefType(r.getType()),
                                   adaptor.getOperands()[0]));
    return success();
  }
};

/// permute, broadcast: a strided copy into the result's order.
template <typename OpTy> struct CopyPattern : PlanPattern<OpTy> {
  using PlanPattern<OpTy>::PlanPattern;
  LogicalResult lower(OpTy op, typename OpTy::Adaptor adaptor, PlanEmitter &emit) const override {
    NamedShape out = shapeOf(op->getResult(0));
    Value r = emit.define(op->getResult(0));
    emit.kernel("copy", {adaptor.getOperands()[0]}, {r},
                {emit.list("shape", sizesOf(out)),
                 emit.list("x_strides", stridesIn(shapeOf(op->getOperand(0)), out))});
    return success();
  }
};

/// slice: a strided copy of the input's elements from the slice's first.
struct SlicePattern : PlanPattern<graph::SliceOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::SliceOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    NamedShape in = shapeOf(op.getInput()), out = shapeOf(op.getResult());
    Strides strides = denseStrides(in);
    const int at = findDim(in, op.getDim().str());
    Value r = emit.define(op.getResult());
    emit.kernel("copy", {adaptor.getInput()}, {r},
                {emit.list("shape", sizesOf(out)), emit.list("x_strides", strides),
                 emit.i64("x_offset", op.getStart() * strides[at])});
    return success();
  }
};

/// sum, mean: the input's elements added onto the result's (0 strides for the summed dims).
template <typename OpTy> struct ReducePattern : PlanPattern<OpTy> {
  using PlanPattern<OpTy>::PlanPattern;
  static constexpr bool kMean = std::is_same_v<OpTy, graph::MeanOp>;

  LogicalResult lower(OpTy op, typename OpTy::Adaptor adaptor, PlanEmitter &emit) const override {
    NamedShape in = shapeOf(op.getInput()), out = shapeOf(op.getResult());
    double count = static_cast<double>(numElements(in) / std::max<int64_t>(numElements(out), 1));
    Value r = emit.define(op.getResult());
    emit.kernel("reduce", {adaptor.getInput()}, {r},
                {emit.list("shape", sizesOf(in)), emit.list("y_strides", stridesIn(out, in)),
                 emit.i64("y_elements", numElements(out)),
                 emit.f64("scale", kMean ? 1.0 / count : 1.0)});
    return success();
  }
};

struct PackPattern : PlanPattern<graph::PackOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::PackOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    SmallVector<int64_t> outers, chunks;
    for (auto [v, dimAttr] : llvm::zip(op.getInputs(), op.getDims())) {
      NamedShape shape = shapeOf(v);
      int at = findDim(shape, cast<StringAttr>(dimAttr).str());
      int64_t outer = 1, inner = 1;
      for (int i = 0; i < static_cast<int>(shape.size()); ++i)
        (i < at ? outer : inner) *= shape[i].size;
      outers.push_back(at < 0 ? 1 : outer);
      chunks.push_back(at < 0 ? inner : inner / op.getWays());
    }
    Value r = emit.define(op.getResult());
    emit.kernel(
        "pack", buffers(adaptor.getInputs()), {r},
        {emit.i64("ways", op.getWays()), emit.list("outers", outers), emit.list("chunks", chunks)});
    return success();
  }
};

/// The parts of a packed buffer, as views at their offsets. A part of a buffer an
/// asynchronous collective still writes waits for it where it is read.
struct UnpackPattern : PlanPattern<graph::UnpackOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::UnpackOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    int64_t offset = 0;
    for (Value r : op.getResults()) {
      emit.bind(r, plan::ViewOp::create(emit.builder(), emit.loc(),
                                        PlanEmitter::memrefType(r.getType()), adaptor.getInput(),
                                        emit.builder().getI64IntegerAttr(offset)));
      lowering.shareWait(r, op.getInput());
      offset += numElements(shapeOf(r));
    }
    return success();
  }
};

/// Embedding lookups and their gradient; under a split table `row_group` names the group
/// whose ranks hold its rows.
template <typename OpTy> struct EmbeddingPattern : PlanPattern<OpTy> {
  using PlanPattern<OpTy>::PlanPattern;
  static constexpr bool kGrad = std::is_same_v<OpTy, graph::EmbeddingGradOp>;

  LogicalResult lower(OpTy op, typename OpTy::Adaptor adaptor, PlanEmitter &emit) const override {
    NamedShape table = shapeOf(kGrad ? op->getResult(0) : op->getOperand(0));
    Value r = emit.define(op.getResult());
    SmallVector<NamedAttribute> params = {emit.i64("n", numElements(shapeOf(op.getIds()))),
                                          emit.i64("rows", table[0].size),
                                          emit.i64("cols", table[1].size)};
    if (std::optional<StringRef> axis = op.getRowAxis())
      params.push_back(emit.str("row_group", *axis));
    emit.kernel(kGrad ? "embedding_grad" : "embedding", adaptor.getOperands(), {r}, params);
    return success();
  }
};

} // namespace

void plan_lowering::populateDataMovementPatterns(RewritePatternSet &patterns,
                                                 const TypeConverter &converter,
                                                 PlanLowering &lowering) {
  patterns
      .add<ViewPattern<graph::SplitOp>, ViewPattern<graph::MergeOp>, ViewPattern<graph::RenameOp>,
           CopyPattern<graph::BroadcastOp>, CopyPattern<graph::PermuteOp>, SlicePattern,
           ReducePattern<graph::SumOp>, ReducePattern<graph::MeanOp>, PackPattern, UnpackPattern,
           EmbeddingPattern<graph::EmbeddingOp>, EmbeddingPattern<graph::EmbeddingGradOp>>(
          converter, patterns.getContext(), lowering);
}
