//===- ChatTemplateMethods.cpp - The methods of strings, dicts and lists --===//
//
// The methods of strings, dicts and lists as Python's, called on a value bound to them
// (`.strip()`, `.items()`, `loop.cycle()`), with the immutable sandbox's refusals: methods that
// would change a list or dict exist, as Jinja's sandbox sees them, but calling one fails.
// String methods count code points, not bytes, and their work by the text's size.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateBuiltins.h"
#include "common/tokenizer/ChatTemplateText.h"
#include "common/tokenizer/Utf8.h"

namespace tessel::tok::chat {

namespace {

const char *const kStrMethods[] = {
    "capitalize", "count",   "endswith",   "find",       "isalnum", "isalpha", "isdigit", "islower",
    "isspace",    "isupper", "join",       "lower",      "lstrip",  "replace", "rfind",   "rsplit",
    "rstrip",     "split",   "splitlines", "startswith", "strip",   "title",   "upper"};
const char *const kDictMethods[] = {"copy", "get", "items", "keys", "values"};
const char *const kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
const char *const kListMethods[] = {"copy", "count", "index"};
const char *const kListUnsafe[] = {"append", "clear",  "extend",  "insert",
                                   "pop",    "remove", "reverse", "sort"};

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

} // namespace

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
