//===- ChatTemplateValue.cpp - The values of chat templates ---------------===//

#include "common/tokenizer/ChatTemplateValue.h"
#include "common/tokenizer/JsonReader.h"
#include "common/tokenizer/Utf8.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace tessel::tok::chat {

namespace {
// Deeper than the JSON reader's 512 levels, so any message prints; shallow enough that the
// recursion stays far from the stack's end. Only namespaces holding themselves reach it.
constexpr int kMaxPrintDepth = 600;
// A dict keeps an index of its string keys from this size on.
constexpr size_t kIndexedDictSize = 16;
} // namespace

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty())
    v.ptr_ = std::make_shared<std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}

Value Value::real(double f) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = f;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::String;
  v.ptr_ = std::make_shared<std::string>(std::move(s));
  return v;
}

Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::List;
  v.depth_ = 1;
  for (const Value &item : items)
    v.deepen(item);
  v.ptr_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::tuple(List items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::Tuple;
  return v;
}

Value Value::dict(Dict entries) {
  Value v;
  v.kind_ = Kind::Dict;
  v.depth_ = 1;
  for (const auto &[key, value] : entries.entries) {
    v.deepen(key);
    v.deepen(value);
  }
  v.ptr_ = std::make_shared<Dict>(std::move(entries));
  return v;
}

Value Value::namespaceObject(Dict attributes) {
  Value v = dict(std::move(attributes));
  v.kind_ = Kind::Namespace;
  v.depth_ = 0;
  return v;
}

Value Value::loop(std::shared_ptr<const LoopState> state) {
  Value v;
  v.kind_ = Kind::Loop;
  v.depth_ = 1;
  v.deepen(state->previous);
  v.deepen(state->next);
  v.ptr_ = std::const_pointer_cast<LoopState>(std::move(state));
  return v;
}

Value Value::callable(std::shared_ptr<const Callable> fn) {
  Value v;
  v.kind_ = Kind::Callable;
  v.depth_ = 1;
  v.deepen(fn->self);
  v.ptr_ = std::const_pointer_cast<Callable>(std::move(fn));
  return v;
}

Value Value::fromJson(const JsonValue &json) {
  switch (json.kind()) {
  case JsonValue::Kind::Null:
    return none();
  case JsonValue::Kind::Bool:
    return boolean(json.boolean());
  case JsonValue::Kind::Number:
    return json.isInteger() ? integer(json.integer()) : real(json.number());
  case JsonValue::Kind::String:
    return string(std::string(json.string()));
  case JsonValue::Kind::Array: {
    List items;
    items.reserve(json.size());
    for (size_t i = 0; i < json.size(); ++i)
      items.push_back(fromJson(json.at(i)));
    return list(std::move(items));
  }
  case JsonValue::Kind::Object: {
    Dict d;
    for (size_t i = 0; i < json.size(); ++i)
      d.set(string(std::string(json.key(i))), fromJson(json.value(i)));
    return dict(std::move(d));
  }
  }
  return none();
}

double Value::number() const {
  switch (kind_) {
  case Kind::Int:
    return static_cast<double>(i_);
  case Kind::Float:
    return f_;
  case Kind::Bool:
    return b_ ? 1.0 : 0.0;
  default:
    return 0.0;
  }
}

std::string Value::undefinedHint() const {
  if (kind_ == Kind::Undefined && ptr_)
    return str();
  return "a value is undefined";
}

bool Value::truthy() const {
  switch (kind_) {
  case Kind::Undefined:
  case Kind::None:
    return false;
  case Kind::Bool:
    return b_;
  case Kind::Int:
    return i_ != 0;
  case Kind::Float:
    return f_ != 0.0;
  case Kind::String:
    return !str().empty();
  case Kind::List:
  case Kind::Tuple:
    return !items().empty();
  case Kind::Dict:
    return dict().size() != 0;
  case Kind::Namespace:
  case Kind::Loop:
  case Kind::Callable:
    return true;
  }
  return false;
}

const char *Value::typeName() const {
  switch (kind_) {
  case Kind::Undefined:
    return "Undefined";
  case Kind::None:
    return "NoneType";
  case Kind::Bool:
    return "bool";
  case Kind::Int:
    return "int";
  case Kind::Float:
    return "float";
  case Kind::String:
    return "str";
  case Kind::List:
    return "list";
  case Kind::Tuple:
    return "tuple";
  case Kind::Dict:
    return "dict";
  case Kind::Namespace:
    return "Namespace";
  case Kind::Loop:
    return "LoopContext";
  case Kind::Callable:
    return callable().kind == Callable::Kind::Macro ? "Macro" : "builtin_function_or_method";
  }
  return "object";
}

