//===- Json.cpp - A small JSON value, parser and writer -------------------===//

#include "runtime/support/Json.h"

#include "runtime/support/AtomicFile.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

namespace tessel::rt {

Json::Json(double value) : kind_(Kind::Number), double_(value) {
  // 2^63 is exactly representable; every integral double below it fits int64.
  constexpr double kTwo63 = 9223372036854775808.0;
  if (std::isfinite(value) && value == std::trunc(value) && value >= -kTwo63 && value < kTwo63 &&
      !(value == 0 && std::signbit(value))) {
    isInt_ = true;
    int_ = static_cast<int64_t>(value);
  }
}

size_t Json::size() const {
  if (kind_ == Kind::Array)
    return array_.size();
  if (kind_ == Kind::Object)
    return object_.size();
  return 0;
}

const Json *Json::find(std::string_view key) const {
  for (const auto &member : object_)
    if (member.first == key)
      return &member.second;
  return nullptr;
}

Json *Json::find(std::string_view key) {
  return const_cast<Json *>(static_cast<const Json *>(this)->find(key));
}

void Json::push(Json value) {
  if (kind_ == Kind::Null)
    kind_ = Kind::Array;
  array_.push_back(std::move(value));
}

Json &Json::set(std::string_view key, Json value) {
  if (kind_ == Kind::Null)
    kind_ = Kind::Object;
  if (Json *existing = find(key))
    return *existing = std::move(value);
  object_.emplace_back(std::string(key), std::move(value));
  return object_.back().second;
}

bool Json::operator==(const Json &other) const {
  if (kind_ != other.kind_)
    return false;
  switch (kind_) {
  case Kind::Null:
    return true;
  case Kind::Bool:
    return bool_ == other.bool_;
  case Kind::Number:
    if (isInt_ && other.isInt_)
      return int_ == other.int_;
    return double_ == other.double_;
  case Kind::String:
    return string_ == other.string_;
  case Kind::Array:
    return array_ == other.array_;
  case Kind::Object:
    return object_ == other.object_;
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

static void writeNumber(std::string &out, bool isInt, int64_t intValue, double value) {
  char buffer[32];
  std::to_chars_result result;
  if (isInt) {
    result = std::to_chars(buffer, buffer + sizeof buffer, intValue);
  } else if (!std::isfinite(value)) {
    out += "null"; // JSON has no NaN or infinity.
    return;
  } else {
    // The shortest text that reads back as the same double (what %.17g guarantees, shorter).
    result = std::to_chars(buffer, buffer + sizeof buffer, value);
  }
  out.append(buffer, result.ptr);
}

void Json::write(std::string &out, int indent, bool pretty) const {
  switch (kind_) {
  case Kind::Null:
    out += "null";
    return;
  case Kind::Bool:
    out += bool_ ? "true" : "false";
    return;
  case Kind::Number:
    writeNumber(out, isInt_, int_, double_);
    return;
  case Kind::String:
    appendJsonString(out, string_);
    return;
  case Kind::Array: {
    if (array_.empty()) {
      out += "[]";
      return;
    }
    bool allScalars = true;
    for (const Json &item : array_)
      allScalars &= !item.isArray() && !item.isObject();
    // Shapes and other lists of scalars read best on one line.
    bool multiline = pretty && !allScalars;
    out += '[';
    for (size_t i = 0; i < array_.size(); ++i) {
      if (i)
        out += pretty && !multiline ? ", " : ",";
      if (multiline)
        out.append("\n").append(indent + 2, ' ');
      array_[i].write(out, indent + 2, pretty);
    }
    if (multiline)
      out.append("\n").append(indent, ' ');
    out += ']';
    return;
  }
  case Kind::Object: {
    if (object_.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    for (size_t i = 0; i < object_.size(); ++i) {
      if (i)
        out += ',';
      if (pretty)
        out.append("\n").append(indent + 2, ' ');
      appendJsonString(out, object_[i].first);
      out += pretty ? ": " : ":";
      object_[i].second.write(out, indent + 2, pretty);
    }
    if (pretty)
      out.append("\n").append(indent, ' ');
    out += '}';
    return;
  }
  }
}

std::string Json::pretty() const {
  std::string out;
  write(out, 0, true);
  return out;
}

std::string Json::compact() const {
  std::string out;
  write(out, 0, false);
  return out;
}

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

namespace {

class Parser {
public:
  Parser(std::string_view text, std::string_view source, int maxDepth)
      : text_(text), source_(source), maxDepth_(maxDepth) {}

  std::optional<Json> parseDocument(std::string &error) {
    std::optional<Json> value = parseValue(0);
    if (value) {
      skipSpace();
      if (pos_ < text_.size()) {
        fail("unexpected " + describe(pos_) + " after the value");
        value.reset();
      }
    }
    if (!value)
      error = error_;
    return value;
  }

private:
  /// Records the first error, at the current offset.
  void fail(const std::string &what) {
    if (!error_.empty())
      return;
    error_ = std::string(source_) + ": " + what + " at byte " + std::to_string(pos_);
  }

  void expected(const std::string &what) {
    fail("expected " + what + (pos_ >= text_.size() ? ", found the end of the input" : ""));
  }

  std::string describe(size_t at) const {
    unsigned char c = static_cast<unsigned char>(text_[at]);
    if (c >= 0x20 && c < 0x7f)
      return std::string("'") + static_cast<char>(c) + "'";
    char buffer[16];
    std::snprintf(buffer, sizeof buffer, "byte 0x%02x", c);
    return buffer;
  }

  void skipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  bool consumeWord(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word)
      return false;
    pos_ += word.size();
    return true;
  }

  std::optional<Json> parseValue(int depth) {
    skipSpace();
    if (pos_ >= text_.size()) {
      expected("a value");
      return std::nullopt;
    }
    char c = text_[pos_];
    if (c == '{' || c == '[') {
      if (depth >= maxDepth_) {
        fail("nesting deeper than " + std::to_string(maxDepth_) + " levels");
        return std::nullopt;
      }
      return c == '{' ? parseObject(depth + 1) : parseArray(depth + 1);
    }
    if (c == '"') {
      std::string value;
      if (!parseString(value))
        return std::nullopt;
      return Json(std::move(value));
    }
    if (c == '-' || (c >= '0' && c <= '9'))
      return parseNumber();
    if (consumeWord("true"))
      return Json(true);
    if (consumeWord("false"))
      return Json(false);
    if (consumeWord("null"))
      return Json();
    fail("expected a value, found " + describe(pos_));
    return std::nullopt;
  }

  std::optional<Json> parseObject(int depth) {
    ++pos_; // '{'
    Json::Object members;
    std::set<std::string> keys;
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return Json(std::move(members));
    }
    while (true) {
      skipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') {
        expected("a string key");
        return std::nullopt;
      }
      size_t keyStart = pos_;
      std::string key;
      if (!parseString(key))
        return std::nullopt;
      if (!keys.insert(key).second) {
        pos_ = keyStart;
        fail("duplicate key '" + key + "'");
        return std::nullopt;
      }
      skipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':') {
        expected("':'");
        return std::nullopt;
      }
      ++pos_;
      std::optional<Json> value = parseValue(depth);
      if (!value)
        return std::nullopt;
      members.emplace_back(std::move(key), std::move(*value));
      skipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return Json(std::move(members));
      }
      expected("',' or '}'");
      return std::nullopt;
    }
  }

