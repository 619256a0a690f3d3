//===- ChatTemplateLexer.cpp - The tokens of a chat template --------------===//
//
// Jinja's lexer (jinja2/lexer.py) with transformers' settings: trim_blocks (the newline after a
// block tag or comment is dropped) and lstrip_blocks (spaces and tabs before a block tag or
// comment that starts a line are dropped), `-` and `+` at a tag's edge to strip or keep
// whitespace, newlines normalized to "\n" and one trailing newline of the source dropped.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateLexer.h"
#include "common/tokenizer/Utf8.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tessel::tok::chat {

namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isNameChar(char c) { return isNameStart(c) || isDigit(c); }

/// Splits normalized template text into data and the tokens of its tags.
class Lexer {
public:
  Lexer(std::string_view src, std::vector<uint32_t> &lineStarts, std::vector<Token> &tokens)
      : src_(src), lineStarts_(lineStarts), tokens_(tokens) {}

  bool run(std::string &error) {
    size_t pos = 0;
    bool lineStarting = true;
    while (pos < src_.size()) {
      size_t open = findOpener(pos);
      if (open == std::string_view::npos) {
        addData(pos, src_.substr(pos));
        break;
      }
      char kind = src_[open + 1];
      size_t after = open + 2;
      char sign =
          after < src_.size() && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
      if (sign)
        ++after;
      std::string_view text = src_.substr(pos, open - pos);
      if (sign == '-') {
        text = rstrip(text);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: a tag preceded on its line by whitespace only starts the line.
        size_t lineStart = text.rfind('\n');
        lineStart = lineStart == std::string_view::npos ? 0 : lineStart + 1;
        if ((lineStart > 0 || lineStarting) && lineStart < text.size() &&
            rstrip(text.substr(lineStart)).empty())
          text = text.substr(0, lineStart);
      }
      addData(pos, text);
      if (kind == '#') {
        if (!comment(open, after, pos, error))
          return false;
      } else if (!tag(kind == '%', open, after, pos, error)) {
        return false;
      }
      lineStarting = pos > 0 && src_[pos - 1] == '\n';
    }
    tokens_.push_back(Token{Tok::End, locate(src_.size()), {}});
    return true;
  }

  Location locate(size_t offset) const {
    auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), offset);
    size_t line = it - lineStarts_.begin();
    return Location{static_cast<uint32_t>(line),
                    static_cast<uint32_t>(offset - lineStarts_[line - 1] + 1)};
  }

