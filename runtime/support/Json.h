//===- Json.h - A small JSON value, parser and writer -----------*- C++ -*-===//
//
// The runtime's JSON: checkpoint manifests, safetensors headers and metrics lines. Numbers keep
// an exact int64 beside the double when they are integral, so step counts and byte offsets
// survive a round trip; doubles are written in their shortest form that reads back bit-exactly.
// Objects keep insertion order, so what is written reads like what the code built.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_SUPPORT_JSON_H
#define TESSEL_RUNTIME_SUPPORT_JSON_H

#include "common/support/JsonString.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessel::rt {

/// A JSON value: null, bool, number, string, array or object.
class Json {
public:
  enum class Kind { Null, Bool, Number, String, Array, Object };
  using Array = std::vector<Json>;
  /// Members in insertion order; keys are unique.
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool value) : kind_(Kind::Bool), bool_(value) {}
  /// An exact integer (an unsigned one above INT64_MAX is kept as a double only).
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Json(T value) : kind_(Kind::Number), double_(static_cast<double>(value)) {
    if constexpr (std::is_unsigned_v<T>)
      if (static_cast<uint64_t>(value) > static_cast<uint64_t>(INT64_MAX))
        return;
    isInt_ = true;
    int_ = static_cast<int64_t>(value);
  }
  /// A double; it also counts as an integer when it is integral and fits int64 (not -0.0).
  Json(double value);
  Json(const char *value) : Json(std::string(value)) {}
  Json(std::string value) : kind_(Kind::String), string_(std::move(value)) {}
  Json(std::string_view value) : Json(std::string(value)) {}
  Json(Array value) : kind_(Kind::Array), array_(std::move(value)) {}
  Json(Object value) : kind_(Kind::Object), object_(std::move(value)) {}

  /// An empty array / object.
  static Json array() { return Json(Array{}); }
  static Json object() { return Json(Object{}); }

  Kind kind() const { return kind_; }
  bool isNull() const { return kind_ == Kind::Null; }
  bool isBool() const { return kind_ == Kind::Bool; }
  bool isNumber() const { return kind_ == Kind::Number; }
  /// A number with an exact int64 value.
  bool isInteger() const { return kind_ == Kind::Number && isInt_; }
  bool isString() const { return kind_ == Kind::String; }
  bool isArray() const { return kind_ == Kind::Array; }
  bool isObject() const { return kind_ == Kind::Object; }

  /// Accessors; each requires the matching kind (asDouble and asInt: a number, asInt an integer).
  bool asBool() const { return bool_; }
  double asDouble() const { return double_; }
  int64_t asInt() const { return int_; }
  const std::string &asString() const { return string_; }
  const Array &items() const { return array_; }
  Array &items() { return array_; }
  const Object &members() const { return object_; }

  /// Elements of an array or members of an object; 0 for scalars.
  size_t size() const;
  /// Appends to an array (a null becomes an empty array first).
  void push(Json value);
  /// The member named `key` of an object, or null when absent (or not an object).
  const Json *find(std::string_view key) const;
  Json *find(std::string_view key);
  /// Sets member `key` of an object (a null becomes an empty object first), replacing an
  /// existing member in place; returns the value.
  Json &set(std::string_view key, Json value);

  /// Structural equality; numbers compare by double, and integers also by their int64.
  bool operator==(const Json &other) const;
  bool operator!=(const Json &other) const { return !(*this == other); }

  /// Pretty text: 2-space indent, "key": value, arrays of scalars on one line. No final newline.
  std::string pretty() const;
  /// One line without spaces, for JSONL.
  std::string compact() const;

  /// Parses `text`; on failure returns nullopt and sets `error` to
  /// "<sourceName>: <what> at byte <offset>" (offsets count from 0). Nesting deeper than
  /// `maxDepth` arrays/objects, duplicate object keys and trailing content are errors.
  /// Non-finite numbers cannot be written and are written as null.
  static std::optional<Json> parse(std::string_view text, std::string_view sourceName,
                                   std::string &error, int maxDepth = 128);

private:
  void write(std::string &out, int indent, bool pretty) const;

  Kind kind_ = Kind::Null;
  bool bool_ = false;
  bool isInt_ = false;
  int64_t int_ = 0;
  double double_ = 0;
  std::string string_;
  Array array_;
  Object object_;
};

/// Reads and parses a JSON file of at most `maxBytes` (readWholeFile); errors name the path.
std::optional<Json> readJsonFile(const std::string &path, uint64_t maxBytes, std::string &error);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_SUPPORT_JSON_H
