//===- ChatTemplateSequenceFilters.cpp - The sequence filters of templates ===//
//
// The filters of lists, tuples, dicts and other iterables as Jinja 3.1 computes them
// (jinja2/filters.py): length, first, last, list, items, dictsort, join, map, max, min,
// select, reject, selectattr, rejectattr, reverse, sort, sum and unique. Those taking
// `attribute=` read it as Jinja does (dotted parts, numbers as indexes); sorting and comparing
// use Python's orderings and count the comparisons as work.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateFilters.h"
#include "common/tokenizer/ChatTemplateText.h"
#include "common/tokenizer/Utf8.h"

#include <algorithm>
#include <cstdlib>

namespace tessel::tok::chat {

namespace {

// Jinja's attribute getter for filters' `attribute=`: dotted parts, numbers as indexes.
bool getPath(RenderState &st, const Value &item, const std::string &path, Value &out) {
  out = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    Value key = Value::string(part);
    if (!part.empty() && std::all_of(part.begin(), part.end(), asciiDigit) && part.size() < 18)
      key = Value::integer(std::atoll(part.c_str()));
    Value next;
    if (!getItem(st, out, key, next))
      return false;
    out = next;
    if (dot == std::string::npos)
      return true;
    start = dot + 1;
  }
}

// The key a sort or unique compares: the attribute, lowercased when not case-sensitive.
bool sortKey(RenderState &st, const Value &item, const Value *attribute, bool caseSensitive,
             Value &out) {
  out = item;
  if (attribute && !attribute->isNone()) {
    std::string path;
    if (!toStr(st, *attribute, path) || !getPath(st, item, path, out))
      return false;
  }
  if (!caseSensitive && out.isString()) {
    if (!st.grow(out.str().size()))
      return false;
    out = Value::string(lower(out.str()));
  }
  return true;
}

bool sortList(RenderState &st, List &items, const Value *attribute, bool caseSensitive,
              bool reverse) {
  std::vector<std::pair<Value, size_t>> keys;
  keys.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    Value key;
    if (!sortKey(st, items[i], attribute, caseSensitive, key))
      return false;
    keys.emplace_back(std::move(key), i);
  }
  std::string error;
  bool failed = false;
  uint64_t work = 0;
  std::stable_sort(keys.begin(), keys.end(), [&](const auto &a, const auto &b) {
    bool less = false;
    if (failed ||
        !lessThan(reverse ? b.first : a.first, reverse ? a.first : b.first, less, error, &work))
      failed = true;
    return less;
  });
  if (failed)
    return st.fail(error);
  List sorted;
  sorted.reserve(items.size());
  for (const auto &k : keys)
    sorted.push_back(items[k.second]);
  items = std::move(sorted);
  return st.step(items.size() + work / 16);
}

bool extremum(RenderState &st, const Value &v, const Args &args, Value &out, bool max) {
  Bind p(st, max ? "max" : "min", args, {"case_sensitive", "attribute"});
  if (!p.ok())
    return false;
  List items;
  if (!iterate(st, v, items))
    return false;
  if (items.empty()) {
    out = Value::undefined("No aggregated item, sequence was empty.");
    return true;
  }
  Value bestKey;
  size_t best = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    Value key;
    if (!sortKey(st, items[i], p[1], p.flag(0, false), key))
      return false;
    bool better = i == 0;
    std::string error;
    uint64_t work = 0;
    if (i && !lessThan(max ? bestKey : key, max ? key : bestKey, better, error, &work))
      return st.fail(error);
    if (!st.step(1 + work / 16))
      return false;
    if (better) {
      best = i;
      bestKey = key;
    }
  }
  out = items[best];
  return true;
}

// select, reject, selectattr and rejectattr.
bool selectOrReject(RenderState &st, const Value &v, const Args &args, Value &out, bool attr,
                    bool keep) {
  const char *name = attr ? (keep ? "selectattr" : "rejectattr") : (keep ? "select" : "reject");
  List items, kept;
  // Jinja iterates only a true value: none or false selects nothing.
  if (v.truthy() && !iterate(st, v, items))
    return false;
  size_t next = 0;
  std::string path;
  if (attr) {
    if (args.positional.empty())
      return st.fail(std::string(name) + "() needs an attribute");
    if (!toStr(st, args.positional[0], path))
      return false;
    next = 1;
  }
  std::string test;
  Args testArgs;
  if (args.positional.size() > next) {
    if (!needString(st, &args.positional[next], "the test's name"))
      return false;
    test = args.positional[next].str();
    if (!isKnownTest(test))
      return st.fail("no test named '" + test + "' (outside the supported subset)");
    testArgs.positional.assign(args.positional.begin() + next + 1, args.positional.end());
    testArgs.keywords = args.keywords;
  } else if (!args.keywords.empty()) {
    return st.fail(std::string(name) + "() takes keyword arguments only after a test's name");
  }
  for (const Value &item : items) {
    Value subject = item;
    if (attr && !getPath(st, item, path, subject))
      return false;
    bool pass = subject.truthy();
    if (!test.empty() && !callTest(st, test, subject, testArgs, pass))
      return false;
    if (pass == keep)
      kept.push_back(item);
  }
  out = Value::list(std::move(kept));
  return st.step(items.size());
}

} // namespace

