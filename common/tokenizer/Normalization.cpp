//===- Normalization.cpp - Unicode normalization form C -------------------===//
//
// UAX #15: canonical decomposition, canonical ordering of combining marks, then canonical
// composition (a character combines with the last starter before it unless a character
// between them blocks it); Hangul syllables by their formula.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/Normalization.h"

#include "common/tokenizer/Utf8.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tessel::tok {

namespace {

struct CombiningClassRange {
  uint32_t first, last;
  uint8_t ccc;
};
struct Decomposition {
  uint32_t cp;
  uint16_t offset;
  uint8_t length;
};
struct Composition {
  uint32_t first, second, composite;
};
struct CodePointRange {
  uint32_t first, last;
};

#include "common/tokenizer/UnicodeTables.inc"

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

template <typename Range>
const Range *findRange(const Range *begin, const Range *end, uint32_t cp) {
  const Range *it =
      std::upper_bound(begin, end, cp, [](uint32_t v, const Range &r) { return v < r.first; });
  if (it == begin)
    return nullptr;
  --it;
  return cp <= it->last ? it : nullptr;
}

uint8_t combiningClass(uint32_t cp) {
  if (cp < 0x300)
    return 0;
  const CombiningClassRange *r =
      findRange(std::begin(kCombiningClasses), std::end(kCombiningClasses), cp);
  return r ? r->ccc : 0;
}

bool nfcUnsafe(uint32_t cp) {
  return cp >= 0x300 && findRange(std::begin(kNfcUnsafe), std::end(kNfcUnsafe), cp) != nullptr;
}

void decompose(uint32_t cp, std::vector<uint32_t> &out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount)
      out.push_back(kTBase + s % kTCount);
    return;
  }
  const Decomposition *it =
      std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                       [](const Decomposition &d, uint32_t v) { return d.cp < v; });
  if (it == std::end(kDecompositions) || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), kDecompositionData + it->offset,
             kDecompositionData + it->offset + it->length);
}

/// The primary composite of `first` and `second`, or 0.
uint32_t compose(uint32_t first, uint32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount)
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount)
    return first + (second - kTBase);
  const Composition *it = std::lower_bound(
      std::begin(kCompositions), std::end(kCompositions), std::make_pair(first, second),
      [](const Composition &c, const std::pair<uint32_t, uint32_t> &v) {
        return c.first != v.first ? c.first < v.first : c.second < v.second;
      });
  if (it != std::end(kCompositions) && it->first == first && it->second == second)
    return it->composite;
  return 0;
}

} // namespace

void appendNfc(std::string_view text, std::string &out) {
  bool unsafe = false;
  for (size_t i = 0, length = 0; i < text.size() && !unsafe; i += length) {
    if (static_cast<unsigned char>(text[i]) < 0xCC) { // below U+0300 (or ASCII)
      length = utf8SequenceLength(static_cast<unsigned char>(text[i]));
      continue;
    }
    unsafe = nfcUnsafe(decodeUtf8(text, i, length));
  }
  if (!unsafe) {
    out.append(text);
    return;
  }
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  for (size_t i = 0, length = 0; i < text.size(); i += length)
    decompose(decodeUtf8(text, i, length), cps);
  // Canonical ordering: each run of combining marks sorted (stably) by class.
  for (size_t i = 0; i < cps.size();) {
    if (combiningClass(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < cps.size() && combiningClass(cps[end]) != 0)
      ++end;
    std::stable_sort(cps.begin() + i, cps.begin() + end,
                     [](uint32_t a, uint32_t b) { return combiningClass(a) < combiningClass(b); });
    i = end;
  }
  std::vector<uint32_t> composed;
  composed.reserve(cps.size());
  long starter = -1;  // index in `composed` of the last starter
  int lastClass = -1; // class of the last character after it; -1: none (adjacent)
  for (uint32_t cp : cps) {
    int cls = combiningClass(cp);
    if (starter >= 0 && (lastClass == -1 || lastClass < cls)) {
      if (uint32_t composite = compose(composed[starter], cp)) {
        composed[starter] = composite;
        continue;
      }
    }
    if (cls == 0) {
      starter = static_cast<long>(composed.size());
      lastClass = -1;
    } else {
      lastClass = cls;
    }
    composed.push_back(cp);
  }
  for (uint32_t cp : composed)
    appendUtf8(cp, out);
}

} // namespace tessel::tok
