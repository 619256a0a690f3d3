//===- DataExamples.cpp - The rows of example files -----------------------===//
//
// Tessel's example files (common/data/TokenFiles.h) hold prompt/completion or chat examples
// with a loss mask. Each example is a row of its own from its start, cut at seq + 1 tokens or
// padded, whose targets outside the mask (and the padding's) are kernels::kIgnoredTarget. Here
// the examples are indexed and checked when the data opens, split into train and eval parts,
// and read as rows, or only counted.
//
//===----------------------------------------------------------------------===//

#include "runtime/host/Data.h"

#include "common/data/TokenFiles.h"
#include "kernels/KernelTypes.h"
#include "runtime/host/DataImpl.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tessel::rt {

namespace tf = tokenfiles;
using detail::tokenAt;

bool TokenData::indexExamples(int64_t window, std::string &error) {
  for (uint32_t index = 0; index < segments_.size(); ++index) {
    const Segment &segment = segments_[index];
    const std::string file = "example file of " + what_;
    auto startOf = [&](int64_t i) {
      return static_cast<int64_t>(tf::readLe64(segment.starts + 8 * i));
    };
    if (startOf(0) != 0 || startOf(segment.exampleCount) != segment.count) {
      error = what_ + ": an example file's starts do not run from 0 to its " +
              std::to_string(segment.count) + " tokens (it is corrupt)";
      return false;
    }
    for (int64_t i = 0; i < segment.exampleCount; ++i) {
      const int64_t begin = startOf(i), end = startOf(i + 1);
      if (end < begin || end > segment.count) {
        error = what_ + ": example " + std::to_string(i) + " of an example file has starts " +
                std::to_string(begin) + " and " + std::to_string(end) + " (the file is corrupt)";
        return false;
      }
      if (end - begin < 2) {
        error = what_ + ": example " + std::to_string(i) + " of an example file has " +
                std::to_string(end - begin) + " tokens; an example needs 2 or more";
        return false;
      }
      examples_.push_back({index, begin, end - begin});
    }
    for (int64_t i = 0; i < segment.count; ++i)
      if (segment.mask[i] > 1) {
        error = what_ + ": the loss mask of an example file holds " +
                std::to_string(segment.mask[i]) + " at token " + std::to_string(i) +
                "; its bytes are 0 or 1 (the file is corrupt)";
        return false;
      }
    if (segment.padId >= static_cast<uint64_t>(vocab_)) {
      error = what_ + ": an example file pads with token " + std::to_string(segment.padId) +
              ", not below the vocabulary size " + std::to_string(vocab_);
      return false;
    }
  }
  if (examples_.empty()) {
    error = what_ + " holds no examples";
    return false;
  }
  for (int64_t e = 0; e < exampleCount(); ++e) {
    longExamples_ += examples_[e].length > window;
    untrainedExamples_ += countedTargets(e, window - 1) == 0;
  }
  return true;
}

bool TokenData::splitExamples(double evalFraction, std::string &error) {
  const int64_t n = exampleCount();
  const int64_t evalExamples =
      static_cast<int64_t>(std::floor(static_cast<double>(n) * evalFraction));
  trainExamples_ = n - evalExamples;
  if (evalFraction > 0 && evalExamples == 0) {
    char percent[32];
    std::snprintf(percent, sizeof percent, "%g%%", 100 * evalFraction);
    error = what_ + ": the eval split (" + percent + " of " + std::to_string(n) +
            " examples) holds no example; raise eval.fraction, use more data, or set "
            "eval.fraction = 0 to hold nothing out";
    return false;
  }
  if (trainExamples_ == 0) {
    error = what_ + ": the train split holds no example of " + std::to_string(n) +
            "; lower the eval fraction";
    return false;
  }
  trainTokens_ = 0;
  for (int64_t e = 0; e < trainExamples_; ++e)
    trainTokens_ += examples_[e].length;
  return true;
}

int64_t TokenData::copyExample(int64_t index, int32_t *tokens, int32_t *targets,
                               int64_t seq) const {
  ++windowsRead_;
  const Example &x = examples_[index];
  const Segment &segment = segments_[x.segment];
  int64_t counted = 0;
  for (int64_t j = 0; j < seq; ++j) {
    tokens[j] = static_cast<int32_t>(
        j < x.length ? tokenAt(segment.tokens, x.begin + j, segment.width) : segment.padId);
    const int64_t next = j + 1;
    if (next < x.length && segment.mask[x.begin + next]) {
      targets[j] = static_cast<int32_t>(tokenAt(segment.tokens, x.begin + next, segment.width));
      ++counted;
    } else {
      targets[j] = kernels::kIgnoredTarget;
    }
  }
  return counted;
}

int64_t TokenData::countedTargets(int64_t index, int64_t seq) const {
  const Example &x = examples_[index];
  const unsigned char *mask = segments_[x.segment].mask + x.begin;
  int64_t counted = 0;
  for (int64_t next = 1; next < std::min(x.length, seq + 1); ++next)
    counted += mask[next];
  return counted;
}

} // namespace tessel::rt
