//===- ChatTemplateBuiltins.cpp - Tests, methods, globals -----------------===//
//
// `value is name(args)` as Jinja 3.1's tests (jinja2/tests.py) decide it; the methods of
// strings, dicts and lists as Python's, with the immutable sandbox's refusals (methods that
// would change a list or dict); the globals transformers' templates call (range, namespace,
// dict, raise_exception, strftime_now); and what all builtins share: the render's state and
// the binding of arguments.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateBuiltins.h"
#include "common/tokenizer/ChatTemplateText.h"
#include "common/tokenizer/Utf8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>

namespace tessel::tok::chat {

namespace {

// The sandbox's bound on range() (jinja2.sandbox.MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

} // namespace

bool RenderState::fail(const std::string &what) {
  if (error.empty())
    error =
        "line " + std::to_string(at.line) + ", column " + std::to_string(at.column) + ": " + what;
  return false;
}

bool RenderState::step(uint64_t n) {
  steps += n;
  if (steps <= limits.maxSteps)
    return true;
  return fail("the render takes more than " + std::to_string(limits.maxSteps) +
              " steps (loop iterations, macro calls, values built)");
}

bool RenderState::grow(size_t bytes) {
  if (bytes > limits.maxOutputBytes)
    return fail("the template builds text longer than " + std::to_string(limits.maxOutputBytes) +
                " bytes");
  return step(bytes / 64);
}

Bind::Bind(RenderState &st, const char *function, const Args &args,
           std::initializer_list<const char *> names)
    : values_(names.size(), nullptr) {
  if (args.positional.size() > names.size()) {
    ok_ = st.fail(std::string(function) + "() takes at most " + std::to_string(names.size()) +
                  " argument" + (names.size() == 1 ? "" : "s") + " here, not " +
                  std::to_string(args.positional.size()));
    return;
  }
  for (size_t i = 0; i < args.positional.size(); ++i)
    values_[i] = &args.positional[i];
  for (const auto &[key, value] : args.keywords) {
    const char *const *at =
        std::find_if(names.begin(), names.end(), [&](const char *n) { return key == n; });
    if (at == names.end()) {
      ok_ = st.fail(std::string(function) + "() has no parameter named '" + key + "'");
      return;
    }
    const Value *&slot = values_[at - names.begin()];
    if (slot) {
      ok_ = st.fail(std::string(function) + "() got several values for '" + key + "'");
      return;
    }
    slot = &value;
  }
}

bool needString(RenderState &st, const Value *v, const char *what) {
  if (v && v->isString())
    return true;
  return st.fail(std::string(what) + " must be a string, not " + (v ? v->typeName() : "nothing"));
}

bool needInt(RenderState &st, const Value *v, const char *what, int64_t &out) {
  if (v && (v->isInt() || v->isBool())) {
    out = v->isInt() ? v->intValue() : v->boolValue();
    return true;
  }
  return st.fail(std::string(what) + " must be an integer, not " + (v ? v->typeName() : "nothing"));
}

bool undefinedError(RenderState &st, const Value &v) { return st.fail(v.undefinedHint()); }

namespace {

// ---- Tests ----

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

// ---- Methods ----

const char *const kStrMethods[] = {
    "capitalize", "count",   "endswith",   "find",       "isalnum", "isalpha", "isdigit", "islower",
    "isspace",    "isupper", "join",       "lower",      "lstrip",  "replace", "rfind",   "rsplit",
    "rstrip",     "split",   "splitlines", "startswith", "strip",   "title",   "upper"};
const char *const kDictMethods[] = {"copy", "get", "items", "keys", "values"};
const char *const kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
const char *const kListMethods[] = {"copy", "count", "index"};
const char *const kListUnsafe[] = {"append", "clear",  "extend",  "insert",
                                   "pop",    "remove", "reverse", "sort"};

template <size_t N> bool among(const char *const (&names)[N], std::string_view name) {
  for (const char *n : names)
    if (name == n)
      return true;
  return false;
}

// A method's code-point index of byte offset `at`, or -1.
int64_t cpIndex(const std::string &s, size_t at) {
  return at == std::string::npos
             ? -1
             : static_cast<int64_t>(codePointCount(std::string_view(s).substr(0, at)));
}

bool affix(RenderState &st, const std::string &s, const Value *arg, bool prefix, bool &out) {
  auto one = [&](const Value &a) -> int {
    if (!a.isString())
      return -1;
    const std::string &x = a.str();
    bool hit = x.size() <= s.size() && (prefix ? s.compare(0, x.size(), x) == 0
                                               : s.compare(s.size() - x.size(), x.size(), x) == 0);
    return hit ? 1 : 0;
  };
  if (!arg)
    return st.fail(std::string(prefix ? "startswith" : "endswith") + "() needs an argument");
  if (arg->kind() == Value::Kind::Tuple) {
    out = false;
    for (const Value &a : arg->items()) {
      int r = one(a);
      if (r < 0)
        return st.fail("tuple for startswith/endswith must only contain str");
      out = out || r;
    }
    return true;
  }
  int r = one(*arg);
  if (r < 0)
    return st.fail(std::string(prefix ? "startswith" : "endswith") +
                   " first arg must be str or a tuple of str, not " + arg->typeName());
  out = r;
  return true;
}

bool strMethod(RenderState &st, const std::string &s, const std::string &name, const Args &args,
               Value &out) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Bind p(st, name.c_str(), args, {"chars"});
    if (!p.ok() || (p[0] && !p[0]->isNone() && !needString(st, p[0], "strip's chars")))
      return false;
    out = Value::string(strip(s, p[0], name != "rstrip", name != "lstrip"));
    return true;
  }
  if (name == "split" || name == "rsplit") {
    Bind p(st, name.c_str(), args, {"sep", "maxsplit"});
    int64_t maxSplit = -1;
    if (!p.ok() || (p[0] && !p[0]->isNone() && !needString(st, p[0], "split's separator")) ||
        (p[1] && !needInt(st, p[1], "split's maxsplit", maxSplit)))
      return false;
    if (p[0] && p[0]->isString() && p[0]->str().empty())
      return st.fail("empty separator");
    List parts = split(s, p[0], maxSplit, name == "rsplit");
    if (!st.step(parts.size()))
      return false;
    out = Value::list(std::move(parts));
    return true;
  }
  if (name == "startswith" || name == "endswith") {
    Bind p(st, name.c_str(), args, {"prefix"});
    bool r = false;
    if (!p.ok() || !affix(st, s, p[0], name == "startswith", r))
      return false;
    out = Value::boolean(r);
    return true;
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    if (!Bind(st, name.c_str(), args, {}).ok())
      return false;
    out = Value::string(name == "upper"   ? upper(s)
                        : name == "lower" ? lower(s)
                        : name == "title" ? pythonTitle(s)
                                          : capitalize(s));
    return true;
  }
  if (name == "replace")
    return callFilter(st, "replace", Value::string(s), args, out);
  if (name == "find" || name == "rfind" || name == "count") {
    Bind p(st, name.c_str(), args, {"sub"});
    if (!p.ok() || !needString(st, p[0], (name + "()'s argument").c_str()))
      return false;
    const std::string &sub = p[0]->str();
    if (name == "count") {
      int64_t n = 0;
      if (sub.empty())
        n = static_cast<int64_t>(codePointCount(s)) + 1;
      else
        for (size_t at = findText(s, sub); at != std::string::npos;
             at = findText(s, sub, at + sub.size()))
          ++n;
      out = Value::integer(n);
    } else {
      out = Value::integer(cpIndex(s, name == "find" ? findText(s, sub) : findLastText(s, sub)));
    }
    return st.step(s.size() / 64);
  }
  if (name == "join") {
    Bind p(st, name.c_str(), args, {"iterable"});
    List items;
    if (!p.ok() || !p[0] || !iterate(st, *p[0], items))
      return p.ok() && p[0] ? false : st.fail("join() needs an iterable");
    std::string joined;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].isString())
        return st.fail("sequence item " + std::to_string(i) + ": expected str instance, " +
                       items[i].typeName() + " found");
      joined += (i ? s : "") + items[i].str();
      if (!st.grow(joined.size()))
        return false;
    }
    out = Value::string(std::move(joined));
    return true;
  }
  if (name == "splitlines") {
    List lines;
    for (std::string &line : splitLines(s))
      lines.push_back(Value::string(std::move(line)));
    out = Value::list(std::move(lines));
    return st.step(out.items().size());
  }
  // The character classes.
  bool r = !s.empty();
  if (name == "islower" || name == "isupper") {
    r = hasCased(s, name == "islower");
  } else {
    for (char c : s) {
      if (name == "isalpha")
        r = r && asciiAlpha(c);
      else if (name == "isdigit")
        r = r && asciiDigit(c);
      else if (name == "isalnum")
        r = r && (asciiAlpha(c) || asciiDigit(c));
      else if (name == "isspace")
        r = r && isPythonSpace(static_cast<unsigned char>(c));
    }
  }
  out = Value::boolean(r);
  return true;
}

