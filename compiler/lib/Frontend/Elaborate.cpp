//===- Elaborate.cpp - Instantiating blocks into the typed graph ----------===//
//
// The forward function is executed symbolically: statements bind names to tensors, block
// calls instantiate fresh parameters under a dotted path (`layers.3.gpt_block.wq`), and every
// op is typed over named dims by the rules of NamedShape.h as it is created, so a shape error
// points at the expression that caused it.
//
//===----------------------------------------------------------------------===//

#include "SemaImpl.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace tessel;
using namespace tessel::detail;

namespace {

const std::vector<std::string> kUnaryOps = {"exp",  "log",  "sqrt",    "rsqrt",  "tanh",    "gelu",
                                            "silu", "relu", "sigmoid", "square", "gelu_erf"};
const std::vector<std::string> kBuiltins = {
    "exp",           "log",       "sqrt",    "rsqrt",     "tanh",     "gelu",
    "silu",          "relu",      "sigmoid", "square",    "gelu_erf", "pow",
    "softmax",       "sum",       "mean",    "layernorm", "rmsnorm",  "embedding",
    "cross_entropy", "attention", "rope",    "dropout",   "split",    "merge",
    "permute",       "contract",  "where",   "positions", "rename",   "top_k",
    "add_loss"};

std::string joinPath(const std::vector<std::string> &parts, const std::string &last) {
  std::string out;
  for (const std::string &p : parts)
    out += p + ".";
  return out + last;
}

bool sameDimSet(const NamedShape &a, const NamedShape &b) {
  if (a.size() != b.size())
    return false;
  for (const NamedDim &d : a) {
    int j = findDim(b, d.name);
    if (j < 0 || b[j].size != d.size)
      return false;
  }
  return true;
}

/// The arguments of a built-in call, split into positional and keyword ones.
struct CallArgs {
  std::vector<const ast::Expr *> positional;
  std::map<std::string, const ast::Expr *> keyword;
  std::map<std::string, SourceLoc> keywordLoc; ///< Where each keyword is written.
};

} // namespace

int Sema::emit(Op op, Frame &frame, SourceLoc loc) {
  Graph &g = program_.forward;
  if (g.ops.size() >= options_.maxOps) {
    if (!elaborationAborted_)
      error(loc, "the model has more than " + std::to_string(options_.maxOps) + " ops",
            "is a repeat count far larger than intended?");
    elaborationAborted_ = true;
    return -1;
  }
  op.loc = loc;
  op.callers = frame.callers;
  op.layer = frame.layer;
  g.ops.push_back(std::move(op));
  return static_cast<int>(g.inputs.size() + g.ops.size() - 1);
}

int Sema::scalarConstant(double v, DType dtype, SourceLoc loc, Frame &frame) {
  Op op;
  op.name = "constant";
  op.type = {dtype, {}};
  op.attrs.push_back({"value", v});
  return emit(std::move(op), frame, loc);
}

std::optional<TensorType> Sema::resolveType(const ast::TypeExpr &type) {
  TensorType out;
  bool ok = true;
  const std::string &dt = type.dtype.name;
  if (dt.empty() || dt == "f32") {
    out.dtype = DType::F32;
  } else if (dt == "bf16" || dt == "f16") {
    // The language has them; the runtime does not, and the plan writer would refuse them.
    error(type.dtype.loc, dt + " tensors are not supported yet",
          "the CPU runtime computes in f32: leave the element type out");
    ok = false;
  } else if (dt == "i32") {
    out.dtype = DType::I32;
  } else {
    error(type.dtype.loc, "unknown element type '" + dt + "'",
          "element types are f32 (the default), bf16, f16 and i32");
    ok = false;
  }
  for (const ast::Ident &d : type.dims) {
    auto it = dims_.find(d.name);
    if (it != dims_.end()) {
      if (findDim(out.dims, d.name) >= 0) {
        error(d.loc, "dim '" + d.name + "' appears twice in this type");
        ok = false;
      }
      out.dims.push_back(it->second);
      continue;
    }
    ok = false;
    if (d.name == "batch") {
      error(d.loc, "the size of 'batch' is not known", "set train.micro_batch");
    } else if (definitions_.count(d.name) && !dimDefinitions_.count(d.name)) {
      error(d.loc, "'" + d.name + "' is a constant, not a dim",
            "declare it inside dims { ... } to use it as a dim");
    } else if (!dimDefinitions_.count(d.name)) {
      std::string guess = closestDim(d.name);
      error(d.loc, "unknown dim '" + d.name + "'",
            guess.empty() ? "dims are declared in the model's dims { ... }"
                          : "did you mean '" + guess + "'?");
    } // else: the dim's own definition is erroneous and was reported.
  }
  if (!ok)
    return std::nullopt;
  return out;
}

static const char *kInitHint = "initialisers: normal(std), normal(mean, std), uniform(lo, hi), "
                              "zeros, ones, constant(v), load(\"stored name\")";

// load("model.layers.{layer}.mlp.up_proj.weight"), load("h.{layer}.attn.c_attn.weight",
// part = 0, parts = 3): the parameter is a stored tensor of the weights the run starts from.
std::optional<InitSpec> Sema::evalLoadInit(const ast::Expr &expr, int layer) {
  InitSpec spec;
  spec.kind = InitSpec::Load;
  if (expr.operands.empty() || !expr.keys[0].empty() ||
      expr.operands[0]->kind != ast::ExprKind::String) {
    error(expr.loc, "load takes the stored tensor's name first, as a string",
          "load(\"model.layers.{layer}.self_attn.q_proj.weight\")");
    return std::nullopt;
  }
  // `{layer}` is the index of the repeated layer; nothing else is substituted.
  const std::string &pattern = expr.operands[0]->text;
  for (size_t at = 0; at < pattern.size();) {
    size_t open = pattern.find('{', at);
    if (open == std::string::npos) {
      spec.source += pattern.substr(at);
      break;
    }
    spec.source += pattern.substr(at, open - at);
    size_t close = pattern.find('}', open);
    std::string field =
        close == std::string::npos ? "" : pattern.substr(open + 1, close - open - 1);
    if (field != "layer") {
      error(expr.operands[0]->loc,
            "'{" + field + (close == std::string::npos ? "" : "}") +
                "' in a stored name: only {layer} is replaced (by the repeated layer's index)");
      return std::nullopt;
    }
    if (layer < 0) {
      error(expr.operands[0]->loc, "'{layer}' names the repeated layer's index, but this "
                                   "parameter is not inside 'repeat'");
      return std::nullopt;
    }
    spec.source += std::to_string(layer);
    at = close + 1;
  }
  if (spec.source.empty()) {
    error(expr.operands[0]->loc, "the stored tensor's name is empty");
    return std::nullopt;
  }
  std::map<std::string, int64_t> named;
  for (size_t i = 1; i < expr.operands.size(); ++i) {
    const std::string &key = expr.keys[i];
    if (key != "part" && key != "parts" && key != "axis" && key != "rows") {
      error(key.empty() ? expr.operands[i]->loc : expr.keyLocs[i],
            key.empty() ? "load takes one name; its other arguments are named"
                        : "'load' has no argument '" + key + "'",
            "load(\"name\", part = 0, parts = 3, axis = -1): the first of three equal parts "
            "along the last dim; load(\"name\", rows = seq): the first seq entries of its "
            "first dim");
      return std::nullopt;
    }
    Value v = evalConstant(*expr.operands[i]);
    if (v.isError())
      return std::nullopt;
    if (v.kind != Value::Int) {
      error(expr.operands[i]->loc, "'" + key + "' is an integer, not " + kindName(v.kind));
      return std::nullopt;
    }
    named[key] = v.i;
  }
  if (named.count("part") != named.count("parts")) {
    error(expr.loc, "'part' and 'parts' go together: part = i of parts = n equal pieces");
    return std::nullopt;
  }
  if (named.count("axis") && !named.count("parts")) {
    error(expr.loc, "'axis' says where 'parts' cuts: give part and parts too");
    return std::nullopt;
  }
  int64_t part = 0, parts = 1, axis = named.count("axis") ? named["axis"] : -1, rows = -1;
  if (named.count("parts")) {
    part = named["part"];
    parts = named["parts"];
    if (parts < 1 || part < 0 || part >= parts) {
      error(expr.loc, "part = " + std::to_string(part) + " of parts = " + std::to_string(parts) +
                          ": need 0 <= part < parts");
      return std::nullopt;
    }
  }
  if (named.count("rows")) {
    rows = named["rows"];
    if (rows < 1) {
      error(expr.loc, "rows = " + std::to_string(rows) + ": the first rows of the stored "
                      "tensor are at least one");
      return std::nullopt;
    }
    if (parts > 1 && axis == 0) {
      error(expr.loc, "rows and parts both cut the first dim: cut parts along another axis");
      return std::nullopt;
    }
  }
  if (named.count("parts") || named.count("rows"))
    spec.slice = {part, parts, axis, rows};
  return spec;
}

