//===- Builtins.cpp - The table of built-in ops and their argument checks -===//
//
// Sema::callBuiltin looks a call's name up in the table of built-in ops below and runs the
// op's function on a BuiltinCall. The table lists the ops in the order the language documents
// them; that order also decides between equally close names in a "did you mean" hint. What
// every op checks of its arguments, and the typing and emission of the op it builds, live
// here once, as BuiltinCall's methods.
//
// The elementwise functions are not listed here: each function of the kernel catalogue
// (UnaryOp in common/catalogue/KernelCatalogue.def) is a built-in of the same name, but neg,
// which the language writes `-x`. The table is built from that list.
//
//===----------------------------------------------------------------------===//

#include "Builtins.h"

#include "common/catalogue/KernelOps.h"

#include <algorithm>

using namespace tessel;
using namespace tessel::detail;

namespace {

using BuiltinFn = Value (*)(BuiltinCall &);

struct Builtin {
  std::string_view name;
  BuiltinFn fn;
};

/// The built-ins other than the elementwise functions, in the language's order.
const Builtin kOtherBuiltins[] = {
    {"softmax", builtinReduce},
    {"sum", builtinReduce},
    {"mean", builtinReduce},
    {"layernorm", builtinNorm},
    {"rmsnorm", builtinNorm},
    {"embedding", builtinEmbedding},
    {"cross_entropy", builtinCrossEntropy},
    {"attention", builtinAttention},
    {"rope", builtinRope},
    {"dropout", builtinDropout},
    {"split", builtinSplit},
    {"merge", builtinMerge},
    {"permute", builtinPermute},
    {"contract", builtinContract},
    {"where", builtinWhere},
    {"positions", builtinPositions},
    {"rename", builtinRename},
    {"top_k", builtinTopK},
    {"add_loss", builtinAddLoss},
};

/// The elementwise functions (pow with its exponent), then the other built-ins.
const std::vector<Builtin> &builtins() {
  static const std::vector<Builtin> table = [] {
    using catalogue::UnaryOp;
    std::vector<Builtin> out;
    for (size_t i = 0; i < catalogue::enumSize<UnaryOp>(); ++i) {
      auto fn = static_cast<UnaryOp>(i);
      if (fn != UnaryOp::Neg)
        out.push_back({catalogue::wordOf(fn), fn == UnaryOp::Pow ? builtinPow : builtinUnary});
    }
    out.insert(out.end(), std::begin(kOtherBuiltins), std::end(kOtherBuiltins));
    return out;
  }();
  return table;
}

const Builtin *findBuiltin(const std::string &name) {
  for (const Builtin &b : builtins())
    if (name == b.name)
      return &b;
  return nullptr;
}

} // namespace

Value Sema::callBuiltin(const ast::Expr &call, Frame &frame) {
  const std::string &fn = call.text;
  const Builtin *builtin = findBuiltin(fn);
  if (!builtin) {
    std::string guess;
    if (wantHints()) {
      std::vector<std::string> names;
      for (const Builtin &b : builtins())
        names.emplace_back(b.name);
      for (const auto &entry : blocks_)
        names.push_back(entry.first);
      guess = closestMatch(fn, names);
    }
    error(call.loc, "unknown op or block '" + fn + "'",
          guess.empty() ? "" : "did you mean '" + guess + "'?");
    return Value::error();
  }
  BuiltinCall c(*this, call, frame);
  if (!c.readArgs())
    return Value::error();
  return builtin->fn(c);
}

bool BuiltinCall::readArgs() {
  for (size_t i = 0; i < call.operands.size(); ++i) {
    if (call.keys[i].empty()) {
      if (!args.keyword.empty()) {
        sema.error(call.operands[i]->loc, "positional argument after a keyword argument");
        return false;
      }
      args.positional.push_back(call.operands[i].get());
    } else if (!args.keyword.insert({call.keys[i], call.operands[i].get()}).second) {
      sema.error(call.keyLocs[i], "argument '" + call.keys[i] + "' is given twice");
      return false;
    } else {
      args.keywordLoc[call.keys[i]] = call.keyLocs[i];
    }
  }
  evaluated_.resize(args.positional.size());
  return true;
}

