//===- JsonReader.cpp - A strict JSON reader for tokenizer files ----------===//

#include "common/tokenizer/JsonReader.h"
#include "common/tokenizer/Utf8.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>

namespace tessel::tok {

namespace {
constexpr int kMaxDepth = 512;
// Node offsets and string offsets are 32-bit.
constexpr size_t kMaxText = std::numeric_limits<uint32_t>::max() - 1;
} // namespace

class JsonParser {
public:
  JsonParser(JsonDocument &doc, std::string_view text) : doc_(doc), text_(text) {}

  bool run(std::string &error) {
    if (text_.size() > kMaxText)
      return fail(0, "the text is over 4 GiB", error);
    if (text_.size() >= 3 && std::memcmp(text_.data(), "\xEF\xBB\xBF", 3) == 0)
      return fail(0, "the text starts with a byte-order mark, which JSON does not allow", error);
    skipSpace();
    if (!parseValue(0, error))
      return false;
    skipSpace();
    if (pos_ != text_.size())
      return fail(pos_, "unexpected text after the JSON value", error);
    return true;
  }

private:
  JsonDocument &doc_;
  std::string_view text_;
  size_t pos_ = 0;
  // Children of the arrays and objects being parsed, moved to the document when each closes
  // so that every container's children are contiguous.
  std::vector<uint32_t> pendingChildren_;
  std::vector<JsonDocument::Member> pendingMembers_;

  bool fail(size_t at, const std::string &what, std::string &error) {
    error = doc_.location(at) + ": " + what;
    return false;
  }

