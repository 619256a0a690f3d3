//===- ChatTemplateFilters.cpp - The filters of chat templates ------------===//
//
// `value | name(args)` as Jinja 3.1's filters (jinja2/filters.py) compute it, with
// transformers' tojson (json.dumps with ensure_ascii=False, indent, separators, sort_keys).
// Each filter reads its arguments by Python's rules (Bind) and counts its work. Here are the
// table of filters by name and the call through it, and the filters of numbers and other
// values (abs, default, float, int, safe, tojson); those of strings and of sequences are in
// ChatTemplateStringFilters.cpp and ChatTemplateSequenceFilters.cpp.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateFilters.h"
#include "common/tokenizer/ChatTemplateText.h"

#include <cmath>
#include <cstdlib>
#include <unordered_map>

namespace tessel::tok::chat {

bool stringResult(RenderState &st, std::string s, Value &out) {
  if (!st.grow(s.size()))
    return false;
  out = Value::string(std::move(s));
  return true;
}

namespace {

using FilterFn = bool (*)(RenderState &, const Value &, const Args &, Value &);

bool fAbs(RenderState &st, const Value &v, const Args &args, Value &out) {
  if (v.isInt() && v.intValue() == INT64_MIN)
    return st.fail("integer overflow (Tessel's integers are 64-bit)");
  if (v.isInt() || v.isBool())
    out = Value::integer(std::llabs(v.isInt() ? v.intValue() : v.boolValue()));
  else if (v.kind() == Value::Kind::Float)
    out = Value::real(std::fabs(v.number()));
  else if (v.isUndefined())
    return undefinedError(st, v);
  else
    return st.fail(std::string("bad operand type for abs(): '") + v.typeName() + "'");
  return true;
}

bool fDefault(RenderState &st, const Value &v, const Args &args, Value &out) {
  Bind p(st, "default", args, {"default_value", "boolean"});
  if (!p.ok())
    return false;
  bool use = v.isUndefined() || (p.flag(1, false) && !v.truthy());
  out = use ? (p[0] ? *p[0] : Value::string("")) : v;
  return true;
}

bool fFloat(RenderState &st, const Value &v, const Args &args, Value &out) {
  Bind p(st, "float", args, {"default"});
  if (!p.ok())
    return false;
  double f = 0;
  if (v.isNumber())
    out = Value::real(v.number());
  else if (v.isString() && parseFloat(v.str(), f))
    out = Value::real(f);
  else if (v.isUndefined())
    return undefinedError(st, v);
  else
    out = p[0] ? *p[0] : Value::real(0.0);
  return true;
}

bool fInt(RenderState &st, const Value &v, const Args &args, Value &out) {
  Bind p(st, "int", args, {"default", "base"});
  if (!p.ok())
    return false;
  if (p[1] && !(p[1]->isInt() && p[1]->intValue() == 10))
    return st.fail("int() with a base other than 10 is outside the supported subset");
  int64_t i = 0;
  double f = 0;
  auto fromFloat = [&](double d) {
    if (std::isinf(d))
      return st.fail("cannot convert float infinity to integer");
    if (std::isnan(d))
      return st.fail("cannot convert float NaN to integer");
    if (std::fabs(d) >= 9.2e18)
      return st.fail("integer overflow (Tessel's integers are 64-bit)");
    out = Value::integer(static_cast<int64_t>(std::trunc(d)));
    return true;
  };
  if (v.isInt() || v.isBool()) {
    out = Value::integer(v.isInt() ? v.intValue() : v.boolValue());
    return true;
  }
  if (v.kind() == Value::Kind::Float)
    return fromFloat(v.number());
  if (v.isString()) {
    if (parseInt(v.str(), i)) {
      out = Value::integer(i);
      return true;
    }
    if (parseFloat(v.str(), f))
      return fromFloat(f);
  }
  if (v.isUndefined())
    return undefinedError(st, v);
  out = p[0] ? *p[0] : Value::integer(0);
  return true;
}

bool fSafe(RenderState &st, const Value &v, const Args &args, Value &out) {
  out = v;
  return true;
}

bool fTojson(RenderState &st, const Value &v, const Args &args, Value &out) {
  // transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  Bind p(st, "tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  if (!p.ok())
    return false;
  JsonStyle style;
  style.ensureAscii = p.flag(0, false);
  style.sortKeys = p.flag(3, false);
  if (p[1] && !p[1]->isNone()) {
    style.indented = true;
    style.itemSeparator = ",";
    if (p[1]->isString()) {
      style.indent = p[1]->str();
    } else {
      int64_t width = 0;
      if (!needInt(st, p[1], "tojson's indent", width) || !st.grow(width > 0 ? width : 0))
        return false;
      style.indent.assign(width > 0 ? width : 0, ' ');
    }
  }
  if (p[2] && !p[2]->isNone()) {
    if (!p[2]->isSequence() || p[2]->items().size() != 2 || !p[2]->items()[0].isString() ||
        !p[2]->items()[1].isString())
      return st.fail("tojson's separators must be two strings");
    style.itemSeparator = p[2]->items()[0].str();
    style.keySeparator = p[2]->items()[1].str();
  }
  std::string text, error;
  if (!appendJson(v, style, text, error))
    return st.fail(error);
  return stringResult(st, std::move(text), out);
}

const std::unordered_map<std::string_view, FilterFn> &filters() {
  static const std::unordered_map<std::string_view, FilterFn> table = {
      {"abs", fAbs},
      {"capitalize", fCapitalize},
      {"count", fLength},
      {"d", fDefault},
      {"default", fDefault},
      {"dictsort", fDictsort},
      {"e", fEscape},
      {"escape", fEscape},
      {"first", fFirst},
      {"float", fFloat},
      {"indent", fIndent},
      {"int", fInt},
      {"items", fItems},
      {"join", fJoin},
      {"last", fLast},
      {"length", fLength},
      {"list", fList},
      {"lower", fLower},
      {"map", fMap},
      {"max", fMax},
      {"min", fMin},
      {"reject", fReject},
      {"rejectattr", fRejectattr},
      {"replace", fReplace},
      {"reverse", fReverse},
      {"safe", fSafe},
      {"select", fSelect},
      {"selectattr", fSelectattr},
      {"sort", fSort},
      {"string", fString},
      {"sum", fSum},
      {"title", fTitle},
      {"tojson", fTojson},
      {"trim", fTrim},
      {"unique", fUnique},
      {"upper", fUpper},
      {"wordcount", fWordcount},
  };
  return table;
}

} // namespace

bool isKnownFilter(std::string_view name) { return filters().count(name) != 0; }

bool callFilter(RenderState &st, const std::string &name, const Value &value, const Args &args,
                Value &out) {
  auto it = filters().find(name);
  if (it == filters().end())
    return st.fail("no filter named '" + name + "'");
  // Filters read their text whole: its size is work.
  if (value.isString() && !st.step(value.str().size() / 64))
    return false;
  return it->second(st, value, args, out);
}

} // namespace tessel::tok::chat