bool fLength(RenderState &st, const Value &v, const Args &args, Value &out) {
  int64_t n = 0;
  if (!length(st, v, n))
    return false;
  out = Value::integer(n);
  return true;
}

bool fDictsort(RenderState &st, const Value &v, const Args &args, Value &out) {
  Bind p(st, "dictsort", args, {"case_sensitive", "by", "reverse"});
  if (!p.ok())
    return false;
  if (!v.isDict())
    return st.fail(std::string("dictsort needs a mapping, not '") + v.typeName() + "'");
  bool byValue = false;
  if (p[1]) {
    if (!p[1]->isString() || (p[1]->str() != "key" && p[1]->str() != "value"))
      return st.fail("You can only sort by either \"key\" or \"value\"");
    byValue = p[1]->str() == "value";
  }
  List pairs;
  std::vector<std::pair<Value, size_t>> keys;
  for (const auto &[key, value] : v.dict().entries) {
    Value sortBy = byValue ? value : key;
    if (!p.flag(0, false) && sortBy.isString())
      sortBy = Value::string(lower(sortBy.str()));
    keys.emplace_back(std::move(sortBy), pairs.size());
    pairs.push_back(Value::tuple({key, value}));
  }
  std::string error;
  bool failed = false, reverse = p.flag(2, false);
  uint64_t work = 0;
  std::stable_sort(keys.begin(), keys.end(), [&](const auto &a, const auto &b) {
    bool less = false;
    if (failed ||
        !lessThan(reverse ? b.first : a.first, reverse ? a.first : b.first, less, error, &work))
      failed = true;
    return less;
  });
  if (!st.step(pairs.size() + work / 16))
    return false;
  if (failed)
    return st.fail(error);
  List sorted;
  for (const auto &k : keys)
    sorted.push_back(pairs[k.second]);
  out = Value::list(std::move(sorted));
  return true;
}

bool fFirst(RenderState &st, const Value &v, const Args &args, Value &out) {
  List items;
  if (!iterate(st, v, items))
    return false;
  out = items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
  return true;
}

bool fLast(RenderState &st, const Value &v, const Args &args, Value &out) {
  List items;
  if (!iterate(st, v, items))
    return false;
  out = items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
  return true;
}

bool fItems(RenderState &st, const Value &v, const Args &args, Value &out) {
  if (v.isUndefined()) {
    out = Value::list({});
    return true;
  }
  if (!v.isDict())
    return st.fail("Can only get item pairs from a mapping.");
  List pairs;
  for (const auto &[key, value] : v.dict().entries)
    pairs.push_back(Value::tuple({key, value}));
  out = Value::list(std::move(pairs));
  return st.step(v.dict().size());
}

bool fJoin(RenderState &st, const Value &v, const Args &args, Value &out) {
  Bind p(st, "join", args, {"d", "attribute"});
  if (!p.ok())
    return false;
  std::string separator, joined;
  if (p[0] && !toStr(st, *p[0], separator))
    return false;
  List items;
  if (!iterate(st, v, items))
    return false;
  std::string path;
  if (p[1] && !p[1]->isNone() && !toStr(st, *p[1], path))
    return false;
  for (size_t i = 0; i < items.size(); ++i) {
    Value item = items[i];
    if (!path.empty() && !getPath(st, items[i], path, item))
      return false;
    if (i)
      joined += separator;
    std::string error;
    if (!appendStr(item, joined, error))
      return st.fail(error);
    if (!st.grow(joined.size()))
      return false;
  }
  out = Value::string(std::move(joined));
  return true;
}

bool fList(RenderState &st, const Value &v, const Args &args, Value &out) {
  List items;
  if (!iterate(st, v, items))
    return false;
  out = Value::list(std::move(items));
  return true;
}

