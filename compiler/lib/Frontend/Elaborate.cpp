//===- Elaborate.cpp - Instantiating blocks into the typed graph ----------===//
//
// The forward function is executed symbolically: statements bind names to tensors, block
// calls instantiate fresh parameters under a dotted path (`layers.3.gpt_block.wq`), and every
// op is typed over named dims by the rules of NamedShape.h as it is created, so a shape error
// points at the expression that caused it. The ops a call can name without a block are
// Builtins.cpp's; the types and initialisers that declarations give are Parameters.cpp's.
//
//===----------------------------------------------------------------------===//

#include "SemaImpl.h"

#include <limits>

using namespace tessel;
using namespace tessel::detail;

namespace {

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
