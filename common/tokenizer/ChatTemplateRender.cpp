//===- ChatTemplateRender.cpp - Running a parsed chat template ------------===//
//
// Walks the template's tree as Jinja's generated Python runs it: a for loop's body gets a
// fresh scope each iteration (a `set` inside it is gone after the loop, which is why templates
// keep state in namespaces), `if` opens none, a macro reads the scope it was defined in at call
// time, transformers' generation block runs its body as a call block (its own scope) and
// records where its text lands in the output. Every value an expression makes is checked
// against the render's limits, so no template can exhaust the stack, the memory or the time.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplate.h"
#include "common/tokenizer/ChatTemplateBuiltins.h"
#include "common/tokenizer/JsonReader.h"
#include "common/tokenizer/Utf8.h"

#include <cmath>

namespace tessel::tok {

namespace chat {
namespace {

// Nesting of evaluation (macro calls, blocks, expressions): far beyond real templates, and at
// this depth the stack used stays below half a megabyte.
constexpr unsigned kMaxDepth = 500;
// Nesting of values: deeper than the JSON reader's 512 levels, and comparing, printing and
// freeing values recurse this deep at a small cost per level.
constexpr unsigned kMaxValueDepth = 1000;

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value *find(const std::string &name) const {
    for (const auto &[n, v] : vars)
      if (n == name)
        return &v;
    return nullptr;
  }
  void set(const std::string &name, Value v) {
    for (auto &[n, old] : vars)
      if (n == name) {
        old = std::move(v);
        return;
      }
    vars.emplace_back(name, std::move(v));
  }
};
using ScopePtr = std::shared_ptr<Scope>;

ScopePtr child(const ScopePtr &parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

class Renderer {
public:
  Renderer(RenderState &st, const Dict &globals, std::string &root, std::vector<TextRange> *ranges)
      : st_(st), globals_(globals), out_(&root), root_(root), ranges_(ranges) {}

  bool run(const Template &t) {
    top_ = std::make_shared<Scope>();
    return exec(t.body, top_) != Flow::Fail;
  }

private:
  enum class Flow { Next, Break, Continue, Fail };

  RenderState &st_;
  const Dict &globals_;
  std::string *out_;
  std::string &root_;
  std::vector<TextRange> *ranges_;
  ScopePtr top_;
  unsigned depth_ = 0, calls_ = 0;

  bool fail(Location at, const std::string &what) {
    st_.at = at;
    return st_.fail(what);
  }

  /// One level of nesting, counted while it lives.
  struct Nest {
    Renderer &r;
    bool ok;
    Nest(Renderer &r, Location at) : r(r), ok(++r.depth_ <= kMaxDepth) {
      if (!ok)
        r.fail(at, "the template nests deeper than " + std::to_string(kMaxDepth) +
                       " levels (macro calls, blocks and expressions)");
    }
    ~Nest() { --r.depth_; }
  };

  bool emit(std::string_view text) {
    if (text.size() > st_.limits.maxOutputBytes - std::min(out_->size(), st_.limits.maxOutputBytes))
      return st_.fail("the output is longer than " + std::to_string(st_.limits.maxOutputBytes) +
                      " bytes");
    out_->append(text);
    return st_.step(text.size() / 64);
  }

  // Runs `body` with its output into `text` instead of the current output.
  Flow capture(const Body &body, const ScopePtr &scope, std::string &text) {
    std::string *saved = out_;
    out_ = &text;
    Flow flow = exec(body, scope);
    out_ = saved;
    return flow;
  }

  Flow exec(const Body &body, const ScopePtr &scope) {
    for (const NodePtr &n : body) {
      Flow flow = node(*n, scope);
      if (flow != Flow::Next)
        return flow;
    }
    return Flow::Next;
  }

  Flow node(const Node &n, const ScopePtr &scope) {
    Nest nest(*this, n.at);
    if (!nest.ok)
      return Flow::Fail;
    switch (n.kind) {
    case Node::Kind::Text:
      return emit(n.text) ? Flow::Next : Flow::Fail;
    case Node::Kind::Output: {
      Value v;
      std::string text;
      if (!eval(*n.expr, scope, v))
        return Flow::Fail;
      st_.at = n.expr->at;
      return toStr(st_, v, text) && emit(text) ? Flow::Next : Flow::Fail;
    }
    case Node::Kind::If:
      for (size_t i = 0; i < n.bodies.size(); ++i) {
        if (i < n.conditions.size()) {
          Value test;
          if (!eval(*n.conditions[i], scope, test))
            return Flow::Fail;
          if (!test.truthy())
            continue;
        }
        return exec(n.bodies[i], scope);
      }
      return Flow::Next;
    case Node::Kind::For:
      return forLoop(n, scope);
    case Node::Kind::Set: {
      Value v;
      if (!eval(*n.expr, scope, v))
        return Flow::Fail;
      return assign(n, v, scope) ? Flow::Next : Flow::Fail;
    }
    case Node::Kind::SetBlock: {
      std::string text;
      if (capture(n.bodies[0], child(scope), text) == Flow::Fail)
        return Flow::Fail;
      scope->set(n.target.names[0], Value::string(std::move(text)));
      return Flow::Next;
    }
    case Node::Kind::Macro: {
      auto fn = std::make_shared<Callable>();
      fn->kind = Callable::Kind::Macro;
      fn->name = n.text;
      fn->macro = &n;
      fn->closure = scope;
      scope->set(n.text, Value::callable(std::move(fn)));
      return Flow::Next;
    }
    case Node::Kind::Generation: {
      std::string text;
      if (capture(n.bodies[0], child(scope), text) == Flow::Fail)
        return Flow::Fail;
      // transformers records the block where the top-level output stands when it returns.
      if (ranges_)
        ranges_->push_back(TextRange{root_.size(), root_.size() + text.size()});
      return emit(text) ? Flow::Next : Flow::Fail;
    }
    case Node::Kind::Break:
      return Flow::Break;
    case Node::Kind::Continue:
      return Flow::Continue;
    }
    return Flow::Next;
  }

  bool unpack(const Target &target, const Value &v, Scope &scope, Location at) {
    if (!target.tuple) {
      scope.set(target.names[0], v);
      return true;
    }
    List parts;
    st_.at = at;
    if (!iterate(st_, v, parts))
      return false;
    size_t n = target.names.size();
    if (parts.size() != n)
      return fail(at, parts.size() > n
                          ? "too many values to unpack (expected " + std::to_string(n) + ")"
                          : "not enough values to unpack (expected " + std::to_string(n) +
                                ", got " + std::to_string(parts.size()) + ")");
    for (size_t i = 0; i < n; ++i)
      scope.set(target.names[i], parts[i]);
    return true;
  }

  bool assign(const Node &n, const Value &v, const ScopePtr &scope) {
    if (n.target.attribute.empty())
      return unpack(n.target, v, *scope, n.at);
    Value ns;
    if (!lookup(n.target.names[0], scope, ns))
      return false;
    if (ns.kind() != Value::Kind::Namespace)
      return fail(n.at, "cannot assign attribute on non-namespace object");
    ns.namespaceAttributes().set(Value::string(n.target.attribute), v);
    return true;
  }

  Flow forLoop(const Node &n, const ScopePtr &scope) {
    Value iterable;
    List items;
    if (!eval(*n.expr, scope, iterable))
      return Flow::Fail;
    st_.at = n.expr->at;
    if (!iterate(st_, iterable, items))
      return Flow::Fail;
    if (n.filter) {
      List kept;
      for (const Value &item : items) {
        ScopePtr s = child(scope);
        Value keep;
        if (!st_.step() || !unpack(n.target, item, *s, n.at) || !eval(*n.filter, s, keep))
          return Flow::Fail;
        if (keep.truthy())
          kept.push_back(item);
      }
      items = std::move(kept);
    }
    int64_t length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      st_.at = n.at;
      if (!st_.step())
        return Flow::Fail;
      ScopePtr s = child(scope);
      auto state = std::make_shared<LoopState>();
      state->index0 = i;
      state->length = length;
      if (i > 0)
        state->previous = items[i - 1];
      if (i + 1 < length)
        state->next = items[i + 1];
      s->set("loop", Value::loop(std::move(state)));
      if (!unpack(n.target, items[i], *s, n.at))
        return Flow::Fail;
      Flow flow = exec(n.bodies[0], s);
      if (flow == Flow::Fail)
        return flow;
      if (flow == Flow::Break)
        break;
    }
    if (length == 0 && n.bodies.size() > 1)
      return exec(n.bodies[1], child(scope)) == Flow::Fail ? Flow::Fail : Flow::Next;
    return Flow::Next;
  }

  bool lookup(const std::string &name, const ScopePtr &scope, Value &out) {
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

  bool evalArgs(const Expr &e, size_t first, const ScopePtr &scope, Args &args) {
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

  bool call(const Value &fn, const Args &args, Location at, Value &out) {
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

  bool callMacro(const Callable &fn, const Args &args, Location at, Value &out) {
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

  bool eval(const Expr &e, const ScopePtr &scope, Value &out) {
    Nest nest(*this, e.at);
    if (!nest.ok || !evalInner(e, scope, out))
      return false;
    if (out.depth() > kMaxValueDepth)
      return fail(e.at,
                  "the value nests deeper than " + std::to_string(kMaxValueDepth) + " levels");
    return true;
  }

  bool evalInner(const Expr &e, const ScopePtr &scope, Value &out) {
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

  bool undefinedOperand(const Expr &e, const Value &a, const Value &b) {
    return fail(e.at, (a.isUndefined() ? a : b).undefinedHint());
  }

  bool negate(const Expr &e, const Value &v, Value &out) {
    if (v.isUndefined())
      return fail(e.at, v.undefinedHint());
    if (!v.isNumber())
      return fail(e.at, std::string("bad operand type for unary ") +
                            (e.op == Expr::Op::Neg ? "-" : "+") + ": '" + v.typeName() + "'");
    if (v.kind() == Value::Kind::Float) {
      out = Value::real(e.op == Expr::Op::Neg ? -v.number() : v.number());
      return true;
    }
    int64_t i = v.isInt() ? v.intValue() : v.boolValue();
    if (e.op == Expr::Op::Neg && i == INT64_MIN)
      return overflow(e);
    out = Value::integer(e.op == Expr::Op::Neg ? -i : i);
    return true;
  }

  bool overflow(const Expr &e) {
    return fail(e.at, "integer overflow (Tessel's integers are 64-bit)");
  }

  static int64_t asInt(const Value &v) { return v.isInt() ? v.intValue() : v.boolValue(); }

  // Python's a * n for a string, list or tuple and an integer.
  bool repeat(const Expr &e, const Value &seq, int64_t n, Value &out) {
    st_.at = e.at;
    n = std::max<int64_t>(n, 0);
    if (seq.isString()) {
      const std::string &s = seq.str();
      if (!s.empty() && static_cast<uint64_t>(n) > st_.limits.maxOutputBytes / s.size())
        return st_.grow(SIZE_MAX);
      if (!st_.grow(s.size() * n))
        return false;
      std::string r;
      r.reserve(s.size() * n);
      for (int64_t i = 0; i < n; ++i)
        r += s;
      out = Value::string(std::move(r));
      return true;
    }
    const List &items = seq.items();
    if (!items.empty() && static_cast<uint64_t>(n) > st_.limits.maxSteps / items.size())
      return st_.step(UINT64_MAX / 2);
    if (!st_.step(items.size() * n))
      return false;
    List r;
    for (int64_t i = 0; i < n; ++i)
      r.insert(r.end(), items.begin(), items.end());
    out = seq.kind() == Value::Kind::Tuple ? Value::tuple(std::move(r)) : Value::list(std::move(r));
    return true;
  }

  bool arithmetic(const Expr &e, const Value &a, const Value &b, Value &out) {
    using Op = Expr::Op;
    if (a.isUndefined() || b.isUndefined())
      return undefinedOperand(e, a, b);
    Op op = e.op;
    if (a.isNumber() && b.isNumber()) {
      bool real = a.kind() == Value::Kind::Float || b.kind() == Value::Kind::Float;
      if (op == Op::Div || (real && op != Op::Pow)) {
        double x = a.number(), y = b.number();
        if ((op == Op::Div || op == Op::FloorDiv || op == Op::Mod) && y == 0)
          return fail(e.at, "division by zero");
        double r = 0;
        switch (op) {
        case Op::Add:
          r = x + y;
          break;
        case Op::Sub:
          r = x - y;
          break;
        case Op::Mul:
          r = x * y;
          break;
        case Op::Div:
          r = x / y;
          break;
        case Op::FloorDiv:
          r = std::floor(x / y);
          break;
        case Op::Mod:
          r = std::fmod(x, y);
          if (r != 0 && ((r < 0) != (y < 0)))
            r += y;
          else if (r == 0)
            r = std::copysign(0.0, y);
          break;
        default:
          break;
        }
        out = Value::real(r);
        return true;
      }
      if (op == Op::Pow) {
        if (real || asInt(b) < 0) {
          if (a.number() == 0 && b.number() < 0)
            return fail(e.at, "0.0 cannot be raised to a negative power");
          double r = std::pow(a.number(), b.number());
          if (std::isinf(r) && std::isfinite(a.number()) && std::isfinite(b.number()))
            return fail(e.at, "the power is out of the range of floats");
          out = Value::real(r);
          return true;
        }
        int64_t base = asInt(a), exponent = asInt(b), r = 1;
        while (exponent > 0) {
          if ((exponent & 1) && __builtin_mul_overflow(r, base, &r))
            return overflow(e);
          exponent >>= 1;
          if (exponent && __builtin_mul_overflow(base, base, &base))
            return overflow(e);
        }
        out = Value::integer(r);
        return true;
      }
      int64_t x = asInt(a), y = asInt(b), r = 0;
      bool overflowed = false;
      switch (op) {
      case Op::Add:
        overflowed = __builtin_add_overflow(x, y, &r);
        break;
      case Op::Sub:
        overflowed = __builtin_sub_overflow(x, y, &r);
        break;
      case Op::Mul:
        overflowed = __builtin_mul_overflow(x, y, &r);
        break;
      case Op::FloorDiv:
      case Op::Mod:
        if (y == 0)
          return fail(e.at, "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) {
          if (op == Op::FloorDiv)
            return overflow(e);
          r = 0;
          break;
        }
        r = op == Op::FloorDiv ? x / y : x % y;
        // Python floors: the remainder takes the divisor's sign.
        if (x % y != 0 && ((x % y < 0) != (y < 0)))
          r = op == Op::FloorDiv ? r - 1 : r + y;
        break;
      default:
        break;
      }
      if (overflowed)
        return overflow(e);
      out = Value::integer(r);
      return true;
    }
    if (op == Op::Add) {
      if (a.isString() && b.isString()) {
        st_.at = e.at;
        if (!st_.grow(a.str().size() + b.str().size()))
          return false;
        out = Value::string(a.str() + b.str());
        return true;
      }
      if (a.isSequence() && a.kind() == b.kind()) {
        st_.at = e.at;
        List r = a.items();
        if (!st_.step(r.size() + b.items().size()))
          return false;
        r.insert(r.end(), b.items().begin(), b.items().end());
        out =
            a.kind() == Value::Kind::Tuple ? Value::tuple(std::move(r)) : Value::list(std::move(r));
        return true;
      }
    }
    if (op == Op::Mul) {
      if ((a.isString() || a.isSequence()) && (b.isInt() || b.isBool()))
        return repeat(e, a, asInt(b), out);
      if ((b.isString() || b.isSequence()) && (a.isInt() || a.isBool()))
        return repeat(e, b, asInt(a), out);
    }
    if (op == Op::Mod && a.isString())
      return fail(e.at, "string formatting with '%' is outside the supported subset");
    static const char *const kSymbols[] = {"", "+", "-", "*", "/", "//", "%", "**"};
    return fail(e.at, std::string("unsupported operand type(s) for ") +
                          kSymbols[static_cast<int>(op)] + ": '" + a.typeName() + "' and '" +
                          b.typeName() + "'");
  }

  bool compare(const Expr &e, Expr::Op op, const Value &a, const Value &b, bool &out) {
    using Op = Expr::Op;
    st_.at = e.at;
    uint64_t work = 0;
    switch (op) {
    case Op::Eq:
    case Op::Ne:
      out = equal(a, b, &work) == (op == Op::Eq);
      return st_.step(work / 16);
    case Op::In:
    case Op::NotIn:
      if (!contains(st_, b, a, out))
        return false;
      out = out == (op == Op::In);
      return true;
    default:
      break;
    }
    if (a.isUndefined() || b.isUndefined())
      return undefinedOperand(e, a, b);
    std::string error;
    bool less = false;
    bool ok = op == Op::Lt   ? lessThan(a, b, out, error, &work)
              : op == Op::Gt ? lessThan(b, a, out, error, &work)
              : op == Op::Le ? lessThan(b, a, less, error, &work)
                             : lessThan(a, b, less, error, &work);
    if (!ok)
      return fail(e.at, error);
    if (op == Op::Le || op == Op::Ge)
      out = !less;
    return st_.step(work / 16);
  }
};

} // namespace
} // namespace chat

ChatTemplate::ChatTemplate() = default;
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(const ChatTemplate &) = default;
ChatTemplate &ChatTemplate::operator=(const ChatTemplate &) = default;

bool ChatTemplate::parse(std::string_view source, std::string &error) {
  auto t = std::make_shared<chat::Template>();
  template_.reset();
  if (!chat::parseTemplate(source, *t, error))
    return false;
  template_ = std::move(t);
  return true;
}

bool ChatTemplate::hasGenerationBlocks() const { return template_ && template_->hasGeneration; }

bool ChatTemplate::render(const JsonValue &messages, const Options &options, std::string &out,
                          std::string &error, std::vector<TextRange> *generation) const {
  if (!messages.valid() || !messages.isArray()) {
    out.clear();
    if (generation)
      generation->clear();
    error = "the messages are not a JSON array";
    return false;
  }
  return render(chat::Value::fromJson(messages), options, out, error, generation);
}

bool ChatTemplate::render(const chat::Value &messages, const Options &options, std::string &out,
                          std::string &error, std::vector<TextRange> *generation) const {
  using chat::Value;
  out.clear();
  error.clear();
  if (generation)
    generation->clear();
  if (!template_) {
    error = "no chat template was parsed";
    return false;
  }
  if (!messages.isSequence()) {
    error = "the messages are not a list";
    return false;
  }
  // The variables transformers passes to the template.
  chat::Dict globals;
  auto set = [&](std::string name, Value v) {
    globals.set(Value::string(std::move(name)), std::move(v));
  };
  set("messages", messages);
  set("tools", Value::none());
  set("documents", Value::none());
  set("add_generation_prompt", Value::boolean(options.addGenerationPrompt));
  if (!options.bosToken.empty())
    set("bos_token", Value::string(repairUtf8(options.bosToken)));
  if (!options.eosToken.empty())
    set("eos_token", Value::string(repairUtf8(options.eosToken)));
  if (!options.variables.empty()) {
    JsonDocument doc;
    std::string why;
    if (!doc.parse(options.variables, why) || !doc.root().isObject()) {
      error = "the template variables are not a JSON object" + (why.empty() ? "" : ": " + why);
      return false;
    }
    for (size_t i = 0; i < doc.root().size(); ++i)
      set(std::string(doc.root().key(i)), Value::fromJson(doc.root().value(i)));
  }

  chat::RenderState st;
  st.limits = options.limits;
  st.now = options.now;
  chat::Renderer renderer(st, globals, out, generation);
  bool ok = renderer.run(*template_);
  // Namespaces are the only mutable values, so every reference cycle runs through one.
  for (Value &ns : st.namespaces)
    ns.namespaceAttributes().clear();
  if (ok)
    return true;
  error = st.error;
  out.clear();
  if (generation)
    generation->clear();
  return false;
}

} // namespace tessel::tok