std::optional<InitSpec> Sema::evalInit(const ast::Expr *expr, int layer) {
  InitSpec spec;
  if (!expr)
    return spec;
  const std::string &fn = expr->text;
  const char *hint = kInitHint;
  if (expr->kind == ast::ExprKind::Call && fn == "load")
    return evalLoadInit(*expr, layer);
  if (expr->kind == ast::ExprKind::Name) {
    if (fn == "zeros")
      return InitSpec{InitSpec::Zeros, 0, 0};
    if (fn == "ones")
      return InitSpec{InitSpec::Ones, 0, 0};
    if (fn == "normal")
      return spec;
  }
  if (expr->kind != ast::ExprKind::Call) {
    error(expr->loc, "expected an initialiser", hint);
    return std::nullopt;
  }
  std::vector<double> args;
  std::map<std::string, double> named;
  std::map<std::string, SourceLoc> keyLocs;
  for (size_t i = 0; i < expr->operands.size(); ++i) {
    Value v = evalConstant(*expr->operands[i]);
    if (v.isError())
      return std::nullopt;
    if (!v.isNumber()) {
      error(expr->operands[i]->loc,
            std::string("initialiser arguments are numbers, not ") + kindName(v.kind));
      return std::nullopt;
    }
    if (expr->keys[i].empty())
      args.push_back(v.asDouble());
    else {
      named[expr->keys[i]] = v.asDouble();
      keyLocs[expr->keys[i]] = expr->keyLocs[i];
    }
  }
  auto arity = [&](size_t lo, size_t hi, std::vector<std::string> keys) {
    for (const auto &[k, _] : named)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
        error(keyLocs[k], "'" + fn + "' has no argument '" + k + "'", hint);
        return false;
      }
    size_t n = args.size() + named.size();
    if (n < lo || n > hi) {
      error(expr->loc,
            "'" + fn + "' takes " + std::to_string(lo) +
                (hi > lo ? " to " + std::to_string(hi) : "") + " argument" + (hi == 1 ? "" : "s"),
            hint);
      return false;
    }
    return true;
  };
  if (fn == "normal") {
    if (!arity(1, 2, {"mean", "std"}))
      return std::nullopt;
    spec.kind = InitSpec::Normal;
    if (args.size() == 2) {
      spec.a = args[0];
      spec.b = args[1];
    } else if (args.size() == 1) {
      spec.b = args[0];
    }
    if (named.count("mean"))
      spec.a = named["mean"];
    if (named.count("std"))
      spec.b = named["std"];
    if (spec.b < 0) {
      error(expr->loc, "a standard deviation cannot be negative");
      return std::nullopt;
    }
    return spec;
  }
  if (fn == "uniform") {
    if (!arity(2, 2, {}))
      return std::nullopt;
    if (args[0] > args[1]) {
      error(expr->loc, "uniform(lo, hi) needs lo <= hi");
      return std::nullopt;
    }
    return InitSpec{InitSpec::Uniform, args[0], args[1]};
  }
  if (fn == "constant") {
    if (!arity(1, 1, {}))
      return std::nullopt;
    return InitSpec{InitSpec::Constant, args[0], 0};
  }
  error(expr->loc, "unknown initialiser '" + fn + "'", hint);
  return std::nullopt;
}

Value Sema::coerceTo(const Value &v, const TensorType &want, SourceLoc loc, Frame &frame,
                     const std::string &what) {
  if (v.isError())
    return v;
  if (v.kind != Value::Tensor) {
    error(loc, what + " must be a tensor, not " + kindName(v.kind));
    return Value::error();
  }
  const TensorType &have = typeOf(v.tensor);
  if (have.dtype != want.dtype) {
    error(loc, what + " has element type " + dtypeName(have.dtype) + " but " +
                   dtypeName(want.dtype) + " is declared");
    return Value::error();
  }
  if (!sameDimSet(have.dims, want.dims)) {
    error(loc, what + " has shape " + formatShape(have.dims) + " but " + formatShape(want.dims) +
                   " is declared");
    return Value::error();
  }
  if (have.dims == want.dims)
    return v;
  // Same dims in another order: a transpose the user need not write.
  Op op;
  op.name = "permute";
  op.operands = {v.tensor};
  op.type = want;
  int id = emit(std::move(op), frame, loc);
  return id < 0 ? Value::error() : Value::ofTensor(id);
}