bool dictMethod(RenderState &st, const Value &self, const std::string &name, const Args &args,
                Value &out) {
  const Dict &d = self.dict();
  if (name == "get") {
    Bind p(st, "get", args, {"key", "default"});
    if (!p.ok())
      return false;
    if (!p[0])
      return st.fail("get() needs a key");
    const Value *found = d.find(*p[0]);
    out = found ? *found : p[1] ? *p[1] : Value::none();
    return true;
  }
  if (!Bind(st, name.c_str(), args, {}).ok())
    return false;
  if (name == "copy") {
    out = self;
    return true;
  }
  List items;
  for (const auto &[key, value] : d.entries)
    items.push_back(name == "keys" ? key : name == "values" ? value : Value::tuple({key, value}));
  out = Value::list(std::move(items));
  return st.step(d.size());
}

bool listMethod(RenderState &st, const Value &self, const std::string &name, const Args &args,
                Value &out) {
  const List &items = self.items();
  if (name == "copy") {
    if (!Bind(st, "copy", args, {}).ok())
      return false;
    out = self;
    return true;
  }
  Bind p(st, name.c_str(), args, {"value"});
  if (!p.ok())
    return false;
  if (!p[0])
    return st.fail(name + "() needs an argument");
  int64_t n = 0, first = -1;
  uint64_t work = 0;
  for (size_t i = 0; i < items.size(); ++i)
    if (equal(items[i], *p[0], &work)) {
      ++n;
      if (first < 0)
        first = static_cast<int64_t>(i);
    }
  if (!st.step(work / 16))
    return false;
  if (name == "index" && first < 0)
    return st.fail("the value is not in the list");
  out = Value::integer(name == "index" ? first : n);
  return true;
}

