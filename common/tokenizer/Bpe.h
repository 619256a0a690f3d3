//===- Bpe.h - Byte-pair encoding of one pre-token --------------*- C++ -*-===//
//
// The BPE model of a tokenizer.json: a vocabulary, ranked merges and what to do with a
// character the vocabulary lacks (byte fallback, the unknown token). A pre-token's characters
// become symbols; then the adjacent pair whose merge has the lowest rank (the leftmost of
// equals) merges, again and again, as Hugging Face's tokenizers does it: candidate merges wait
// in a heap ordered by rank and position, and one whose pair has changed since it was pushed
// is dropped when it comes up. A token may have several merges (Llama 3's file lists every
// split of a token); each pair merges at its own rank.
//
// In byte-level files the vocabulary spells bytes as printable characters (ByteLevel.h).
// Tessel keeps such a vocabulary as the bytes it stands for and merges the text's bytes
// directly: the symbols of a pre-token are its bytes, and no text is ever mapped to the
// printable alphabet.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_BPE_H
#define TESSEL_COMMON_TOKENIZER_BPE_H

#include "common/tokenizer/HashTables.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::tok {

/// What encoding one pre-token needs on one thread: reused buffers and the word cache.
struct BpeScratch {
  struct Symbol {
    uint32_t id;
    int32_t prev, next;
    uint32_t length; // bytes; 0 once merged into the symbol before it
  };
  struct Candidate {
    uint32_t rank, position, id;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::vector<uint32_t> ids;
  std::string text;
  WordCache cache;
};

struct BpeOptions {
  std::optional<std::string> unkToken;
  std::string continuingSubwordPrefix, endOfWordSuffix;
  bool fuseUnk = false, byteFallback = false, ignoreMerges = false;
};

class BpeModel {
public:
  /// Builds the model from its vocabulary (token → id, in file order) and merges (pairs of
  /// tokens, in rank order). `byteLevel`: pre-tokens are bytes and the vocabulary spells them
  /// in the byte-level alphabet. On failure returns false with the reason, naming the merge
  /// ("merges[12]") or token at fault.
  bool build(std::vector<std::pair<std::string, uint32_t>> vocab,
             const std::vector<std::pair<std::string, std::string>> &merges, BpeOptions options,
             bool byteLevel, std::string &error);

  /// Appends the ids of pre-token `word` (bytes in byte-level mode, else UTF-8 text).
  void encodeWord(std::string_view word, BpeScratch &scratch, std::vector<uint32_t> &out) const;

  /// The id of `token` as the vocabulary spells it, or StringIdMap::kNone.
  uint32_t tokenToId(std::string_view token) const { return vocab_.find(token); }
  /// The token of `id` as the vocabulary spells it, or null.
  const std::string *idToToken(uint32_t id) const {
    return id < tokens_.size() && hasToken_[id] ? &tokens_[id] : nullptr;
  }
  /// Entries in the vocabulary (Hugging Face's vocab size of the model).
  size_t entries() const { return vocab_.size(); }
  /// The largest id + 1.
  uint32_t idBound() const { return static_cast<uint32_t>(tokens_.size()); }
  bool byteLevel() const { return byteLevel_; }
  const BpeOptions &options() const { return options_; }

private:
  StringIdMap vocab_;  // as the file spells tokens
  StringIdMap pieces_; // what encoding looks up: the bytes a byte-level token stands for
  std::vector<std::string> tokens_;
  std::vector<uint8_t> hasToken_;
  MergeMap merges_;
  BpeOptions options_;
  bool byteLevel_ = false;
  uint32_t unkId_ = StringIdMap::kNone;
  uint32_t byteIds_[256];     // byte-level: the symbol of each byte, or kNone
  uint32_t fallbackIds_[256]; // the id of "<0xXX>", or kNone

  /// Appends to `symbols` the symbols of the character `piece` (bytes of the word) at
  /// `first`/`last` position, handling unknown characters as the model's options say.
  void addCharacter(std::string_view piece, bool first, bool last, BpeScratch &scratch,
                    uint32_t &pendingUnk, uint32_t &pendingUnkLength) const;
  void mergeAll(BpeScratch &scratch) const;
};

} // namespace tessel::tok

#endif // TESSEL_COMMON_TOKENIZER_BPE_H
