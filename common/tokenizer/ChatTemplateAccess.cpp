//===- ChatTemplateAccess.cpp - Attributes, items, slices, iteration ------===//
//
// How Jinja reaches into values: `obj.name` (a method of the object's type, else a dict's key,
// else undefined), `obj[key]` (an element or a value, else as `.name` for string keys, else
// undefined), slices, the elements a for loop visits, `in`, len() and str(). Undefined objects
// are errors here, as Jinja's Undefined makes them.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateBuiltins.h"
#include "common/tokenizer/Utf8.h"

#include <algorithm>
#include <iterator>

namespace tessel::tok::chat {

namespace {

const std::string_view kLoopFields[] = {"index",    "index0", "revindex", "revindex0",
                                        "first",    "last",   "length",   "previtem",
                                        "nextitem", "depth",  "depth0",   "cycle"};

// The object's name in Jinja's undefined messages: "'dict object'", "'None'".
std::string objectName(const Value &v) {
  if (v.isNone())
    return "'None'";
  return std::string("'") + v.typeName() + " object'";
}

// Jinja's message for a missing element: "list object has no element 3".
std::string elementMissing(const Value &obj, const Value &key) {
  std::string text = obj.isNone() ? "None" : std::string(obj.typeName()) + " object", ignored;
  text += " has no element ";
  appendRepr(key, text, ignored);
  return text;
}

} // namespace

bool length(RenderState &st, const Value &v, int64_t &out) {
  switch (v.kind()) {
  case Value::Kind::Undefined:
    out = 0;
    return true;
  case Value::Kind::String:
    out = static_cast<int64_t>(codePointCount(v.str()));
    return st.step(v.str().size() / 64);
  case Value::Kind::List:
  case Value::Kind::Tuple:
    out = static_cast<int64_t>(v.items().size());
    return true;
  case Value::Kind::Dict:
    out = static_cast<int64_t>(v.dict().size());
    return true;
  case Value::Kind::Loop:
    out = v.loopState().length;
    return true;
  default:
    return st.fail(std::string("object of type '") + v.typeName() + "' has no len()");
  }
}

bool toStr(RenderState &st, const Value &v, std::string &out) {
  out.clear();
  std::string error;
  if (!appendStr(v, out, error))
    return st.fail(error);
  return st.grow(out.size());
}

bool getAttribute(RenderState &st, const Value &obj, const std::string &name, Value &out) {
  using K = Value::Kind;
  switch (obj.kind()) {
  case K::Undefined:
    return undefinedError(st, obj);
  case K::Dict:
    if (hasMethod(obj, name)) {
      out = boundMethod(obj, name);
      return true;
    }
    if (const Value *v = obj.dict().find(std::string_view(name))) {
      out = *v;
      return true;
    }
    break;
  case K::Namespace:
    if (const Value *v = obj.dict().find(std::string_view(name))) {
      out = *v;
      return true;
    }
    break;
  case K::String:
    if (hasMethod(obj, name)) {
      out = boundMethod(obj, name);
      return true;
    }
    break;
  case K::List:
  case K::Tuple:
    if (hasMethod(obj, name)) {
      out = boundMethod(obj, name);
      return true;
    }
    break;
  case K::Loop: {
    if (std::find(std::begin(kLoopFields), std::end(kLoopFields), name) == std::end(kLoopFields))
      break;
    const LoopState &l = obj.loopState();
    if (name == "cycle")
      out = boundMethod(obj, name);
    else if (name == "index")
      out = Value::integer(l.index0 + 1);
    else if (name == "index0")
      out = Value::integer(l.index0);
    else if (name == "revindex")
      out = Value::integer(l.length - l.index0);
    else if (name == "revindex0")
      out = Value::integer(l.length - l.index0 - 1);
    else if (name == "first")
      out = Value::boolean(l.index0 == 0);
    else if (name == "last")
      out = Value::boolean(l.index0 + 1 == l.length);
    else if (name == "length")
      out = Value::integer(l.length);
    else if (name == "previtem")
      out = l.index0 > 0 ? l.previous : Value::undefined("there is no previous item");
    else if (name == "nextitem")
      out = l.index0 + 1 < l.length ? l.next : Value::undefined("there is no next item");
    else
      out = Value::integer(name == "depth" ? 1 : 0);
    return true;
  }
  default:
    break;
  }
  out = Value::undefined(objectName(obj) + " has no attribute '" + name + "'");
  return true;
}

bool getItem(RenderState &st, const Value &obj, const Value &key, Value &out) {
  if (obj.isUndefined())
    return undefinedError(st, obj);
  if (key.isString() && !st.step(key.str().size() / 64))
    return false;
  if (obj.isDict() && !st.step(obj.dict().lookupCost(key) / 16))
    return false;
  if (obj.isDict()) {
    if (const Value *v = obj.dict().find(key)) {
      out = *v;
      return true;
    }
  } else if ((obj.isSequence() || obj.isString()) && (key.isInt() || key.isBool())) {
    int64_t i = key.isInt() ? key.intValue() : key.boolValue();
    int64_t n = 0;
    if (!length(st, obj, n))
      return false;
    if (i < 0)
      i += n;
    if (i >= 0 && i < n) {
      if (obj.isString()) {
        if (!st.step(obj.str().size() / 64))
          return false;
        const std::string &s = obj.str();
        size_t begin = codePointOffset(s, static_cast<size_t>(i));
        size_t end = begin + std::min(utf8SequenceLength(static_cast<unsigned char>(s[begin])),
                                      s.size() - begin);
        out = Value::string(s.substr(begin, end - begin));
      } else {
        out = obj.items()[static_cast<size_t>(i)];
      }
      return true;
    }
    out = Value::undefined(elementMissing(obj, key));
    return true;
  }
  if (key.isString())
    return getAttribute(st, obj, key.str(), out);
  out = Value::undefined(elementMissing(obj, key));
  return true;
}

bool getSlice(RenderState &st, const Value &obj, const Value &start, const Value &stop,
              const Value &step, Value &out) {
  if (obj.isUndefined())
    return undefinedError(st, obj);
  if (!obj.isSequence() && !obj.isString())
    return st.fail(std::string("'") + obj.typeName() + "' object is not sliceable");
  int64_t n = 0;
  if (!length(st, obj, n))
    return false;
  auto part = [&](const Value &v, bool &given, int64_t &x) {
    given = !(v.isUndefined() || v.isNone());
    if (!given)
      return true;
    if (!v.isInt() && !v.isBool())
      return st.fail("slice indices must be integers or None");
    x = v.isInt() ? v.intValue() : v.boolValue();
    return true;
  };
  bool hasStart, hasStop, hasStep;
  int64_t a = 0, b = 0, s = 1;
  if (!part(start, hasStart, a) || !part(stop, hasStop, b) || !part(step, hasStep, s))
    return false;
  if (s == 0)
    return st.fail("slice step cannot be zero");
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](bool given, int64_t x, int64_t otherwise) {
    if (!given)
      return otherwise;
    if (x < 0) {
      x += n;
      if (x < 0)
        x = s < 0 ? -1 : 0;
    } else if (x >= n) {
      x = s < 0 ? n - 1 : n;
    }
    return x;
  };
  a = adjust(hasStart, a, s < 0 ? n - 1 : 0);
  b = adjust(hasStop, b, s < 0 ? -1 : n);
  std::vector<int64_t> indices;
  for (int64_t i = a; s > 0 ? i < b : i > b; i += s)
    indices.push_back(i);
  if (!st.step(indices.size()))
    return false;
  if (obj.isString()) {
    // One walk over the code points, forward or backward, picking every step-th.
    const std::string &text = obj.str();
    if (!st.step(text.size() / 64))
      return false;
    std::string r;
    if (!indices.empty()) {
      size_t at = codePointOffset(text, static_cast<size_t>(indices.front()));
      int64_t index = indices.front();
      for (size_t k = 0; k < indices.size();) {
        size_t length =
            std::min(utf8SequenceLength(static_cast<unsigned char>(text[at])), text.size() - at);
        if (index == indices[k]) {
          r.append(text, at, length);
          ++k;
        }
        if (s > 0) {
          at += length;
          ++index;
        } else if (index > 0) {
          do
            --at;
          while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80);
          --index;
        } else {
          break;
        }
      }
    }
    out = Value::string(std::move(r));
    return true;
  }
  List items;
  items.reserve(indices.size());
  for (int64_t i : indices)
    items.push_back(obj.items()[i]);
  out = obj.kind() == Value::Kind::Tuple ? Value::tuple(std::move(items))
                                         : Value::list(std::move(items));
  return true;
}

