//===- RunningSumTest.cpp - Sums over each sequence's earlier tokens ------===//
//
// cpu::runningSum, called as the decode programs call it (a prefill chunk with padding after
// its tokens, then one token a call, sequences side by side), gives every token the sum over
// its sequence's earlier tokens that a whole window computes; a call at position 0 starts
// afresh whatever the totals held; padding and a sequence without a valid first block get -1
// and leave the totals alone.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

using namespace tessel;

namespace {

using Floats = std::vector<float>;
using Ids = std::vector<int32_t>;

struct Call {
  Ids positions, table; ///< [batch, seq], [batch, maxBlocks]
  Floats x;             ///< [batch, seq, width]
};

/// The sums a whole window gives sequence values `v` ([tokens, width]) at token t.
Floats windowSum(const Floats &v, int64_t width, int64_t t, bool inclusive) {
  Floats s(static_cast<size_t>(width), 0.0f);
  for (int64_t u = 0; u < t + (inclusive ? 1 : 0); ++u)
    for (int64_t j = 0; j < width; ++j)
      s[j] += v[u * width + j];
  return s;
}

TEST(RunningSum, ChunksAndStepsGiveTheWholeWindowsSums) {
  const int64_t width = 3, tokens = 11, chunk = 4, blocks = 6, maxBlocks = 2;
  std::mt19937 rng(5);
  // Two sequences, values small whole numbers (exact sums), first blocks 4 and 1.
  std::vector<Floats> values(2, Floats(tokens * width));
  for (Floats &v : values)
    for (float &x : v)
      x = static_cast<float>(rng() % 3);
  const int32_t first[2] = {4, 1};
  for (bool inclusive : {false, true}) {
    kernels::RunningSumArgs a{2, chunk, width, blocks, maxBlocks, inclusive};
    Floats totals(blocks * width, 99.0f); // stale: the first call is at position 0
    Ids table = {first[0], 0, first[1], 5};
    // Prefill: sequence 0's first 3 tokens, sequence 1's first 4, padding after.
    const int64_t filled[2] = {3, 4};
    Call c{Ids(2 * chunk, -1), table, Floats(2 * chunk * width, 7.0f)};
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t s = 0; s < filled[b]; ++s) {
        c.positions[b * chunk + s] = static_cast<int32_t>(s);
        std::copy_n(values[b].begin() + s * width, width, c.x.begin() + (b * chunk + s) * width);
      }
    Floats y(c.x.size());
    cpu::runningSum(a, c.x.data(), c.positions.data(), c.table.data(), y.data(), totals.data());
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t s = 0; s < chunk; ++s) {
        const Floats want = s < filled[b] ? windowSum(values[b], width, s, inclusive)
                                          : Floats(width, -1.0f);
        EXPECT_EQ(Floats(y.begin() + (b * chunk + s) * width, y.begin() + (b * chunk + s + 1) * width),
                  want)
            << "prefill, sequence " << b << " row " << s << (inclusive ? " inclusive" : "");
      }
    // Then one token a call, both sequences at once, until each has all its tokens.
    a.seq = 1;
    int64_t next[2] = {filled[0], filled[1]};
    while (next[0] < tokens || next[1] < tokens) {
      Call step{Ids(2, -1), table, Floats(2 * width, 5.0f)};
      for (int64_t b = 0; b < 2; ++b)
        if (next[b] < tokens) {
          step.positions[b] = static_cast<int32_t>(next[b]);
          std::copy_n(values[b].begin() + next[b] * width, width, step.x.begin() + b * width);
        }
      Floats ys(2 * width);
      cpu::runningSum(a, step.x.data(), step.positions.data(), step.table.data(), ys.data(),
                      totals.data());
      for (int64_t b = 0; b < 2; ++b) {
        const Floats want = next[b] < tokens ? windowSum(values[b], width, next[b], inclusive)
                                             : Floats(width, -1.0f);
        EXPECT_EQ(Floats(ys.begin() + b * width, ys.begin() + (b + 1) * width), want)
            << "step, sequence " << b << " position " << next[b];
        next[b] += next[b] < tokens;
      }
    }
    // The totals hold each sequence's whole sum; other rows are as they were.
    for (int64_t b = 0; b < 2; ++b)
      EXPECT_EQ(Floats(totals.begin() + first[b] * width, totals.begin() + (first[b] + 1) * width),
                windowSum(values[b], width, tokens, false));
    EXPECT_EQ(totals[0], 99.0f);
  }
}

TEST(RunningSum, PaddingAndUnnamedBlocksGetMinusOneAndLeaveTheTotals) {
  const int64_t width = 2, blocks = 3, maxBlocks = 1;
  kernels::RunningSumArgs a{3, 2, width, blocks, maxBlocks, false};
  // Sequence 0 continues at position 5 (its total so far 10, 20); sequence 1 names block -1;
  // sequence 2 a block past the totals.
  Floats totals = {10, 20, 1, 2, 3, 4};
  const Ids table = {0, -1, static_cast<int32_t>(blocks)};
  const Ids positions = {5, -1, 0, 1, 0, 1};
  const Floats x = {1, 1, 9, 9, 1, 1, 1, 1, 1, 1, 1, 1};
  Floats y(x.size());
  cpu::runningSum(a, x.data(), positions.data(), table.data(), y.data(), totals.data());
  EXPECT_EQ(y, (Floats{10, 20, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(totals, (Floats{11, 21, 1, 2, 3, 4}));
}

} // namespace