// ---- Globals ----

bool gRange(RenderState &st, const Args &args, Value &out) {
  if (!args.keywords.empty())
    return st.fail("range() takes no keyword arguments");
  size_t n = args.positional.size();
  if (n < 1 || n > 3)
    return st.fail("range() takes one to three arguments");
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < n; ++i)
    if (!needInt(st, &args.positional[i], "range()'s arguments", v[n == 1 ? 1 : i]))
      return false;
  if (v[2] == 0)
    return st.fail("range() arg 3 must not be zero");
  int64_t start = v[0], stop = v[1], stride = v[2];
  // The count in double: start and stop may be far apart.
  double count = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / stride);
  if (count > kMaxRange)
    return st.fail("range too big: the sandbox allows at most " + std::to_string(kMaxRange) +
                   " items");
  List items;
  for (int64_t i = 0; i < static_cast<int64_t>(std::max(count, 0.0)); ++i)
    items.push_back(Value::integer(start + i * stride));
  if (!st.step(items.size()))
    return false;
  out = Value::list(std::move(items));
  return true;
}

// The entries dict() and namespace() take: a mapping or pairs, then keywords.
bool dictArgs(RenderState &st, const char *name, const Args &args, Dict &d) {
  if (args.positional.size() > 1)
    return st.fail(std::string(name) + "() takes at most one positional argument");
  if (!args.positional.empty()) {
    const Value &init = args.positional[0];
    if (init.isDict() || init.kind() == Value::Kind::Namespace) {
      d = init.dict();
    } else if (init.isSequence()) {
      for (const Value &pair : init.items()) {
        if (!pair.isSequence() || pair.items().size() != 2)
          return st.fail(std::string(name) + "()'s sequence must hold pairs");
        if (!st.step(d.lookupCost(pair.items()[0]) / 16))
          return false;
        d.set(pair.items()[0], pair.items()[1]);
      }
    } else {
      return st.fail(std::string(name) + "() takes a mapping, not " + init.typeName());
    }
  }
  for (const auto &[key, value] : args.keywords)
    d.set(Value::string(key), value);
  return st.step(d.size());
}

