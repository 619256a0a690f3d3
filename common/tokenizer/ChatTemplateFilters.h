//===- ChatTemplateFilters.h - The filters of chat templates ----*- C++ -*-===//
//
// The filters the table of ChatTemplateFilters.cpp names, by family: those of strings
// (ChatTemplateStringFilters.cpp) and those of sequences and mappings
// (ChatTemplateSequenceFilters.cpp); the filters of numbers and other values and tojson are
// in ChatTemplateFilters.cpp with the table. Each computes `value | name(args)` into `out`,
// reading its arguments by Python's rules (Bind), or fails with the render's state.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_CHATTEMPLATEFILTERS_H
#define TESSEL_COMMON_TOKENIZER_CHATTEMPLATEFILTERS_H

#include "common/tokenizer/ChatTemplateBuiltins.h"

#include <string>

namespace tessel::tok::chat {

/// A filter's text as its result, checked against the limits.
bool stringResult(RenderState &st, std::string s, Value &out);

// Strings: ChatTemplateStringFilters.cpp.
bool fCapitalize(RenderState &st, const Value &v, const Args &args, Value &out);
bool fEscape(RenderState &st, const Value &v, const Args &args, Value &out);
bool fIndent(RenderState &st, const Value &v, const Args &args, Value &out);
bool fLower(RenderState &st, const Value &v, const Args &args, Value &out);
bool fUpper(RenderState &st, const Value &v, const Args &args, Value &out);
bool fTitle(RenderState &st, const Value &v, const Args &args, Value &out);
bool fReplace(RenderState &st, const Value &v, const Args &args, Value &out);
bool fString(RenderState &st, const Value &v, const Args &args, Value &out);
bool fTrim(RenderState &st, const Value &v, const Args &args, Value &out);
bool fWordcount(RenderState &st, const Value &v, const Args &args, Value &out);

// Sequences and mappings: ChatTemplateSequenceFilters.cpp.
bool fLength(RenderState &st, const Value &v, const Args &args, Value &out);
bool fDictsort(RenderState &st, const Value &v, const Args &args, Value &out);
bool fFirst(RenderState &st, const Value &v, const Args &args, Value &out);
bool fLast(RenderState &st, const Value &v, const Args &args, Value &out);
bool fItems(RenderState &st, const Value &v, const Args &args, Value &out);
bool fJoin(RenderState &st, const Value &v, const Args &args, Value &out);
bool fList(RenderState &st, const Value &v, const Args &args, Value &out);
bool fMap(RenderState &st, const Value &v, const Args &args, Value &out);
bool fMax(RenderState &st, const Value &v, const Args &args, Value &out);
bool fMin(RenderState &st, const Value &v, const Args &args, Value &out);
bool fSelect(RenderState &st, const Value &v, const Args &args, Value &out);
bool fReject(RenderState &st, const Value &v, const Args &args, Value &out);
bool fSelectattr(RenderState &st, const Value &v, const Args &args, Value &out);
bool fRejectattr(RenderState &st, const Value &v, const Args &args, Value &out);
bool fReverse(RenderState &st, const Value &v, const Args &args, Value &out);
bool fSort(RenderState &st, const Value &v, const Args &args, Value &out);
bool fSum(RenderState &st, const Value &v, const Args &args, Value &out);
bool fUnique(RenderState &st, const Value &v, const Args &args, Value &out);

} // namespace tessel::tok::chat

#endif // TESSEL_COMMON_TOKENIZER_CHATTEMPLATEFILTERS_H
