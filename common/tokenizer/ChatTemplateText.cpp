//===- ChatTemplateText.cpp - Python's string operations ------------------===//

#include "common/tokenizer/ChatTemplateText.h"
#include "common/tokenizer/Utf8.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace tessel::tok::chat {

std::string lower(std::string s) {
  for (char &c : s)
    c = asciiLower(c);
  return s;
}

std::string upper(std::string s) {
  for (char &c : s)
    c = asciiUpper(c);
  return s;
}

// Python's str.capitalize.
std::string capitalize(std::string s) {
  s = lower(std::move(s));
  if (!s.empty())
    s[0] = asciiUpper(s[0]);
  return s;
}

// Python's str.title: a letter after a non-letter starts a word.
std::string pythonTitle(std::string s) {
  bool previousCased = false;
  for (char &c : s) {
    bool cased = asciiAlpha(c);
    c = cased ? (previousCased ? asciiLower(c) : asciiUpper(c)) : c;
    previousCased = cased;
  }
  return s;
}

// Jinja's title filter: a word starts after '-', whitespace or an opening bracket; its first
// letter is raised and the rest lowered.
std::string jinjaTitle(const std::string &s) {
  std::string out = s;
  bool wordStart = true;
  for (size_t i = 0; i < s.size();) {
    size_t length = 1;
    uint32_t cp = decodeUtf8(s, i, length);
    if (cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || isPythonSpace(cp)) {
      wordStart = true;
    } else {
      if (length == 1)
        out[i] = wordStart ? asciiUpper(s[i]) : asciiLower(s[i]);
      wordStart = false;
    }
    i += length;
  }
  return out;
}

// The code points of `chars`, for strip's argument.
std::vector<uint32_t> codePoints(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    size_t length = 1;
    out.push_back(decodeUtf8(s, i, length));
    i += length;
  }
  return out;
}

// Python's strip, lstrip and rstrip: whitespace, or the characters of `chars`.
std::string strip(std::string_view s, const Value *chars, bool left, bool right) {
  std::vector<uint32_t> set;
  bool spaces = !chars || chars->isNone() || chars->isUndefined();
  if (!spaces)
    set = codePoints(chars->str());
  auto strippable = [&](uint32_t cp) {
    return spaces ? isPythonSpace(cp) : std::find(set.begin(), set.end(), cp) != set.end();
  };
  size_t begin = 0, end = s.size();
  if (left)
    while (begin < end) {
      size_t length = 1;
      if (!strippable(decodeUtf8(s, begin, length)))
        break;
      begin += length;
    }
  if (right)
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
        --start;
      size_t length = 1;
      if (!strippable(decodeUtf8(s, start, length)))
        break;
      end = start;
    }
  return std::string(s.substr(begin, end - begin));
}

// Python's str.split and str.rsplit; no separator splits at runs of whitespace.
List split(std::string_view s, const Value *sep, int64_t maxSplit, bool fromRight) {
  std::vector<std::string> parts;
  bool spaces = !sep || sep->isNone() || sep->isUndefined();
  if (spaces) {
    std::vector<std::pair<size_t, size_t>> words; // [begin, end) of each word
    size_t i = 0;
    while (i < s.size()) {
      size_t length = 1;
      if (isPythonSpace(decodeUtf8(s, i, length))) {
        i += length;
        continue;
      }
      size_t start = i;
      while (i < s.size() && !isPythonSpace(decodeUtf8(s, i, length)))
        i += length;
      words.emplace_back(start, i);
    }
    size_t n = words.size();
    size_t splits = maxSplit < 0 ? n : static_cast<size_t>(maxSplit);
    if (splits < n) {
      // The words beyond the splits stay joined with the text between them, and Python keeps
      // the whitespace at the far end of that unsplit part.
      if (fromRight) {
        size_t keep = n - splits;
        parts.emplace_back(s.substr(0, words[keep - 1].second));
        for (size_t k = keep; k < n; ++k)
          parts.emplace_back(s.substr(words[k].first, words[k].second - words[k].first));
      } else {
        for (size_t k = 0; k < splits; ++k)
          parts.emplace_back(s.substr(words[k].first, words[k].second - words[k].first));
        parts.emplace_back(s.substr(words[splits].first));
      }
    } else {
      for (const auto &[b, e] : words)
        parts.emplace_back(s.substr(b, e - b));
    }
  } else {
    // From the right, as from the left in the reversed bytes (a match reverses to a match).
    std::string reversed, separator = sep->str();
    if (fromRight) {
      reversed.assign(s.rbegin(), s.rend());
      std::reverse(separator.begin(), separator.end());
      s = reversed;
    }
    size_t start = 0;
    int64_t done = 0;
    while (maxSplit < 0 || done < maxSplit) {
      size_t at = findText(s, separator, start);
      if (at == std::string_view::npos)
        break;
      parts.emplace_back(s.substr(start, at - start));
      start = at + separator.size();
      ++done;
    }
    parts.emplace_back(s.substr(start));
    if (fromRight) {
      for (std::string &part : parts)
        std::reverse(part.begin(), part.end());
      std::reverse(parts.begin(), parts.end());
    }
  }
  List out;
  out.reserve(parts.size());
  for (std::string &p : parts)
    out.push_back(Value::string(std::move(p)));
  return out;
}