private:
  std::string_view src_;
  std::vector<uint32_t> &lineStarts_;
  std::vector<Token> &tokens_;

  bool fail(size_t at, const std::string &what, std::string &error) {
    Location l = locate(at);
    error = "line " + std::to_string(l.line) + ", column " + std::to_string(l.column) + ": " + what;
    return false;
  }

  size_t findOpener(size_t pos) const {
    for (size_t i = src_.find('{', pos); i != std::string_view::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    return std::string_view::npos;
  }

  // The length of the Python whitespace character at `i`, or 0.
  size_t spaceAt(size_t i) const {
    unsigned char c = static_cast<unsigned char>(src_[i]);
    if (c < 0x80)
      return isPythonSpace(c) ? 1 : 0;
    size_t length = 1;
    return isPythonSpace(decodeUtf8(src_, i, length)) ? length : 0;
  }

  size_t skipSpace(size_t i) const {
    while (i < src_.size()) {
      size_t n = spaceAt(i);
      if (!n)
        break;
      i += n;
    }
    return i;
  }

  // Python's str.rstrip().
  std::string_view rstrip(std::string_view text) const {
    size_t base = text.data() - src_.data(), end = text.size();
    while (end > 0) {
      size_t start = end - 1;
      while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
        --start;
      if (spaceAt(base + start) != end - start)
        break;
      end = start;
    }
    return text.substr(0, end);
  }

  void addData(size_t pos, std::string_view text) {
    if (!text.empty())
      tokens_.push_back(Token{Tok::Data, locate(pos), std::string(text)});
  }

  bool comment(size_t open, size_t bodyStart, size_t &pos, std::string &error) {
    size_t close = src_.find("#}", bodyStart);
    if (close == std::string_view::npos)
      return fail(open, "the comment is not closed (no '#}')", error);
    pos = close + 2;
    char sign = close > bodyStart ? src_[close - 1] : 0;
    if (sign == '-')
      pos = skipSpace(pos);
    else if (sign != '+' && pos < src_.size() && src_[pos] == '\n')
      ++pos; // trim_blocks
    return true;
  }

  // The tokens of one `{% %}` or `{{ }}` tag; `pos` ends past its closer (and what the closer
  // strips).
  bool tag(bool block, size_t open, size_t i, size_t &pos, std::string &error) {
    tokens_.push_back(Token{block ? Tok::BlockBegin : Tok::VarBegin, locate(open), {}});
    std::string brackets; // the closers the open brackets expect
    while (true) {
      i = skipSpace(i);
      if (i >= src_.size())
        return fail(open,
                    block ? "the statement is not closed (no '%}')"
                          : "the expression is not closed (no '}}')",
                    error);
      std::string_view rest = src_.substr(i);
      if (brackets.empty()) {
        const char *closer = block ? "%}" : "}}";
        size_t end = 0;
        if (rest.substr(0, 3) == std::string("-") + closer) {
          end = skipSpace(i + 3);
        } else if (block && rest.substr(0, 3) == "+%}") {
          end = i + 3;
        } else if (rest.substr(0, 2) == closer) {
          end = i + 2;
          if (block && end < src_.size() && src_[end] == '\n')
            ++end; // trim_blocks
        }
        if (end) {
          tokens_.push_back(Token{block ? Tok::BlockEnd : Tok::VarEnd, locate(i), {}});
          pos = end;
          return true;
        }
      }
      if (!token(i, brackets, error))
        return false;
    }
  }

  bool token(size_t &i, std::string &brackets, std::string &error) {
    char c = src_[i];
    Token t{Tok::Op, locate(i), {}};
    if (isDigit(c))
      return number(i, error);
    if (isNameStart(c)) {
      size_t end = i;
      while (end < src_.size() && isNameChar(src_[end]))
        ++end;
      t.type = Tok::Name;
      t.text = std::string(src_.substr(i, end - i));
      tokens_.push_back(std::move(t));
      i = end;
      return true;
    }
    if (c == '\'' || c == '"')
      return string(i, error);
    static const char *const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char *op : kTwo)
      if (src_.compare(i, 2, op) == 0) {
        t.text = op;
        tokens_.push_back(std::move(t));
        i += 2;
        return true;
      }
    if (!std::strchr("+-/*%~[](){}><=.:|,;", c) || c == 0) {
      size_t length = 1;
      uint32_t cp = static_cast<unsigned char>(c) < 0x80 ? c : decodeUtf8(src_, i, length);
      std::string shown;
      appendUtf8(cp, shown);
      return fail(i, "unexpected character '" + shown + "'", error);
    }
    if (c == '(' || c == '[' || c == '{') {
      brackets += c == '(' ? ')' : c == '[' ? ']' : '}';
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty())
        return fail(i, std::string("unexpected '") + c + "'", error);
      if (brackets.back() != c)
        return fail(i, std::string("unexpected '") + c + "', expected '" + brackets.back() + "'",
                    error);
      brackets.pop_back();
    }
    t.text = std::string(1, c);
    tokens_.push_back(std::move(t));
    ++i;
    return true;
  }

  // Decimal digits with single underscores between them, as Python's literals allow.
  size_t digits(size_t i) const {
    size_t start = i;
    while (i < src_.size() && (isDigit(src_[i]) || (src_[i] == '_' && i > start &&
                                                    i + 1 < src_.size() && isDigit(src_[i + 1]))))
      ++i;
    return i;
  }

  bool number(size_t &i, std::string &error) {
    Token t{Tok::Int, locate(i), {}};
    // Jinja's float: digits, then a fraction, an exponent or both; not right after a '.'.
    size_t end = digits(i);
    size_t floatEnd = 0;
    if (i == 0 || src_[i - 1] != '.') {
      size_t j = end;
      if (j + 1 < src_.size() && src_[j] == '.' && isDigit(src_[j + 1]))
        j = digits(j + 1);
      if (j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
        size_t k = j + 1;
        if (k < src_.size() && (src_[k] == '+' || src_[k] == '-'))
          ++k;
        if (k < src_.size() && isDigit(src_[k]))
          j = digits(k);
      }
      if (j != end)
        floatEnd = j;
    }
    if (floatEnd) {
      std::string text;
      for (size_t k = i; k < floatEnd; ++k)
        if (src_[k] != '_')
          text += src_[k];
      t.type = Tok::Float;
      t.f = std::strtod(text.c_str(), nullptr);
      t.text = text;
      tokens_.push_back(std::move(t));
      i = floatEnd;
      return true;
    }
    int base = 10;
    size_t start = i;
    if (src_[i] == '0' && i + 1 < src_.size()) {
      char p = static_cast<char>(src_[i + 1] | 0x20);
      base = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 10;
    }
    if (base != 10) {
      start = i + 2;
      end = start;
      while (end < src_.size()) {
        char d = static_cast<char>(src_[end] | 0x20);
        int v = isDigit(d) ? d - '0' : (d >= 'a' && d <= 'f') ? d - 'a' + 10 : 99;
        if (v < base || (src_[end] == '_' && end + 1 < src_.size()))
          ++end;
        else
          break;
      }
      if (end == start)
        return fail(i, "a number needs digits after its base prefix", error);
    } else if (src_[i] == '0') {
      // Jinja reads zeros ("0", "00", "0_0") but no other number with a leading zero.
      end = i + 1;
      while (end < src_.size() && (src_[end] == '0' || (src_[end] == '_' && end + 1 < src_.size() &&
                                                        src_[end + 1] == '0')))
        ++end;
    }
    uint64_t value = 0;
    for (size_t k = start; k < end; ++k) {
      if (src_[k] == '_')
        continue;
      char d = static_cast<char>(src_[k] | 0x20);
      int v = isDigit(d) ? d - '0' : d - 'a' + 10;
      if (value > (uint64_t(INT64_MAX) - v) / base)
        return fail(i, "the integer is too large (Tessel's integers are 64-bit)", error);
      value = value * base + v;
    }
    t.i = static_cast<int64_t>(value);
    t.text = std::string(src_.substr(i, end - i));
    tokens_.push_back(std::move(t));
    i = end;
    return true;
  }

  static int hexValue(char c) {
    if (isDigit(c))
      return c - '0';
    c = static_cast<char>(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  }

  // A string literal, its escapes read as Python's unicode-escape codec reads them.
  bool string(size_t &i, std::string &error) {
    char quote = src_[i];
    Token t{Tok::String, locate(i), {}};
    size_t k = i + 1;
    std::string &out = t.text;
    while (true) {
      if (k >= src_.size())
        return fail(i, "the string is not closed", error);
      char c = src_[k];
      if (c == quote)
        break;
      if (c != '\\') {
        out += c;
        ++k;
        continue;
      }
      if (k + 1 >= src_.size())
        return fail(i, "the string is not closed", error);
      char e = src_[k + 1];
      k += 2;
      static const char kSimple[] = "\\\\''\"\"a\ab\bf\fn\nr\rt\tv\v";
      const char *simple = nullptr;
      for (const char *s = kSimple; *s; s += 2)
        if (*s == e)
          simple = s;
      if (simple) {
        out += simple[1];
      } else if (e == '\n') {
        // a line continuation
      } else if (e >= '0' && e <= '7') {
        uint32_t v = e - '0';
        for (int n = 0; n < 2 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7'; ++n)
          v = v * 8 + (src_[k++] - '0');
        appendUtf8(v, out);
      } else if (e == 'x' || e == 'u' || e == 'U') {
        int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (int d = 0; d < n; ++d) {
          int h = k < src_.size() ? hexValue(src_[k]) : -1;
          if (h < 0)
            return fail(k - 2 - d, std::string("truncated \\") + e + " escape", error);
          v = v * 16 + h;
          ++k;
        }
        if (v > 0x10FFFF)
          return fail(k - n - 2, "the escape is not a Unicode code point", error);
        if (v >= 0xD800 && v <= 0xDFFF)
          return fail(k - n - 2, "the escape is a lone surrogate, which UTF-8 cannot hold", error);
        appendUtf8(v, out);
      } else if (e == 'N') {
        return fail(k - 2, "\\N{...} escapes are outside the supported subset", error);
      } else if (static_cast<unsigned char>(e) >= 0x80) {
        // Jinja escapes non-ASCII characters before decoding: "\é" reads as "\xe9".
        size_t length = 1;
        uint32_t cp = decodeUtf8(src_, k - 1, length);
        char buffer[16];
        std::snprintf(buffer, sizeof buffer,
                      cp <= 0xFF     ? "\\x%02x"
                      : cp <= 0xFFFF ? "\\u%04x"
                                     : "\\U%08x",
                      cp);
        out += buffer;
        k += length - 1;
      } else {
        out += '\\';
        out += e;
      }
    }
    tokens_.push_back(std::move(t));
    i = k + 1;
    return true;
  }
};

} // namespace

