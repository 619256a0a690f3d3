//===- BuiltinsTensor.cpp - Elementwise, reduction and dim-moving ops -----===//
//
// The built-in ops that any tensor program has: elementwise functions and selection, sums and
// their normalised kin, the choice of the largest entries, and the ops that rename, split,
// merge, reorder and contract named dims. Each checks its arguments through BuiltinCall and
// types its result by the rules of NamedShape.h, so a shape error points at the call.
//
//===----------------------------------------------------------------------===//

#include "Builtins.h"

#include <cmath>

using namespace tessel;
using namespace tessel::detail;

Value tessel::detail::builtinUnary(BuiltinCall &c) {
  if (!c.signature(1, 1, {}))
    return Value::error();
  const Value &v = c.valueAt(0);
  if (v.isNumber()) // `sqrt(2 * layers)` in a tensor expression is still a number.
    return c.sema.scalarCall(c.call, {v});
  if (v.isError())
    return v;
  int x = c.tensor(0);
  if (x < 0)
    return Value::error();
  return c.finish({c.sema.typeOf(x).dims, ""}, Op{}, {x});
}

Value tessel::detail::builtinPow(BuiltinCall &c) {
  if (!c.signature(2, 2, {}))
    return Value::error();
  const Value &base = c.valueAt(0), &exponent = c.valueAt(1);
  if (base.isError() || exponent.isError())
    return Value::error();
  if (!exponent.isNumber()) {
    c.sema.error(c.args.positional[1]->loc,
                 std::string("the exponent of 'pow' is a number, not ") + kindName(exponent.kind),
                 exponent.kind == Value::Tensor ? "for a tensor exponent write exp(y * log(x))"
                                                : "");
    return Value::error();
  }
  if (base.isNumber())
    return Value::ofFloat(std::pow(base.asDouble(), exponent.asDouble()));
  int x = c.tensor(0);
  if (x < 0)
    return Value::error();
  Op op;
  op.attrs.push_back({"exponent", exponent.asDouble()});
  return c.finish({c.sema.typeOf(x).dims, ""}, std::move(op), {x});
}

Value tessel::detail::builtinWhere(BuiltinCall &c) {
  Sema &s = c.sema;
  if (!c.signature(3, 3, {}))
    return Value::error();
  int cond = c.tensor(0);
  const Value &a = c.valueAt(1), &b = c.valueAt(2);
  if (cond < 0 || a.isError() || b.isError())
    return Value::error();
  DType dtype = s.typeOf(cond).dtype;
  std::vector<int> operands = {cond};
  for (size_t i : {1, 2}) {
    const Value &v = c.valueAt(i);
    if (v.isNumber()) {
      operands.push_back(
          s.scalarConstant(v.asDouble(), dtype, c.args.positional[i]->loc, c.frame));
      continue;
    }
    int t = c.tensor(i);
    if (t < 0)
      return Value::error();
    if (s.typeOf(t).dtype != dtype) {
      s.error(c.args.positional[i]->loc,
              std::string("'where' selects between tensors of the condition's element type, "
                          "not ") +
                  dtypeName(s.typeOf(t).dtype) + " and " + dtypeName(dtype));
      return Value::error();
    }
    operands.push_back(t);
  }
  if (operands[1] < 0 || operands[2] < 0)
    return Value::error();
  return c.finish(whereShape(s.typeOf(cond).dims, s.typeOf(operands[1]).dims,
                             s.typeOf(operands[2]).dims),
                  Op{}, operands);
}

Value tessel::detail::builtinPositions(BuiltinCall &c) {
  if (!c.signature(1, 1, {}))
    return Value::error();
  auto dim = c.sema.dimNamed(*c.args.positional[0]);
  if (!dim)
    return Value::error();
  return c.finish({{*dim}, ""}, Op{}, {});
}

// rename(x, seq = seq_k, ...): the keywords are dims of x, their values the new names.
Value tessel::detail::builtinRename(BuiltinCall &c) {
  Sema &s = c.sema;
  if (c.args.positional.size() != 1) {
    s.error(c.call.loc,
            "'rename' takes 1 positional argument, not " +
                std::to_string(c.args.positional.size()),
            "rename(x, seq = seq_k)");
    return Value::error();
  }
  int x = c.tensor(0);
  if (x < 0)
    return Value::error();
  if (c.args.keyword.empty()) {
    s.error(c.call.loc, "'rename' names no dim to rename", "rename(x, seq = seq_k)");
    return Value::error();
  }
  const NamedShape &shape = s.typeOf(x).dims;
  std::vector<std::pair<std::string, NamedDim>> renames;
  bool ok = true;
  for (const auto &[from, to] : c.args.keyword) {
    if (findDim(shape, from) < 0) {
      std::vector<std::string> names;
      for (const NamedDim &d : shape)
        names.push_back(d.name);
      std::string guess = closestMatch(from, names);
      s.error(c.args.keywordLoc[from], "'" + from + "' is not a dim of " + formatShape(shape),
              guess.empty() ? "" : "did you mean '" + guess + "'?");
      ok = false;
      continue;
    }
    auto target = s.dimNamed(*to);
    if (!target) {
      ok = false;
      continue;
    }
    int64_t size = shape[findDim(shape, from)].size;
    if (target->size != size) {
      s.error(to->loc,
              "'" + from + "' has size " + std::to_string(size) + " but '" + target->name +
                  "' has size " + std::to_string(target->size),
              "a dim is renamed to another name of its size; declare one in dims { ... }, "
              "as in " +
                  from + "_2 = " + from);
      ok = false;
      continue;
    }
    renames.push_back({from, *target});
  }
  if (!ok)
    return Value::error();
  return c.finish(renameShape(shape, renames), Op{}, {x});
}

