//===- ChatTemplateValue.h - The values of chat templates -------*- C++ -*-===//
//
// Chat templates run as Python's Jinja2 runs them inside Hugging Face's transformers, so their
// values behave as the Python objects they stand for: `{{ [1, 'a'] }}` prints Python's repr,
// `1 == 1.0` holds, `7 // -2` floors, strings index and count code points, `tojson` writes
// json.dumps's text. A value is a kind and, for strings and containers, a shared pointer:
// copying one is cheap, and templates cannot change lists and dicts (transformers renders in
// Jinja's immutable sandbox), so sharing is safe. Namespaces are the one mutable object; the
// renderer empties them all after a render, which breaks any cycle a template made through
// them.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_CHATTEMPLATEVALUE_H
#define TESSEL_COMMON_TOKENIZER_CHATTEMPLATEVALUE_H

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tessel::tok {
class JsonValue;
}

namespace tessel::tok::chat {

class Value;
struct Dict;
struct Callable;
struct LoopState;
using List = std::vector<Value>;

class Value {
public:
  /// Undefined is Jinja's Undefined: printed empty, false, iterable and empty, and an error
  /// for arithmetic, calls and attribute access. Loop is a for loop's `loop` object.
  enum class Kind : uint8_t {
    Undefined,
    None,
    Bool,
    Int,
    Float,
    String,
    List,
    Tuple,
    Dict,
    Namespace,
    Loop,
    Callable
  };

  /// An undefined value.
  Value() = default;
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value real(double f);
  static Value string(std::string s);
  static Value list(List items);
  static Value tuple(List items);
  static Value dict(Dict entries);
  static Value namespaceObject(Dict attributes);
  static Value loop(std::shared_ptr<const LoopState> state);
  static Value callable(std::shared_ptr<const Callable> fn);
  /// The value of a JSON document's value, as Python's json.loads makes it.
  static Value fromJson(const JsonValue &json);

  Kind kind() const { return kind_; }
  bool isUndefined() const { return kind_ == Kind::Undefined; }
  bool isNone() const { return kind_ == Kind::None; }
  bool isString() const { return kind_ == Kind::String; }
  bool isInt() const { return kind_ == Kind::Int; }
  bool isBool() const { return kind_ == Kind::Bool; }
  /// Int, Float or Bool: Python's numbers.
  bool isNumber() const {
    return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool;
  }
  /// List or Tuple.
  bool isSequence() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }
  bool isDict() const { return kind_ == Kind::Dict; }

  bool boolValue() const { return b_; }
  int64_t intValue() const { return i_; }
  /// A number as a double (Int, Float or Bool).
  double number() const;
  const std::string &str() const { return *static_cast<const std::string *>(ptr_.get()); }
  const List &items() const { return *static_cast<const List *>(ptr_.get()); }
  /// The entries of a Dict, the attributes of a Namespace.
  const Dict &dict() const { return *static_cast<const Dict *>(ptr_.get()); }
  Dict &namespaceAttributes() const { return *static_cast<Dict *>(ptr_.get()); }
  const LoopState &loopState() const { return *static_cast<const LoopState *>(ptr_.get()); }
  const Callable &callable() const { return *static_cast<const Callable *>(ptr_.get()); }
  /// Why an undefined value is undefined, as Jinja says it ("'x' is undefined").
  std::string undefinedHint() const;
  /// Whether two values are the same object (namespaces and callables compare so).
  bool sameObject(const Value &other) const { return ptr_ == other.ptr_; }
  /// How deeply the value nests: 0 for scalars and namespaces, 1 + the deepest part for
  /// containers, loops and bound methods. Comparison, printing and destruction recurse this
  /// deep, so the renderer bounds it; a namespace stays 0 because it is compared by identity
  /// and kept alive until the render ends.
  unsigned depth() const { return depth_; }

  /// Python's truth: None, False, 0, 0.0, empty strings and containers, Undefined are false.
  bool truthy() const;
  /// Python's type name ("str", "dict", "NoneType"), for messages.
  const char *typeName() const;

private:
  void deepen(const Value &part) {
    depth_ = static_cast<uint16_t>(std::min(0xFFFFu, std::max<unsigned>(depth_, part.depth_ + 1u)));
  }

