//===- RngTest.cpp - Tests of the deterministic RNG -------------------------===//

#include "runtime/core/Rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using tessel::rt::Rng;

namespace {

TEST(Rng, SplitMix64MatchesTheReference) {
  // The first outputs of splitmix64 from 0 (Vigna's reference implementation).
  uint64_t x = 0;
  EXPECT_EQ(Rng::splitmix64(x), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(Rng::splitmix64(x), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(Rng::splitmix64(x), 0x06c45d188009454fULL);
}

TEST(Rng, Xoshiro256StarStarMatchesTheReference) {
  // xoshiro256** from state {1, 2, 3, 4}, worked by hand from the reference code.
  Rng rng;
  rng.setState({1, 2, 3, 4});
  EXPECT_EQ(rng.next(), 11520u);
  EXPECT_EQ(rng.next(), 0u);
  EXPECT_EQ(rng.next(), 1509978240u);
}

TEST(Rng, SeedingUsesSplitMix64) {
  uint64_t x = 42;
  std::array<uint64_t, 4> expected;
  for (uint64_t &word : expected)
    word = Rng::splitmix64(x);
  EXPECT_EQ(Rng(42).state(), expected);
}

TEST(Rng, SameSeedSameStream) {
  Rng a(1234), b(1234), c(1235);
  bool differs = false;
  for (int i = 0; i < 1000; ++i) {
    uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    differs |= x != c.next();
  }
  EXPECT_TRUE(differs);
}

TEST(Rng, StateRestoreContinuesTheStream) {
  Rng rng(99);
  for (int i = 0; i < 10; ++i)
    rng.next();
  std::array<uint64_t, 4> saved = rng.state();
  std::vector<double> first;
  for (int i = 0; i < 100; ++i) {
    first.push_back(rng.uniform());
    first.push_back(rng.normal());
    first.push_back(static_cast<double>(rng.below(1000)));
  }
  Rng restored(0);
  restored.setState(saved);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(restored.uniform(), first[3 * i]);
    EXPECT_EQ(restored.normal(), first[3 * i + 1]);
    EXPECT_EQ(static_cast<double>(restored.below(1000)), first[3 * i + 2]);
  }
  EXPECT_EQ(restored.state(), rng.state());
}

TEST(Rng, AllZeroStateIsReplaced) {
  Rng rng(5);
  rng.setState({0, 0, 0, 0});
  EXPECT_EQ(rng.state(), Rng(0).state());
  EXPECT_NE(rng.next(), 0u);
}

TEST(Rng, UniformLiesInUnitInterval) {
  Rng rng(3);
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
}

TEST(Rng, BelowIsInRangeAndUnbiased) {
  Rng rng(11);
  EXPECT_EQ(rng.below(0), 0u);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(rng.below(1), 0u);
  // Chi-square over 7 buckets (6 degrees of freedom; 22.46 is the 0.1% critical value).
  const int buckets = 7, draws = 70000;
  std::vector<int> counts(buckets);
  for (int i = 0; i < draws; ++i) {
    uint64_t x = rng.below(buckets);
    ASSERT_LT(x, static_cast<uint64_t>(buckets));
    ++counts[x];
  }
  double chi2 = 0, expected = double(draws) / buckets;
  for (int count : counts)
    chi2 += (count - expected) * (count - expected) / expected;
  EXPECT_LT(chi2, 22.46);

  // A bound just above 2^63 rejects about half the raw draws; the result must stay below it.
  const uint64_t big = (1ULL << 63) + 1;
  int high = 0;
  for (int i = 0; i < 10000; ++i) {
    uint64_t x = rng.below(big);
    ASSERT_LT(x, big);
    high += x >= (1ULL << 62);
  }
  EXPECT_NEAR(high / 10000.0, 0.5, 0.03);
}

TEST(Rng, NormalHasUnitVariance) {
  Rng rng(17);
  const int n = 200000;
  double sum = 0, squares = 0;
  int beyondThree = 0;
  for (int i = 0; i < n; ++i) {
    float x = rng.normal();
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    squares += double(x) * x;
    beyondThree += std::fabs(x) > 3;
  }
  double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(squares / n - mean * mean, 1.0, 0.02);
  EXPECT_NEAR(beyondThree / double(n), 0.0027, 0.001);
}

} // namespace
