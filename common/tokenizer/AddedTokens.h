//===- AddedTokens.h - Tokens matched in the text before BPE ----*- C++ -*-===//
//
// A tokenizer.json's added_tokens (special tokens such as <|endoftext|> among them) are found
// in the text before it is normalized or pre-tokenized, as Hugging Face's tokenizers finds
// them: the leftmost occurrence of any of them, the longest of those that start there, then
// the next occurrence after it. A token marked `normalized` is looked for, in its normalized
// spelling, in the normalized text between the others; `single_word` keeps an occurrence only
// between non-word characters; `lstrip` and `rstrip` take the whitespace beside it into the
// token.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_ADDEDTOKENS_H
#define TESSEL_COMMON_TOKENIZER_ADDEDTOKENS_H

#include "common/tokenizer/Regex.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::tok {

struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool special = false, singleWord = false, lstrip = false, rstrip = false, normalized = true;
  /// The content as the normalizer leaves it (what is matched and decoded when `normalized`).
  std::string normalizedContent;
};

/// Finds the leftmost-longest occurrences of a set of strings (a byte trie).
class TokenMatcher {
public:
  /// `patterns[i]` is reported as index i. Empty patterns never match.
  void build(const std::vector<std::string_view> &patterns);
  bool empty() const { return nodes_.size() <= 1; }
  /// The leftmost-longest occurrence in text[from, end) of any pattern: its bytes
  /// [start, stop) and pattern index. False when there is none.
  bool next(std::string_view text, size_t from, size_t &start, size_t &stop, uint32_t &index) const;

private:
  struct Node {
    uint32_t firstEdge = 0, edges = 0;
    int32_t pattern = -1;
  };
  struct Edge {
    uint8_t byte;
    uint32_t child;
  };
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;
  bool firstByte_[256] = {};
};

/// A part of text: either a run of text or the id of an added token found there.
struct TextPart {
  size_t begin, end;
  uint32_t token; // kText for a run of text
  static constexpr uint32_t kText = 0xFFFFFFFFu;
};

/// Cuts `text` at the occurrences of `tokens` (indexes into `all`) that `matcher` finds,
/// honouring single_word, lstrip and rstrip, and appends the parts to `parts`. `wordClass`
/// is a compiled regex of one word character (for single_word; may be uncompiled when no
/// token needs it).
void splitOnAddedTokens(std::string_view text, const TokenMatcher &matcher,
                        const std::vector<uint32_t> &tokens, const std::vector<AddedToken> &all,
                        const Regex &wordClass, RegexScratch &scratch,
                        std::vector<TextPart> &parts);

} // namespace tessel::tok

#endif // TESSEL_COMMON_TOKENIZER_ADDEDTOKENS_H
