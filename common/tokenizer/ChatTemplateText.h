//===- ChatTemplateText.h - Python's string operations ----------*- C++ -*-===//
//
// Python's str methods and the text parsing Jinja's filters do (strip, split, splitlines,
// replace, title, int(), float()) on UTF-8, for the filters and the methods of strings.
// Whitespace is Python's (Unicode's White_Space and U+001C..U+001F); case mapping and
// character classes cover ASCII letters, other characters are left as they are.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_CHATTEMPLATETEXT_H
#define TESSEL_COMMON_TOKENIZER_CHATTEMPLATETEXT_H

#include "common/tokenizer/ChatTemplateValue.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::tok::chat {

inline char asciiUpper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; }
inline char asciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }
inline bool asciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool asciiDigit(char c) { return c >= '0' && c <= '9'; }

/// str.lower(), str.upper(), str.capitalize(), str.title() (a letter after a non-letter
/// starts a word).
std::string lower(std::string s);
std::string upper(std::string s);
std::string capitalize(std::string s);
std::string pythonTitle(std::string s);
/// Jinja's title filter: a word starts after '-', whitespace or an opening bracket.
std::string jinjaTitle(const std::string &s);
/// The code points of UTF-8 text.
std::vector<uint32_t> codePoints(std::string_view s);
/// str.strip(), lstrip(), rstrip(): whitespace, or the characters of `chars` (a string; null,
/// none or undefined for whitespace).
std::string strip(std::string_view s, const Value *chars, bool left, bool right);
/// str.split() and str.rsplit(): at `sep` (a string), or at runs of whitespace (null, none or
/// undefined); at most `maxSplit` times unless it is negative.
List split(std::string_view s, const Value *sep, int64_t maxSplit, bool fromRight);
/// str.splitlines().
std::vector<std::string> splitLines(std::string_view s);
/// str.replace(): at most `count` times unless it is negative.
std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
/// int(text) in base 10 and float(text): spaces around, a sign, '_' between digits.
bool parseInt(std::string_view text, int64_t &out);
bool parseFloat(std::string_view text, double &out);
/// Whether `cp` is a word character of Jinja's wordcount (letters, digits, '_').
bool isWordChar(uint32_t cp);
/// str.islower() (`wantLower`) or str.isupper(): cased letters, all of that case.
bool hasCased(const std::string &s, bool wantLower);

} // namespace tessel::tok::chat

#endif // TESSEL_COMMON_TOKENIZER_CHATTEMPLATETEXT_H