  void skipSpace() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
        return;
      ++pos_;
    }
  }

  uint32_t newNode(JsonValue::Kind kind) {
    doc_.nodes_.push_back({kind, 0, 0, static_cast<uint32_t>(pos_)});
    return static_cast<uint32_t>(doc_.nodes_.size() - 1);
  }

  bool parseValue(int depth, std::string &error) {
    if (pos_ >= text_.size())
      return fail(pos_, "the text ends where a value was expected", error);
    char c = text_[pos_];
    switch (c) {
    case '{':
      return parseObject(depth, error);
    case '[':
      return parseArray(depth, error);
    case '"': {
      uint32_t node = newNode(JsonValue::Kind::String);
      uint32_t start = 0, length = 0;
      if (!parseString(start, length, error))
        return false;
      doc_.nodes_[node].first = start;
      doc_.nodes_[node].count = length;
      return true;
    }
    case 't':
    case 'f':
    case 'n': {
      const char *word = c == 't' ? "true" : c == 'f' ? "false" : "null";
      size_t n = std::strlen(word);
      if (text_.compare(pos_, n, word) != 0)
        return fail(pos_, "unexpected character '" + std::string(1, c) + "'", error);
      uint32_t node = newNode(c == 'n' ? JsonValue::Kind::Null : JsonValue::Kind::Bool);
      doc_.nodes_[node].first = c == 't';
      pos_ += n;
      return true;
    }
    default:
      if (c == '-' || (c >= '0' && c <= '9'))
        return parseNumber(error);
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7F)
        return fail(pos_, "unexpected byte 0x" + hex(static_cast<unsigned char>(c)), error);
      return fail(pos_, "unexpected character '" + std::string(1, c) + "'", error);
    }
  }

  static std::string hex(unsigned value) {
    const char *digits = "0123456789ABCDEF";
    return std::string{digits[(value >> 4) & 15], digits[value & 15]};
  }

  bool parseNumber(std::string &error) {
    size_t start = pos_;
    uint32_t node = newNode(JsonValue::Kind::Number);
    auto digit = [&](size_t i) { return i < text_.size() && text_[i] >= '0' && text_[i] <= '9'; };
    size_t i = pos_;
    if (text_[i] == '-')
      ++i;
    if (!digit(i))
      return fail(i, "a number needs a digit here", error);
    if (text_[i] == '0' && digit(i + 1))
      return fail(i, "a number may not start with a leading zero", error);
    while (digit(i))
      ++i;
    bool integral = true;
    if (i < text_.size() && text_[i] == '.') {
      integral = false;
      ++i;
      if (!digit(i))
        return fail(i, "a number needs a digit after its decimal point", error);
      while (digit(i))
        ++i;
    }
    if (i < text_.size() && (text_[i] == 'e' || text_[i] == 'E')) {
      integral = false;
      ++i;
      if (i < text_.size() && (text_[i] == '+' || text_[i] == '-'))
        ++i;
      if (!digit(i))
        return fail(i, "a number needs a digit in its exponent", error);
      while (digit(i))
        ++i;
    }
    const char *first = text_.data() + start, *last = text_.data() + i;
    double value = 0;
    std::from_chars_result parsed = std::from_chars(first, last, value);
    if (parsed.ec == std::errc::result_out_of_range)
      return fail(start, "the number is out of range", error);
    int64_t whole = 0;
    if (integral && std::from_chars(first, last, whole).ec != std::errc())
      integral = false;
    doc_.nodes_[node].first = static_cast<uint32_t>(doc_.numbers_.size());
    doc_.numbers_.push_back(value);
    doc_.integers_.push_back(whole);
    doc_.integral_.push_back(integral);
    pos_ = i;
    return true;
  }

  bool hex4(size_t at, unsigned &value, std::string &error) {
    if (at + 4 > text_.size())
      return fail(at, "the text ends inside a \\u escape", error);
    value = 0;
    for (size_t k = 0; k < 4; ++k) {
      char c = text_[at + k];
      unsigned d;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      else
        return fail(at + k, "a \\u escape needs four hexadecimal digits", error);
      value = value * 16 + d;
    }
    return true;
  }

  /// Parses the string at pos_ into the document's pool.
  bool parseString(uint32_t &start, uint32_t &length, std::string &error) {
    std::string &out = doc_.strings_;
    const size_t begin = out.size();
    const size_t quote = pos_++;
    while (true) {
      // Copy the run of plain characters up to the next quote, backslash or special byte.
      size_t run = pos_;
      while (run < text_.size()) {
        unsigned char b = static_cast<unsigned char>(text_[run]);
        if (b == '"' || b == '\\' || b < 0x20 || b >= 0x80)
          break;
        ++run;
      }
      out.append(text_.data() + pos_, run - pos_);
      pos_ = run;
      if (pos_ >= text_.size())
        return fail(quote, "the string starting here is not closed", error);
      unsigned char b = static_cast<unsigned char>(text_[pos_]);
      if (b == '"') {
        ++pos_;
        break;
      }
      if (b < 0x20)
        return fail(pos_, "a string may not hold control character 0x" + hex(b) + " unescaped",
                    error);
      if (b >= 0x80) {
        long n = utf8WellFormedLength(text_, pos_);
        if (n < 0)
          return fail(pos_, "invalid UTF-8 (byte 0x" + hex(b) + ")", error);
        out.append(text_.data() + pos_, n);
        pos_ += n;
        continue;
      }
      // A backslash escape.
      if (pos_ + 1 >= text_.size())
        return fail(quote, "the string starting here is not closed", error);
      char e = text_[pos_ + 1];
      const char *simple = std::strchr("\"\\/bfnrt", e);
      if (e != 'u') {
        if (e == 0 || simple == nullptr)
          return fail(pos_, std::string("unknown escape '\\") + e + "'", error);
        static const char replacement[] = "\"\\/\b\f\n\r\t";
        out.push_back(replacement[simple - "\"\\/bfnrt"]);
        pos_ += 2;
        continue;
      }
      unsigned cp = 0;
      if (!hex4(pos_ + 2, cp, error))
        return false;
      if (cp >= 0xDC00 && cp <= 0xDFFF)
        return fail(pos_, "a low surrogate escape without a high surrogate before it", error);
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        unsigned low = 0;
        if (pos_ + 7 >= text_.size() || text_[pos_ + 6] != '\\' || text_[pos_ + 7] != 'u')
          return fail(pos_, "a high surrogate escape without a low surrogate after it", error);
        if (!hex4(pos_ + 8, low, error))
          return false;
        if (low < 0xDC00 || low > 0xDFFF)
          return fail(pos_, "a high surrogate escape without a low surrogate after it", error);
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        pos_ += 6;
      }
      appendUtf8(cp, doc_.strings_);
      pos_ += 6;
    }
    if (out.size() > kMaxText)
      return fail(quote, "the document's strings are over 4 GiB", error);
    start = static_cast<uint32_t>(begin);
    length = static_cast<uint32_t>(out.size() - begin);
    return true;
  }

  bool parseArray(int depth, std::string &error) {
    if (depth >= kMaxDepth)
      return fail(pos_, "arrays and objects nest deeper than " + std::to_string(kMaxDepth), error);
    uint32_t node = newNode(JsonValue::Kind::Array);
    const size_t open = pos_++;
    const size_t mark = pendingChildren_.size();
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
    } else {
      while (true) {
        pendingChildren_.push_back(static_cast<uint32_t>(doc_.nodes_.size()));
        if (!parseValue(depth + 1, error))
          return false;
        skipSpace();
        if (pos_ >= text_.size())
          return fail(open, "the array starting here is not closed", error);
        if (text_[pos_] == ']') {
          ++pos_;
          break;
        }
        if (text_[pos_] != ',')
          return fail(pos_, "expected ',' or ']' after an array element", error);
        ++pos_;
        skipSpace();
        if (pos_ < text_.size() && text_[pos_] == ']')
          return fail(pos_, "a trailing comma before ']'", error);
      }
    }
    doc_.nodes_[node].first = static_cast<uint32_t>(doc_.children_.size());
    doc_.nodes_[node].count = static_cast<uint32_t>(pendingChildren_.size() - mark);
    doc_.children_.insert(doc_.children_.end(), pendingChildren_.begin() + mark,
                          pendingChildren_.end());
    pendingChildren_.resize(mark);
    return true;
  }

  bool parseObject(int depth, std::string &error) {
    if (depth >= kMaxDepth)
      return fail(pos_, "arrays and objects nest deeper than " + std::to_string(kMaxDepth), error);
    uint32_t node = newNode(JsonValue::Kind::Object);
    const size_t open = pos_++;
    const size_t mark = pendingMembers_.size();
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
    } else {
      while (true) {
        if (pos_ >= text_.size())
          return fail(open, "the object starting here is not closed", error);
        if (text_[pos_] != '"')
          return fail(pos_, "expected a member name in double quotes", error);
        JsonDocument::Member member{};
        if (!parseString(member.keyOffset, member.keyLength, error))
          return false;
        skipSpace();
        if (pos_ >= text_.size() || text_[pos_] != ':')
          return fail(pos_, "expected ':' after a member name", error);
        ++pos_;
        skipSpace();
        member.value = static_cast<uint32_t>(doc_.nodes_.size());
        if (!parseValue(depth + 1, error))
          return false;
        pendingMembers_.push_back(member);
        skipSpace();
        if (pos_ >= text_.size())
          return fail(open, "the object starting here is not closed", error);
        if (text_[pos_] == '}') {
          ++pos_;
          break;
        }
        if (text_[pos_] != ',')
          return fail(pos_, "expected ',' or '}' after an object member", error);
        ++pos_;
        skipSpace();
        if (pos_ < text_.size() && text_[pos_] == '}')
          return fail(pos_, "a trailing comma before '}'", error);
      }
    }
    doc_.nodes_[node].first = static_cast<uint32_t>(doc_.members_.size());
    doc_.nodes_[node].count = static_cast<uint32_t>(pendingMembers_.size() - mark);
    doc_.members_.insert(doc_.members_.end(), pendingMembers_.begin() + mark,
                         pendingMembers_.end());
    pendingMembers_.resize(mark);
    return true;
  }
};

