//===- ChatTemplateOperators.cpp - Python's operators in chat templates ---===//
//
// The operators of expressions as Python computes them: unary - and +; + - * / // % ** with
// integers that stay integers (64-bit here, overflow refused), floats where either side is
// one, `/` always a float, `//` flooring and `%` taking the divisor's sign, `**` by squaring;
// strings and sequences joined with + and repeated with *; and one comparison of a chain
// (==, !=, <, <=, >, >=, in, not in) by Python's == and < and `in`. Building a long string or
// list, and comparing large values, count as work.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateRenderer.h"

#include <cmath>

namespace tessel::tok::chat {

bool Renderer::undefinedOperand(const Expr &e, const Value &a, const Value &b) {
  return fail(e.at, (a.isUndefined() ? a : b).undefinedHint());
}

bool Renderer::negate(const Expr &e, const Value &v, Value &out) {
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

bool Renderer::overflow(const Expr &e) {
  return fail(e.at, "integer overflow (Tessel's integers are 64-bit)");
}

int64_t Renderer::asInt(const Value &v) { return v.isInt() ? v.intValue() : v.boolValue(); }

// Python's a * n for a string, list or tuple and an integer.
bool Renderer::repeat(const Expr &e, const Value &seq, int64_t n, Value &out) {
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

bool Renderer::arithmetic(const Expr &e, const Value &a, const Value &b, Value &out) {
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
      out = a.kind() == Value::Kind::Tuple ? Value::tuple(std::move(r)) : Value::list(std::move(r));
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

bool Renderer::compare(const Expr &e, Expr::Op op, const Value &a, const Value &b, bool &out) {
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

} // namespace tessel::tok::chat
