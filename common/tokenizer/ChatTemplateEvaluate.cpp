//===- ChatTemplateEvaluate.cpp - Chat templates' expressions, evaluated --===//
//
// An expression's value as Jinja computes it: names looked up from the innermost scope out to
// the render's variables and then the globals, literals built, attributes, items and slices
// read, filters and tests applied, calls made (builtins, and macros with Python's binding of
// arguments, each in a scope of its own under the one it was defined in), and/or giving an
// operand, and the conditional expression. Each evaluation counts one level of nesting, and a
// value nesting deeper than the bound is refused.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateRenderer.h"

namespace tessel::tok::chat {

bool Renderer::lookup(const std::string &name, const ScopePtr &scope, Value &out) {
  for (const Scope *s = scope.get(); s; s = s->parent.get())
    if (const Value *v = s->find(name)) {
      out = *v;
      return true;
    }
  if (const Value *v = globals_.find(std::string_view(name))) {
    out = *v;
    return true;
  }
  out = builtinGlobal(name);
  return true;
}

bool Renderer::evalArgs(const Expr &e, size_t first, const ScopePtr &scope, Args &args) {
  for (size_t i = first; i < e.args.size(); ++i) {
    args.positional.emplace_back();
    if (!eval(*e.args[i], scope, args.positional.back()))
      return false;
  }
  for (const auto &[key, expr] : e.keywords) {
    args.keywords.emplace_back(key, Value());
    if (!eval(*expr, scope, args.keywords.back().second))
      return false;
  }
  return true;
}

bool Renderer::call(const Value &fn, const Args &args, Location at, Value &out) {
  st_.at = at;
  if (fn.isUndefined())
    return st_.fail(fn.undefinedHint());
  if (fn.kind() != Value::Kind::Callable)
    return st_.fail(std::string("'") + fn.typeName() + "' object is not callable");
  if (!st_.step())
    return false;
  const Callable &c = fn.callable();
  if (c.kind != Callable::Kind::Macro)
    return callBuiltin(st_, c, args, out);
  return callMacro(c, args, at, out);
}

bool Renderer::callMacro(const Callable &fn, const Args &args, Location at, Value &out) {
  const Node &m = *static_cast<const Node *>(fn.macro);
  if (calls_ >= st_.limits.maxCallDepth)
    return fail(at, "macro calls nest deeper than " + std::to_string(st_.limits.maxCallDepth) +
                        " levels");
  if (args.positional.size() > m.params.size())
    return fail(at, "macro '" + m.text + "' takes not more than " +
                        std::to_string(m.params.size()) + " argument(s)");
  ScopePtr closure = std::static_pointer_cast<Scope>(fn.closure.lock());
  ScopePtr scope = child(closure ? closure : top_);
  std::vector<const Value *> given(m.params.size(), nullptr);
  for (size_t i = 0; i < args.positional.size(); ++i)
    given[i] = &args.positional[i];
  for (const auto &[key, value] : args.keywords) {
    size_t i = 0;
    while (i < m.params.size() && m.params[i].name != key)
      ++i;
    if (i == m.params.size())
      return fail(at, "macro '" + m.text + "' takes no keyword argument '" + key + "'");
    if (given[i])
      return fail(at, "macro '" + m.text + "' got multiple values for argument '" + key + "'");
    given[i] = &value;
  }
  for (size_t i = 0; i < m.params.size(); ++i) {
    Value v;
    if (given[i])
      v = *given[i];
    else if (m.params[i].defaultValue && !eval(*m.params[i].defaultValue, scope, v))
      return false;
    else if (!m.params[i].defaultValue)
      v = Value::undefined("parameter '" + m.params[i].name + "' was not provided");
    scope->set(m.params[i].name, std::move(v));
  }
  // A call allocates its scope, arguments and text: a few steps of work.
  if (!st_.step(4))
    return false;
  ++calls_;
  std::string text;
  Flow flow = capture(m.bodies[0], scope, text);
  --calls_;
  if (flow == Flow::Fail)
    return false;
  out = Value::string(std::move(text));
  return true;
}

bool Renderer::eval(const Expr &e, const ScopePtr &scope, Value &out) {
  Nest nest(*this, e.at);
  if (!nest.ok || !evalInner(e, scope, out))
    return false;
  if (out.depth() > kMaxValueDepth)
    return fail(e.at, "the value nests deeper than " + std::to_string(kMaxValueDepth) + " levels");
  return true;
}

bool Renderer::evalInner(const Expr &e, const ScopePtr &scope, Value &out) {
  using K = Expr::Kind;
  switch (e.kind) {
  case K::Literal:
    out = e.value;
    return true;
  case K::Name:
    return lookup(e.name, scope, out);
  case K::ListLit:
  case K::TupleLit: {
    List items(e.args.size());
    for (size_t i = 0; i < e.args.size(); ++i)
      if (!eval(*e.args[i], scope, items[i]))
        return false;
    st_.at = e.at;
    if (!st_.step(items.size()))
      return false;
    out = e.kind == K::ListLit ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    return true;
  }
  case K::DictLit: {
    Dict d;
    for (size_t i = 0; i < e.args.size(); i += 2) {
      Value key, value;
      if (!eval(*e.args[i], scope, key) || !eval(*e.args[i + 1], scope, value))
        return false;
      if (!hashable(key))
        return fail(e.args[i]->at, std::string("unhashable type: '") + key.typeName() + "'");
      st_.at = e.at;
      if (!st_.step(d.lookupCost(key) / 16 + (key.isString() ? key.str().size() / 64 : 0)))
        return false;
      d.set(std::move(key), std::move(value));
    }
    st_.at = e.at;
    if (!st_.step(d.size()))
      return false;
    out = Value::dict(std::move(d));
    return true;
  }
  case K::Attribute: {
    Value obj;
    if (!eval(*e.args[0], scope, obj))
      return false;
    st_.at = e.at;
    return getAttribute(st_, obj, e.name, out);
  }
  case K::Item: {
    Value obj, key;
    if (!eval(*e.args[0], scope, obj) || !eval(*e.args[1], scope, key))
      return false;
    st_.at = e.at;
    return getItem(st_, obj, key, out);
  }
  case K::Slice: {
    Value obj, parts[3];
    if (!eval(*e.args[0], scope, obj))
      return false;
    for (int i = 0; i < 3; ++i)
      if (e.args[i + 1] && !eval(*e.args[i + 1], scope, parts[i]))
        return false;
    st_.at = e.at;
    return getSlice(st_, obj, parts[0], parts[1], parts[2], out);
  }
  case K::Call: {
    Value fn;
    Args args;
    if (!eval(*e.args[0], scope, fn) || !evalArgs(e, 1, scope, args))
      return false;
    return call(fn, args, e.at, out);
  }
  case K::Filter: {
    Value input;
    Args args;
    if (!eval(*e.args[0], scope, input) || !evalArgs(e, 1, scope, args))
      return false;
    st_.at = e.at;
    return st_.step() && callFilter(st_, e.name, input, args, out);
  }
  case K::Test: {
    Value input;
    Args args;
    bool result = false;
    if (!eval(*e.args[0], scope, input) || !evalArgs(e, 1, scope, args))
      return false;
    st_.at = e.at;
    if (!callTest(st_, e.name, input, args, result))
      return false;
    out = Value::boolean(result != e.negated);
    return true;
  }
  case K::Unary: {
    Value v;
    if (!eval(*e.args[0], scope, v))
      return false;
    if (e.op == Expr::Op::Not) {
      out = Value::boolean(!v.truthy());
      return true;
    }
    return negate(e, v, out);
  }
  case K::Binary: {
    Value a, b;
    if (!eval(*e.args[0], scope, a))
      return false;
    if (e.op == Expr::Op::And || e.op == Expr::Op::Or) {
      // Python's and/or give an operand, not a boolean.
      if (a.truthy() == (e.op == Expr::Op::Or)) {
        out = a;
        return true;
      }
      return eval(*e.args[1], scope, out);
    }
    if (!eval(*e.args[1], scope, b))
      return false;
    return arithmetic(e, a, b, out);
  }
  case K::Concat: {
    std::string text, part;
    for (const ExprPtr &arg : e.args) {
      Value v;
      if (!eval(*arg, scope, v))
        return false;
      st_.at = e.at;
      if (!toStr(st_, v, part) || !st_.grow(text.size() + part.size()))
        return false;
      text += part;
    }
    out = Value::string(std::move(text));
    return true;
  }
  case K::Compare: {
    Value left;
    if (!eval(*e.args[0], scope, left))
      return false;
    for (size_t i = 0; i < e.ops.size(); ++i) {
      Value right;
      bool holds = false;
      if (!eval(*e.args[i + 1], scope, right) || !compare(e, e.ops[i], left, right, holds))
        return false;
      if (!holds) {
        out = Value::boolean(false);
        return true;
      }
      left = std::move(right);
    }
    out = Value::boolean(true);
    return true;
  }
  case K::Condition: {
    Value test;
    if (!eval(*e.args[1], scope, test))
      return false;
    if (test.truthy())
      return eval(*e.args[0], scope, out);
    if (e.args[2])
      return eval(*e.args[2], scope, out);
    out = Value::undefined("the inline if-expression on line " + std::to_string(e.at.line) +
                           " evaluated to false and no else section was defined.");
    return true;
  }
  }
  return fail(e.at, "an expression the renderer does not know");
}

} // namespace tessel::tok::chat
