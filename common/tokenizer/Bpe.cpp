//===- Bpe.cpp - Byte-pair encoding of one pre-token ----------------------===//

#include "common/tokenizer/Bpe.h"

#include "common/tokenizer/ByteLevel.h"
#include "common/tokenizer/Utf8.h"

#include <algorithm>

namespace tessel::tok {

namespace {

constexpr uint32_t kNone = StringIdMap::kNone;
/// Ids are indexes of tables here; a file's id beyond this is refused, not allocated for.
constexpr uint32_t kMaxId = (1u << 24) - 1;
/// Pre-tokens this long or longer are not cached (as Hugging Face's cache keeps them out).
constexpr size_t kMaxCachedWord = 256;

std::string quoted(std::string_view token) {
  std::string out = "'";
  out.append(token.substr(0, 80));
  if (token.size() > 80)
    out += "...";
  return out + "'";
}

std::string byteFallbackToken(uint8_t b) {
  static const char digits[] = "0123456789ABCDEF";
  return std::string("<0x") + digits[b >> 4] + digits[b & 15] + ">";
}

/// The heap's order: the lowest rank first, then the leftmost position.
struct LaterCandidate {
  bool operator()(const BpeScratch::Candidate &a, const BpeScratch::Candidate &b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.position > b.position;
  }
};

} // namespace

bool BpeModel::build(std::vector<std::pair<std::string, uint32_t>> vocab,
                     const std::vector<std::pair<std::string, std::string>> &merges,
                     BpeOptions options, bool byteLevel, std::string &error) {
  options_ = std::move(options);
  byteLevel_ = byteLevel;
  if (byteLevel_ &&
      (!options_.continuingSubwordPrefix.empty() || !options_.endOfWordSuffix.empty())) {
    error = "continuing_subword_prefix and end_of_word_suffix are not supported with a "
            "ByteLevel pre-tokenizer";
    return false;
  }
  uint32_t bound = 0;
  for (const auto &[token, id] : vocab) {
    if (id > kMaxId) {
      error = "vocab: the id of " + quoted(token) + " is " + std::to_string(id) +
              ", beyond the largest Tessel takes (" + std::to_string(kMaxId) + ")";
      return false;
    }
    bound = std::max(bound, id + 1);
  }
  tokens_.assign(bound, std::string());
  hasToken_.assign(bound, 0);
  std::string bytes;
  for (auto &[token, id] : vocab) {
    if (hasToken_[id]) {
      error = "vocab: id " + std::to_string(id) + " is given to both " + quoted(tokens_[id]) +
              " and " + quoted(token);
      return false;
    }
    if (!vocab_.insert(token, id)) {
      error = "vocab: token " + quoted(token) + " appears twice";
      return false;
    }
    if (byteLevel_ && byteLevelDecode(token, bytes))
      pieces_.insert(bytes, id);
    hasToken_[id] = 1;
    tokens_[id] = std::move(token);
  }
  const std::string &prefix = options_.continuingSubwordPrefix;
  std::string merged;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto &[a, b] = merges[rank];
    const std::string where = "merges[" + std::to_string(rank) + "]: ";
    uint32_t aId = vocab_.find(a), bId = vocab_.find(b);
    if (aId == kNone || bId == kNone) {
      error = where + quoted(aId == kNone ? a : b) + " is not in the vocabulary";
      return false;
    }
    if (b.size() < prefix.size()) {
      error = where + quoted(b) + " is shorter than continuing_subword_prefix";
      return false;
    }
    merged.assign(a);
    merged.append(b, prefix.size(), std::string::npos);
    uint32_t id = vocab_.find(merged);
    if (id == kNone) {
      error = where + "the merged token " + quoted(merged) + " is not in the vocabulary";
      return false;
    }
    merges_.set(aId, bId, {static_cast<uint32_t>(rank), id});
  }
  if (options_.unkToken) {
    unkId_ = vocab_.find(*options_.unkToken);
    if (unkId_ == kNone) {
      error = "unk_token " + quoted(*options_.unkToken) + " is not in the vocabulary";
      return false;
    }
  }
  for (unsigned b = 0; b < 256; ++b) {
    byteIds_[b] = byteLevel_ ? pieces_.find(std::string(1, static_cast<char>(b))) : kNone;
    fallbackIds_[b] = vocab_.find(byteFallbackToken(static_cast<uint8_t>(b)));
  }
  return true;
}