// Python's str.splitlines (without keepends).
std::vector<std::string> splitLines(std::string_view s) {
  std::vector<std::string> lines;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    size_t length = 1;
    uint32_t cp = decodeUtf8(s, i, length);
    bool boundary = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C ||
                    cp == 0x1D || cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!boundary) {
      i += length;
      continue;
    }
    lines.emplace_back(s.substr(start, i - start));
    i += length;
    if (cp == '\r' && i < s.size() && s[i] == '\n')
      ++i;
    start = i;
  }
  if (start < s.size())
    lines.emplace_back(s.substr(start));
  return lines;
}

// Python's str.replace.
std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  int64_t done = 0;
  if (from.empty()) {
    // Python inserts `to` before every character and at the end.
    for (size_t i = 0; i <= s.size();) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (i == s.size())
        break;
      size_t length = std::min(utf8SequenceLength(static_cast<unsigned char>(s[i])), s.size() - i);
      out.append(s.substr(i, length));
      i += length;
    }
    return out;
  }
  size_t start = 0;
  while (count < 0 || done < count) {
    size_t at = findText(s, from, start);
    if (at == std::string_view::npos)
      break;
    out.append(s.substr(start, at - start));
    out += to;
    start = at + from.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

// Python's int(text) for base 10: spaces around, a sign, digits with single underscores.
bool parseInt(std::string_view text, int64_t &out) {
  std::string t = strip(text, nullptr, true, true);
  size_t i = 0;
  bool negative = false;
  if (i < t.size() && (t[i] == '+' || t[i] == '-'))
    negative = t[i++] == '-';
  if (i >= t.size() || !asciiDigit(t[i]))
    return false;
  uint64_t value = 0;
  for (; i < t.size(); ++i) {
    if (t[i] == '_' && i + 1 < t.size() && asciiDigit(t[i + 1]) && asciiDigit(t[i - 1]))
      continue;
    if (!asciiDigit(t[i]))
      return false;
    value = value * 10 + (t[i] - '0');
    if (value > static_cast<uint64_t>(INT64_MAX))
      return false;
  }
  out = negative ? -static_cast<int64_t>(value) : static_cast<int64_t>(value);
  return true;
}

// Python's float(text).
bool parseFloat(std::string_view text, double &out) {
  std::string t = strip(text, nullptr, true, true);
  std::string clean;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '_' && i > 0 && i + 1 < t.size() && asciiDigit(t[i - 1]) && asciiDigit(t[i + 1]))
      continue;
    clean += t[i];
  }
  if (clean.empty() || clean.find_first_of("xXpP") != std::string::npos)
    return false;
  std::string l = lower(clean);
  size_t sign = (l[0] == '+' || l[0] == '-') ? 1 : 0;
  std::string body = l.substr(sign);
  if (body == "inf" || body == "infinity" || body == "nan") {
    out = body == "nan" ? NAN : INFINITY;
    if (l[0] == '-')
      out = -out;
    return true;
  }
  char *end = nullptr;
  out = std::strtod(clean.c_str(), &end);
  return end == clean.c_str() + clean.size() &&
         body.find_first_not_of("0123456789.e+-") == std::string::npos;
}

// Jinja's wordcount: runs of word characters (letters, digits, '_'). Beyond ASCII, a character
// counts as a letter unless it is a space, or in the blocks of Latin-1 signs, general
// punctuation and symbols, CJK punctuation, variation selectors or emoji.
bool isWordChar(uint32_t cp) {
  if (cp < 0x80)
    return asciiAlpha(static_cast<char>(cp)) || asciiDigit(static_cast<char>(cp)) || cp == '_';
  return !isPythonSpace(cp) && !(cp >= 0xA0 && cp <= 0xBF) && cp != 0xD7 && cp != 0xF7 &&
         !(cp >= 0x2000 && cp <= 0x2BFF) && !(cp >= 0x3000 && cp <= 0x303F) &&
         !(cp >= 0xFE00 && cp <= 0xFE0F) && !(cp >= 0x1F000 && cp <= 0x1FAFF);
}

bool hasCased(const std::string &s, bool wantLower) {
  bool any = false;
  for (char c : s) {
    if (!asciiAlpha(c))
      continue;
    any = true;
    if ((c >= 'a' && c <= 'z') != wantLower)
      return false;
  }
  return any;
}

} // namespace tessel::tok::chat