bool gStrftime(RenderState &st, const Args &args, Value &out) {
  Bind p(st, "strftime_now", args, {"format"});
  if (!p.ok() || !needString(st, p[0], "strftime_now's format"))
    return false;
  const std::string &format = p[0]->str();
  if (format.size() > 256)
    return st.fail("strftime_now's format is longer than 256 bytes");
  std::time_t t = st.now ? static_cast<std::time_t>(*st.now) : std::time(nullptr);
  std::tm tm{};
  if (st.now ? !gmtime_r(&t, &tm) : !localtime_r(&t, &tm))
    return st.fail("strftime_now: the time cannot be represented");
  if (format.empty()) {
    out = Value::string("");
    return true;
  }
  char buffer[4096];
  size_t n = std::strftime(buffer, sizeof buffer, format.c_str(), &tm);
  if (n == 0)
    return st.fail("strftime_now's text is empty or longer than 4096 bytes");
  out = Value::string(std::string(buffer, n));
  return true;
}

bool callGlobal(RenderState &st, const std::string &name, const Args &args, Value &out) {
  if (name == "range")
    return gRange(st, args, out);
  if (name == "namespace" || name == "dict") {
    Dict d;
    if (!dictArgs(st, name.c_str(), args, d))
      return false;
    if (name == "dict") {
      out = Value::dict(std::move(d));
      return true;
    }
    out = Value::namespaceObject(std::move(d));
    st.namespaces.push_back(out);
    return true;
  }
  if (name == "raise_exception") {
    Bind p(st, "raise_exception", args, {"message"});
    std::string message;
    if (!p.ok() || (p[0] && !toStr(st, *p[0], message)))
      return false;
    return st.fail("the template raised: " + message);
  }
  if (name == "strftime_now")
    return gStrftime(st, args, out);
  return st.fail("'" + name + "' is not callable");
}

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

Value builtinGlobal(const std::string &name) {
  static const char *const kGlobals[] = {"range", "namespace", "dict", "raise_exception",
                                         "strftime_now"};
  for (const char *g : kGlobals)
    if (name == g) {
      auto fn = std::make_shared<Callable>();
      fn->kind = Callable::Kind::Global;
      fn->name = name;
      return Value::callable(std::move(fn));
    }
  return Value::undefined("'" + name + "' is undefined");
}

bool hasMethod(const Value &obj, const std::string &name) {
  switch (obj.kind()) {
  case Value::Kind::String:
    return among(kStrMethods, name);
  case Value::Kind::Dict:
    return among(kDictMethods, name) || among(kDictUnsafe, name);
  case Value::Kind::List:
  case Value::Kind::Tuple:
    return among(kListMethods, name) || among(kListUnsafe, name);
  case Value::Kind::Loop:
    return name == "cycle";
  default:
    return false;
  }
}

Value boundMethod(const Value &obj, const std::string &name) {
  auto fn = std::make_shared<Callable>();
  fn->kind = Callable::Kind::Method;
  fn->name = name;
  fn->self = obj;
  return Value::callable(std::move(fn));
}

bool callBuiltin(RenderState &st, const Callable &fn, const Args &args, Value &out) {
  if (fn.kind == Callable::Kind::Global)
    return callGlobal(st, fn.name, args, out);
  const Value &self = fn.self;
  switch (self.kind()) {
  case Value::Kind::String:
    // Methods read their text whole: its size is work.
    return st.step(self.str().size() / 64) && strMethod(st, self.str(), fn.name, args, out);
  case Value::Kind::Dict:
    if (among(kDictUnsafe, fn.name))
      break;
    return dictMethod(st, self, fn.name, args, out);
  case Value::Kind::List:
  case Value::Kind::Tuple:
    if (among(kListUnsafe, fn.name))
      break;
    return listMethod(st, self, fn.name, args, out);
  case Value::Kind::Loop: {
    // loop.cycle(a, b, ...): the argument at the iteration's index, round robin.
    if (args.positional.empty())
      return st.fail("no items for cycling given");
    out = args.positional[self.loopState().index0 % args.positional.size()];
    return true;
  }
  default:
    break;
  }
  return st.fail("access to attribute '" + fn.name + "' of '" + self.typeName() +
                 "' object is unsafe (transformers renders in Jinja's immutable sandbox)");
}

} // namespace tessel::tok::chat
