//===- ChatTemplateValuePrint.cpp - Chat template values as text ----------===//
//
// Python's str() and repr() of values, which `{{ }}` prints and `~` joins, and json.dumps's
// text of them, which tojson writes: floats as Python's repr (the shortest text that reads
// back), strings quoted and escaped as repr and JSON do, dict keys as json.dumps converts
// them, indent, separators, sort_keys and ensure_ascii as asked. A value nesting deeper than
// Python's repr can print is refused.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateValue.h"
#include "common/tokenizer/Utf8.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace tessel::tok::chat {

namespace {
// Deeper than the JSON reader's 512 levels, so any message prints; shallow enough that the
// recursion stays far from the stack's end. Only namespaces holding themselves reach it.
constexpr int kMaxPrintDepth = 600;
} // namespace

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
