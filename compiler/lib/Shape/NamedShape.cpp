//===- NamedShape.cpp - Shape rules over named dimensions -----------------===//

#include "tessel/Shape/NamedShape.h"

#include <algorithm>
#include <set>

namespace tessel {

std::string formatShape(const NamedShape &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      out += ", ";
    out += shape[i].name + "=" + std::to_string(shape[i].size);
  }
  return out + "]";
}

int findDim(const NamedShape &shape, const std::string &name) {
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i].name == name)
      return static_cast<int>(i);
  return -1;
}

std::string checkWellFormed(const NamedShape &shape) {
  std::set<std::string> seen;
  for (const NamedDim &d : shape) {
    if (d.size <= 0)
      return "dim '" + d.name + "' has size " + std::to_string(d.size) + "; sizes are positive";
    if (!seen.insert(d.name).second)
      return "dim '" + d.name + "' appears twice in " + formatShape(shape);
  }
  return "";
}

static std::string sizeClash(const NamedDim &a, const NamedDim &b) {
  return "dim '" + a.name + "' has size " + std::to_string(a.size) + " in one operand and " +
         std::to_string(b.size) + " in the other";
}

ShapeResult broadcastShapes(const NamedShape &a, const NamedShape &b) {
  NamedShape out = a;
  for (const NamedDim &d : b) {
    int i = findDim(a, d.name);
    if (i < 0) {
      out.push_back(d);
      continue;
    }
    if (a[i].size != d.size)
      return ShapeResult::fail(sizeClash(a[i], d));
  }
  return {out, ""};
}

ShapeResult whereShape(const NamedShape &cond, const NamedShape &a, const NamedShape &b) {
  ShapeResult values = broadcastShapes(a, b);
  if (!values.ok())
    return values;
  return broadcastShapes(values.shape, cond);
}

ShapeResult renameShape(const NamedShape &x,
                        const std::vector<std::pair<std::string, NamedDim>> &renames) {
  NamedShape out = x;
  for (const auto &[from, to] : renames) {
    int i = findDim(x, from);
    if (i < 0)
      return ShapeResult::fail("'" + from + "' is not a dim of " + formatShape(x));
    if (x[i].size != to.size)
      return ShapeResult::fail("'" + from + "' has size " + std::to_string(x[i].size) + " but '" +
                               to.name + "' has size " + std::to_string(to.size) +
                               "; a dim is renamed only to a name of its size");
    out[i].name = to.name;
  }
  std::string err = checkWellFormed(out);
  if (!err.empty())
    return ShapeResult::fail("the result " + formatShape(out) + " is not a shape: " + err);
  return {out, ""};
}

ShapeResult contractShapes(const NamedShape &a, const NamedShape &b,
                           const std::vector<std::string> &over) {
  std::vector<std::string> summed = over;
  for (const NamedDim &d : a) {
    int j = findDim(b, d.name);
    if (j >= 0 && b[j].size != d.size)
      return ShapeResult::fail(sizeClash(d, b[j]));
    if (over.empty() && j >= 0)
      summed.push_back(d.name);
  }
  if (summed.empty())
    return ShapeResult::fail("operands " + formatShape(a) + " and " + formatShape(b) +
                             " share no dim to contract over");
  for (const std::string &name : over) {
    if (findDim(a, name) < 0 || findDim(b, name) < 0)
      return ShapeResult::fail("cannot sum over '" + name + "': it is not a dim of both " +
                               formatShape(a) + " and " + formatShape(b));
    if (std::count(over.begin(), over.end(), name) > 1)
      return ShapeResult::fail("dim '" + name + "' is listed twice");
  }
  auto isSummed = [&](const std::string &n) {
    return std::find(summed.begin(), summed.end(), n) != summed.end();
  };
  NamedShape out;
  for (const NamedDim &d : a)
    if (!isSummed(d.name))
      out.push_back(d);
  for (const NamedDim &d : b)
    if (!isSummed(d.name) && findDim(a, d.name) < 0)
      out.push_back(d);
  return {out, ""};
}

