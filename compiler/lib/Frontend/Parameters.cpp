//===- Parameters.cpp - The declared types and initialisers of tensors ----===//
//
// What a declaration says about a tensor before any op touches it: the element type and named
// dims of a type written in the spec (`f32[batch, seq, embed]`), and the initialiser of a
// parameter, drawn at random (`normal(0.02)`), constant (`zeros`) or loaded from stored
// weights (`load("h.{layer}.attn.c_attn.weight", part = 0, parts = 3)`).
//
//===----------------------------------------------------------------------===//

#include "SemaImpl.h"

#include <algorithm>

using namespace tessel;
using namespace tessel::detail;

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
