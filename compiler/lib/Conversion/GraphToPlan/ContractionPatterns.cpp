//===- ContractionPatterns.cpp - Contractions to GEMM kernels -------------===//
//
// A contraction becomes one strided batched GEMM: batch dims are in both operands and kept, M
// only in the lhs, N only in the rhs, K summed. An operand whose layout no GEMM can read is
// first copied into one it can; a result BLAS cannot write in its own order goes through a
// temporary.
//
//===----------------------------------------------------------------------===//

#include "PlanLowering.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::plan_lowering;

namespace {

/// A group of dims (GEMM's M, N, K or batch) that one operand addresses as a single index:
/// total size and the stride of that index. Fails when the dims are not evenly strided in
/// the group's order.
std::optional<std::pair<int64_t, int64_t>> collapse(const NamedShape &operand,
                                                    ArrayRef<std::string> group) {
  Strides dense = denseStrides(operand);
  int64_t size = 1, stride = 1;
  for (size_t i = 0; i < group.size(); ++i) {
    int at = findDim(operand, group[i]);
    size *= operand[at].size;
    if (i + 1 < group.size()) {
      int next = findDim(operand, group[i + 1]);
      if (dense[at] != dense[next] * operand[next].size)
        return std::nullopt;
    } else {
      stride = dense[at];
    }
  }
  return std::make_pair(size, stride);
}

/// One GEMM operand viewed as a matrix: whether to transpose and its leading dimension.
struct MatrixLayout {
  bool trans = false;
  int64_t ld = 0;
};

/// A rows x cols matrix whose row index moves by `rowStride` and column index by
/// `colStride`, as BLAS reads it (row-major), if it can.
std::optional<MatrixLayout> matrixLayout(int64_t rows, int64_t cols, int64_t rowStride,
                                         int64_t colStride) {
  if ((colStride == 1 || cols == 1) && (rows == 1 || rowStride >= cols))
    return MatrixLayout{false, rows == 1 ? std::max<int64_t>(cols, 1) : rowStride};
  if ((rowStride == 1 || rows == 1) && (cols == 1 || colStride >= rows))
    return MatrixLayout{true, cols == 1 ? std::max<int64_t>(rows, 1) : colStride};
  return std::nullopt;
}

struct ContractPattern : PlanPattern<graph::ContractOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::ContractOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    NamedShape a = shapeOf(op.getLhs()), bs = shapeOf(op.getRhs()), c = shapeOf(op.getResult());
    std::vector<std::string> sum;
    for (Attribute s : op.getSum())
      sum.push_back(cast<StringAttr>(s).str());
    auto summed = [&](const std::string &n) { return llvm::is_contained(sum, n); };

    // Batch dims are in both operands and kept; M only in lhs; N only in rhs; K summed.
    std::vector<std::string> batch, m, n;
    for (const NamedDim &d : a)
      if (!summed(d.name))
        (findDim(bs, d.name) >= 0 ? batch : m).push_back(d.name);
    for (const NamedDim &d : bs)
      if (!summed(d.name) && findDim(a, d.name) < 0)
        n.push_back(d.name);
    std::vector<std::string> k;
    for (const NamedDim &d : a)
      if (summed(d.name))
        k.push_back(d.name);

    Type element = cast<RankedTensorType>(op.getType()).getElementType();
    auto pick = [](const NamedShape &s, ArrayRef<std::string> names) {
      NamedShape out;
      for (const std::string &nm : names)
        out.push_back(s[findDim(s, nm)]);
      return out;
    };
    auto concat = [](std::initializer_list<NamedShape> parts) {
      NamedShape out;
      for (const NamedShape &p : parts)
        out.insert(out.end(), p.begin(), p.end());
      return out;
    };

    Value lhs = adaptor.getLhs(), rhs = adaptor.getRhs();
    auto layoutOf = [&](const NamedShape &s, ArrayRef<std::string> rows,
                        ArrayRef<std::string> cols) -> std::optional<MatrixLayout> {
      auto r = collapse(s, rows), cl = collapse(s, cols);
      if (!r || !cl)
        return std::nullopt;
      return matrixLayout(r->first, cl->first, rows.empty() ? 1 : r->second,
                          cols.empty() ? 1 : cl->second);
    };
    std::optional<MatrixLayout> la = layoutOf(a, m, k);
    if (!la) { // Copy lhs into [batch, M, K].
      NamedShape packed = concat({pick(a, batch), pick(a, m), pick(a, k)});
      lhs = emit.relayout(lhs, a, packed, element);
      a = packed;
      la = layoutOf(a, m, k);
    }
    std::optional<MatrixLayout> lb = layoutOf(bs, k, n);
    if (!lb) { // Copy rhs into [batch, K, N].
      NamedShape packed = concat({pick(bs, batch), pick(bs, k), pick(bs, n)});
      rhs = emit.relayout(rhs, bs, packed, element);
      bs = packed;
      lb = layoutOf(bs, k, n);
    }
    // The result is dense in its own order; BLAS writes it directly when N is its trailing
    // group and M evenly strided, else through a [batch, M, N] temporary.
    NamedShape cc = c;
    std::optional<MatrixLayout> lc = layoutOf(c, m, n);
    bool viaTemp = !lc || lc->trans;
    if (viaTemp) {
      cc = concat({pick(c, batch), pick(c, m), pick(c, n)});
      lc = layoutOf(cc, m, n);
    }
    Value out = emit.define(op.getResult());
    Value target = viaTemp ? emit.alloc(sizesOf(cc), element) : out;

    auto sizeOf = [](const NamedShape &s, ArrayRef<std::string> names) {
      int64_t total = 1;
      for (const std::string &nm : names)
        total *= s[findDim(s, nm)].size;
      return total;
    };
    SmallVector<int64_t> batchShape;
    Strides aBatch, bBatch, cBatch;
    Strides da = denseStrides(a), db = denseStrides(bs), dc = denseStrides(cc);
    for (const std::string &nm : batch) {
      batchShape.push_back(a[findDim(a, nm)].size);
      aBatch.push_back(da[findDim(a, nm)]);
      bBatch.push_back(db[findDim(bs, nm)]);
      cBatch.push_back(dc[findDim(cc, nm)]);
    }
    emit.kernel("gemm", {lhs, rhs}, {target},
                {emit.list("batch_shape", batchShape), emit.list("a_batch_strides", aBatch),
                 emit.list("b_batch_strides", bBatch), emit.list("c_batch_strides", cBatch),
                 emit.i64("m", sizeOf(a, m)), emit.i64("n", sizeOf(bs, n)),
                 emit.i64("k", sizeOf(a, k)), emit.i64("trans_a", la->trans),
                 emit.i64("trans_b", lb->trans), emit.i64("lda", la->ld), emit.i64("ldb", lb->ld),
                 emit.i64("ldc", lc->ld)});
    if (viaTemp)
      emit.kernel("copy", {target}, {out},
                  {emit.list("shape", sizesOf(c)), emit.list("x_strides", stridesIn(cc, c))});
    return success();
  }
};

} // namespace

void plan_lowering::populateContractionPatterns(RewritePatternSet &patterns,
                                                const TypeConverter &converter,
                                                PlanLowering &lowering) {
  patterns.add<ContractPattern>(converter, patterns.getContext(), lowering);
}