bool fMap(RenderState &st, const Value &v, const Args &args, Value &out) {
  List items, mapped;
  // Jinja iterates only a true value: none or false maps to nothing.
  if (v.truthy() && !iterate(st, v, items))
    return false;
  if (args.positional.empty()) {
    const Value *attribute = nullptr, *fallback = nullptr;
    for (const auto &[key, value] : args.keywords) {
      if (key == "attribute")
        attribute = &value;
      else if (key == "default")
        fallback = &value;
      else
        return st.fail("map() has no parameter named '" + key + "'");
    }
    if (!attribute)
      return st.fail("map() needs a filter name or attribute=");
    std::string path;
    if (!toStr(st, *attribute, path))
      return false;
    for (const Value &item : items) {
      Value r;
      if (!getPath(st, item, path, r))
        return false;
      if (r.isUndefined() && fallback)
        r = *fallback;
      mapped.push_back(std::move(r));
    }
  } else {
    if (!needString(st, &args.positional[0], "map()'s filter name"))
      return false;
    std::string name = args.positional[0].str();
    if (!isKnownFilter(name))
      return st.fail("no filter named '" + name + "' (outside the supported subset)");
    Args rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keywords = args.keywords;
    for (const Value &item : items) {
      Value r;
      if (!callFilter(st, name, item, rest, r))
        return false;
      mapped.push_back(std::move(r));
    }
  }
  out = Value::list(std::move(mapped));
  return st.step(items.size());
}

bool fMax(RenderState &st, const Value &v, const Args &args, Value &out) {
  return extremum(st, v, args, out, true);
}

bool fMin(RenderState &st, const Value &v, const Args &args, Value &out) {
  return extremum(st, v, args, out, false);
}

bool fSelect(RenderState &st, const Value &v, const Args &args, Value &out) {
  return selectOrReject(st, v, args, out, false, true);
}

bool fReject(RenderState &st, const Value &v, const Args &args, Value &out) {
  return selectOrReject(st, v, args, out, false, false);
}

bool fSelectattr(RenderState &st, const Value &v, const Args &args, Value &out) {
  return selectOrReject(st, v, args, out, true, true);
}

bool fRejectattr(RenderState &st, const Value &v, const Args &args, Value &out) {
  return selectOrReject(st, v, args, out, true, false);
}

bool fReverse(RenderState &st, const Value &v, const Args &args, Value &out) {
  if (v.isString()) {
    std::vector<uint32_t> cps = codePoints(v.str());
    std::string r;
    for (size_t i = cps.size(); i-- > 0;)
      appendUtf8(cps[i], r);
    return stringResult(st, std::move(r), out);
  }
  List items;
  if (!iterate(st, v, items))
    return false;
  std::reverse(items.begin(), items.end());
  out = Value::list(std::move(items));
  return true;
}

bool fSort(RenderState &st, const Value &v, const Args &args, Value &out) {
  Bind p(st, "sort", args, {"reverse", "case_sensitive", "attribute"});
  if (!p.ok())
    return false;
  List items;
  if (!iterate(st, v, items) || !sortList(st, items, p[2], p.flag(1, false), p.flag(0, false)))
    return false;
  out = Value::list(std::move(items));
  return true;
}

bool fSum(RenderState &st, const Value &v, const Args &args, Value &out) {
  Bind p(st, "sum", args, {"attribute", "start"});
  if (!p.ok())
    return false;
  List items;
  if (!iterate(st, v, items))
    return false;
  std::string path;
  if (p[0] && !p[0]->isNone() && !toStr(st, *p[0], path))
    return false;
  Value total = p[1] ? *p[1] : Value::integer(0);
  for (const Value &item : items) {
    Value x = item;
    if (!path.empty() && !getPath(st, item, path, x))
      return false;
    if (!total.isNumber() || !x.isNumber())
      return st.fail(std::string("sum() adds numbers, not '") + x.typeName() + "'");
    if (total.kind() == Value::Kind::Float || x.kind() == Value::Kind::Float) {
      total = Value::real(total.number() + x.number());
    } else {
      int64_t a = total.isInt() ? total.intValue() : total.boolValue();
      int64_t b = x.isInt() ? x.intValue() : x.boolValue(), r = 0;
      if (__builtin_add_overflow(a, b, &r))
        return st.fail("integer overflow (Tessel's integers are 64-bit)");
      total = Value::integer(r);
    }
  }
  out = total;
  return true;
}

bool fUnique(RenderState &st, const Value &v, const Args &args, Value &out) {
  Bind p(st, "unique", args, {"case_sensitive", "attribute"});
  if (!p.ok())
    return false;
  List items, kept, seen;
  if (!iterate(st, v, items))
    return false;
  for (const Value &item : items) {
    Value key;
    if (!sortKey(st, item, p[1], p.flag(0, false), key))
      return false;
    if (!hashable(key)) // Jinja keeps the keys seen in a set
      return st.fail(std::string("unhashable type: '") + key.typeName() + "'");
    uint64_t work = 0;
    bool repeated =
        std::any_of(seen.begin(), seen.end(), [&](const Value &s) { return equal(s, key, &work); });
    if (!st.step(1 + work / 16))
      return false;
    if (repeated)
      continue;
    seen.push_back(key);
    kept.push_back(item);
  }
  out = Value::list(std::move(kept));
  return true;
}

} // namespace tessel::tok::chat