void BpeModel::addCharacter(std::string_view piece, bool first, bool last, BpeScratch &scratch,
                            uint32_t &pendingUnk, uint32_t &pendingUnkLength) const {
  auto add = [&](uint32_t id, uint32_t length) {
    int32_t index = static_cast<int32_t>(scratch.symbols.size());
    if (index > 0)
      scratch.symbols.back().next = index;
    scratch.symbols.push_back({id, index - 1, -1, length});
  };
  const uint32_t length = static_cast<uint32_t>(piece.size());
  uint32_t id = kNone;
  // The character as the vocabulary spells it, with the affixes where they apply.
  std::string_view spelled = piece;
  if (byteLevel_) {
    id = byteIds_[static_cast<uint8_t>(piece[0])];
    if (id == kNone) {
      scratch.text.clear();
      appendUtf8(byteLevelChar(static_cast<uint8_t>(piece[0])), scratch.text);
      spelled = scratch.text;
    }
  } else {
    const std::string &prefix = options_.continuingSubwordPrefix,
                      &suffix = options_.endOfWordSuffix;
    if ((!first && !prefix.empty()) || (last && !suffix.empty())) {
      scratch.text.assign(first ? "" : prefix);
      scratch.text.append(piece);
      if (last)
        scratch.text.append(suffix);
      spelled = scratch.text;
    }
    id = vocab_.find(spelled);
  }
  if (id != kNone) {
    if (pendingUnk != kNone) {
      add(pendingUnk, pendingUnkLength);
      pendingUnk = kNone;
    }
    add(id, length);
    return;
  }
  if (options_.byteFallback) {
    bool all = std::all_of(spelled.begin(), spelled.end(),
                           [&](char c) { return fallbackIds_[static_cast<uint8_t>(c)] != kNone; });
    if (all) {
      // As the reference does, an unknown token still pending comes after these bytes.
      for (char c : spelled)
        add(fallbackIds_[static_cast<uint8_t>(c)], 1);
      return;
    }
  }
  if (unkId_ == kNone)
    return; // no unknown token: the character is dropped
  if (pendingUnk != kNone && options_.fuseUnk) {
    pendingUnkLength += length;
    return;
  }
  if (pendingUnk != kNone)
    add(pendingUnk, pendingUnkLength);
  pendingUnk = unkId_;
  pendingUnkLength = length;
}

void BpeModel::mergeAll(BpeScratch &scratch) const {
  std::vector<BpeScratch::Symbol> &symbols = scratch.symbols;
  std::vector<BpeScratch::Candidate> &heap = scratch.heap;
  heap.clear();
  for (size_t i = 0; i + 1 < symbols.size(); ++i)
    if (const MergeMap::Merge *m = merges_.find(symbols[i].id, symbols[i + 1].id))
      heap.push_back({m->rank, static_cast<uint32_t>(i), m->id});
  std::make_heap(heap.begin(), heap.end(), LaterCandidate());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), LaterCandidate());
    BpeScratch::Candidate top = heap.back();
    heap.pop_back();
    BpeScratch::Symbol &left = symbols[top.position];
    if (left.length == 0 || left.next == -1)
      continue;
    const BpeScratch::Symbol right = symbols[left.next];
    // A stale entry: the pair here now makes another token (or none).
    const MergeMap::Merge *now = merges_.find(left.id, right.id);
    if (!now || now->id != top.id)
      continue;
    symbols[left.next].length = 0;
    left.id = top.id;
    left.length += right.length;
    left.next = right.next;
    if (right.next != -1)
      symbols[right.next].prev = static_cast<int32_t>(top.position);
    if (left.prev != -1) {
      if (const MergeMap::Merge *m = merges_.find(symbols[left.prev].id, left.id)) {
        heap.push_back({m->rank, static_cast<uint32_t>(left.prev), m->id});
        std::push_heap(heap.begin(), heap.end(), LaterCandidate());
      }
    }
    if (left.next != -1) {
      if (const MergeMap::Merge *m = merges_.find(left.id, symbols[left.next].id)) {
        heap.push_back({m->rank, top.position, m->id});
        std::push_heap(heap.begin(), heap.end(), LaterCandidate());
      }
    }
  }
}

void BpeModel::encodeWord(std::string_view word, BpeScratch &scratch,
                          std::vector<uint32_t> &out) const {
  if (word.empty())
    return;
  const StringIdMap &lookup = byteLevel_ ? pieces_ : vocab_;
  if (options_.ignoreMerges) {
    uint32_t id = lookup.find(word);
    if (id != kNone) {
      out.push_back(id);
      return;
    }
  }
  if (byteLevel_ && word.size() == 1 && byteIds_[static_cast<uint8_t>(word[0])] != kNone) {
    out.push_back(byteIds_[static_cast<uint8_t>(word[0])]);
    return;
  }
  const bool cacheable = word.size() < kMaxCachedWord;
  uint64_t hash = 0;
  if (cacheable) {
    hash = hashBytes(word);
    if (scratch.cache.lookup(word, hash, out))
      return;
  }
  scratch.symbols.clear();
  uint32_t pendingUnk = kNone, pendingUnkLength = 0;
  for (size_t i = 0; i < word.size();) {
    size_t length = byteLevel_ ? 1 : utf8SequenceLength(static_cast<unsigned char>(word[i]));
    addCharacter(word.substr(i, length), i == 0, i + length >= word.size(), scratch, pendingUnk,
                 pendingUnkLength);
    i += length;
  }
  if (pendingUnk != kNone) {
    int32_t index = static_cast<int32_t>(scratch.symbols.size());
    if (index > 0)
      scratch.symbols.back().next = index;
    scratch.symbols.push_back({pendingUnk, index - 1, -1, pendingUnkLength});
  }
  mergeAll(scratch);
  const size_t start = out.size();
  for (const BpeScratch::Symbol &s : scratch.symbols)
    if (s.length != 0)
      out.push_back(s.id);
  if (cacheable)
    scratch.cache.store(word, hash, out.data() + start, out.size() - start);
}

} // namespace tessel::tok
