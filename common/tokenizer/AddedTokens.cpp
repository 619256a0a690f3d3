//===- AddedTokens.cpp - Tokens matched in the text before BPE ------------===//

#include "common/tokenizer/AddedTokens.h"

#include "common/tokenizer/Utf8.h"

#include <algorithm>
#include <map>

namespace tessel::tok {

void TokenMatcher::build(const std::vector<std::string_view> &patterns) {
  // Build with maps, then lay the trie out as sorted edge arrays.
  struct BuildNode {
    std::map<uint8_t, uint32_t> children;
    int32_t pattern = -1;
  };
  std::vector<BuildNode> trie(1);
  for (size_t p = 0; p < patterns.size(); ++p) {
    if (patterns[p].empty())
      continue;
    uint32_t node = 0;
    for (char c : patterns[p]) {
      uint8_t b = static_cast<uint8_t>(c);
      auto it = trie[node].children.find(b);
      if (it == trie[node].children.end()) {
        trie.push_back({});
        it = trie[node].children.emplace(b, static_cast<uint32_t>(trie.size() - 1)).first;
      }
      node = it->second;
    }
    // Two tokens with one spelling: the later one is found, as a map from spelling keeps.
    trie[node].pattern = static_cast<int32_t>(p);
  }
  nodes_.assign(trie.size(), Node());
  edges_.clear();
  std::fill(std::begin(firstByte_), std::end(firstByte_), false);
  for (size_t n = 0; n < trie.size(); ++n) {
    nodes_[n].firstEdge = static_cast<uint32_t>(edges_.size());
    nodes_[n].edges = static_cast<uint32_t>(trie[n].children.size());
    nodes_[n].pattern = trie[n].pattern;
    for (const auto &[byte, child] : trie[n].children)
      edges_.push_back({byte, child});
  }
  for (const auto &[byte, child] : trie[0].children)
    firstByte_[byte] = true;
}

bool TokenMatcher::next(std::string_view text, size_t from, size_t &start, size_t &stop,
                        uint32_t &index) const {
  if (empty())
    return false;
  const size_t n = text.size();
  for (size_t i = from; i < n; ++i) {
    if (!firstByte_[static_cast<uint8_t>(text[i])])
      continue;
    uint32_t node = 0;
    int32_t best = -1;
    size_t bestEnd = 0;
    for (size_t k = i; k < n; ++k) {
      const Node &current = nodes_[node];
      const Edge *begin = edges_.data() + current.firstEdge, *end = begin + current.edges;
      uint8_t b = static_cast<uint8_t>(text[k]);
      const Edge *edge =
          std::lower_bound(begin, end, b, [](const Edge &e, uint8_t v) { return e.byte < v; });
      if (edge == end || edge->byte != b)
        break;
      node = edge->child;
      if (nodes_[node].pattern >= 0) {
        best = nodes_[node].pattern;
        bestEnd = k + 1;
      }
    }
    if (best >= 0) {
      start = i;
      stop = bestEnd;
      index = static_cast<uint32_t>(best);
      return true;
    }
  }
  return false;
}

namespace {

/// Whether the character that ends text[0, end) is a word character.
bool wordBefore(std::string_view text, size_t end, const Regex &wordClass, RegexScratch &s) {
  if (end == 0)
    return false;
  size_t begin = end - 1;
  while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80)
    --begin;
  return wordClass.matchesWhole(text.substr(begin, end - begin), s);
}

/// Whether the character that starts text[begin, ...) is a word character.
bool wordAfter(std::string_view text, size_t begin, const Regex &wordClass, RegexScratch &s) {
  if (begin >= text.size())
    return false;
  size_t length = utf8SequenceLength(static_cast<unsigned char>(text[begin]));
  return wordClass.matchesWhole(text.substr(begin, length), s);
}

/// Where the run of whitespace that ends at `end` starts.
size_t whitespaceRunBefore(std::string_view text, size_t end) {
  size_t begin = end;
  while (begin > 0) {
    size_t charStart = begin - 1;
    while (charStart > 0 && (static_cast<unsigned char>(text[charStart]) & 0xC0) == 0x80)
      --charStart;
    size_t length = 0;
    if (!isUnicodeWhiteSpace(decodeUtf8(text, charStart, length)))
      break;
    begin = charStart;
  }
  return begin;
}

/// Where the run of whitespace that starts at `begin` ends.
size_t whitespaceRunAfter(std::string_view text, size_t begin) {
  size_t end = begin;
  while (end < text.size()) {
    size_t length = 0;
    if (!isUnicodeWhiteSpace(decodeUtf8(text, end, length)))
      break;
    end += length;
  }
  return end;
}

} // namespace

void splitOnAddedTokens(std::string_view text, const TokenMatcher &matcher,
                        const std::vector<uint32_t> &tokens, const std::vector<AddedToken> &all,
                        const Regex &wordClass, RegexScratch &scratch,
                        std::vector<TextPart> &parts) {
  size_t done = 0, from = 0, start = 0, stop = 0;
  uint32_t index = 0;
  while (matcher.next(text, from, start, stop, index)) {
    // The search goes on after this occurrence whether or not it is kept.
    from = stop;
    const AddedToken &token = all[tokens[index]];
    if (token.singleWord &&
        (wordBefore(text, start, wordClass, scratch) || wordAfter(text, stop, wordClass, scratch)))
      continue;
    if (token.lstrip)
      start = std::max(whitespaceRunBefore(text, start), done);
    if (token.rstrip)
      stop = whitespaceRunAfter(text, stop);
    if (done < start)
      parts.push_back({done, start, TextPart::kText});
    parts.push_back({start, stop, token.id});
    done = std::max(done, stop);
  }
  if (done < text.size())
    parts.push_back({done, text.size(), TextPart::kText});
}

} // namespace tessel::tok