const Value *Dict::find(std::string_view key) const {
  if (!index_.empty()) {
    auto it = index_.find(std::string(key));
    return it == index_.end() ? nullptr : &entries[it->second].second;
  }
  for (const auto &[k, v] : entries)
    if (k.isString() && k.str() == key)
      return &v;
  return nullptr;
}

const Value *Dict::find(const Value &key) const {
  if (key.isString())
    return find(std::string_view(key.str()));
  for (const auto &[k, v] : entries)
    if (equal(k, key))
      return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  if (key.isString() && !index_.empty()) {
    auto [it, added] = index_.try_emplace(key.str(), entries.size());
    if (!added) {
      entries[it->second].second = std::move(value);
      return;
    }
    entries.emplace_back(std::move(key), std::move(value));
    return;
  }
  for (auto &[k, v] : entries)
    if (equal(k, key)) {
      v = std::move(value);
      return;
    }
  entries.emplace_back(std::move(key), std::move(value));
  if (entries.size() == kIndexedDictSize &&
      std::all_of(entries.begin(), entries.end(), [](const auto &e) { return e.first.isString(); }))
    for (size_t i = 0; i < entries.size(); ++i)
      index_.emplace(entries[i].first.str(), i);
}

bool hashable(const Value &v) {
  switch (v.kind()) {
  case Value::Kind::List:
  case Value::Kind::Dict:
  case Value::Kind::Namespace:
    return false;
  case Value::Kind::Tuple:
    return std::all_of(v.items().begin(), v.items().end(),
                       [](const Value &item) { return hashable(item); });
  default:
    return true;
  }
}

bool equal(const Value &a, const Value &b, uint64_t *work) {
  using K = Value::Kind;
  if (work)
    ++*work;
  if (a.isNumber() && b.isNumber()) {
    if (a.kind() == K::Float || b.kind() == K::Float)
      return a.number() == b.number();
    int64_t x = a.isBool() ? a.boolValue() : a.intValue();
    int64_t y = b.isBool() ? b.boolValue() : b.intValue();
    return x == y;
  }
  if (a.kind() != b.kind())
    return false;
  switch (a.kind()) {
  case K::Undefined:
  case K::None:
    return true;
  case K::String:
    if (work)
      *work += std::min(a.str().size(), b.str().size()) / 64;
    return a.str() == b.str();
  case K::List:
  case K::Tuple: {
    // An object equals itself (Python compares elements so, which holds for NaN too).
    if (a.sameObject(b))
      return true;
    const List &x = a.items(), &y = b.items();
    if (x.size() != y.size())
      return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!equal(x[i], y[i], work))
        return false;
    return true;
  }
  case K::Dict: {
    if (a.sameObject(b))
      return true;
    if (a.dict().size() != b.dict().size())
      return false;
    for (const auto &[k, v] : a.dict().entries) {
      if (work)
        *work += b.dict().lookupCost(k);
      const Value *other = b.dict().find(k);
      if (!other || !equal(v, *other, work))
        return false;
    }
    return true;
  }
  default:
    return a.sameObject(b);
  }
}

bool lessThan(const Value &a, const Value &b, bool &result, std::string &error, uint64_t *work) {
  using K = Value::Kind;
  if (work)
    ++*work;
  if (a.isNumber() && b.isNumber()) {
    if (a.kind() == K::Float || b.kind() == K::Float)
      result = a.number() < b.number();
    else
      result =
          (a.isBool() ? a.boolValue() : a.intValue()) < (b.isBool() ? b.boolValue() : b.intValue());
    return true;
  }
  if (a.isString() && b.isString()) {
    if (work)
      *work += std::min(a.str().size(), b.str().size()) / 64;
    result = a.str() < b.str(); // UTF-8's byte order is its code points' order
    return true;
  }
  if (a.isSequence() && a.kind() == b.kind()) {
    const List &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equal(x[i], y[i], work))
        continue;
      return lessThan(x[i], y[i], result, error, work);
    }
    result = x.size() < y.size();
    return true;
  }
  error = std::string("'<' is not supported between instances of '") + a.typeName() + "' and '" +
          b.typeName() + "'";
  return false;
}

size_t findText(std::string_view haystack, std::string_view needle, size_t from) {
  if (from > haystack.size())
    return std::string_view::npos;
  if (needle.empty())
    return from;
  const void *at =
      memmem(haystack.data() + from, haystack.size() - from, needle.data(), needle.size());
  return at ? static_cast<const char *>(at) - haystack.data() : std::string_view::npos;
}

size_t findLastText(std::string_view haystack, std::string_view needle) {
  if (needle.size() > haystack.size())
    return std::string_view::npos;
  // The first match in the reversed bytes is the last in the text.
  std::string h(haystack.rbegin(), haystack.rend()), n(needle.rbegin(), needle.rend());
  size_t at = findText(h, n);
  return at == std::string_view::npos ? at : haystack.size() - at - needle.size();
}

