//===- NamedShape.h - Shape rules over named dimensions ---------*- C++ -*-===//
//
// The single statement of how each tensor op combines named dimensions. Semantic analysis uses
// it to type the user's program, and the graph dialect's verifiers use it to check IR, so the
// two can never disagree. It depends on nothing but the standard library.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_SHAPE_NAMEDSHAPE_H
#define TESSEL_SHAPE_NAMEDSHAPE_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessel {

struct NamedDim {
  std::string name;
  int64_t size = 0;
  bool operator==(const NamedDim &o) const { return name == o.name && size == o.size; }
};

using NamedShape = std::vector<NamedDim>;

/// A result shape, or the reason there is none.
struct ShapeResult {
  NamedShape shape;
  std::string error;
  bool ok() const { return error.empty(); }
  static ShapeResult fail(std::string why) { return {{}, std::move(why)}; }
};

/// `[batch, seq, embed]`, as printed in diagnostics.
std::string formatShape(const NamedShape &shape);
/// The position of `name` in `shape`, or -1.
int findDim(const NamedShape &shape, const std::string &name);
/// Names must be unique within a shape and sizes positive.
std::string checkWellFormed(const NamedShape &shape);

/// Elementwise ops align dims by name: the result has `a`'s dims followed by those of `b` that
/// `a` lacks. A name present in both must have one size.
ShapeResult broadcastShapes(const NamedShape &a, const NamedShape &b);

/// `where(cond, a, b)`: the result has `a`'s dims, then those of `b` that `a` lacks, then
/// those of `cond` that neither has; a name in several operands has one size.
ShapeResult whereShape(const NamedShape &cond, const NamedShape &a, const NamedShape &b);

/// Gives dims of `x` new names, keeping their order and sizes: `renames` pairs an old name with
/// its new one. The old names must be dims of `x` and the result's names unique.
ShapeResult renameShape(const NamedShape &x,
                        const std::vector<std::pair<std::string, NamedDim>> &renames);

/// Contraction (`a @ b` and `contract`): sums over the dims in `over`, or over every dim the
/// operands share when `over` is empty. Shared dims not summed are batch dims and kept once.
/// The result lists `a`'s kept dims, then `b`'s.
ShapeResult contractShapes(const NamedShape &a, const NamedShape &b,
                           const std::vector<std::string> &over);

/// Removes `dims` (sum, mean).
ShapeResult reduceShape(const NamedShape &x, const std::vector<std::string> &dims);

/// Norms scale each position by a parameter over the normalised dims: `g`'s dims must all be
/// dims of `x`; the result is `x`.
ShapeResult normShape(const NamedShape &x, const NamedShape &g);

/// Row lookup: `table` is [rows, features]; the result is `ids`' dims followed by features.
ShapeResult embeddingShape(const NamedShape &table, const NamedShape &ids);

/// `targets` has `logits`' dims minus one (the class dim); the result is a scalar. Returns the
/// class dim's name in `classDim`.
ShapeResult crossEntropyShape(const NamedShape &logits, const NamedShape &targets,
                              std::string *classDim = nullptr);

/// Scaled dot-product attention. `q` is [..., seq, heads, head]; `k` and `v` are
/// [..., kv_seq, kv_heads, head] with the same leading dims; kv_heads divides heads (grouped
/// query attention when smaller). The result has `q`'s shape. With `blockOfHeads`, `q`
/// holds one rank's block of the query heads and `k`, `v` every kv head (tensor parallelism
/// over more ranks than kv heads): the heads are then not compared.
ShapeResult attentionShape(const NamedShape &q, const NamedShape &k, const NamedShape &v,
                           bool blockOfHeads = false);

/// Rotary embedding on [..., seq, heads, head] with an even head size; shape-preserving.
ShapeResult ropeShape(const NamedShape &x);

/// Replaces dim `dim` by `parts`, whose sizes must multiply to its size.
ShapeResult splitShape(const NamedShape &x, const std::string &dim, const NamedShape &parts);

/// Replaces the adjacent dims `parts` (in order) by `into`, whose size must be their product.
ShapeResult mergeShape(const NamedShape &x, const std::vector<std::string> &parts,
                       const NamedDim &into);

/// Reorders `x` to `order`, which must name exactly `x`'s dims.
ShapeResult permuteShape(const NamedShape &x, const std::vector<std::string> &order);

} // namespace tessel

#endif // TESSEL_SHAPE_NAMEDSHAPE_H