  std::optional<Json> parseArray(int depth) {
    ++pos_; // '['
    Json::Array items;
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return Json(std::move(items));
    }
    while (true) {
      std::optional<Json> value = parseValue(depth);
      if (!value)
        return std::nullopt;
      items.push_back(std::move(*value));
      skipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return Json(std::move(items));
      }
      expected("',' or ']'");
      return std::nullopt;
    }
  }

  static bool isDigit(char c) { return c >= '0' && c <= '9'; }

  std::optional<Json> parseNumber() {
    size_t start = pos_;
    // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    if (text_[pos_] == '-')
      ++pos_;
    if (pos_ >= text_.size() || !isDigit(text_[pos_])) {
      expected("a digit");
      return std::nullopt;
    }
    if (text_[pos_] == '0')
      ++pos_;
    else
      while (pos_ < text_.size() && isDigit(text_[pos_]))
        ++pos_;
    bool integral = true;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      integral = false;
      ++pos_;
      if (pos_ >= text_.size() || !isDigit(text_[pos_])) {
        expected("a digit after '.'");
        return std::nullopt;
      }
      while (pos_ < text_.size() && isDigit(text_[pos_]))
        ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-'))
        ++pos_;
      if (pos_ >= text_.size() || !isDigit(text_[pos_])) {
        expected("a digit in the exponent");
        return std::nullopt;
      }
      while (pos_ < text_.size() && isDigit(text_[pos_]))
        ++pos_;
    }
    const char *first = text_.data() + start;
    const char *last = text_.data() + pos_;
    // "-0" is the double -0.0, which has no int64.
    bool negativeZero = last - first == 2 && first[0] == '-' && first[1] == '0';
    if (integral && !negativeZero) {
      int64_t value = 0;
      auto result = std::from_chars(first, last, value);
      if (result.ec == std::errc() && result.ptr == last)
        return Json(value);
      // Out of int64's range: fall through to a double.
    }
    double value = 0;
    auto result = std::from_chars(first, last, value);
    if (result.ec == std::errc::result_out_of_range) {
      pos_ = start;
      fail("number out of range");
      return std::nullopt;
    }
    if (result.ec != std::errc() || result.ptr != last) {
      pos_ = start;
      fail("malformed number");
      return std::nullopt;
    }
    return Json(value);
  }

  bool parseHex4(uint32_t &value) {
    if (pos_ + 4 > text_.size()) {
      pos_ = text_.size();
      expected("4 hex digits after \\u");
      return false;
    }
    value = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_];
      value <<= 4;
      if (c >= '0' && c <= '9')
        value |= c - '0';
      else if (c >= 'a' && c <= 'f')
        value |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        value |= c - 'A' + 10;
      else {
        expected("a hex digit");
        return false;
      }
      ++pos_;
    }
    return true;
  }

  static void appendUtf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  bool parseString(std::string &out) {
    ++pos_; // '"'
    while (true) {
      if (pos_ >= text_.size()) {
        expected("'\"' to close the string");
        return false;
      }
      char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        fail("control character " + describe(pos_) + " in a string (escape it)");
        return false;
      }
      if (c != '\\') {
        out += c; // Bytes from 0x80 up pass through unchecked.
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= text_.size()) {
        expected("an escape character");
        return false;
      }
      char escape = text_[pos_++];
      switch (escape) {
      case '"':
      case '\\':
      case '/':
        out += escape;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        size_t escapeStart = pos_ - 2;
        uint32_t cp;
        if (!parseHex4(cp))
          return false;
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
          pos_ = escapeStart;
          fail("unpaired low surrogate");
          return false;
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t low;
          if (text_.substr(pos_, 2) != "\\u" || (pos_ += 2, !parseHex4(low)) || low < 0xDC00 ||
              low > 0xDFFF) {
            if (error_.empty()) {
              pos_ = escapeStart;
              fail("unpaired high surrogate");
            }
            return false;
          }
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        appendUtf8(out, cp);
        break;
      }
      default:
        --pos_;
        fail("invalid escape " + describe(pos_));
        return false;
      }
    }
  }

  std::string_view text_;
  std::string_view source_;
  int maxDepth_;
  size_t pos_ = 0;
  std::string error_;
};

} // namespace

std::optional<Json> Json::parse(std::string_view text, std::string_view sourceName,
                                std::string &error, int maxDepth) {
  return Parser(text, sourceName, maxDepth).parseDocument(error);
}

std::optional<Json> readJsonFile(const std::string &path, uint64_t maxBytes, std::string &error) {
  std::string text;
  if (!readWholeFile(path, maxBytes, text, error))
    return std::nullopt;
  return Json::parse(text, path, error);
}

} // namespace tessel::rt