ShapeResult reduceShape(const NamedShape &x, const std::vector<std::string> &dims) {
  if (dims.empty())
    return ShapeResult::fail("no dim to reduce over");
  for (const std::string &name : dims)
    if (findDim(x, name) < 0)
      return ShapeResult::fail("'" + name + "' is not a dim of " + formatShape(x));
  NamedShape out;
  for (const NamedDim &d : x)
    if (std::find(dims.begin(), dims.end(), d.name) == dims.end())
      out.push_back(d);
  return {out, ""};
}

ShapeResult normShape(const NamedShape &x, const NamedShape &g) {
  if (g.empty())
    return ShapeResult::fail("the scale parameter must have at least one dim");
  for (const NamedDim &d : g) {
    int i = findDim(x, d.name);
    if (i < 0)
      return ShapeResult::fail("the scale's dim '" + d.name + "' is not a dim of the input " +
                               formatShape(x));
    if (x[i].size != d.size)
      return ShapeResult::fail(sizeClash(x[i], d));
  }
  return {x, ""};
}

ShapeResult embeddingShape(const NamedShape &table, const NamedShape &ids) {
  if (table.size() != 2)
    return ShapeResult::fail("the table must have two dims [rows, features], not " +
                             formatShape(table));
  for (const NamedDim &d : table)
    if (findDim(ids, d.name) >= 0)
      return ShapeResult::fail("the ids " + formatShape(ids) + " already have the table's dim '" +
                               d.name + "'");
  NamedShape out = ids;
  out.push_back(table[1]);
  return {out, ""};
}

ShapeResult crossEntropyShape(const NamedShape &logits, const NamedShape &targets,
                              std::string *classDim) {
  if (logits.size() != targets.size() + 1)
    return ShapeResult::fail("targets " + formatShape(targets) +
                             " must have every dim of the logits " + formatShape(logits) +
                             " but the class dim");
  std::string cls;
  for (const NamedDim &d : logits) {
    int j = findDim(targets, d.name);
    if (j < 0) {
      if (!cls.empty())
        return ShapeResult::fail("logits dims '" + cls + "' and '" + d.name +
                                 "' are both missing from the targets " + formatShape(targets));
      cls = d.name;
      continue;
    }
    if (targets[j].size != d.size)
      return ShapeResult::fail(sizeClash(d, targets[j]));
  }
  if (cls.empty())
    return ShapeResult::fail("the logits have no class dim beyond the targets' dims");
  if (classDim)
    *classDim = cls;
  return {{}, ""};
}

ShapeResult attentionShape(const NamedShape &q, const NamedShape &k, const NamedShape &v,
                           bool blockOfHeads) {
  if (q.size() < 3)
    return ShapeResult::fail("the query must be [..., seq, heads, head], not " + formatShape(q));
  if (k.size() != q.size())
    return ShapeResult::fail("keys " + formatShape(k) + " and queries " + formatShape(q) +
                             " must have the same number of dims");
  if (!(k == v))
    return ShapeResult::fail("keys " + formatShape(k) + " and values " + formatShape(v) +
                             " must have the same shape");
  size_t n = q.size();
  for (size_t i = 0; i + 3 < n; ++i)
    if (!(q[i] == k[i]))
      return ShapeResult::fail("leading dims of queries " + formatShape(q) + " and keys " +
                               formatShape(k) + " must match");
  const NamedDim &qHead = q[n - 1], &kHead = k[n - 1];
  if (!(qHead == kHead))
    return ShapeResult::fail("the last dim of queries and keys (the head size) must match: '" +
                             qHead.name + "' vs '" + kHead.name + "'");
  const NamedDim &heads = q[n - 2], &kvHeads = k[n - 2];
  if (blockOfHeads)
    return {q, ""};
  if (heads.size % kvHeads.size != 0)
    return ShapeResult::fail("kv heads '" + kvHeads.name + "' (" + std::to_string(kvHeads.size) +
                             ") must divide query heads '" + heads.name + "' (" +
                             std::to_string(heads.size) + ")");
  if (kvHeads.name != heads.name && kvHeads.size == heads.size)
    return ShapeResult::fail("keys name their heads '" + kvHeads.name + "' and queries '" +
                             heads.name + "' but the sizes are equal; use one name");
  if (kvHeads.name == heads.name && kvHeads.size != heads.size)
    return ShapeResult::fail(sizeClash(heads, kvHeads));
  return {q, ""};
}

