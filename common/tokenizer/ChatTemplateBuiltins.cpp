//===- ChatTemplateBuiltins.cpp - Globals, and what builtins share --------===//
//
// What all builtins share: the render's state and the binding of arguments; and the globals
// transformers' templates call (range, namespace, dict, raise_exception, strftime_now). The
// tests are in ChatTemplateTests.cpp, the methods of strings, dicts and lists in
// ChatTemplateMethods.cpp.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateBuiltins.h"

#include <algorithm>
#include <cmath>
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
  for (const auto &keyword : args.keywords) {
    const auto &key = keyword.first; // A plain reference: C++17 lambdas cannot capture bindings.
    const auto &value = keyword.second;
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

} // namespace

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

} // namespace tessel::tok::chat
