//===- ChatTemplateStringFilters.cpp - The string filters of templates ----===//
//
// The filters of text as Jinja 3.1 computes them (jinja2/filters.py): capitalize, escape,
// indent, lower, upper, title, replace, string, trim and wordcount. They read their value as
// Python's str() prints it (indent takes strings only) and check the text they make against
// the render's limits.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateFilters.h"
#include "common/tokenizer/ChatTemplateText.h"
#include "common/tokenizer/Utf8.h"

#include <algorithm>

namespace tessel::tok::chat {

bool fCapitalize(RenderState &st, const Value &v, const Args &args, Value &out) {
  std::string s;
  return toStr(st, v, s) && stringResult(st, capitalize(std::move(s)), out);
}

bool fEscape(RenderState &st, const Value &v, const Args &args, Value &out) {
  std::string s, e;
  if (!toStr(st, v, s))
    return false;
  for (char c : s) {
    switch (c) {
    case '&':
      e += "&amp;";
      break;
    case '<':
      e += "&lt;";
      break;
    case '>':
      e += "&gt;";
      break;
    case '"':
      e += "&#34;";
      break;
    case '\'':
      e += "&#39;";
      break;
    default:
      e += c;
    }
  }
  return stringResult(st, std::move(e), out);
}

bool fIndent(RenderState &st, const Value &v, const Args &args, Value &out) {
  Bind p(st, "indent", args, {"width", "first", "blank"});
  if (!p.ok())
    return false;
  std::string indention = "    ", s;
  if (p[0]) {
    if (p[0]->isString()) {
      indention = p[0]->str();
    } else {
      int64_t width = 0;
      if (!needInt(st, p[0], "indent's width", width))
        return false;
      if (!st.grow(width > 0 ? static_cast<size_t>(width) : 0))
        return false;
      indention.assign(width > 0 ? width : 0, ' ');
    }
  }
  if (v.isUndefined())
    return undefinedError(st, v);
  if (!v.isString())
    return st.fail(std::string("indent needs a string, not '") + v.typeName() + "'");
  s = v.str();
  s += '\n'; // Jinja's own quirk, for splitlines
  std::vector<std::string> lines = splitLines(s);
  std::string r;
  if (p.flag(2, false)) {
    for (size_t i = 0; i < lines.size(); ++i)
      r += (i ? "\n" + indention : "") + lines[i];
  } else {
    r = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i)
      r += "\n" + (lines[i].empty() ? "" : indention) + lines[i];
  }
  if (p.flag(1, false))
    r = indention + r;
  return stringResult(st, std::move(r), out);
}

bool fLower(RenderState &st, const Value &v, const Args &args, Value &out) {
  std::string s;
  return toStr(st, v, s) && stringResult(st, lower(std::move(s)), out);
}

bool fUpper(RenderState &st, const Value &v, const Args &args, Value &out) {
  std::string s;
  return toStr(st, v, s) && stringResult(st, upper(std::move(s)), out);
}

bool fTitle(RenderState &st, const Value &v, const Args &args, Value &out) {
  std::string s;
  return toStr(st, v, s) && stringResult(st, jinjaTitle(s), out);
}

bool fReplace(RenderState &st, const Value &v, const Args &args, Value &out) {
  Bind p(st, "replace", args, {"old", "new", "count"});
  if (!p.ok())
    return false;
  std::string s, from, to;
  int64_t count = -1;
  if (!p[0] || !p[1])
    return st.fail("replace() needs the old and the new text");
  if (!toStr(st, v, s) || !toStr(st, *p[0], from) || !toStr(st, *p[1], to))
    return false;
  if (p[2] && !p[2]->isNone() && !needInt(st, p[2], "replace()'s count", count))
    return false;
  // The result's size, bounded before it is built.
  size_t n = from.empty() ? codePointCount(s) + 1 : 0;
  for (size_t at = from.empty() ? std::string::npos : findText(s, from); at != std::string::npos;
       at = findText(s, from, at + from.size()))
    ++n;
  if (count >= 0)
    n = std::min<size_t>(n, count);
  if (!st.step(n))
    return false;
  if (to.size() > from.size() &&
      (to.size() - from.size()) > (st.limits.maxOutputBytes + s.size()) / std::max<size_t>(n, 1))
    return st.grow(SIZE_MAX);
  return stringResult(st, replace(s, from, to, count), out);
}

bool fString(RenderState &st, const Value &v, const Args &args, Value &out) {
  std::string s;
  return toStr(st, v, s) && stringResult(st, std::move(s), out);
}

bool fTrim(RenderState &st, const Value &v, const Args &args, Value &out) {
  Bind p(st, "trim", args, {"chars"});
  if (!p.ok())
    return false;
  std::string s;
  if (p[0] && !p[0]->isNone() && !needString(st, p[0], "trim's chars"))
    return false;
  return toStr(st, v, s) && stringResult(st, strip(s, p[0], true, true), out);
}

bool fWordcount(RenderState &st, const Value &v, const Args &args, Value &out) {
  std::string s;
  if (!toStr(st, v, s))
    return false;
  int64_t words = 0;
  bool inWord = false;
  for (size_t i = 0; i < s.size();) {
    size_t length = 1;
    uint32_t cp = decodeUtf8(s, i, length);
    bool word = isWordChar(cp);
    words += word && !inWord;
    inWord = word;
    i += length;
  }
  out = Value::integer(words);
  return true;
}

} // namespace tessel::tok::chat
