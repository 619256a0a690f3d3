//===- Utf8.cpp - UTF-8 for the tokenizers --------------------------------===//

#include "common/tokenizer/Utf8.h"

namespace tessel::tok {

long utf8WellFormedLength(std::string_view text, size_t i) {
  const auto b = [&](size_t k) {
    return static_cast<unsigned>(static_cast<unsigned char>(text[k]));
  };
  const unsigned b0 = b(i);
  if (b0 < 0x80)
    return 1;
  size_t length;
  unsigned lo = 0x80, hi = 0xBF; // the range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0)
      lo = 0xA0;
    else if (b0 == 0xED)
      hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0)
      lo = 0x90;
    else if (b0 == 0xF4)
      hi = 0x8F;
  } else {
    return -1;
  }
  size_t k = 1;
  for (; k < length; ++k) {
    if (i + k >= text.size())
      return -static_cast<long>(k);
    unsigned c = b(i + k);
    bool ok = k == 1 ? c >= lo && c <= hi : c >= 0x80 && c <= 0xBF;
    if (!ok)
      return -static_cast<long>(k);
  }
  return static_cast<long>(length);
}

size_t validUtf8Prefix(std::string_view text) {
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    // Eight ASCII bytes at a time: most text is mostly ASCII.
    while (i + 8 <= n) {
      uint64_t word;
      __builtin_memcpy(&word, text.data() + i, 8);
      if (word & 0x8080808080808080ull)
        break;
      i += 8;
    }
    if (i >= n)
      break;
    long length = utf8WellFormedLength(text, i);
    if (length < 0)
      return i;
    i += static_cast<size_t>(length);
  }
  return n;
}

void appendRepairedUtf8(std::string_view text, std::string &out) {
  size_t i = 0;
  while (i < text.size()) {
    size_t good = i + validUtf8Prefix(text.substr(i));
    out.append(text.data() + i, good - i);
    if (good >= text.size())
      return;
    long length = utf8WellFormedLength(text, good);
    out.append("\xEF\xBF\xBD");
    i = good + static_cast<size_t>(-length);
  }
}

std::string repairUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  appendRepairedUtf8(text, out);
  return out;
}

void appendUtf8(uint32_t cp, std::string &out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

} // namespace tessel::tok
