//===- DataWindows.cpp - Training and evaluation windows and batches ------===//
//
// What a run reads of open TokenData: a token by its position in the concatenated files,
// training windows drawn at random from the train part, evaluation windows evenly spaced over
// the eval part, and batches of them of which each process reads only the rows its ranks take.
// The vocabulary check of data too large to scan when it opens happens here, window by window.
// Where the data is examples, a row is an example (DataExamples.cpp). Also the data's
// fingerprint, which tells two processes' data apart.
//
//===----------------------------------------------------------------------===//

#include "runtime/host/Data.h"

#include "common/support/Checksum.h"
#include "runtime/core/Rng.h"
#include "runtime/host/DataImpl.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace tessel::rt {

using detail::tokenAt;

/// A broken precondition is a bug in the caller, not bad input: stop loudly.
static void require(bool condition, const char *what) {
  if (condition)
    return;
  std::fprintf(stderr, "tessel runtime: TokenData: %s\n", what);
  std::abort();
}

uint32_t TokenData::at(int64_t index) const {
  // The segment holding `index`: the last one that starts at or before it.
  auto it = std::upper_bound(segments_.begin(), segments_.end(), index,
                             [](int64_t i, const Segment &s) { return i < s.first; });
  const Segment &segment = *(it - 1);
  return tokenAt(segment.tokens, index - segment.first, segment.width);
}

uint64_t TokenData::fingerprint() const {
  std::vector<uint64_t> parts{static_cast<uint64_t>(total_)};
  auto addBytes = [&](const unsigned char *data, size_t bytes) {
    if (bytes <= kFingerprintSamples * kFingerprintPiece) {
      parts.push_back(xxh3_64(data, bytes));
      return;
    }
    // Pieces spread evenly from the first byte to the last.
    const size_t last = bytes - kFingerprintPiece;
    for (size_t i = 0; i < kFingerprintSamples; ++i)
      parts.push_back(xxh3_64(data + last * i / (kFingerprintSamples - 1), kFingerprintPiece));
  };
  for (const Segment &s : segments_) {
    parts.push_back(static_cast<uint64_t>(s.width));
    parts.push_back(static_cast<uint64_t>(s.count));
    addBytes(s.tokens, static_cast<size_t>(s.count) * static_cast<size_t>(s.width));
    if (s.mask) { // An example file: its starts and mask too.
      parts.push_back(static_cast<uint64_t>(s.exampleCount));
      addBytes(s.starts, static_cast<size_t>(s.exampleCount + 1) * 8);
      addBytes(s.mask, static_cast<size_t>(s.count));
    }
  }
  return xxh3_64(parts.data(), parts.size() * sizeof(uint64_t));
}

std::vector<uint32_t> TokenData::slice(int64_t begin, int64_t count) const {
  require(begin >= 0 && count >= 0 && begin + count <= total_, "slice: outside the data");
  std::vector<uint32_t> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    out[i] = at(begin + i);
  return out;
}

bool TokenData::copyWindow(int64_t start, int32_t *tokens, int32_t *targets, int64_t seq,
                           std::string &error) const {
  ++windowsRead_;
  for (int64_t i = 0; i <= seq; ++i) {
    const uint32_t t = at(start + i);
    if (!scanned_ && t >= vocab_) {
      error = what_ + ": token " + std::to_string(t) + " at position " + std::to_string(start + i) +
              " is not below the vocabulary size " + std::to_string(vocab_);
      return false;
    }
    if (i < seq)
      tokens[i] = t;
    if (i > 0)
      targets[i - 1] = t;
  }
  return true;
}

bool TokenData::trainWindow(Rng &rng, int32_t *tokens, int32_t *targets, int64_t seq,
                            std::string &error) const {
  if (hasExamples()) {
    copyExample(static_cast<int64_t>(rng.below(static_cast<uint64_t>(trainExamples_))), tokens,
                targets, seq);
    return true;
  }
  require(seq >= 1 && seq + 1 <= trainTokens_, "trainWindow: seq + 1 exceeds the train split");
  int64_t start = static_cast<int64_t>(rng.below(static_cast<uint64_t>(trainTokens_ - seq)));
  return copyWindow(start, tokens, targets, seq, error);
}

bool TokenData::evalWindow(int64_t index, int64_t count, int32_t *tokens, int32_t *targets,
                           int64_t seq, std::string &error) const {
  require(count >= 1 && index >= 0 && index < count, "evalWindow: index outside [0, count)");
  if (hasExamples()) {
    copyExample(evalExample(index, count), tokens, targets, seq);
    return true;
  }
  require(seq >= 1 && seq + 1 <= evalTokens(), "evalWindow: seq + 1 exceeds the eval split");
  int64_t positions = evalTokens() - seq;
  int64_t offset = static_cast<int64_t>(static_cast<__int128>(index) * positions / count);
  return copyWindow(trainTokens_ + offset, tokens, targets, seq, error);
}

bool TokenData::trainBatch(Rng &rng, const std::vector<bool> &taken, int32_t *tokens,
                           int32_t *targets, int64_t seq, std::string &error,
                           int64_t *counted) const {
  if (hasExamples()) {
    int64_t sum = 0;
    for (size_t row = 0; row < taken.size(); ++row) {
      const auto index = static_cast<int64_t>(rng.below(static_cast<uint64_t>(trainExamples_)));
      sum += taken[row] ? copyExample(index, tokens + row * seq, targets + row * seq, seq)
                        : countedTargets(index, seq);
    }
    if (counted)
      *counted = sum;
    return true;
  }
  if (counted)
    *counted = static_cast<int64_t>(taken.size()) * seq;
  require(seq >= 1 && seq + 1 <= trainTokens_, "trainBatch: seq + 1 exceeds the train split");
  for (size_t row = 0; row < taken.size(); ++row) {
    // Drawn for every row, so the generator moves on alike in every process.
    int64_t start = static_cast<int64_t>(rng.below(static_cast<uint64_t>(trainTokens_ - seq)));
    if (taken[row] && !copyWindow(start, tokens + row * seq, targets + row * seq, seq, error))
      return false;
  }
  return true;
}

bool TokenData::evalBatch(int64_t first, int64_t count, const std::vector<bool> &taken,
                          int32_t *tokens, int32_t *targets, int64_t seq, std::string &error,
                          int64_t *counted) const {
  if (hasExamples()) {
    int64_t sum = 0;
    for (size_t row = 0; row < taken.size(); ++row) {
      const int64_t index = evalExample(first + static_cast<int64_t>(row), count);
      sum += taken[row] ? copyExample(index, tokens + row * seq, targets + row * seq, seq)
                        : countedTargets(index, seq);
    }
    if (counted)
      *counted = sum;
    return true;
  }
  if (counted)
    *counted = static_cast<int64_t>(taken.size()) * seq;
  for (size_t row = 0; row < taken.size(); ++row)
    if (taken[row] && !evalWindow(first + static_cast<int64_t>(row), count, tokens + row * seq,
                                  targets + row * seq, seq, error))
      return false;
  return true;
}

} // namespace tessel::rt