  Kind kind_ = Kind::Undefined;
  uint16_t depth_ = 0;
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<void> ptr_;
};

/// An ordered mapping, as Python's dict: keys keep their first position, a later set replaces
/// the value. Keys compare as Python's do (1, 1.0 and True are one key).
struct Dict {
  std::vector<std::pair<Value, Value>> entries;

  const Value *find(const Value &key) const;
  const Value *find(std::string_view key) const;
  void set(Value key, Value value);
  size_t size() const { return entries.size(); }
  /// The entries a lookup of `key` compares: one where the dict keeps an index of its string
  /// keys, all of them otherwise. For the work a render counts.
  size_t lookupCost(const Value &key) const {
    return key.isString() && !index_.empty() ? 1 : entries.size();
  }
  void clear() {
    entries.clear();
    index_.clear();
  }

private:
  // String keys to positions, kept once a dict is large (tool schemas, long JSON objects).
  std::unordered_map<std::string, size_t> index_;
};

/// What a for loop's `loop` object reads.
struct LoopState {
  int64_t index0 = 0, length = 0;
  Value previous, next;
};

/// Something a template can call: a global function, a method bound to its object, or a macro.
struct Callable {
  enum class Kind : uint8_t { Global, Method, Macro };
  Kind kind = Kind::Global;
  /// The global's or the method's name.
  std::string name;
  /// The object a method is bound to.
  Value self;
  /// The macro's definition (a node of the template) and the scope it was defined in, which
  /// it reads at call time while that scope lives.
  const void *macro = nullptr;
  std::weak_ptr<void> closure;
};

/// Whether Python can hash the value (a dict key, a set member): not lists, dicts, namespaces,
/// nor tuples holding them.
bool hashable(const Value &v);
/// Python's ==. `work`, when given, grows by the number of values compared: comparing large
/// containers is work a render's limits count.
bool equal(const Value &a, const Value &b, uint64_t *work = nullptr);
/// Python's < for numbers, strings, lists and tuples; false with `error` set for other kinds.
bool lessThan(const Value &a, const Value &b, bool &result, std::string &error,
              uint64_t *work = nullptr);

/// Python's str(): strings as they are, None and booleans as "None", "True", containers as
/// their repr; Undefined is empty. False with `error` when the text would nest deeper than
/// Python's repr can.
bool appendStr(const Value &v, std::string &out, std::string &error);
/// Python's repr().
bool appendRepr(const Value &v, std::string &out, std::string &error);
/// Python's repr of a float: the shortest text that reads back as `f` ("0.1", "1e+16").
std::string formatFloat(double f);

/// How tojson writes: json.dumps's indent (none, a number of spaces, or a string), its
/// separators, sort_keys and ensure_ascii.
struct JsonStyle {
  bool indented = false;
  std::string indent;
  std::string itemSeparator = ", ", keySeparator = ": ";
  bool sortKeys = false, ensureAscii = false;
};
/// json.dumps(v) in `style`; false with `error` for what JSON cannot hold (Undefined,
/// namespaces, callables, dict keys that are containers).
bool appendJson(const Value &v, const JsonStyle &style, std::string &out, std::string &error);

/// The first occurrence of `needle` in `haystack` at or after byte `from`, or npos. In time
/// linear in their sizes (glibc's two-way memmem), where std::string::find can take their
/// product: templates search texts that come from outside.
size_t findText(std::string_view haystack, std::string_view needle, size_t from = 0);
/// The last occurrence of `needle` in `haystack`, or npos; linear time too.
size_t findLastText(std::string_view haystack, std::string_view needle);

/// Python's str.isspace for one code point (Unicode White_Space and U+001C..U+001F).
bool isPythonSpace(uint32_t cp);
/// The number of code points of UTF-8 text.
size_t codePointCount(std::string_view s);
/// The byte offset of code point `index` of UTF-8 text (s.size() past the end).
size_t codePointOffset(std::string_view s, size_t index);

} // namespace tessel::tok::chat

#endif // TESSEL_COMMON_TOKENIZER_CHATTEMPLATEVALUE_H