std::string formatFloat(double f) {
  if (std::isnan(f))
    return "nan";
  if (std::isinf(f))
    return f < 0 ? "-inf" : "inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, f, std::chars_format::scientific);
  (void)ec;
  std::string_view text(buffer, end - buffer);
  std::string out;
  if (text.front() == '-') {
    out += '-';
    text.remove_prefix(1);
  }
  size_t e = text.find('e');
  std::string digits;
  for (char c : text.substr(0, e))
    if (c != '.')
      digits += c;
  int exponent = 0;
  std::from_chars(text.data() + e + (text[e + 1] == '+' ? 2 : 1), text.data() + text.size(),
                  exponent);
  // Python's repr: positional while the decimal point falls within -4 < point <= 16.
  int point = exponent + 1;
  if (point > -4 && point <= 16) {
    if (point <= 0)
      out += "0." + std::string(-point, '0') + digits;
    else if (static_cast<size_t>(point) >= digits.size())
      out += digits + std::string(point - digits.size(), '0') + ".0";
    else
      out += digits.substr(0, point) + "." + digits.substr(point);
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1)
    out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

bool isPythonSpace(uint32_t cp) { return isUnicodeWhiteSpace(cp) || (cp >= 0x1C && cp <= 0x1F); }

size_t codePointCount(std::string_view s) {
  size_t n = 0;
  for (char c : s)
    n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

size_t codePointOffset(std::string_view s, size_t index) {
  size_t i = 0;
  for (; i < s.size() && index > 0; --index)
    i += std::min(utf8SequenceLength(static_cast<unsigned char>(s[i])), s.size() - i);
  return i;
}

namespace {

void appendHex(std::string &out, const char *prefix, uint32_t cp, int width) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "%s%0*x", prefix, width, cp);
  out += buffer;
}

// Python's str.isprintable for the code points a chat is likely to hold: controls, the
// format characters and the separators other than the space print escaped.
bool isPrintable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD)
    return false;
  if (cp == 0x1680 || cp == 0x180E || cp == 0x061C || (cp >= 0x2000 && cp <= 0x200F) ||
      (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 ||
      cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB) || (cp >= 0xD800 && cp <= 0xF8FF) ||
      cp >= 0xF0000)
    return false;
  return true;
}

void appendStringRepr(std::string_view s, std::string &out) {
  char quote = '\'';
  if (s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos)
    quote = '"';
  out += quote;
  for (size_t i = 0; i < s.size();) {
    size_t length = 1;
    uint32_t cp = decodeUtf8(s, i, length);
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (isPrintable(cp)) {
      out.append(s.substr(i, length));
    } else if (cp <= 0xFF) {
      appendHex(out, "\\x", cp, 2);
    } else if (cp <= 0xFFFF) {
      appendHex(out, "\\u", cp, 4);
    } else {
      appendHex(out, "\\U", cp, 8);
    }
    i += length;
  }
  out += quote;
}

bool tooDeep(std::string &error) {
  error = "the value nests deeper than " + std::to_string(kMaxPrintDepth) + " levels";
  return false;
}

bool appendReprAt(const Value &v, std::string &out, std::string &error, int depth) {
  using K = Value::Kind;
  if (depth > kMaxPrintDepth)
    return tooDeep(error);
  switch (v.kind()) {
  case K::Undefined:
    out += "Undefined";
    return true;
  case K::None:
    out += "None";
    return true;
  case K::Bool:
    out += v.boolValue() ? "True" : "False";
    return true;
  case K::Int:
    out += std::to_string(v.intValue());
    return true;
  case K::Float:
    out += formatFloat(v.number());
    return true;
  case K::String:
    appendStringRepr(v.str(), out);
    return true;
  case K::List:
  case K::Tuple: {
    const List &items = v.items();
    out += v.kind() == K::List ? '[' : '(';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i)
        out += ", ";
      if (!appendReprAt(items[i], out, error, depth + 1))
        return false;
    }
    if (v.kind() == K::Tuple && items.size() == 1)
      out += ',';
    out += v.kind() == K::List ? ']' : ')';
    return true;
  }
  case K::Dict:
  case K::Namespace: {
    if (v.kind() == K::Namespace)
      out += "<Namespace ";
    out += '{';
    bool first = true;
    for (const auto &[key, value] : v.dict().entries) {
      if (!first)
        out += ", ";
      first = false;
      if (!appendReprAt(key, out, error, depth + 1))
        return false;
      out += ": ";
      if (!appendReprAt(value, out, error, depth + 1))
        return false;
    }
    out += '}';
    if (v.kind() == K::Namespace)
      out += '>';
    return true;
  }
  case K::Loop:
    out += "<LoopContext " + std::to_string(v.loopState().index0 + 1) + "/" +
           std::to_string(v.loopState().length) + ">";
    return true;
  case K::Callable:
    if (v.callable().kind == Callable::Kind::Macro)
      out += "<Macro '" + v.callable().name + "'>";
    else
      out += "<built-in function " + v.callable().name + ">";
    return true;
  }
  return true;
}