Value Sema::elementwise(const std::string &opName, const Value &a, const Value &b, SourceLoc loc,
                        Frame &frame) {
  if (a.isError() || b.isError())
    return Value::error();
  static const std::set<std::string> kComparisons = {"lt", "le", "gt", "ge", "eq", "ne"};
  bool compares = kComparisons.count(opName) > 0;
  auto operandOf = [&](const Value &x, DType dtype) -> int {
    if (x.kind == Value::Tensor)
      return x.tensor;
    if (x.isNumber())
      return scalarConstant(x.asDouble(), dtype, loc, frame);
    return -1;
  };
  const Value &t = a.kind == Value::Tensor ? a : b;
  if ((a.kind != Value::Tensor && !a.isNumber()) || (b.kind != Value::Tensor && !b.isNumber())) {
    error(loc, "cannot combine " + std::string(kindName(a.kind)) + " and " + kindName(b.kind) +
                   (compares ? " with a comparison" : " with an arithmetic operator"));
    return Value::error();
  }
  DType dtype = typeOf(t.tensor).dtype;
  int x = operandOf(a, dtype), y = operandOf(b, dtype);
  if (x < 0 || y < 0)
    return Value::error();
  const TensorType &tx = typeOf(x), &ty = typeOf(y);
  if (tx.dtype != ty.dtype || !isFloat(tx.dtype)) {
    error(loc, std::string(compares ? "comparisons need" : "arithmetic needs") +
                   " floating-point tensors of one type, not " + dtypeName(tx.dtype) + " and " +
                   dtypeName(ty.dtype));
    return Value::error();
  }
  ShapeResult r = broadcastShapes(tx.dims, ty.dims);
  if (!r.ok()) {
    error(loc, "cannot " + (compares ? std::string("compare") : opName) + " " +
                   formatShape(tx.dims) + " and " + formatShape(ty.dims) + ": " + r.error);
    return Value::error();
  }
  Op op;
  op.name = opName;
  op.operands = {x, y};
  op.type = {tx.dtype, r.shape};
  int id = emit(std::move(op), frame, loc);
  return id < 0 ? Value::error() : Value::ofTensor(id);
}

std::string Sema::closestDim(const std::string &name) {
  if (!wantHints())
    return "";
  std::vector<std::string> names;
  for (const auto &entry : dims_)
    names.push_back(entry.first);
  return closestMatch(name, names);
}

std::optional<NamedDim> Sema::dimNamed(const ast::Expr &expr) {
  if (expr.kind != ast::ExprKind::Name) {
    error(expr.loc, "expected a dim name");
    return std::nullopt;
  }
  auto it = dims_.find(expr.text);
  if (it != dims_.end())
    return it->second;
  // A dim whose own definition is erroneous was reported there, once.
  if (dimDefinitions_.count(expr.text))
    return std::nullopt;
  std::string guess = closestDim(expr.text);
  error(expr.loc, "unknown dim '" + expr.text + "'",
        guess.empty() ? "" : "did you mean '" + guess + "'?");
  return std::nullopt;
}