Value tessel::detail::builtinReduce(BuiltinCall &c) {
  if (!c.signature(2, 2, {}))
    return Value::error();
  int x = c.tensor(0);
  std::vector<std::string> dims;
  if (!c.dimList(*c.args.positional[1], dims) || x < 0)
    return Value::error();
  const NamedShape &shape = c.sema.typeOf(x).dims;
  if (c.fn == "softmax") {
    if (dims.size() != 1) {
      c.sema.error(c.args.positional[1]->loc, "softmax normalises over one dim");
      return Value::error();
    }
    ShapeResult r = reduceShape(shape, dims);
    Op op;
    op.attrs.push_back({"dim", dims[0]});
    return c.finish(r.ok() ? ShapeResult{shape, ""} : r, std::move(op), {x});
  }
  Op op;
  op.attrs.push_back({"dims", dims});
  return c.finish(reduceShape(shape, dims), std::move(op), {x});
}

Value tessel::detail::builtinTopK(BuiltinCall &c) {
  Sema &s = c.sema;
  if (!c.signature(3, 3, {}))
    return Value::error();
  int x = c.tensor(0);
  std::vector<std::string> dims;
  if (!c.dimList(*c.args.positional[1], dims) || x < 0)
    return Value::error();
  if (dims.size() != 1) {
    s.error(c.args.positional[1]->loc, "top_k chooses along one dim");
    return Value::error();
  }
  const NamedShape &shape = s.typeOf(x).dims;
  int at = findDim(shape, dims[0]);
  if (at < 0) {
    s.error(c.args.positional[1]->loc, "'" + dims[0] + "' is not a dim of " + formatShape(shape));
    return Value::error();
  }
  int64_t size = shape[at].size;
  Value k = s.evalConstant(*c.args.positional[2]);
  if (k.isError())
    return Value::error();
  if (k.kind != Value::Int || k.i < 1 || k.i > size) {
    s.error(c.args.positional[2]->loc,
            "top_k chooses k of the " + std::to_string(size) + " entries along '" + dims[0] +
                "'; k must be a whole number from 1 to " + std::to_string(size) + ", not " +
                (k.kind == Value::Int ? std::to_string(k.i) : std::string(kindName(k.kind))));
    return Value::error();
  }
  Op op;
  op.attrs.push_back({"dim", dims[0]});
  op.attrs.push_back({"k", k.i});
  return c.finish({shape, ""}, std::move(op), {x});
}

// add_loss(term) is a statement (Sema::execCallStatement); here it stands where a value is
// wanted.
Value tessel::detail::builtinAddLoss(BuiltinCall &c) {
  c.sema.error(c.call.loc, "add_loss is a statement and has no value",
               "write add_loss(term) on a line of its own");
  return Value::error();
}

Value tessel::detail::builtinSplit(BuiltinCall &c) {
  if (!c.signature(3, 3, {}))
    return Value::error();
  int x = c.tensor(0);
  auto dim = c.sema.dimNamed(*c.args.positional[1]);
  std::vector<std::string> parts;
  if (!c.dimList(*c.args.positional[2], parts) || x < 0 || !dim)
    return Value::error();
  NamedShape partDims;
  for (const std::string &p : parts)
    partDims.push_back(c.sema.dims_[p]);
  Op op;
  op.attrs.push_back({"dim", dim->name});
  return c.finish(splitShape(c.sema.typeOf(x).dims, dim->name, partDims), std::move(op), {x});
}

Value tessel::detail::builtinMerge(BuiltinCall &c) {
  if (!c.signature(3, 3, {}))
    return Value::error();
  int x = c.tensor(0);
  std::vector<std::string> parts;
  bool ok = c.dimList(*c.args.positional[1], parts);
  auto into = c.sema.dimNamed(*c.args.positional[2]);
  if (!ok || x < 0 || !into)
    return Value::error();
  Op op;
  op.attrs.push_back({"dims", parts});
  return c.finish(mergeShape(c.sema.typeOf(x).dims, parts, *into), std::move(op), {x});
}

Value tessel::detail::builtinPermute(BuiltinCall &c) {
  if (!c.signature(2, 2, {}))
    return Value::error();
  int x = c.tensor(0);
  std::vector<std::string> order;
  if (!c.dimList(*c.args.positional[1], order) || x < 0)
    return Value::error();
  return c.finish(permuteShape(c.sema.typeOf(x).dims, order), Op{}, {x});
}

// contract(a, b, over = [dims]); without `over`, the sum runs over every dim both share.
Value tessel::detail::builtinContract(BuiltinCall &c) {
  if (!c.signature(2, 2, {"over"}))
    return Value::error();
  int a = c.tensor(0), b = c.tensor(1);
  std::vector<std::string> over;
  if (const ast::Expr *e = c.keyword("over"))
    if (!c.dimList(*e, over))
      return Value::error();
  if (a < 0 || b < 0)
    return Value::error();
  const NamedShape &sa = c.sema.typeOf(a).dims, &sb = c.sema.typeOf(b).dims;
  ShapeResult r = contractShapes(sa, sb, over);
  if (over.empty())
    for (const NamedDim &d : sa)
      if (findDim(sb, d.name) >= 0)
        over.push_back(d.name);
  Op op;
  op.attrs.push_back({"sum", over});
  return c.finish(r, std::move(op), {a, b});
}