void appendJsonString(std::string_view s, bool ensureAscii, std::string &out) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    default:
      if (c < 0x20) {
        appendHex(out, "\\u", c, 4);
      } else if (c >= 0x80 && ensureAscii) {
        size_t length = 1;
        uint32_t cp = decodeUtf8(s, i, length);
        if (cp >= 0x10000) {
          cp -= 0x10000;
          appendHex(out, "\\u", 0xD800 + (cp >> 10), 4);
          appendHex(out, "\\u", 0xDC00 + (cp & 0x3FF), 4);
        } else {
          appendHex(out, "\\u", cp, 4);
        }
        i += length;
        continue;
      } else {
        out += static_cast<char>(c);
      }
    }
    ++i;
  }
  out += '"';
}

bool appendJsonFloat(double f, std::string &out) {
  if (std::isnan(f))
    out += "NaN";
  else if (std::isinf(f))
    out += f < 0 ? "-Infinity" : "Infinity";
  else
    out += formatFloat(f);
  return true;
}

// A dict key as json.dumps writes it: strings as they are, numbers, booleans and None as
// their JSON text.
bool jsonKey(const Value &key, std::string &text, std::string &error) {
  using K = Value::Kind;
  switch (key.kind()) {
  case K::String:
    text = key.str();
    return true;
  case K::Int:
    text = std::to_string(key.intValue());
    return true;
  case K::Float:
    text.clear();
    return appendJsonFloat(key.number(), text);
  case K::Bool:
    text = key.boolValue() ? "true" : "false";
    return true;
  case K::None:
    text = "null";
    return true;
  default:
    error = std::string("keys must be str, int, float, bool or None, not ") + key.typeName();
    return false;
  }
}

void newline(const JsonStyle &style, int level, std::string &out) {
  out += '\n';
  for (int i = 0; i < level; ++i)
    out += style.indent;
}

bool appendJsonAt(const Value &v, const JsonStyle &style, std::string &out, std::string &error,
                  int depth) {
  using K = Value::Kind;
  if (depth > kMaxPrintDepth)
    return tooDeep(error);
  switch (v.kind()) {
  case K::None:
    out += "null";
    return true;
  case K::Bool:
    out += v.boolValue() ? "true" : "false";
    return true;
  case K::Int:
    out += std::to_string(v.intValue());
    return true;
  case K::Float:
    return appendJsonFloat(v.number(), out);
  case K::String:
    appendJsonString(v.str(), style.ensureAscii, out);
    return true;
  case K::List:
  case K::Tuple: {
    const List &items = v.items();
    if (items.empty()) {
      out += "[]";
      return true;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i)
        out += style.itemSeparator;
      if (style.indented)
        newline(style, depth + 1, out);
      if (!appendJsonAt(items[i], style, out, error, depth + 1))
        return false;
    }
    if (style.indented)
      newline(style, depth, out);
    out += ']';
    return true;
  }
  case K::Dict: {
    const auto &entries = v.dict().entries;
    if (entries.empty()) {
      out += "{}";
      return true;
    }
    std::vector<std::pair<std::string, const Value *>> members;
    members.reserve(entries.size());
    for (const auto &[key, value] : entries) {
      members.emplace_back(std::string(), &value);
      if (!jsonKey(key, members.back().first, error))
        return false;
    }
    if (style.sortKeys)
      std::stable_sort(members.begin(), members.end(),
                       [](const auto &a, const auto &b) { return a.first < b.first; });
    out += '{';
    for (size_t i = 0; i < members.size(); ++i) {
      if (i)
        out += style.itemSeparator;
      if (style.indented)
        newline(style, depth + 1, out);
      appendJsonString(members[i].first, style.ensureAscii, out);
      out += style.keySeparator;
      if (!appendJsonAt(*members[i].second, style, out, error, depth + 1))
        return false;
    }
    if (style.indented)
      newline(style, depth, out);
    out += '}';
    return true;
  }
  default:
    error = std::string("Object of type ") + v.typeName() + " is not JSON serializable";
    return false;
  }
}

} // namespace

bool appendRepr(const Value &v, std::string &out, std::string &error) {
  return appendReprAt(v, out, error, 0);
}

bool appendStr(const Value &v, std::string &out, std::string &error) {
  if (v.isString()) {
    out += v.str();
    return true;
  }
  if (v.isUndefined())
    return true;
  return appendReprAt(v, out, error, 0);
}

bool appendJson(const Value &v, const JsonStyle &style, std::string &out, std::string &error) {
  return appendJsonAt(v, style, out, error, 0);
}

} // namespace tessel::tok::chat
