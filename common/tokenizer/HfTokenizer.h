//===- HfTokenizer.h - A Hugging Face tokenizer.json pipeline ---*- C++ -*-===//
//
// The stages of a tokenizer.json, run as Hugging Face's tokenizers runs them:
//
//   added tokens (not normalized) found in the raw text
//   → each run of text between them: normalizer, then the normalized added tokens
//   → each run left: pre-tokenizer (pieces), then the BPE model on each piece
//   → the post-processor's tokens around the sequence (when special tokens are asked for)
//
// and back: ids → tokens (added tokens by their content) → the decoder's steps → text.
//
// Each stage is a list of steps (a tokenizer.json Sequence is flattened into it). Loading
// (HfTokenizerJson*.cpp, HfTokenizerReader.h) builds the steps; this header is internal to the
// library.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_HFTOKENIZER_H
#define TESSEL_COMMON_TOKENIZER_HFTOKENIZER_H

#include "common/tokenizer/AddedTokens.h"
#include "common/tokenizer/Bpe.h"
#include "common/tokenizer/Regex.h"
#include "common/tokenizer/Tokenizer.h"

#include <memory>
#include <mutex>
#include <unordered_set>

namespace tessel::tok {

/// A literal string or a regular expression (a Split's or Replace's "pattern").
struct Pattern {
  bool isRegex = false;
  std::string literal;
  Regex regex;
  /// The first non-empty match in text[from, ...).
  bool find(std::string_view text, size_t from, size_t &start, size_t &stop,
            RegexScratch &scratch) const;
};

/// What a Split does with the matches of its pattern.
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

/// Where a Metaspace puts its replacement character in front of a piece.
enum class PrependScheme { Always, First, Never };

struct NormalizerStep {
  enum class Kind { Prepend, Replace, Strip, Nfc } kind;
  std::string text;                 // Prepend's text, Replace's content
  Pattern pattern;                  // Replace
  bool left = false, right = false; // Strip
};

struct PreTokenizerStep {
  enum class Kind { ByteLevel, Split, Metaspace } kind;
  bool addPrefixSpace = false, useRegex = true; // ByteLevel
  Pattern pattern;                              // Split, and ByteLevel's regex
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  std::string replacement; // Metaspace
  PrependScheme scheme = PrependScheme::Always;
  bool split = true;
};

struct DecoderStep {
  enum class Kind { ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip } kind;
  std::string replacement; // Metaspace
  PrependScheme scheme = PrependScheme::Always;
  Pattern pattern;            // Replace
  std::string content;        // Replace's content; Strip's character
  size_t start = 0, stop = 0; // Strip
};

/// One thread's buffers for encoding (pooled by the tokenizer).
struct EncodeScratch {
  struct Piece {
    int32_t buffer; // -1: the text being pre-tokenized; else buffers[buffer]
    uint32_t begin, end;
    bool atStart; // begins at offset 0 of the original text (Metaspace's "first")
  };
  struct Mark {
    size_t begin, end;
    bool match;
  };
  std::string repaired, normalized, normalizedNext;
  std::vector<TextPart> parts, normalizedParts;
  std::vector<Piece> pieces, nextPieces;
  std::vector<Mark> marks;
  std::vector<std::string> buffers;
  size_t buffersUsed = 0;
  BpeScratch bpe;
  RegexScratch regex;
};

class HfTokenizer final : public Tokenizer {
public:
  void encodeAppend(std::string_view text, bool addSpecialTokens,
                    std::vector<uint32_t> &ids) const override;
  std::string decode(const std::vector<uint32_t> &ids, bool skipSpecialTokens) const override;
  uint32_t vocabSize() const override { return vocabBound_; }
  std::optional<uint32_t> tokenToId(std::string_view token) const override;
  std::optional<std::string> idToToken(uint32_t id) const override;

  /// Reads a tokenizer.json (`file` names it in messages). Defined in HfTokenizerJson.cpp.
  static std::unique_ptr<HfTokenizer> fromJson(const std::string &file, std::string_view text,
                                               std::string &error);

  /// The post-processor's single-sequence template: ids before and after the sequence.
  const std::vector<uint32_t> &prefixIds() const { return prefix_; }
  const std::vector<uint32_t> &suffixIds() const { return suffix_; }
  const std::vector<AddedToken> &addedTokens() const { return added_; }
  const BpeModel &model() const { return model_; }

private:
  friend class HfTokenizerReader;

  BpeModel model_;
  std::vector<NormalizerStep> normalizers_;
  std::vector<PreTokenizerStep> preTokenizers_;
  std::vector<DecoderStep> decoders_;
  bool hasDecoder_ = false;
  std::vector<uint32_t> prefix_, suffix_;

  std::vector<AddedToken> added_;
  std::vector<int32_t> addedIndexOfId_; // -1 where an id is no added token's
  std::unordered_set<std::string> specialContents_;
  TokenMatcher rawMatcher_, normalizedMatcher_;
  std::vector<uint32_t> rawTokens_, normalizedTokens_; // indexes into added_
  Regex wordClass_;                                    // one word character, for single_word
  uint32_t vocabBound_ = 0;

  mutable std::mutex poolMutex_;
  mutable std::vector<std::unique_ptr<EncodeScratch>> pool_;

  std::unique_ptr<EncodeScratch> acquire() const;
  void release(std::unique_ptr<EncodeScratch> scratch) const;

  void normalize(std::string_view text, EncodeScratch &s) const;
  void encodeRun(std::string_view text, bool atStart, EncodeScratch &s,
                 std::vector<uint32_t> &ids) const;
  void preTokenizeAndEncode(std::string_view text, bool atStart, EncodeScratch &s,
                            std::vector<uint32_t> &ids) const;
  /// The token string decoding gives `id` (its added token's content, or the vocabulary's),
  /// or null for an id the tokenizer does not have.
  const std::string *decodedToken(uint32_t id) const;
};

} // namespace tessel::tok

#endif // TESSEL_COMMON_TOKENIZER_HFTOKENIZER_H
