//===- Sema.cpp - Declarations, dims and constants ------------------------===//

#include "SemaImpl.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

using namespace tessel;
using namespace tessel::detail;

const char *tessel::initKindName(InitSpec::Kind kind) {
  switch (kind) {
  case InitSpec::Normal:
    return "normal";
  case InitSpec::Uniform:
    return "uniform";
  case InitSpec::Zeros:
    return "zeros";
  case InitSpec::Ones:
    return "ones";
  case InitSpec::Constant:
    return "constant";
  case InitSpec::Load:
    return "load";
  }
  return "?";
}

const char *tessel::detail::kindName(Value::Kind kind) {
  switch (kind) {
  case Value::Error:
    return "an invalid value";
  case Value::Int:
    return "an integer";
  case Value::Float:
    return "a number";
  case Value::Bool:
    return "a boolean";
  case Value::String:
    return "a string";
  case Value::Tensor:
    return "a tensor";
  case Value::List:
    return "a list";
  case Value::Tuple:
    return "a tuple";
  }
  return "?";
}

std::string tessel::detail::formatNumber(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

bool Sema::error(SourceLoc loc, const std::string &message, const std::string &hint) {
  if (quiet_)
    return false;
  if (!reported_.insert({loc.file, loc.line, loc.col, message}).second)
    return false;
  diags_.error(loc, message, hint);
  return true;
}

void Sema::note(SourceLoc loc, const std::string &message) {
  if (!quiet_)
    diags_.note(loc, message);
}

std::vector<std::string> Sema::knownNames() const {
  std::vector<std::string> names;
  for (const auto &entry : definitions_)
    names.push_back(entry.first);
  names.push_back("batch");
  return names;
}

bool Sema::collectDeclarations() {
  const ast::File &root = module_.root();
  for (const auto &file : module_.files) {
    bool isRoot = file.get() == &root;
    if (!isRoot) {
      for (const ast::Model &m : file->models)
        error(m.name.loc, "an imported file may only declare blocks; model '" + m.name.name +
                              "' belongs in the file given to tessel");
      for (const ast::Section &s : file->sections)
        error(s.kind.loc, "an imported file may only declare blocks; move this '" + s.kind.name +
                              "' section to the main file");
    }
    for (const ast::Block &b : file->blocks) {
      auto [it, inserted] = blocks_.insert({b.name.name, &b});
      if (!inserted) {
        if (error(b.name.loc, "block '" + b.name.name + "' is defined twice"))
          note(it->second->name.loc, "first defined here");
      }
    }
  }
  if (root.models.empty()) {
    error({root.fileId, 1, 1, 1}, "no model in this file",
          "declare one: model name { dims { ... } forward(...) -> loss { ... } }");
    return false;
  }
  for (size_t i = 1; i < root.models.size(); ++i)
    error(root.models[i].name.loc, "a file declares one model; '" + root.models[0].name.name +
                                       "' is already declared");
  model_ = &root.models[0];
  for (const ast::Block &b : model_->blocks) {
    auto [it, inserted] = blocks_.insert({b.name.name, &b});
    if (!inserted) {
      if (error(b.name.loc, "block '" + b.name.name + "' is defined twice"))
        note(it->second->name.loc, "first defined here");
    }
  }
  auto define = [&](const ast::Definition &d, bool isDim) {
    if (d.name.name == "batch") {
      error(d.name.loc, "'batch' is a built-in dim and cannot be defined",
            "its size is train.micro_batch times the data-parallel degree");
      return;
    }
    auto [it, inserted] = definitions_.insert({d.name.name, &d});
    if (!inserted) {
      if (error(d.name.loc, "'" + d.name.name + "' is defined twice"))
        note(it->second->name.loc, "first defined here");
      return;
    }
    if (isDim)
      dimDefinitions_.insert(d.name.name);
  };
  for (const ast::Definition &d : model_->dims)
    define(d, true);
  for (const ast::Definition &d : model_->constants)
    define(d, false);
  for (SourceLoc dup : model_->forwardDuplicates)
    error(dup, "a model has one forward function");
  return true;
}

Value Sema::parseNumber(const ast::Expr &expr) {
  const std::string &text = expr.text;
  size_t end = 0;
  bool isFloat = false;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end])))
    ++end;
  if (end < text.size() && text[end] == '.') {
    isFloat = true;
    ++end;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end])))
      ++end;
  }
  if (end < text.size() && (text[end] == 'e' || text[end] == 'E')) {
    size_t k = end + 1;
    if (k < text.size() && (text[k] == '+' || text[k] == '-'))
      ++k;
    if (k < text.size() && std::isdigit(static_cast<unsigned char>(text[k]))) {
      isFloat = true;
      end = k;
      while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end])))
        ++end;
    }
  }
  std::string digits = text.substr(0, end), suffix = text.substr(end);
  double multiplier = 1;
  static const std::pair<const char *, double> suffixes[] = {
      {"K", 1e3},         {"M", 1e6},         {"G", 1e9},         {"T", 1e12},
      {"KB", 1024.0},     {"MB", 1048576.0},  {"GB", 1073741824.0}, {"TB", 1099511627776.0},
      {"KiB", 1024.0},    {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
  if (!suffix.empty()) {
    bool known = false;
    for (const auto &[name, value] : suffixes)
      if (suffix == name) {
        multiplier = value;
        known = true;
      }
    if (!known) {
      error(expr.loc, "unknown suffix '" + suffix + "' on number '" + text + "'",
            "sizes take KB, MB, GB (powers of 1024); counts take K, M, G");
      return Value::error();
    }
  }
  if (!isFloat) {
    errno = 0;
    char *stop = nullptr;
    unsigned long long v = std::strtoull(digits.c_str(), &stop, 10);
    double scaled = static_cast<double>(v) * multiplier;
    if (errno == ERANGE || scaled > 9.0e18) {
      error(expr.loc, "integer '" + text + "' is too large");
      return Value::error();
    }
    return Value::ofInt(static_cast<int64_t>(v) * static_cast<int64_t>(multiplier));
  }
  double v = std::strtod(digits.c_str(), nullptr) * multiplier;
  if (!std::isfinite(v)) {
    error(expr.loc, "number '" + text + "' is out of range");
    return Value::error();
  }
  return Value::ofFloat(v);
}

Value Sema::lookupDefinition(const std::string &name, SourceLoc use) {
  if (name.empty())
    return Value::error(); // A piece the parser already reported as missing.
  if (name == "true" || name == "false")
    return Value::ofBool(name == "true");
  if (name == "batch") {
    auto it = dims_.find("batch");
    if (it != dims_.end())
      return Value::ofInt(it->second.size);
    error(use, "the size of 'batch' is not known here",
          "it is set by train.micro_batch and the data-parallel degree");
    return Value::error();
  }
  auto cached = evaluated_.find(name);
  if (cached != evaluated_.end())
    return cached->second;
  auto def = definitions_.find(name);
  if (def == definitions_.end()) {
    std::string guess = wantHints() ? closestMatch(name, knownNames()) : "";
    error(use, "unknown name '" + name + "'", guess.empty() ? "" : "did you mean '" + guess + "'?");
    return Value::error();
  }
  for (const std::string &active : evaluating_)
    if (active == name) {
      std::string chain;
      for (const std::string &n : evaluating_)
        chain += n + " -> ";
      error(def->second->name.loc, "'" + name + "' is defined in terms of itself: " + chain + name);
      evaluated_[name] = Value::error();
      return Value::error();
    }
  if (evaluating_.size() > 256) {
    error(use, "definitions refer to each other more than 256 deep");
    return Value::error();
  }
  evaluating_.push_back(name);
  Value v = evalConstant(*def->second->value);
  evaluating_.pop_back();
  if (dimDefinitions_.count(name) && !v.isError()) {
    if (v.kind != Value::Int) {
      error(def->second->value->loc,
            "dim '" + name + "' must be a whole number, not " + kindName(v.kind));
      v = Value::error();
    } else if (v.i <= 0) {
      error(def->second->value->loc,
            "dim '" + name + "' must be positive, not " + std::to_string(v.i));
      v = Value::error();
    }
  }
  evaluated_[name] = v;
  return v;
}

Value Sema::arithmetic(const std::string &op, const Value &a, const Value &b, SourceLoc loc) {
  if (a.isError() || b.isError())
    return Value::error();
  if (!a.isNumber() || !b.isNumber()) {
    error(loc, "'" + op + "' needs numbers, not " + kindName(a.kind) + " and " + kindName(b.kind));
    return Value::error();
  }
  if (op == "@") {
    error(loc, "'@' contracts tensors; both sides here are numbers");
    return Value::error();
  }
  if (isComparison(op)) {
    // Integers compare exactly; a float on either side compares as doubles.
    auto compare = [&](auto x, auto y) {
      return op == "<"    ? x < y
             : op == "<=" ? x <= y
             : op == ">"  ? x > y
             : op == ">=" ? x >= y
             : op == "==" ? x == y
                          : x != y;
    };
    if (a.kind == Value::Int && b.kind == Value::Int)
      return Value::ofBool(compare(a.i, b.i));
    return Value::ofBool(compare(a.asDouble(), b.asDouble()));
  }
  if (a.kind == Value::Int && b.kind == Value::Int && op != "/") {
    int64_t r = 0;
    bool overflow = false;
    if (op == "+")
      overflow = __builtin_add_overflow(a.i, b.i, &r);
    else if (op == "-")
      overflow = __builtin_sub_overflow(a.i, b.i, &r);
    else if (op == "*")
      overflow = __builtin_mul_overflow(a.i, b.i, &r);
    else {
      if (b.i == 0) {
        error(loc, "division by zero");
        return Value::error();
      }
      if (a.i == std::numeric_limits<int64_t>::min() && b.i == -1) {
        error(loc, "integer overflow in '" + op + "'");
        return Value::error();
      }
      if (op == "//") {
        r = a.i / b.i;
        if ((a.i % b.i != 0) && ((a.i < 0) != (b.i < 0)))
          --r;
      } else {
        r = a.i % b.i;
      }
    }
    if (overflow) {
      error(loc, "integer overflow in '" + op + "'");
      return Value::error();
    }
    return Value::ofInt(r);
  }
  if (op == "/" && a.kind == Value::Int && b.kind == Value::Int) {
    if (b.i == 0) {
      error(loc, "division by zero");
      return Value::error();
    }
    if (a.i % b.i != 0) {
      error(loc, std::to_string(a.i) + " / " + std::to_string(b.i) + " is not a whole number",
            "'/' on integers must divide exactly; write '//' to round down");
      return Value::error();
    }
    return Value::ofInt(a.i / b.i);
  }
  double x = a.asDouble(), y = b.asDouble(), r = 0;
  if (op == "+")
    r = x + y;
  else if (op == "-")
    r = x - y;
  else if (op == "*")
    r = x * y;
  else if (op == "/" || op == "//") {
    if (y == 0) {
      error(loc, "division by zero");
      return Value::error();
    }
    r = op == "/" ? x / y : std::floor(x / y);
  } else {
    if (y == 0) {
      error(loc, "division by zero");
      return Value::error();
    }
    r = std::fmod(x, y);
  }
  if (!std::isfinite(r)) {
    error(loc, "result is not a finite number");
    return Value::error();
  }
  return Value::ofFloat(r);
}

Value Sema::scalarCall(const ast::Expr &call, const std::vector<Value> &args) {
  for (const Value &a : args)
    if (a.isError())
      return Value::error();
  const std::string &fn = call.text;
  for (const std::string &key : call.keys)
    if (!key.empty()) {
      error(call.loc, "'" + fn + "' takes no keyword arguments");
      return Value::error();
    }
  auto needNumbers = [&](size_t n) {
    if (args.size() != n) {
      error(call.loc, "'" + fn + "' takes " + std::to_string(n) + " argument" +
                          (n == 1 ? "" : "s") + ", not " + std::to_string(args.size()));
      return false;
    }
    for (const Value &a : args)
      if (!a.isNumber()) {
        error(call.loc, "'" + fn + "' needs numbers, not " + kindName(a.kind));
        return false;
      }
    return true;
  };
  if (fn == "sqrt") {
    if (!needNumbers(1))
      return Value::error();
    if (args[0].asDouble() < 0) {
      error(call.loc, "square root of a negative number");
      return Value::error();
    }
    return Value::ofFloat(std::sqrt(args[0].asDouble()));
  }
  if (fn == "min" || fn == "max") {
    if (!needNumbers(2))
      return Value::error();
    const Value &a = args[0], &b = args[1];
    bool pickA = (fn == "min") == (a.asDouble() <= b.asDouble());
    return pickA ? a : b;
  }
  if (fn == "moe_capacity") {
    // The tokens of one sequence each expert takes: factor x its fair share of the
    // sequence's seq x top_k routings, rounded up, and never more than the sequence.
    if (!needNumbers(4))
      return Value::error();
    const Value &seq = args[0], &experts = args[1], &topK = args[2], &factor = args[3];
    for (const Value *v : {&seq, &experts, &topK})
      if (v->kind != Value::Int || v->i < 1) {
        error(call.loc, "moe_capacity(seq, experts, top_k, factor) needs positive whole "
                        "numbers for seq, experts and top_k");
        return Value::error();
      }
    if (topK.i > experts.i) {
      error(call.loc, "top_k = " + std::to_string(topK.i) + " is more than the " +
                          std::to_string(experts.i) + " experts",
            "each token chooses top_k different experts");
      return Value::error();
    }
    if (!(factor.asDouble() > 0)) {
      error(call.loc, "the capacity factor must be positive, not " + formatNumber(factor.asDouble()),
            "1.25 is usual; capacity = seq instead never drops a token");
      return Value::error();
    }
    double share = factor.asDouble() * static_cast<double>(seq.i) * static_cast<double>(topK.i) /
                   static_cast<double>(experts.i);
    return Value::ofInt(std::min<int64_t>(seq.i, static_cast<int64_t>(std::ceil(share - 1e-9))));
  }
  error(call.loc, "'" + fn + "' cannot be used in a constant expression",
        "constants may use + - * / // %, sqrt, min, max and moe_capacity");
  return Value::error();
}

Value Sema::evalConstant(const ast::Expr &expr) {
  switch (expr.kind) {
  case ast::ExprKind::Number:
    return parseNumber(expr);
  case ast::ExprKind::String:
    return Value::ofString(expr.text);
  case ast::ExprKind::Name:
    return lookupDefinition(expr.text, expr.loc);
  case ast::ExprKind::Neg: {
    Value v = evalConstant(*expr.operands[0]);
    if (v.isError())
      return v;
    if (v.kind == Value::Int) {
      if (v.i == std::numeric_limits<int64_t>::min()) {
        // Returning an error value unreported would let the file pass as valid.
        error(expr.loc, "integer overflow in '-'");
        return Value::error();
      }
      return Value::ofInt(-v.i);
    }
    if (v.kind == Value::Float)
      return Value::ofFloat(-v.f);
    error(expr.loc, std::string("cannot negate ") + kindName(v.kind));
    return Value::error();
  }
  case ast::ExprKind::Binary: {
    // Evaluated in sequence: as two arguments of one call, the order is unspecified and
    // errors in `a + b` came out b first.
    Value lhs = evalConstant(*expr.operands[0]);
    Value rhs = evalConstant(*expr.operands[1]);
    return arithmetic(expr.text, lhs, rhs, expr.loc);
  }
  case ast::ExprKind::Tuple:
  case ast::ExprKind::List: {
    Value v;
    v.kind = expr.kind == ast::ExprKind::Tuple ? Value::Tuple : Value::List;
    for (const auto &e : expr.operands) {
      v.elems.push_back(evalConstant(*e));
      if (v.elems.back().isError())
        return Value::error();
    }
    return v;
  }
  case ast::ExprKind::Call: {
    std::vector<Value> args;
    for (const auto &e : expr.operands)
      args.push_back(evalConstant(*e));
    return scalarCall(expr, args);
  }
  }
  return Value::error();
}

std::optional<int64_t> Sema::evalInt(const ast::Expr &expr, const char *what, int64_t min) {
  Value v = evalConstant(expr);
  if (v.isError())
    return std::nullopt;
  if (v.kind != Value::Int) {
    error(expr.loc, std::string(what) + " must be a whole number, not " + kindName(v.kind));
    return std::nullopt;
  }
  if (v.i < min) {
    error(expr.loc, std::string(what) + " must be at least " + std::to_string(min) + ", not " +
                        std::to_string(v.i));
    return std::nullopt;
  }
  return v.i;
}

std::optional<Program> Sema::run() {
  if (!collectDeclarations())
    return std::nullopt;
  program_.modelName = model_->name.name;
  program_.modelLoc = model_->name.loc;
  // Every definition is checked, used or not, so that a typo in an unused dim still shows.
  for (const ast::Definition &d : model_->dims) {
    if (d.name.name == "batch")
      continue; // Reported as built in; looking it up would add "size not known" to that.
    Value v = lookupDefinition(d.name.name, d.name.loc);
    if (v.kind == Value::Int)
      dims_[d.name.name] = {d.name.name, v.i};
  }
  for (const ast::Definition &d : model_->constants)
    if (d.name.name != "batch")
      lookupDefinition(d.name.name, d.name.loc);
  readSections();
  if (program_.train.microBatch.value > 0)
    dims_["batch"] = {"batch", program_.train.microBatch.value * program_.parallel.dataWays()};
  for (const ast::Definition &d : model_->dims)
    if (dims_.count(d.name.name))
      program_.dims.push_back(dims_[d.name.name]);
  if (dims_.count("batch"))
    program_.dims.push_back(dims_["batch"]);
  elaborateForward();
  if (elaborationAborted_)
    return std::nullopt; // The model is incomplete; checking its layout would mislead.
  checkParallelAgainstModel();
  if (diags_.hasErrors())
    return std::nullopt;
  return std::move(program_);
}

std::optional<Program> tessel::analyze(const ParsedModule &module, const SourceManager &sources,
                                       DiagnosticEngine &diags, const FrontendOptions &options) {
  if (diags.hasErrors())
    return std::nullopt;
  return Sema(module, sources, diags, options).run();
}