bool JsonDocument::parse(std::string_view text, std::string &error) {
  *this = JsonDocument();
  lineStarts_.push_back(0);
  for (const char *p = text.data(), *end = p + text.size();
       (p = static_cast<const char *>(std::memchr(p, '\n', end - p))) != nullptr; ++p)
    lineStarts_.push_back(static_cast<uint32_t>(std::min<size_t>(p + 1 - text.data(), kMaxText)));
  JsonParser parser(*this, text);
  if (parser.run(error))
    return true;
  std::vector<uint32_t> lines = std::move(lineStarts_);
  *this = JsonDocument();
  lineStarts_ = std::move(lines);
  return false;
}

std::string JsonDocument::location(size_t offset) const {
  auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), offset);
  size_t line = it - lineStarts_.begin();
  size_t column = offset - (line ? lineStarts_[line - 1] : 0) + 1;
  return "line " + std::to_string(line ? line : 1) + ", column " + std::to_string(column);
}

JsonValue::Kind JsonValue::kind() const { return doc_->nodes_[node_].kind; }

bool JsonValue::boolean() const { return isBool() && doc_->nodes_[node_].first != 0; }

double JsonValue::number() const {
  return isNumber() ? doc_->numbers_[doc_->nodes_[node_].first] : 0.0;
}

bool JsonValue::isInteger() const {
  return isNumber() && doc_->integral_[doc_->nodes_[node_].first];
}

int64_t JsonValue::integer() const {
  return isInteger() ? doc_->integers_[doc_->nodes_[node_].first] : 0;
}

std::string_view JsonValue::string() const {
  if (!isString())
    return {};
  const JsonDocument::Node &n = doc_->nodes_[node_];
  return std::string_view(doc_->strings_).substr(n.first, n.count);
}

size_t JsonValue::size() const { return isArray() || isObject() ? doc_->nodes_[node_].count : 0; }

JsonValue JsonValue::at(size_t i) const {
  return JsonValue(doc_, doc_->children_[doc_->nodes_[node_].first + i]);
}

std::string_view JsonValue::key(size_t i) const {
  const JsonDocument::Member &m = doc_->members_[doc_->nodes_[node_].first + i];
  return std::string_view(doc_->strings_).substr(m.keyOffset, m.keyLength);
}

JsonValue JsonValue::value(size_t i) const {
  return JsonValue(doc_, doc_->members_[doc_->nodes_[node_].first + i].value);
}

JsonValue JsonValue::find(std::string_view name) const {
  if (!valid() || !isObject())
    return {};
  for (size_t i = size(); i-- > 0;)
    if (key(i) == name)
      return value(i);
  return {};
}

std::string JsonValue::location() const {
  return doc_ ? doc_->location(doc_->nodes_[node_].offset) : "";
}

const char *JsonValue::kindName() const {
  switch (kind()) {
  case Kind::Null:
    return "null";
  case Kind::Bool:
    return "a boolean";
  case Kind::Number:
    return "a number";
  case Kind::String:
    return "a string";
  case Kind::Array:
    return "an array";
  case Kind::Object:
    return "an object";
  }
  return "a value";
}

} // namespace tessel::tok