Value Sema::callBuiltin(const ast::Expr &call, Frame &frame) {
  const std::string &fn = call.text;
  if (std::find(kBuiltins.begin(), kBuiltins.end(), fn) == kBuiltins.end()) {
    std::string guess;
    if (wantHints()) {
      std::vector<std::string> names = kBuiltins;
      for (const auto &entry : blocks_)
        names.push_back(entry.first);
      guess = closestMatch(fn, names);
    }
    error(call.loc, "unknown op or block '" + fn + "'",
          guess.empty() ? "" : "did you mean '" + guess + "'?");
    return Value::error();
  }
  CallArgs args;
  for (size_t i = 0; i < call.operands.size(); ++i) {
    if (call.keys[i].empty()) {
      if (!args.keyword.empty()) {
        error(call.operands[i]->loc, "positional argument after a keyword argument");
        return Value::error();
      }
      args.positional.push_back(call.operands[i].get());
    } else if (!args.keyword.insert({call.keys[i], call.operands[i].get()}).second) {
      error(call.keyLocs[i], "argument '" + call.keys[i] + "' is given twice");
      return Value::error();
    } else {
      args.keywordLoc[call.keys[i]] = call.keyLocs[i];
    }
  }
  // Checks the argument count and keywords against a signature.
  auto signature = [&](size_t minPos, size_t maxPos, std::vector<std::string> keys) {
    for (const auto &[k, e] : args.keyword)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
        std::string guess = closestMatch(k, keys);
        error(args.keywordLoc[k], "'" + fn + "' has no argument '" + k + "'",
              guess.empty() ? "" : "did you mean '" + guess + "'?");
        return false;
      }
    size_t n = args.positional.size();
    if (n < minPos || n > maxPos) {
      error(call.loc,
            "'" + fn + "' takes " +
                (minPos == maxPos ? std::to_string(minPos)
                                  : std::to_string(minPos) + " to " + std::to_string(maxPos)) +
                " positional argument" + (maxPos == 1 ? "" : "s") + ", not " + std::to_string(n));
      return false;
    }
    return true;
  };
  // Each positional argument is evaluated at most once: evaluation emits ops.
  std::vector<std::optional<Value>> evaluated(args.positional.size());
  auto valueAt = [&](size_t i) -> const Value & {
    if (!evaluated[i])
      evaluated[i] = evalTensorExpr(*args.positional[i], frame);
    return *evaluated[i];
  };
  auto tensor = [&](size_t i, bool wantFloat = true) -> int {
    const Value &v = valueAt(i);
    if (v.isError())
      return -1;
    if (v.kind != Value::Tensor) {
      error(args.positional[i]->loc, "argument " + std::to_string(i + 1) + " of '" + fn +
                                         "' must be a tensor, not " + kindName(v.kind));
      return -1;
    }
    if (wantFloat != isFloat(typeOf(v.tensor).dtype)) {
      error(args.positional[i]->loc, "argument " + std::to_string(i + 1) + " of '" + fn +
                                         "' must be " +
                                         (wantFloat ? "floating-point" : "integer (i32)") +
                                         ", not " + dtypeName(typeOf(v.tensor).dtype));
      return -1;
    }
    return v.tensor;
  };
  // A number in [lo, hi], or in (lo, hi] when `aboveLo` (a scale of 0 is not a scale).
  auto number = [&](const ast::Expr *e, double fallback, double lo, double hi, bool &ok,
                    bool aboveLo = false) -> double {
    if (!e)
      return fallback;
    Value v = evalConstant(*e);
    if (v.isError()) {
      ok = false;
      return fallback;
    }
    if (!v.isNumber() || v.asDouble() < lo || (aboveLo && v.asDouble() == lo) ||
        v.asDouble() > hi) {
      error(e->loc, std::string("expected a number in ") + (aboveLo ? "(" : "[") +
                        formatNumber(lo) + ", " + formatNumber(hi) + "]");
      ok = false;
      return fallback;
    }
    return v.asDouble();
  };
  auto keyword = [&](const char *key) -> const ast::Expr * {
    auto it = args.keyword.find(key);
    return it == args.keyword.end() ? nullptr : it->second;
  };
  auto dimList = [&](const ast::Expr &e, std::vector<std::string> &out) {
    std::vector<const ast::Expr *> items;
    if (e.kind == ast::ExprKind::List || e.kind == ast::ExprKind::Tuple)
      for (const auto &x : e.operands)
        items.push_back(x.get());
    else
      items.push_back(&e);
    bool ok = true;
    for (const ast::Expr *x : items) {
      auto d = dimNamed(*x);
      ok &= d.has_value();
      if (d)
        out.push_back(d->name);
    }
    return ok;
  };
  auto finish = [&](const ShapeResult &r, Op op, const std::vector<int> &operands) -> Value {
    if (!r.ok()) {
      error(call.loc, "'" + fn + "': " + r.error);
      return Value::error();
    }
    op.name = fn;
    op.operands = operands;
    op.type.dims = r.shape;
    if (op.type.dtype == DType::F32 && !operands.empty())
      op.type.dtype = typeOf(operands[0]).dtype;
    int id = emit(std::move(op), frame, call.loc);
    return id < 0 ? Value::error() : Value::ofTensor(id);
  };

  if (std::find(kUnaryOps.begin(), kUnaryOps.end(), fn) != kUnaryOps.end()) {
    if (!signature(1, 1, {}))
      return Value::error();
    const Value &v = valueAt(0);
    if (v.isNumber()) // `sqrt(2 * layers)` in a tensor expression is still a number.
      return scalarCall(call, {v});
    if (v.isError())
      return v;
    int x = tensor(0);
    if (x < 0)
      return Value::error();
    return finish({typeOf(x).dims, ""}, Op{}, {x});
  }
  if (fn == "pow") {
    if (!signature(2, 2, {}))
      return Value::error();
    const Value &base = valueAt(0), &exponent = valueAt(1);
    if (base.isError() || exponent.isError())
      return Value::error();
    if (!exponent.isNumber()) {
      error(args.positional[1]->loc,
            std::string("the exponent of 'pow' is a number, not ") + kindName(exponent.kind),
            exponent.kind == Value::Tensor ? "for a tensor exponent write exp(y * log(x))" : "");
      return Value::error();
    }
    if (base.isNumber())
      return Value::ofFloat(std::pow(base.asDouble(), exponent.asDouble()));
    int x = tensor(0);
    if (x < 0)
      return Value::error();
    Op op;
    op.attrs.push_back({"exponent", exponent.asDouble()});
    return finish({typeOf(x).dims, ""}, std::move(op), {x});
  }
  if (fn == "where") {
    if (!signature(3, 3, {}))
      return Value::error();
    int cond = tensor(0);
    const Value &a = valueAt(1), &b = valueAt(2);
    if (cond < 0 || a.isError() || b.isError())
      return Value::error();
    DType dtype = typeOf(cond).dtype;
    std::vector<int> operands = {cond};
    for (size_t i : {1, 2}) {
      const Value &v = valueAt(i);
      if (v.isNumber()) {
        operands.push_back(scalarConstant(v.asDouble(), dtype, args.positional[i]->loc, frame));
        continue;
      }
      int t = tensor(i);
      if (t < 0)
        return Value::error();
      if (typeOf(t).dtype != dtype) {
        error(args.positional[i]->loc, std::string("'where' selects between tensors of the "
                                                   "condition's element type, not ") +
                                           dtypeName(typeOf(t).dtype) + " and " + dtypeName(dtype));
        return Value::error();
      }
      operands.push_back(t);
    }
    if (operands[1] < 0 || operands[2] < 0)
      return Value::error();
    return finish(whereShape(typeOf(cond).dims, typeOf(operands[1]).dims, typeOf(operands[2]).dims),
                  Op{}, operands);
  }
  if (fn == "positions") {
    if (!signature(1, 1, {}))
      return Value::error();
    auto dim = dimNamed(*args.positional[0]);
    if (!dim)
      return Value::error();
    return finish({{*dim}, ""}, Op{}, {});
  }
  if (fn == "rename") {
    // rename(x, seq = seq_k, ...): the keywords are dims of x, their values the new names.
    if (args.positional.size() != 1) {
      error(call.loc,
            "'rename' takes 1 positional argument, not " + std::to_string(args.positional.size()),
            "rename(x, seq = seq_k)");
      return Value::error();
    }
    int x = tensor(0);
    if (x < 0)
      return Value::error();
    if (args.keyword.empty()) {
      error(call.loc, "'rename' names no dim to rename", "rename(x, seq = seq_k)");
      return Value::error();
    }
    const NamedShape &shape = typeOf(x).dims;
    std::vector<std::pair<std::string, NamedDim>> renames;
    bool ok = true;
    for (const auto &[from, to] : args.keyword) {
      if (findDim(shape, from) < 0) {
        std::vector<std::string> names;
        for (const NamedDim &d : shape)
          names.push_back(d.name);
        std::string guess = closestMatch(from, names);
        error(args.keywordLoc[from], "'" + from + "' is not a dim of " + formatShape(shape),
              guess.empty() ? "" : "did you mean '" + guess + "'?");
        ok = false;
        continue;
      }
      auto target = dimNamed(*to);
      if (!target) {
        ok = false;
        continue;
      }
      int64_t size = shape[findDim(shape, from)].size;
      if (target->size != size) {
        error(to->loc,
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
    return finish(renameShape(shape, renames), Op{}, {x});
  }
  if (fn == "softmax" || fn == "sum" || fn == "mean") {
    if (!signature(2, 2, {}))
      return Value::error();
    int x = tensor(0);
    std::vector<std::string> dims;
    if (!dimList(*args.positional[1], dims) || x < 0)
      return Value::error();
    if (fn == "softmax") {
      if (dims.size() != 1) {
        error(args.positional[1]->loc, "softmax normalises over one dim");
        return Value::error();
      }
      ShapeResult r = reduceShape(typeOf(x).dims, dims);
      Op op;
      op.attrs.push_back({"dim", dims[0]});
      return finish(r.ok() ? ShapeResult{typeOf(x).dims, ""} : r, std::move(op), {x});
    }
    Op op;
    op.attrs.push_back({"dims", dims});
    return finish(reduceShape(typeOf(x).dims, dims), std::move(op), {x});
  }
  if (fn == "top_k") {
    if (!signature(3, 3, {}))
      return Value::error();
    int x = tensor(0);
    std::vector<std::string> dims;
    if (!dimList(*args.positional[1], dims) || x < 0)
      return Value::error();
    if (dims.size() != 1) {
      error(args.positional[1]->loc, "top_k chooses along one dim");
      return Value::error();
    }
    int at = findDim(typeOf(x).dims, dims[0]);
    if (at < 0) {
      error(args.positional[1]->loc,
            "'" + dims[0] + "' is not a dim of " + formatShape(typeOf(x).dims));
      return Value::error();
    }
    int64_t size = typeOf(x).dims[at].size;
    Value k = evalConstant(*args.positional[2]);
    if (k.isError())
      return Value::error();
    if (k.kind != Value::Int || k.i < 1 || k.i > size) {
      error(args.positional[2]->loc,
            "top_k chooses k of the " + std::to_string(size) + " entries along '" + dims[0] +
                "'; k must be a whole number from 1 to " + std::to_string(size) + ", not " +
                (k.kind == Value::Int ? std::to_string(k.i) : std::string(kindName(k.kind))));
      return Value::error();
    }
    Op op;
    op.attrs.push_back({"dim", dims[0]});
    op.attrs.push_back({"k", k.i});
    return finish({typeOf(x).dims, ""}, std::move(op), {x});
  }
  if (fn == "add_loss") {
    error(call.loc, "add_loss is a statement and has no value",
          "write add_loss(term) on a line of its own");
    return Value::error();
  }
  if (fn == "layernorm" || fn == "rmsnorm") {
    bool isLayer = fn == "layernorm";
    if (!signature(isLayer ? 3 : 2, isLayer ? 3 : 2, {"eps"}))
      return Value::error();
    bool ok = true;
    double eps = number(keyword("eps"), isLayer ? 1e-5 : 1e-6, 0.0, 1.0, ok);
    int x = tensor(0), g = tensor(1), b = isLayer ? tensor(2) : 0;
    if (x < 0 || g < 0 || b < 0 || !ok)
      return Value::error();
    if (isLayer && !(typeOf(b).dims == typeOf(g).dims)) {
      error(args.positional[2]->loc, "the bias " + formatShape(typeOf(b).dims) +
                                         " must have the scale's shape " +
                                         formatShape(typeOf(g).dims));
      return Value::error();
    }
    Op op;
    op.attrs.push_back({"eps", eps});
    std::vector<int> operands = {x, g};
    if (isLayer)
      operands.push_back(b);
    return finish(normShape(typeOf(x).dims, typeOf(g).dims), std::move(op), operands);
  }
  if (fn == "embedding") {
    if (!signature(2, 2, {}))
      return Value::error();
    int table = tensor(0), ids = tensor(1, false);
    if (table < 0 || ids < 0)
      return Value::error();
    return finish(embeddingShape(typeOf(table).dims, typeOf(ids).dims), Op{}, {table, ids});
  }
  if (fn == "cross_entropy") {
    if (!signature(2, 2, {}))
      return Value::error();
    int logits = tensor(0), targets = tensor(1, false);
    if (logits < 0 || targets < 0)
      return Value::error();
    std::string cls;
    ShapeResult r = crossEntropyShape(typeOf(logits).dims, typeOf(targets).dims, &cls);
    Op op;
    op.attrs.push_back({"dim", cls});
    return finish(r, std::move(op), {logits, targets});
  }
  if (fn == "attention") {
    if (!signature(3, 3, {"causal", "scale", "window"}))
      return Value::error();
    int q = tensor(0), k = tensor(1), v = tensor(2);
    if (q < 0 || k < 0 || v < 0)
      return Value::error();
    bool causal = true;
    if (const ast::Expr *e = keyword("causal")) {
      Value c = evalConstant(*e);
      if (c.isError())
        return c;
      if (c.kind != Value::Bool) {
        error(e->loc, "causal is true or false");
        return Value::error();
      }
      causal = c.b;
    }
    ShapeResult r = attentionShape(typeOf(q).dims, typeOf(k).dims, typeOf(v).dims);
    bool ok = true;
    double headSize = r.ok() ? static_cast<double>(typeOf(q).dims.back().size) : 1.0;
    double scale = number(keyword("scale"), 1.0 / std::sqrt(headSize), 0.0, 1e6, ok,
                          /*aboveLo=*/true);
    if (!ok)
      return Value::error();
    // A sliding window: query i sees keys i - window + 1 .. i.
    int64_t window = 0;
    if (const ast::Expr *e = keyword("window")) {
      Value w = evalConstant(*e);
      if (w.isError())
        return w;
      if (w.kind != Value::Int || w.i <= 0) {
        error(e->loc, "window is a positive whole number of positions");
        return Value::error();
      }
      if (!causal) {
        error(e->loc, "a sliding window needs causal = true: it keeps the last `window` "
                      "positions up to the query");
        return Value::error();
      }
      window = w.i;
    }
    Op op;
    op.attrs.push_back({"causal", causal});
    op.attrs.push_back({"scale", scale});
    op.attrs.push_back({"window", window});
    return finish(r, std::move(op), {q, k, v});
  }
  if (fn == "rope") {
    const std::vector<std::string> scalingKeys = {"scaling_factor", "low_freq_factor",
                                                  "high_freq_factor", "original_context"};
    if (!signature(1, 1, {"theta", "scaling_factor", "low_freq_factor", "high_freq_factor",
                          "original_context"}))
      return Value::error();
    bool ok = true;
    double theta = number(keyword("theta"), 10000.0, 1.0, 1e12, ok);
    // Llama 3.1's frequency scaling: all four numbers or none.
    int given = 0;
    for (const std::string &k : scalingKeys)
      given += keyword(k.c_str()) != nullptr;
    if (given != 0 && given != 4) {
      error(call.loc, "rope's frequency scaling takes scaling_factor, low_freq_factor, "
                      "high_freq_factor and original_context together",
            "rope(x, theta = 500000, scaling_factor = 8, low_freq_factor = 1, "
            "high_freq_factor = 4, original_context = 8192): Llama 3.1's rope_scaling");
      return Value::error();
    }
    double factor = number(keyword("scaling_factor"), 0.0, 1e-6, 1e6, ok);
    double low = number(keyword("low_freq_factor"), 1.0, 1e-6, 1e6, ok);
    double high = number(keyword("high_freq_factor"), 4.0, 1e-6, 1e6, ok);
    double context = number(keyword("original_context"), 8192.0, 1.0, 1e12, ok);
    if (ok && given && !(high > low)) {
      error(keyword("high_freq_factor")->loc, "high_freq_factor must exceed low_freq_factor");
      ok = false;
    }
    int x = tensor(0);
    if (x < 0 || !ok)
      return Value::error();
    Op op;
    op.attrs.push_back({"theta", theta});
    op.attrs.push_back({"scaling_factor", given ? factor : 0.0});
    op.attrs.push_back({"low_freq_factor", low});
    op.attrs.push_back({"high_freq_factor", high});
    op.attrs.push_back({"original_context", context});
    return finish(ropeShape(typeOf(x).dims), std::move(op), {x});
  }
  if (fn == "dropout") {
    if (!signature(1, 2, {"rate"}))
      return Value::error();
    const ast::Expr *rateExpr = args.positional.size() == 2 ? args.positional[1] : keyword("rate");
    if (!rateExpr) {
      error(call.loc, "dropout needs a rate: dropout(x, 0.1)");
      return Value::error();
    }
    bool ok = true;
    double rate = number(rateExpr, 0.0, 0.0, 0.999999, ok);
    int x = tensor(0);
    if (x < 0 || !ok)
      return Value::error();
    Op op;
    op.attrs.push_back({"rate", rate});
    return finish({typeOf(x).dims, ""}, std::move(op), {x});
  }
  if (fn == "split") {
    if (!signature(3, 3, {}))
      return Value::error();
    int x = tensor(0);
    auto dim = dimNamed(*args.positional[1]);
    std::vector<std::string> parts;
    if (!dimList(*args.positional[2], parts) || x < 0 || !dim)
      return Value::error();
    NamedShape partDims;
    for (const std::string &p : parts)
      partDims.push_back(dims_[p]);
    Op op;
    op.attrs.push_back({"dim", dim->name});
    return finish(splitShape(typeOf(x).dims, dim->name, partDims), std::move(op), {x});
  }
  if (fn == "merge") {
    if (!signature(3, 3, {}))
      return Value::error();
    int x = tensor(0);
    std::vector<std::string> parts;
    bool ok = dimList(*args.positional[1], parts);
    auto into = dimNamed(*args.positional[2]);
    if (!ok || x < 0 || !into)
      return Value::error();
    Op op;
    op.attrs.push_back({"dims", parts});
    return finish(mergeShape(typeOf(x).dims, parts, *into), std::move(op), {x});
  }
  if (fn == "permute") {
    if (!signature(2, 2, {}))
      return Value::error();
    int x = tensor(0);
    std::vector<std::string> order;
    if (!dimList(*args.positional[1], order) || x < 0)
      return Value::error();
    return finish(permuteShape(typeOf(x).dims, order), Op{}, {x});
  }
  // contract(a, b, over = [dims])
  if (!signature(2, 2, {"over"}))
    return Value::error();
  int a = tensor(0), b = tensor(1);
  std::vector<std::string> over;
  if (const ast::Expr *e = keyword("over"))
    if (!dimList(*e, over))
      return Value::error();
  if (a < 0 || b < 0)
    return Value::error();
  ShapeResult r = contractShapes(typeOf(a).dims, typeOf(b).dims, over);
  if (over.empty())
    for (const NamedDim &d : typeOf(a).dims)
      if (findDim(typeOf(b).dims, d.name) >= 0)
        over.push_back(d.name);
  Op op;
  op.attrs.push_back({"sum", over});
  return finish(r, std::move(op), {a, b});
}

Value Sema::callBlock(const ast::Block &block, const ast::Expr &call, std::vector<Value> args,
                      Frame &caller) {
  for (const ast::Block *active : activeBlocks_)
    if (active == &block) {
      error(call.loc, "block '" + block.name.name + "' calls itself",
            "blocks are instantiated, not called at run time; use repeat for a stack of layers");
      return Value::error();
    }
  if (activeBlocks_.size() >= 64) {
    error(call.loc, "blocks nested more than 64 deep");
    return Value::error();
  }
  for (const std::string &key : call.keys)
    if (!key.empty()) {
      error(call.loc, "block arguments are positional");
      return Value::error();
    }
  if (args.size() != block.args.size()) {
    if (error(call.loc, "block '" + block.name.name + "' takes " +
                            std::to_string(block.args.size()) + " argument" +
                            (block.args.size() == 1 ? "" : "s") + ", not " +
                            std::to_string(args.size())))
      note(block.name.loc, "'" + block.name.name + "' is declared here");
    return Value::error();
  }
  unsigned errorsBefore = diags_.errorCount();
  Frame frame;
  frame.block = &block;
  frame.layer = caller.layer;
  frame.callers.push_back(call.loc);
  frame.callers.insert(frame.callers.end(), caller.callers.begin(), caller.callers.end());
  std::string scope = joinPath(caller.prefix, block.name.name);
  int &count = blockCallCounts_[scope];
  frame.prefix = caller.prefix;
  frame.prefix.push_back(count == 0 ? block.name.name
                                    : block.name.name + "_" + std::to_string(count));
  ++count;

  bool argsOk = true;
  for (size_t i = 0; i < args.size(); ++i) {
    const ast::TypedName &decl = block.args[i];
    auto type = resolveType(decl.type);
    Value v = type ? coerceTo(args[i], *type, call.operands[i]->loc, caller,
                              "argument '" + decl.name.name + "' of '" + block.name.name + "'")
                   : Value::error();
    argsOk &= !v.isError();
    if (frame.vars.count(decl.name.name))
      error(decl.name.loc, "argument '" + decl.name.name + "' is declared twice");
    frame.vars[decl.name.name] = v;
  }
  Value result = Value::error();
  auto resultType = resolveType(block.result);
  if (argsOk) {
    activeBlocks_.push_back(&block);
    execBody(block.body, frame);
    activeBlocks_.pop_back();
    if (elaborationAborted_) // The body stopped early; its missing return says nothing.
      return Value::error();
    if (!frame.returned)
      error(block.name.loc, "block '" + block.name.name + "' ends without 'return'");
    else if (resultType)
      result = coerceTo(frame.result, *resultType, block.result.loc, frame,
                        "the result of '" + block.name.name + "'");
  }
  if (diags_.errorCount() > errorsBefore && !elaborationAborted_)
    note(call.loc, "in block '" + block.name.name + "' called here");
  return result;
}

Value Sema::evalTensorExpr(const ast::Expr &expr, Frame &frame) {
  if (elaborationAborted_)
    return Value::error();
  switch (expr.kind) {
  case ast::ExprKind::Number:
    return parseNumber(expr);
  case ast::ExprKind::String:
    return Value::ofString(expr.text);
  case ast::ExprKind::Name: {
    auto it = frame.vars.find(expr.text);
    if (it != frame.vars.end())
      return it->second;
    if (definitions_.count(expr.text) || expr.text == "true" || expr.text == "false" ||
        expr.text == "batch" || expr.text.empty())
      return lookupDefinition(expr.text, expr.loc);
    std::string guess;
    if (wantHints()) {
      std::vector<std::string> names = knownNames();
      for (const auto &entry : frame.vars)
        names.push_back(entry.first);
      guess = closestMatch(expr.text, names);
    }
    error(expr.loc, "unknown name '" + expr.text + "'",
          guess.empty() ? "" : "did you mean '" + guess + "'?");
    return Value::error();
  }
  case ast::ExprKind::Neg: {
    Value v = evalTensorExpr(*expr.operands[0], frame);
    if (v.kind == Value::Tensor) {
      if (!isFloat(typeOf(v.tensor).dtype)) {
        error(expr.loc, "cannot negate an integer tensor");
        return Value::error();
      }
      Op op;
      op.name = "neg";
      op.operands = {v.tensor};
      op.type = typeOf(v.tensor);
      int id = emit(std::move(op), frame, expr.loc);
      return id < 0 ? Value::error() : Value::ofTensor(id);
    }
    if (v.kind == Value::Int) {
      if (v.i == std::numeric_limits<int64_t>::min()) { // -v.i would overflow.
        error(expr.loc, "integer overflow in '-'");
        return Value::error();
      }
      return Value::ofInt(-v.i);
    }
    if (v.kind == Value::Float)
      return Value::ofFloat(-v.f);
    if (!v.isError())
      error(expr.loc, std::string("cannot negate ") + kindName(v.kind));
    return Value::error();
  }
  case ast::ExprKind::Binary: {
    Value a = evalTensorExpr(*expr.operands[0], frame);
    Value b = evalTensorExpr(*expr.operands[1], frame);
    if (a.isError() || b.isError())
      return Value::error();
    const std::string &op = expr.text;
    if (a.kind != Value::Tensor && b.kind != Value::Tensor)
      return arithmetic(op, a, b, expr.loc);
    if (op == "@") {
      if (a.kind != Value::Tensor || b.kind != Value::Tensor) {
        error(expr.loc, "'@' contracts two tensors; one side here is " +
                            std::string(kindName(a.kind == Value::Tensor ? b.kind : a.kind)));
        return Value::error();
      }
      const TensorType &ta = typeOf(a.tensor), &tb = typeOf(b.tensor);
      if (ta.dtype != tb.dtype || !isFloat(ta.dtype)) {
        error(expr.loc, std::string("'@' needs floating-point tensors of one type, not ") +
                            dtypeName(ta.dtype) + " and " + dtypeName(tb.dtype));
        return Value::error();
      }
      ShapeResult r = contractShapes(ta.dims, tb.dims, {});
      if (!r.ok()) {
        error(expr.loc,
              "cannot contract " + formatShape(ta.dims) + " @ " + formatShape(tb.dims) + ": " +
                  r.error,
              r.error.find("share no dim") != std::string::npos
                  ? "'@' sums over the dims both sides share; rename or split a dim first"
                  : "");
        return Value::error();
      }
      std::vector<std::string> summed;
      for (const NamedDim &d : ta.dims)
        if (findDim(tb.dims, d.name) >= 0)
          summed.push_back(d.name);
      Op o;
      o.name = "contract";
      o.operands = {a.tensor, b.tensor};
      o.type = {ta.dtype, r.shape};
      o.attrs.push_back({"sum", summed});
      int id = emit(std::move(o), frame, expr.loc);
      return id < 0 ? Value::error() : Value::ofTensor(id);
    }
    static const std::map<std::string, std::string> names = {
        {"+", "add"}, {"-", "sub"}, {"*", "mul"}, {"/", "div"}, {"<", "lt"},
        {"<=", "le"}, {">", "gt"},  {">=", "ge"}, {"==", "eq"}, {"!=", "ne"}};
    auto it = names.find(op);
    if (it == names.end()) {
      error(expr.loc, "'" + op + "' works on numbers, not tensors");
      return Value::error();
    }
    return elementwise(it->second, a, b, expr.loc, frame);
  }
  case ast::ExprKind::Tuple:
  case ast::ExprKind::List: {
    Value v;
    v.kind = expr.kind == ast::ExprKind::Tuple ? Value::Tuple : Value::List;
    for (const auto &e : expr.operands)
      v.elems.push_back(evalTensorExpr(*e, frame));
    return v;
  }
  case ast::ExprKind::Call: {
    auto block = blocks_.find(expr.text);
    if (block == blocks_.end())
      return callBuiltin(expr, frame);
    std::vector<Value> args;
    for (const auto &e : expr.operands)
      args.push_back(evalTensorExpr(*e, frame));
    for (const Value &a : args)
      if (a.isError())
        return Value::error();
    return callBlock(*block->second, expr, std::move(args), frame);
  }
  }
  return Value::error();
}

void Sema::execCallStatement(const ast::Expr &expr, Frame &frame) {
  if (expr.text != "add_loss") {
    error(expr.loc, "a call of '" + expr.text + "' on its own does nothing",
          "bind its result to a name: y = " + expr.text +
              "(...); only add_loss(term) is a statement");
    return;
  }
  if (expr.operands.size() != 1 || !expr.keys[0].empty()) {
    error(expr.loc, "'add_loss' takes one positional argument, the scalar to add to the loss");
    return;
  }
  Value v = evalTensorExpr(*expr.operands[0], frame);
  if (v.isError())
    return;
  if (v.kind != Value::Tensor || !typeOf(v.tensor).dims.empty() ||
      !isFloat(typeOf(v.tensor).dtype)) {
    error(expr.operands[0]->loc,
          std::string("add_loss takes a scalar float tensor, not ") +
              (v.kind == Value::Tensor ? "a tensor of shape " + formatShape(typeOf(v.tensor).dims)
                                       : std::string(kindName(v.kind))),
          v.kind == Value::Tensor ? "reduce it first, e.g. mean(x, [batch, seq])" : "");
    return;
  }
  lossTerms_.push_back({v.tensor, expr.loc});
}

void Sema::execBody(const std::vector<ast::StmtPtr> &body, Frame &frame) {
  for (const ast::StmtPtr &stmt : body) {
    if (elaborationAborted_)
      return;
    if (frame.returned) {
      error(stmt->loc, "statement after 'return' is never run");
      return;
    }
    switch (stmt->kind) {
    case ast::StmtKind::Param: {
      const std::string &name = stmt->name.name;
      if (frame.vars.count(name)) {
        error(stmt->name.loc, "'" + name + "' is already defined in this block");
        break;
      }
      auto type = resolveType(stmt->type);
      auto init = evalInit(stmt->value.get(), frame.layer);
      if (!type || !init) {
        frame.vars[name] = Value::error();
        break;
      }
      if (!isFloat(type->dtype)) {
        error(stmt->type.loc, "parameters are floating-point tensors");
        frame.vars[name] = Value::error();
        break;
      }
      Op op;
      op.name = "param";
      op.type = *type;
      std::string path = joinPath(frame.prefix, name);
      op.attrs.push_back({"name", path});
      op.attrs.push_back({"init", *init});
      int id = emit(std::move(op), frame, stmt->name.loc);
      frame.vars[name] = id < 0 ? Value::error() : Value::ofTensor(id);
      break;
    }
    case ast::StmtKind::Assign: {
      const std::string &name = stmt->name.name;
      if (definitions_.count(name) || name == "batch") {
        error(stmt->name.loc,
              "'" + name + "' is a dim or constant of the model; choose another name");
        break;
      }
      frame.vars[name] = evalTensorExpr(*stmt->value, frame);
      break;
    }
    case ast::StmtKind::Return:
      frame.result = evalTensorExpr(*stmt->value, frame);
      frame.returned = true;
      break;
    case ast::StmtKind::Expr:
      execCallStatement(*stmt->value, frame);
      break;
    case ast::StmtKind::Repeat: {
      auto count = evalInt(*stmt->value, "a repeat count", 1);
      if (!count)
        break;
      if (*count > options_.maxRepeat) {
        error(stmt->value->loc, "repeat count " + std::to_string(*count) + " exceeds " +
                                    std::to_string(options_.maxRepeat));
        break;
      }
      bool outermost = !frame.block && frame.layer < 0;
      if (outermost) {
        if (program_.layers > 0)
          error(stmt->loc, "forward has a second 'repeat'",
                "put every repeated layer in one repeat; it is what pipeline stages split");
        program_.layers = *count;
        program_.layersLoc = stmt->value->loc;
      }
      std::string segment = stmt->value->kind == ast::ExprKind::Name ? stmt->value->text : "repeat";
      int savedLayer = frame.layer;
      for (int64_t i = 0; i < *count && !elaborationAborted_; ++i) {
        unsigned errorsBefore = diags_.errorCount();
        frame.prefix.push_back(segment + "." + std::to_string(i));
        if (outermost)
          frame.layer = static_cast<int>(i);
        execBody(stmt->body, frame);
        frame.prefix.pop_back();
        if (frame.returned) {
          error(stmt->loc, "'return' inside 'repeat'");
          break;
        }
        // Every iteration runs the same text: one failing iteration says all there is.
        if (diags_.errorCount() > errorsBefore)
          break;
      }
      frame.layer = savedLayer;
      break;
    }
    }
  }
}

namespace {

/// a + b and a x b, held at `cap` (the count only matters up to the limit).
uint64_t addCapped(uint64_t a, uint64_t b, uint64_t cap) { return std::min(cap, a + b); }
uint64_t mulCapped(uint64_t a, uint64_t b, uint64_t cap) {
  return b != 0 && a > cap / b ? cap : std::min(cap, a * b);
}

} // namespace

uint64_t Sema::expansion(const ast::Expr &expr) {
  uint64_t cap = options_.maxOps + 1;
  uint64_t n = 0;
  if (expr.kind == ast::ExprKind::Call) {
    auto block = blocks_.find(expr.text);
    // Self-calls and blocks nested past elaboration's limit of 64 are errors it reports; a
    // chain of a hundred thousand blocks must not exhaust the stack here first.
    if (block != blocks_.end() && !expanding_.count(block->second) && expanding_.size() < 64) {
      auto memo = blockExpansion_.find(block->second);
      if (memo == blockExpansion_.end()) {
        expanding_.insert(block->second);
        uint64_t body = expansion(block->second->body);
        expanding_.erase(block->second);
        memo = blockExpansion_.insert({block->second, body}).first;
      }
      n = memo->second;
    }
  }
  for (const ast::ExprPtr &operand : expr.operands)
    n = addCapped(n, expansion(*operand), cap);
  return n;
}

uint64_t Sema::expansion(const std::vector<ast::StmtPtr> &body) {
  uint64_t cap = options_.maxOps + 1;
  uint64_t total = 0;
  for (const ast::StmtPtr &stmt : body) {
    uint64_t n = 1;
    if (stmt->kind != ast::StmtKind::Repeat) {
      if (stmt->value)
        n = addCapped(n, expansion(*stmt->value), cap);
      total = addCapped(total, n, cap);
      continue;
    }
    // A count elaboration would refuse is reported there, in source order.
    quiet_ = true;
    Value count = evalConstant(*stmt->value);
    quiet_ = false;
    uint64_t inner = expansion(stmt->body);
    if (count.kind != Value::Int || count.i < 1 || count.i > options_.maxRepeat) {
      total = addCapped(total, inner, cap);
      continue;
    }
    n = mulCapped(static_cast<uint64_t>(count.i), inner, cap);
    if (n >= cap && inner < cap && !elaborationAborted_) {
      // No overflow: the count is at most maxRepeat and the body below the op limit.
      std::string all = std::to_string(static_cast<uint64_t>(count.i) * inner);
      error(stmt->value->loc,
            "this repeat runs its body " + std::to_string(count.i) +
                " times and the body expands to " + std::to_string(inner) + " statement" +
                (inner == 1 ? "" : "s") + ": " + all + " in all, more than the limit of " +
                std::to_string(options_.maxOps),
            "nested repeats and repeated block calls multiply; is a count far larger than "
            "intended?");
      elaborationAborted_ = true;
    }
    total = addCapped(total, n, cap);
  }
  return total;
}

void Sema::elaborateForward() {
  if (!model_->forward) {
    error(model_->name.loc, "model '" + model_->name.name + "' has no forward function",
          "add forward(tokens: i32[batch, seq], targets: i32[batch, seq]) -> loss { ... }");
    return;
  }
  const ast::Forward &fwd = *model_->forward;
  Frame frame;
  for (const ast::TypedName &arg : fwd.args) {
    auto type = resolveType(arg.type);
    if (frame.vars.count(arg.name.name)) {
      error(arg.name.loc, "argument '" + arg.name.name + "' is declared twice");
      continue;
    }
    if (!type) {
      frame.vars[arg.name.name] = Value::error();
      continue;
    }
    program_.forward.inputs.push_back({arg.name.name, *type, arg.name.loc});
    frame.vars[arg.name.name] =
        Value::ofTensor(static_cast<int>(program_.forward.inputs.size()) - 1);
  }
  if (fwd.result.name != "loss")
    error(fwd.result.loc, "forward returns the loss: write '-> loss'");
  // Bounded before any work: nested repeats of 96 would otherwise elaborate until the op
  // limit, seconds and a gigabyte later.
  expansion(fwd.body);
  if (elaborationAborted_)
    return;
  execBody(fwd.body, frame);
  if (elaborationAborted_)
    return;
  if (!frame.returned) {
    error(fwd.loc, "forward ends without 'return'",
          "return the loss: return cross_entropy(logits, targets)");
    return;
  }
  const Value &r = frame.result;
  if (r.isError())
    return;
  if (r.kind != Value::Tensor || !typeOf(r.tensor).dims.empty() ||
      !isFloat(typeOf(r.tensor).dtype)) {
    std::string what = r.kind == Value::Tensor
                           ? "a tensor of shape " + formatShape(typeOf(r.tensor).dims)
                           : std::string(kindName(r.kind));
    error(fwd.body.empty() ? fwd.loc : fwd.body.back()->loc,
          "forward must return a scalar loss, not " + what,
          "reduce it with cross_entropy(logits, targets)");
    return;
  }
  // The compiled model samples text from the logits of the loss (tessel generate), so the
  // loss is the cross-entropy itself, not a value computed from it.
  size_t inputs = program_.forward.inputs.size();
  if (static_cast<size_t>(r.tensor) < inputs ||
      program_.forward.ops[r.tensor - inputs].name != "cross_entropy") {
    error(fwd.body.empty() ? fwd.loc : fwd.body.back()->loc,
          "forward must return cross_entropy(logits, targets) itself",
          "text generation samples from the logits of the returned cross_entropy");
    return;
  }
  program_.forward.result = r.tensor;
  // Auxiliary terms (a mixture of experts' balancing and z-losses) join the loss after the
  // cross-entropy, in the order they were added, so every layout sums them alike.
  if (!lossTerms_.empty()) {
    if (program_.parallel.axisSize("pp") > 1) {
      error(lossTerms_.front().second, "add_loss is not supported under pipeline parallelism",
            "an auxiliary loss computed in one stage would have to reach the last; drop pp or "
            "the auxiliary loss");
      return;
    }
    Value total = Value::ofTensor(r.tensor);
    for (const auto &[term, loc] : lossTerms_) {
      total = elementwise("add", total, Value::ofTensor(term), loc, frame);
      if (total.isError())
        return;
    }
    program_.forward.result = total.tensor;
  }
  if (program_.train.tokenizer.value == "byte")
    for (const Op &op : program_.forward.ops)
      if (op.name == "embedding" && !program_.forward.typeOf(op.operands[0]).dims.empty() &&
          program_.forward.typeOf(op.operands[0]).dims[0].size < 256) {
        error(op.loc,
              "the byte tokenizer produces ids up to 255 but this table has " +
                  std::to_string(program_.forward.typeOf(op.operands[0]).dims[0].size) + " rows",
              "make the vocabulary dim at least 256");
        break;
      }
}
