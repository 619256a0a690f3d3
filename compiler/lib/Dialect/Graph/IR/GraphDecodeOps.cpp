//===- GraphDecodeOps.cpp - Verifiers of the decoding ops ----------------===//
//
// The verifiers of the ops the decoder derivation builds (GraphDecodeOps.td): the key/value
// caches, paged attention over them, running sums and rope at given positions. Their layouts
// are fixed ([batch, seq, heads, head] and the caches' [blocks, block_size, kv_heads, head]),
// so each names the dims it expects.
//
//===----------------------------------------------------------------------===//

#include "GraphVerifiers.h"
#include "tessel/Dialect/Graph/IR/GraphOps.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;
using namespace tessel::graph::verifier;

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
  if (failed(shapes) || failed(sameElementType(*this, {getQuery(), getKey(), getValue(),
                                                       getKeyCache(), getValueCache()})))
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
                         << formatShape(in[2]) << " must have the input's " << x[0].name << " and "
                         << x[1].name;
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