std::string describeToken(const Token &t) {
  switch (t.type) {
  case Tok::Data:
    return "template data";
  case Tok::BlockBegin:
    return "the start of a statement ('{%')";
  case Tok::BlockEnd:
    return "the end of the statement ('%}')";
  case Tok::VarBegin:
    return "the start of an expression ('{{')";
  case Tok::VarEnd:
    return "the end of the expression ('}}')";
  case Tok::End:
    return "the end of the template";
  case Tok::String:
    return "a string";
  case Tok::Int:
  case Tok::Float:
    return "the number " + t.text;
  default:
    return "'" + t.text + "'";
  }
}

bool lexTemplate(std::string_view source, std::vector<Token> &tokens, std::string &error) {
  if (source.size() > UINT32_MAX / 2) {
    error = "line 1, column 1: the template is over 2 GiB";
    return false;
  }
  size_t valid = validUtf8Prefix(source);
  if (valid < source.size()) {
    std::string_view before = source.substr(0, valid);
    size_t lineStart = before.rfind('\n');
    lineStart = lineStart == std::string_view::npos ? 0 : lineStart + 1;
    error = "line " + std::to_string(std::count(before.begin(), before.end(), '\n') + 1) +
            ", column " + std::to_string(valid - lineStart + 1) +
            ": the template is not valid UTF-8";
    return false;
  }
  // Newlines as Jinja normalizes them ("\r\n" and "\r" read as "\n"), and line starts for
  // messages.
  std::string text;
  std::vector<uint32_t> lineStarts{0};
  text.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    char c = source[i];
    if (c == '\r') {
      if (i + 1 < source.size() && source[i + 1] == '\n')
        ++i;
      c = '\n';
    }
    text += c;
    if (c == '\n')
      lineStarts.push_back(static_cast<uint32_t>(text.size()));
  }
  // keep_trailing_newline=False: one newline at the end of the source is dropped.
  if (!text.empty() && text.back() == '\n')
    text.pop_back();
  Lexer lexer(text, lineStarts, tokens);
  return lexer.run(error);
}

} // namespace tessel::tok::chat
