//===- ChatTemplateBuiltins.h - Filters, tests, methods, globals -*- C++ -*-===//
//
// What a chat template calls by name, as Jinja 3.1 and Python define it: the filters
// (`|trim`, `|tojson`: ChatTemplateFilters.cpp), the tests (`is defined`:
// ChatTemplateTests.cpp), the methods of strings, lists and dicts (`.strip()`, `.items()`:
// ChatTemplateMethods.cpp) and the globals (range, namespace, raise_exception, strftime_now:
// ChatTemplateBuiltins.cpp), and attribute and item access, which is where methods come from
// (ChatTemplateAccess.cpp). The renderer (ChatTemplateRender.cpp) evaluates the template;
// these evaluate one call each.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_CHATTEMPLATEBUILTINS_H
#define TESSEL_COMMON_TOKENIZER_CHATTEMPLATEBUILTINS_H

#include "common/tokenizer/ChatTemplate.h"
#include "common/tokenizer/ChatTemplateSyntax.h"

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::tok::chat {

/// The state of one render that calls share: its limits and the work done, the first error,
/// the namespaces made (emptied at the end to break cycles), strftime_now's time.
struct RenderState {
  ChatTemplate::Limits limits;
  uint64_t steps = 0;
  std::optional<int64_t> now;
  std::vector<Value> namespaces;
  /// Where evaluation is, for the message of an error.
  Location at;
  std::string error;

  /// Records `what` as the error at `at` (the first one wins); returns false.
  bool fail(const std::string &what);
  /// Counts `n` steps of work; false once over the limit.
  bool step(uint64_t n = 1);
  /// Checks a string of `bytes` the template builds against the limits and counts its work.
  bool grow(size_t bytes);
};

/// A call's arguments, evaluated.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

/// Binds a call's arguments to named parameters as Python does: positional ones first, then
/// keywords by name; too many, an unknown keyword or one given twice is an error (ok() is
/// false). The value of a parameter not passed is null.
class Bind {
public:
  Bind(RenderState &st, const char *function, const Args &args,
       std::initializer_list<const char *> names);

  bool ok() const { return ok_; }
  const Value *operator[](size_t i) const { return values_[i]; }
  /// The parameter's truth, `otherwise` where it was not passed.
  bool flag(size_t i, bool otherwise) const {
    return values_[i] ? values_[i]->truthy() : otherwise;
  }

private:
  std::vector<const Value *> values_;
  bool ok_ = true;
};

/// Checks that an argument was passed and is a string, or an integer (or a boolean), naming
/// it as `what` in the error.
bool needString(RenderState &st, const Value *v, const char *what);
bool needInt(RenderState &st, const Value *v, const char *what, int64_t &out);
/// Fails with Jinja's message for using the undefined value `v`.
bool undefinedError(RenderState &st, const Value &v);
/// Python's len() of a string (code points), list, tuple, dict or loop; undefined is 0.
bool length(RenderState &st, const Value &v, int64_t &out);

/// Whether the type of `obj` has a method `name` (those the sandbox refuses included), and
/// that method bound to `obj`.
bool hasMethod(const Value &obj, const std::string &name);
Value boundMethod(const Value &obj, const std::string &name);

/// `value | name(args)`.
bool callFilter(RenderState &st, const std::string &name, const Value &value, const Args &args,
                Value &out);
/// `value is name(args)`.
bool callTest(RenderState &st, const std::string &name, const Value &value, const Args &args,
              bool &out);
/// A global function or a bound method (a Callable that is not a macro).
bool callBuiltin(RenderState &st, const Callable &fn, const Args &args, Value &out);
/// The global functions, by name; undefined for other names.
Value builtinGlobal(const std::string &name);
/// A call of the global function `name`.
bool callGlobal(RenderState &st, const std::string &name, const Args &args, Value &out);

/// Whether `name` is one of `names`.
template <size_t N> bool among(const char *const (&names)[N], std::string_view name) {
  for (const char *n : names)
    if (name == n)
      return true;
  return false;
}

/// Jinja's `obj.name`: a method, else a dict's key, else undefined. Fails for an undefined
/// object, as Jinja does.
bool getAttribute(RenderState &st, const Value &obj, const std::string &name, Value &out);
/// Jinja's `obj[key]`: an element or a dict's value, else as getAttribute for string keys,
/// else undefined.
bool getItem(RenderState &st, const Value &obj, const Value &key, Value &out);
/// Python's obj[start:stop:step] of a list, tuple or string (parts undefined or none: absent).
bool getSlice(RenderState &st, const Value &obj, const Value &start, const Value &stop,
              const Value &step, Value &out);
/// The elements a for loop visits: a list's or tuple's, a string's characters, a dict's keys;
/// none for undefined.
bool iterate(RenderState &st, const Value &v, List &out);
/// Python's `needle in haystack`.
bool contains(RenderState &st, const Value &haystack, const Value &needle, bool &out);
/// Python's str(v), with the limits checked.
bool toStr(RenderState &st, const Value &v, std::string &out);

} // namespace tessel::tok::chat

#endif // TESSEL_COMMON_TOKENIZER_CHATTEMPLATEBUILTINS_H