ShapeResult ropeShape(const NamedShape &x) {
  if (x.size() < 3)
    return ShapeResult::fail("rope needs [..., seq, heads, head], not " + formatShape(x));
  if (x.back().size % 2 != 0)
    return ShapeResult::fail("rope rotates pairs: the head size " +
                             std::to_string(x.back().size) + " must be even");
  return {x, ""};
}

ShapeResult splitShape(const NamedShape &x, const std::string &dim, const NamedShape &parts) {
  int i = findDim(x, dim);
  if (i < 0)
    return ShapeResult::fail("'" + dim + "' is not a dim of " + formatShape(x));
  if (parts.size() < 2)
    return ShapeResult::fail("split needs at least two parts");
  int64_t product = 1;
  for (const NamedDim &p : parts) {
    product *= p.size;
    if (findDim(x, p.name) >= 0 && p.name != dim)
      return ShapeResult::fail("'" + p.name + "' is already a dim of " + formatShape(x));
  }
  if (product != x[i].size)
    return ShapeResult::fail("parts multiply to " + std::to_string(product) + " but '" + dim +
                             "' has size " + std::to_string(x[i].size));
  NamedShape out(x.begin(), x.begin() + i);
  out.insert(out.end(), parts.begin(), parts.end());
  out.insert(out.end(), x.begin() + i + 1, x.end());
  std::string err = checkWellFormed(out);
  if (!err.empty())
    return ShapeResult::fail(err);
  return {out, ""};
}

ShapeResult mergeShape(const NamedShape &x, const std::vector<std::string> &parts,
                       const NamedDim &into) {
  if (parts.size() < 2)
    return ShapeResult::fail("merge needs at least two dims");
  int first = findDim(x, parts[0]);
  if (first < 0)
    return ShapeResult::fail("'" + parts[0] + "' is not a dim of " + formatShape(x));
  int64_t product = 1;
  for (size_t k = 0; k < parts.size(); ++k) {
    int i = findDim(x, parts[k]);
    if (i != first + static_cast<int>(k))
      return ShapeResult::fail("merged dims must be adjacent and in order in " + formatShape(x));
    product *= x[i].size;
  }
  if (product != into.size)
    return ShapeResult::fail("dims multiply to " + std::to_string(product) + " but '" +
                             into.name + "' has size " + std::to_string(into.size));
  NamedShape out(x.begin(), x.begin() + first);
  out.push_back(into);
  out.insert(out.end(), x.begin() + first + parts.size(), x.end());
  std::string err = checkWellFormed(out);
  if (!err.empty())
    return ShapeResult::fail(err);
  return {out, ""};
}

ShapeResult permuteShape(const NamedShape &x, const std::vector<std::string> &order) {
  if (order.size() != x.size())
    return ShapeResult::fail("a permutation of " + formatShape(x) + " must name all " +
                             std::to_string(x.size()) + " dims");
  NamedShape out;
  for (const std::string &name : order) {
    int i = findDim(x, name);
    if (i < 0)
      return ShapeResult::fail("'" + name + "' is not a dim of " + formatShape(x));
    if (findDim(out, name) >= 0)
      return ShapeResult::fail("dim '" + name + "' is listed twice");
    out.push_back(x[i]);
  }
  return {out, ""};
}

} // namespace tessel