bool BuiltinCall::signature(size_t minPos, size_t maxPos, std::vector<std::string> keys) {
  for (const auto &[k, e] : args.keyword)
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
      std::string guess = closestMatch(k, keys);
      sema.error(args.keywordLoc[k], "'" + fn + "' has no argument '" + k + "'",
                 guess.empty() ? "" : "did you mean '" + guess + "'?");
      return false;
    }
  size_t n = args.positional.size();
  if (n < minPos || n > maxPos) {
    sema.error(call.loc,
               "'" + fn + "' takes " +
                   (minPos == maxPos ? std::to_string(minPos)
                                     : std::to_string(minPos) + " to " + std::to_string(maxPos)) +
                   " positional argument" + (maxPos == 1 ? "" : "s") + ", not " +
                   std::to_string(n));
    return false;
  }
  return true;
}

const Value &BuiltinCall::valueAt(size_t i) {
  if (!evaluated_[i])
    evaluated_[i] = sema.evalTensorExpr(*args.positional[i], frame);
  return *evaluated_[i];
}

int BuiltinCall::tensor(size_t i, bool wantFloat) {
  const Value &v = valueAt(i);
  if (v.isError())
    return -1;
  if (v.kind != Value::Tensor) {
    sema.error(args.positional[i]->loc, "argument " + std::to_string(i + 1) + " of '" + fn +
                                            "' must be a tensor, not " + kindName(v.kind));
    return -1;
  }
  DType dtype = sema.typeOf(v.tensor).dtype;
  if (wantFloat != isFloat(dtype)) {
    sema.error(args.positional[i]->loc, "argument " + std::to_string(i + 1) + " of '" + fn +
                                            "' must be " +
                                            (wantFloat ? "floating-point" : "integer (i32)") +
                                            ", not " + dtypeName(dtype));
    return -1;
  }
  return v.tensor;
}

double BuiltinCall::number(const ast::Expr *e, double fallback, double lo, double hi, bool &ok,
                           bool aboveLo) {
  if (!e)
    return fallback;
  Value v = sema.evalConstant(*e);
  if (v.isError()) {
    ok = false;
    return fallback;
  }
  if (!v.isNumber() || v.asDouble() < lo || (aboveLo && v.asDouble() == lo) ||
      v.asDouble() > hi) {
    sema.error(e->loc, std::string("expected a number in ") + (aboveLo ? "(" : "[") +
                           formatNumber(lo) + ", " + formatNumber(hi) + "]");
    ok = false;
    return fallback;
  }
  return v.asDouble();
}

const ast::Expr *BuiltinCall::keyword(const std::string &key) const {
  auto it = args.keyword.find(key);
  return it == args.keyword.end() ? nullptr : it->second;
}

bool BuiltinCall::dimList(const ast::Expr &e, std::vector<std::string> &out) {
  std::vector<const ast::Expr *> items;
  if (e.kind == ast::ExprKind::List || e.kind == ast::ExprKind::Tuple)
    for (const auto &x : e.operands)
      items.push_back(x.get());
  else
    items.push_back(&e);
  bool ok = true;
  for (const ast::Expr *x : items) {
    auto d = sema.dimNamed(*x);
    ok &= d.has_value();
    if (d)
      out.push_back(d->name);
  }
  return ok;
}

Value BuiltinCall::finish(const ShapeResult &r, Op op, const std::vector<int> &operands) {
  if (!r.ok()) {
    sema.error(call.loc, "'" + fn + "': " + r.error);
    return Value::error();
  }
  op.name = fn;
  op.operands = operands;
  op.type.dims = r.shape;
  if (op.type.dtype == DType::F32 && !operands.empty())
    op.type.dtype = sema.typeOf(operands[0]).dtype;
  int id = sema.emit(std::move(op), frame, call.loc);
  return id < 0 ? Value::error() : Value::ofTensor(id);
}
