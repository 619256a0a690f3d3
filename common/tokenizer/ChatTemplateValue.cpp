//===- ChatTemplateValue.cpp - The values of chat templates ---------------===//
//
// Values as the Python objects they stand for: made from literals and from JSON, their truth
// and type names, Python's dict with its order and key equality, hashability, == and <, and
// the text searches and code-point counts of strings. Printing them (str, repr, json.dumps)
// is in ChatTemplateValuePrint.cpp.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateValue.h"
#include "common/tokenizer/JsonReader.h"
#include "common/tokenizer/Utf8.h"

#include <algorithm>
#include <cstring>

namespace tessel::tok::chat {

namespace {
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

} // namespace tessel::tok::chat
