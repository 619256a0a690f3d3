//===- JsonReader.h - A strict JSON reader for tokenizer files --*- C++ -*-===//
//
// tokenizer.json files are large (a Llama 3 file holds 128,000 vocabulary entries and 280,000
// merges) and come from outside, so the reader keeps every value in flat arrays (a node is 16
// bytes, strings share one pool) and refuses anything RFC 8259 does not allow: comments,
// trailing commas, NaN, leading zeros, control characters and invalid UTF-8 in strings, lone
// surrogate escapes, nesting deeper than 512. A refusal says where: "line L, column C: what".
//
// The runtime has its own JSON reader (runtime/support/Json.h); common/ may not include the
// runtime, and the tokenizer library is shared by the compiler's driver and the runtime.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_JSONREADER_H
#define TESSEL_COMMON_TOKENIZER_JSONREADER_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::tok {

class JsonDocument;

/// One value of a parsed document: a cheap handle, valid while its document lives.
class JsonValue {
public:
  enum class Kind : uint8_t { Null, Bool, Number, String, Array, Object };

  JsonValue() = default;
  JsonValue(const JsonDocument *doc, uint32_t node) : doc_(doc), node_(node) {}

  Kind kind() const;
  bool isNull() const { return kind() == Kind::Null; }
  bool isBool() const { return kind() == Kind::Bool; }
  bool isNumber() const { return kind() == Kind::Number; }
  bool isString() const { return kind() == Kind::String; }
  bool isArray() const { return kind() == Kind::Array; }
  bool isObject() const { return kind() == Kind::Object; }

  bool boolean() const;
  double number() const;
  /// Whether the number is an integer in int64's range, written without fraction or exponent.
  bool isInteger() const;
  int64_t integer() const;
  std::string_view string() const;

  /// Elements of an array, members of an object.
  size_t size() const;
  /// Element `i` of an array.
  JsonValue at(size_t i) const;
  /// Key and value of member `i` of an object, in document order.
  std::string_view key(size_t i) const;
  JsonValue value(size_t i) const;
  /// The value of the last member named `key` (as JSON parsers that build maps keep), or a
  /// value whose valid() is false.
  JsonValue find(std::string_view key) const;

  bool valid() const { return doc_ != nullptr; }
  /// Where the value starts in the document, for messages: "line L, column C".
  std::string location() const;
  /// The name of the value's kind ("a string", "an object"), for messages.
  const char *kindName() const;

private:
  const JsonDocument *doc_ = nullptr;
  uint32_t node_ = 0;
};

/// A parsed JSON text. The text itself need not outlive it.
class JsonDocument {
public:
  /// Parses `text` as one JSON value (whitespace around it allowed). On failure returns false
  /// and sets `error` to "line L, column C: what was wrong".
  bool parse(std::string_view text, std::string &error);
  JsonValue root() const { return JsonValue(this, 0); }
  /// "line L, column C" of byte `offset` of the parsed text.
  std::string location(size_t offset) const;

private:
  friend class JsonValue;
  friend class JsonParser;
  struct Node {
    JsonValue::Kind kind;
    uint32_t count;  // elements or members; string length
    uint32_t first;  // first child (children_ or members_), string offset, number index
    uint32_t offset; // where the value starts in the text
  };
  struct Member {
    uint32_t keyOffset, keyLength, value;
  };
  std::vector<Node> nodes_;
  std::vector<uint32_t> children_;
  std::vector<Member> members_;
  std::vector<double> numbers_;
  std::vector<int64_t> integers_;
  std::vector<uint8_t> integral_;
  std::string strings_;
  std::vector<uint32_t> lineStarts_;
};

} // namespace tessel::tok

#endif // TESSEL_COMMON_TOKENIZER_JSONREADER_H