bool iterate(RenderState &st, const Value &v, List &out) {
  using K = Value::Kind;
  out.clear();
  switch (v.kind()) {
  case K::Undefined:
    return true;
  case K::List:
  case K::Tuple:
    out = v.items();
    return st.step(out.size() / 16);
  case K::Dict:
    for (const auto &entry : v.dict().entries)
      out.push_back(entry.first);
    return st.step(out.size());
  case K::String: {
    const std::string &s = v.str();
    for (size_t i = 0; i < s.size();) {
      size_t length = std::min(utf8SequenceLength(static_cast<unsigned char>(s[i])), s.size() - i);
      out.push_back(Value::string(s.substr(i, length)));
      i += length;
    }
    return st.step(out.size());
  }
  default:
    return st.fail(std::string("'") + v.typeName() + "' object is not iterable");
  }
}

bool contains(RenderState &st, const Value &haystack, const Value &needle, bool &out) {
  using K = Value::Kind;
  switch (haystack.kind()) {
  case K::Undefined:
    out = false;
    return true;
  case K::String:
    if (!needle.isString()) {
      if (needle.isUndefined())
        return undefinedError(st, needle);
      return st.fail(std::string("'in <string>' requires string as left operand, not ") +
                     needle.typeName());
    }
    out = findText(haystack.str(), needle.str()) != std::string::npos;
    return st.step(haystack.str().size() / 64);
  case K::List:
  case K::Tuple: {
    uint64_t work = 0;
    out = std::any_of(haystack.items().begin(), haystack.items().end(),
                      [&](const Value &x) { return equal(x, needle, &work); });
    return st.step(work / 16);
  }
  case K::Dict:
    if (!hashable(needle))
      return st.fail(std::string("unhashable type: '") + needle.typeName() + "'");
    out = haystack.dict().find(needle) != nullptr;
    return st.step(haystack.dict().lookupCost(needle) / 16 +
                   (needle.isString() ? needle.str().size() / 64 : 0));
  default:
    return st.fail(std::string("argument of type '") + haystack.typeName() + "' is not iterable");
  }
}

} // namespace tessel::tok::chat
