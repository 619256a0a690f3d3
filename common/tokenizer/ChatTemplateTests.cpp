//===- ChatTemplateTests.cpp - The tests of chat templates ----------------===//
//
// `value is name(args)` as Jinja 3.1's tests (jinja2/tests.py) decide it: defined and
// undefined, the types, even, odd and divisibleby by Python's remainder, lower and upper, in,
// sameas, filter and test (whether a name is one), and the comparisons (eq, ne, lt, gt, le, ge
// and their aliases) by Python's == and <, their work counted.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateBuiltins.h"
#include "common/tokenizer/ChatTemplateText.h"

#include <cmath>

namespace tessel::tok::chat {

namespace {

// One argument of a test, which several need.
bool testArg(RenderState &st, const char *name, const Args &args, const Value *&arg) {
  Bind p(st, name, args, {"other"});
  if (!p.ok())
    return false;
  if (!p[0])
    return st.fail(std::string("the test '") + name + "' needs an argument");
  arg = p[0];
  return true;
}

// Python's a % b == 0 test for even, odd and divisibleby.
bool remainder(RenderState &st, const Value &v, const Value &by, double &out) {
  if (v.isUndefined())
    return undefinedError(st, v);
  if (!v.isNumber() || !by.isNumber())
    return st.fail(std::string("unsupported operand types for %: '") + v.typeName() + "' and '" +
                   by.typeName() + "'");
  double d = by.number();
  if (d == 0)
    return st.fail("division by zero");
  out = std::fmod(v.number(), d);
  if (out != 0 && ((out < 0) != (d < 0)))
    out += d;
  return true;
}

bool compareTest(RenderState &st, const std::string &name, const Value &v, const Args &args,
                 bool &out) {
  const Value *arg = nullptr;
  if (!testArg(st, name.c_str(), args, arg))
    return false;
  const Value &other = *arg;
  uint64_t work = 0;
  if (name == "eq" || name == "equalto" || name == "==" || name == "ne" || name == "!=") {
    out = equal(v, other, &work) == (name[0] == 'e' || name[0] == '=');
    return st.step(work / 16);
  }
  if (v.isUndefined())
    return undefinedError(st, v);
  if (other.isUndefined())
    return undefinedError(st, other);
  std::string error;
  bool less = false, ok = false;
  if (name == "lt" || name == "<" || name == "lessthan")
    ok = lessThan(v, other, out, error, &work);
  else if (name == "gt" || name == ">" || name == "greaterthan")
    ok = lessThan(other, v, out, error, &work);
  else if (name == "le" || name == "<=")
    ok = lessThan(other, v, less, error, &work) && ((out = !less), true);
  else
    ok = lessThan(v, other, less, error, &work) && ((out = !less), true);
  return ok ? st.step(work / 16) : st.fail(error);
}

const char *const kCompareTests[] = {"eq", "equalto",     "==", "ne", "!=", "lt", "<", "lessthan",
                                     "gt", "greaterthan", ">",  "le", "<=", "ge", ">="};

const char *const kTests[] = {
    "boolean",  "callable", "defined", "divisibleby", "even",  "false",  "float", "in",
    "integer",  "iterable", "lower",   "mapping",     "none",  "number", "odd",   "sameas",
    "sequence", "string",   "true",    "undefined",   "upper", "filter", "test",  "escaped"};

} // namespace

bool isKnownTest(std::string_view name) {
  return among(kTests, name) || among(kCompareTests, name);
}

bool callTest(RenderState &st, const std::string &name, const Value &v, const Args &args,
              bool &out) {
  using K = Value::Kind;
  if (among(kCompareTests, name))
    return compareTest(st, name, v, args, out);
  if (name == "in") {
    const Value *arg = nullptr;
    return testArg(st, "in", args, arg) && contains(st, *arg, v, out);
  }
  if (name == "sameas") {
    const Value *arg = nullptr;
    if (!testArg(st, "sameas", args, arg))
      return false;
    const Value &o = *arg;
    out = v.kind() == o.kind() &&
          (v.isNone() || v.isUndefined() || (v.isBool() && v.boolValue() == o.boolValue()) ||
           (v.isInt() && v.intValue() == o.intValue()) || v.sameObject(o));
    return true;
  }
  if (name == "divisibleby") {
    const Value *arg = nullptr;
    double r = 0;
    if (!testArg(st, "divisibleby", args, arg) || !remainder(st, v, *arg, r))
      return false;
    out = r == 0;
    return true;
  }
  if (!args.positional.empty() || !args.keywords.empty())
    return st.fail("the test '" + name + "' takes no arguments");
  if (name == "defined" || name == "undefined") {
    out = v.isUndefined() == (name == "undefined");
  } else if (name == "none") {
    out = v.isNone();
  } else if (name == "boolean") {
    out = v.isBool();
  } else if (name == "true" || name == "false") {
    out = v.isBool() && v.boolValue() == (name == "true");
  } else if (name == "integer") {
    out = v.isInt();
  } else if (name == "float") {
    out = v.kind() == K::Float;
  } else if (name == "number") {
    out = v.isNumber();
  } else if (name == "string") {
    out = v.isString();
  } else if (name == "mapping") {
    out = v.isDict();
  } else if (name == "iterable") {
    out = v.isString() || v.isSequence() || v.isDict() || v.isUndefined() || v.kind() == K::Loop;
  } else if (name == "sequence") {
    out = v.isString() || v.isSequence() || v.isDict() || v.isUndefined();
  } else if (name == "callable") {
    out = v.kind() == K::Callable;
  } else if (name == "even" || name == "odd") {
    double r = 0;
    if (!remainder(st, v, Value::integer(2), r))
      return false;
    out = name == "even" ? r == 0 : r == 1;
  } else if (name == "lower" || name == "upper") {
    std::string s;
    if (!toStr(st, v, s))
      return false;
    out = hasCased(s, name == "lower");
  } else if (name == "filter" || name == "test") {
    out = v.isString() && (name == "filter" ? isKnownFilter(v.str()) : isKnownTest(v.str()));
  } else if (name == "escaped") {
    out = false;
  } else {
    return st.fail("no test named '" + name + "'");
  }
  return true;
}

} // namespace tessel::tok::chat
