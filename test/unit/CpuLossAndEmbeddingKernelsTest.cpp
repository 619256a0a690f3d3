//===- CpuLossAndEmbeddingKernelsTest.cpp - Cross entropy and embedding ---===//
//
// The CPU's cross entropy and embedding lookup (and their gradients) against naive
// double-precision references, with ignored targets and ids outside the vocabulary; then their
// forms for tensors split between ranks, and the bucket packing, against the whole kernels with
// the collectives between the ranks done here in order.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "test/unit/CpuKernelsTestSupport.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using namespace tessel::cpu;

namespace {

using namespace tessel::test;

//===----------------------------------------------------------------------===//
// Cross entropy and embedding
//===----------------------------------------------------------------------===//

double crossEntropyRef(int64_t rows, int64_t cols, const Doubles &x,
                       const std::vector<int32_t> &t) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < cols; ++j)
      max = std::max(max, x[r * cols + j]);
    for (int64_t j = 0; j < cols; ++j)
      sum += std::exp(x[r * cols + j] - max);
    total += max + std::log(sum) - x[r * cols + t[r]];
  }
  return total / rows;
}

TEST(CpuKernelsLoss, CrossEntropyAndGrad) {
  const int64_t rows = 7, cols = 10;
  Floats x = randomFloats(rows * cols, -4, 4, 400);
  x[3] = 95; // needs the max subtraction
  const std::vector<int32_t> t = randomIds(rows, cols, 401);
  float loss = NAN;
  std::string error;
  ASSERT_TRUE(crossEntropy(rows, cols, x.data(), t.data(), &loss, error)) << error;
  const Doubles xd = toDoubles(x);
  const double want = crossEntropyRef(rows, cols, xd, t);
  EXPECT_NEAR(loss, want, 1e-5 * std::fabs(want));

  const float dloss = 2.5f;
  Floats dx(x.size());
  ASSERT_TRUE(crossEntropyGrad(rows, cols, x.data(), t.data(), &dloss, dx.data(), error));
  Doubles grad =
      numericGradient([&](const Doubles &v) { return crossEntropyRef(rows, cols, v, t); }, xd);
  for (double &v : grad)
    v *= dloss;
  expectClose(dx, grad, 1e-4, 1e-6, "crossEntropyGrad");
}

TEST(CpuKernelsLoss, IgnoredTargetsCountNothing) {
  // Rows whose target is kIgnoredTarget (-1): the loss and gradient of the other rows alone,
  // and exactly zero gradient rows.
  const int64_t rows = 9, cols = 12;
  const Floats x = randomFloats(rows * cols, -4, 4, 410);
  std::vector<int32_t> t = randomIds(rows, cols, 411);
  t[0] = t[4] = t[8] = tessel::kernels::kIgnoredTarget;
  std::vector<int32_t> kept;
  Floats keptX;
  for (int64_t r = 0; r < rows; ++r)
    if (t[r] != tessel::kernels::kIgnoredTarget) {
      kept.push_back(t[r]);
      keptX.insert(keptX.end(), x.begin() + r * cols, x.begin() + (r + 1) * cols);
    }
  const int64_t n = static_cast<int64_t>(kept.size());
  const double scale = 1.0 / static_cast<double>(n);
  const float dloss = 1.5f;
  std::string error;
  float loss = NAN, want = NAN;
  ASSERT_TRUE(crossEntropy(rows, cols, x.data(), t.data(), scale, &loss, error)) << error;
  ASSERT_TRUE(crossEntropy(n, cols, keptX.data(), kept.data(), scale, &want, error)) << error;
  EXPECT_EQ(loss, want);
  Floats dx(x.size(), NAN), wantGrad(keptX.size());
  ASSERT_TRUE(crossEntropyGrad(rows, cols, x.data(), t.data(), &dloss, scale, dx.data(), error));
  ASSERT_TRUE(
      crossEntropyGrad(n, cols, keptX.data(), kept.data(), &dloss, scale, wantGrad.data(), error));
  int64_t k = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      const float got = dx[r * cols + j];
      if (t[r] == tessel::kernels::kIgnoredTarget)
        ASSERT_EQ(got, 0.0f) << "row " << r << " col " << j;
      else
        ASSERT_EQ(got, wantGrad[k * cols + j]) << "row " << r << " col " << j;
      k += j == cols - 1 && t[r] != tessel::kernels::kIgnoredTarget;
    }
  // Every target ignored: the loss is 0 and so is the gradient.
  const std::vector<int32_t> none(rows, tessel::kernels::kIgnoredTarget);
  ASSERT_TRUE(crossEntropy(rows, cols, x.data(), none.data(), &loss, error));
  EXPECT_EQ(loss, 0.0f);
}

TEST(CpuKernelsShardedLoss, IgnoredRowsAreSkippedButNonFiniteSumsAreNot) {
  // ce_sums marks an ignored row with s = 0; a NaN or infinite sum must still reach the loss.
  const Floats m = {0, 0, 0}, t = {0, 0, 0};
  float loss = 0;
  ceLoss(3, m.data(), Floats{1, 0, 1}.data(), t.data(), 1.0, &loss);
  EXPECT_EQ(loss, 0.0f);
  ceLoss(3, m.data(), Floats{1, 0, NAN}.data(), t.data(), 1.0, &loss);
  EXPECT_TRUE(std::isnan(loss));
  ceLoss(3, m.data(), Floats{INFINITY, 0, 1}.data(), t.data(), 1.0, &loss);
  EXPECT_TRUE(std::isinf(loss));
}

TEST(CpuKernelsLoss, CrossEntropyRejectsBadTargets) {
  const int64_t rows = 20, cols = 256;
  const Floats x(rows * cols, 0.0f);
  std::vector<int32_t> t(rows, 5);
  t[17] = 300;
  float loss = 0;
  Floats dx(x.size());
  const float dloss = 1;
  std::string error;
  EXPECT_FALSE(crossEntropy(rows, cols, x.data(), t.data(), &loss, error));
  EXPECT_EQ(error, "token id 300 at position 17 is outside the vocabulary of 256");
  error.clear();
  t[17] = 5;
  t[2] = -2; // -1 is an ignored target
  EXPECT_FALSE(crossEntropyGrad(rows, cols, x.data(), t.data(), &dloss, dx.data(), error));
  EXPECT_EQ(error, "token id -2 at position 2 is outside the vocabulary of 256");
  t[2] = 255;
  EXPECT_TRUE(crossEntropy(rows, cols, x.data(), t.data(), &loss, error));
  EXPECT_NEAR(loss, std::log(256.0), 1e-5);
}

TEST(CpuKernelsEmbedding, LookupAndGrad) {
  const int64_t n = 12, rows = 5, cols = 7;
  const Floats table = randomFloats(rows * cols, -1, 1, 500);
  // Repeated ids, and row 4 never used (its gradient must be zero, not left over).
  const std::vector<int32_t> ids = {0, 3, 3, 1, 0, 2, 3, 1, 0, 0, 2, 3};
  std::string error;
  Floats out(n * cols);
  ASSERT_TRUE(embedding(n, rows, cols, table.data(), ids.data(), out.data(), error));
  Doubles want(out.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < cols; ++j)
      want[i * cols + j] = table[ids[i] * cols + j];
  expectClose(out, want, 0, 0, "embedding");

  const Floats dout = randomFloats(n * cols, -1, 1, 501);
  Floats dtable(rows * cols, NAN);
  ASSERT_TRUE(embeddingGrad(n, rows, cols, dout.data(), ids.data(), dtable.data(), error));
  Doubles wantGrad(dtable.size(), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < cols; ++j)
      wantGrad[ids[i] * cols + j] += dout[i * cols + j];
  expectClose(dtable, wantGrad, 1e-6, 1e-7, "embeddingGrad");
}

TEST(CpuKernelsEmbedding, RejectsBadIds) {
  const int64_t rows = 256, cols = 4;
  const Floats table(rows * cols, 1.0f);
  std::vector<int32_t> ids(20, 7);
  ids[17] = 300;
  Floats out(ids.size() * cols), dtable(table.size());
  std::string error;
  EXPECT_FALSE(embedding(20, rows, cols, table.data(), ids.data(), out.data(), error));
  EXPECT_EQ(error, "token id 300 at position 17 is outside the vocabulary of 256");
  error.clear();
  ids[17] = 256;
  EXPECT_FALSE(embeddingGrad(20, rows, cols, out.data(), ids.data(), dtable.data(), error));
  EXPECT_EQ(error, "token id 256 at position 17 is outside the vocabulary of 256");
}

TEST(CpuKernelsEmbedding, NegativeIdsGiveZeroRows) {
  // Padding slots (negative ids) among real ids, on the whole table and on a rank's block of
  // rows [5, 10) of 15; an id of another rank's rows gives a zero row too.
  const int64_t rows = 5, cols = 6;
  const Floats table = randomFloats(rows * cols, -1, 1, 510);
  const std::vector<int32_t> ids = {-1, 2, -7, 4, 0, -2147483647 - 1};
  for (int64_t first : {int64_t(0), int64_t(5)}) {
    const std::vector<int32_t> here = first == 0 ? ids : std::vector<int32_t>{-1, 7, -7, 9, 2, -3};
    Floats out(here.size() * cols, NAN);
    std::string error;
    ASSERT_TRUE(embeddingRows(static_cast<int64_t>(here.size()), rows, cols, first, 3 * rows,
                              table.data(), here.data(), out.data(), error))
        << error;
    for (size_t i = 0; i < here.size(); ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t row = here[i] - first;
        const float want = here[i] >= 0 && row >= 0 && row < rows ? table[row * cols + j] : 0.0f;
        EXPECT_EQ(out[i * cols + j], want) << "first " << first << ", id " << here[i];
      }
  }
  // An id past the vocabulary is still refused.
  const std::vector<int32_t> past = {-1, 5};
  Floats out(2 * cols);
  std::string error;
  EXPECT_FALSE(embedding(2, rows, cols, table.data(), past.data(), out.data(), error));
  EXPECT_EQ(error, "token id 5 at position 1 is outside the vocabulary of 5");
}

//===----------------------------------------------------------------------===//
// Kernels of tensors split between ranks (the collectives between them done here in order)
//===----------------------------------------------------------------------===//

/// Columns [first, first + cols) of a [rows, whole] matrix.
Floats columns(const Floats &x, int64_t rows, int64_t whole, int64_t first, int64_t cols) {
  Floats out(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    std::copy(x.begin() + r * whole + first, x.begin() + r * whole + first + cols,
              out.begin() + r * cols);
  return out;
}

TEST(CpuKernelsShardedLoss, ScaledCrossEntropyIsAShareOfTheMean) {
  // A batch of 12 rows split in three: each part's loss scaled by 1/12 sums to the mean, and
  // each part's gradient is those rows of the whole gradient.
  const int64_t rows = 12, cols = 9, parts = 3, part = rows / parts;
  const Floats x = randomFloats(rows * cols, -4, 4, 450);
  const std::vector<int32_t> t = randomIds(rows, cols, 451);
  const float dloss = 1.5f;
  std::string error;
  float whole = 0;
  Floats wholeGrad(x.size());
  ASSERT_TRUE(crossEntropy(rows, cols, x.data(), t.data(), &whole, error));
  ASSERT_TRUE(crossEntropyGrad(rows, cols, x.data(), t.data(), &dloss, wholeGrad.data(), error));
  double sum = 0;
  for (int64_t p = 0; p < parts; ++p) {
    float loss = 0;
    Floats grad(part * cols);
    const float *xp = x.data() + p * part * cols;
    ASSERT_TRUE(crossEntropy(part, cols, xp, t.data() + p * part, 1.0 / rows, &loss, error));
    ASSERT_TRUE(crossEntropyGrad(part, cols, xp, t.data() + p * part, &dloss, 1.0 / rows,
                                 grad.data(), error));
    sum += loss;
    Doubles want(wholeGrad.begin() + p * part * cols, wholeGrad.begin() + (p + 1) * part * cols);
    expectClose(grad, want, 1e-6, 1e-9, "gradient of part " + std::to_string(p));
  }
  EXPECT_NEAR(sum, whole, 1e-6 * std::fabs(whole));
}

TEST(CpuKernelsShardedLoss, VocabularySplitMatchesWholeCrossEntropy) {
  const int64_t rows = 9;
  for (int64_t ways : {2, 4}) {
    const int64_t cols = 6, classes = ways * cols;
    Floats x = randomFloats(rows * classes, -5, 5, 460 + static_cast<uint32_t>(ways));
    x[2 * classes + classes - 1] = 60; // One row's max is far out, in the last rank's columns.
    std::vector<int32_t> t = randomIds(rows, static_cast<int32_t>(classes), 470);
    t[2] = static_cast<int32_t>(classes - 1);
    t[5] = tessel::kernels::kIgnoredTarget; // Counts nothing in either form.
    const double scale = 1.0 / rows;
    const float dloss = 0.75f;
    std::string error;
    float whole = 0;
    Floats wholeGrad(x.size());
    ASSERT_TRUE(crossEntropy(rows, classes, x.data(), t.data(), &whole, error));
    ASSERT_TRUE(
        crossEntropyGrad(rows, classes, x.data(), t.data(), &dloss, wholeGrad.data(), error));

    std::vector<Floats> block(ways);
    Floats m(rows, -INFINITY), s(rows, 0.0f), picked(rows, 0.0f);
    for (int64_t r = 0; r < ways; ++r) {
      block[r] = columns(x, rows, classes, r * cols, cols);
      Floats mr(rows);
      ceMax(rows, cols, block[r].data(), mr.data());
      for (int64_t i = 0; i < rows; ++i)
        m[i] = std::max(m[i], mr[i]); // all_reduce max
    }
    for (int64_t r = 0; r < ways; ++r) {
      Floats sr(rows), tr(rows);
      ASSERT_TRUE(ceSums(rows, cols, r * cols, classes, block[r].data(), t.data(), m.data(),
                         sr.data(), tr.data(), error))
          << error;
      for (int64_t i = 0; i < rows; ++i) { // all_reduce sum, in rank order
        s[i] += sr[i];
        picked[i] += tr[i];
      }
    }
    float loss = 0;
    ceLoss(rows, m.data(), s.data(), picked.data(), scale, &loss);
    EXPECT_NEAR(loss, whole, 1e-6 * std::fabs(whole)) << ways << " ways";
    for (int64_t r = 0; r < ways; ++r) {
      Floats grad(rows * cols);
      ASSERT_TRUE(ceGrad(rows, cols, r * cols, classes, block[r].data(), t.data(), m.data(),
                         s.data(), &dloss, scale, grad.data(), error));
      Floats want = columns(wholeGrad, rows, classes, r * cols, cols);
      expectClose(grad, toDoubles(want), 1e-6, 1e-9,
                  "ce_grad of rank " + std::to_string(r) + " of " + std::to_string(ways));
    }
  }
}

TEST(CpuKernelsShardedLoss, RejectsTargetsOutsideTheClasses) {
  const int64_t rows = 3, cols = 4;
  const Floats x(rows * cols, 0.0f), m(rows, 0.0f), s(rows, 1.0f);
  Floats sOut(rows), tOut(rows), grad(rows * cols);
  const std::vector<int32_t> t = {1, 8, 2}; // 8 is outside 2 ranks x 4 classes.
  const float dloss = 1;
  std::string error;
  EXPECT_FALSE(
      ceSums(rows, cols, 4, 8, x.data(), t.data(), m.data(), sOut.data(), tOut.data(), error));
  EXPECT_EQ(error, "token id 8 at position 1 is outside the vocabulary of 8");
  error.clear();
  EXPECT_FALSE(ceGrad(rows, cols, 0, 8, x.data(), t.data(), m.data(), s.data(), &dloss, 1.0,
                      grad.data(), error));
  EXPECT_EQ(error, "token id 8 at position 1 is outside the vocabulary of 8");
}

TEST(CpuKernelsEmbedding, RowSplitTablesAddUpToTheWhole) {
  const int64_t n = 14, vocab = 8, cols = 5;
  const Floats table = randomFloats(vocab * cols, -1, 1, 520);
  const std::vector<int32_t> ids = {7, 0, 3, 3, 6, 1, 0, 5, 2, 7, 7, 4, 0, 6};
  const Floats dout = randomFloats(n * cols, -1, 1, 521);
  std::string error;
  Floats whole(n * cols), wholeGrad(vocab * cols);
  ASSERT_TRUE(embedding(n, vocab, cols, table.data(), ids.data(), whole.data(), error));
  ASSERT_TRUE(embeddingGrad(n, vocab, cols, dout.data(), ids.data(), wholeGrad.data(), error));
  for (int64_t ways : {2, 4}) {
    const int64_t rows = vocab / ways;
    Floats sum(n * cols, 0.0f);
    for (int64_t r = 0; r < ways; ++r) {
      Floats out(n * cols, NAN), grad(rows * cols, NAN);
      const float *part = table.data() + r * rows * cols;
      ASSERT_TRUE(
          embeddingRows(n, rows, cols, r * rows, vocab, part, ids.data(), out.data(), error));
      for (size_t i = 0; i < sum.size(); ++i)
        sum[i] += out[i]; // Each row comes from one rank; the others give zeros.
      ASSERT_TRUE(embeddingGradRows(n, rows, cols, r * rows, vocab, dout.data(), ids.data(),
                                    grad.data(), error));
      Floats want(wholeGrad.begin() + r * rows * cols, wholeGrad.begin() + (r + 1) * rows * cols);
      EXPECT_EQ(std::memcmp(grad.data(), want.data(), want.size() * 4), 0)
          << "gradient rows of rank " << r << " of " << ways;
    }
    EXPECT_EQ(std::memcmp(sum.data(), whole.data(), whole.size() * 4), 0) << ways << " ways";
  }
  Floats out(n * cols), grad(2 * cols);
  std::vector<int32_t> bad = ids;
  bad[3] = 8;
  EXPECT_FALSE(embeddingRows(n, 2, cols, 6, vocab, table.data(), bad.data(), out.data(), error));
  EXPECT_EQ(error, "token id 8 at position 3 is outside the vocabulary of 8");
  error.clear();
  EXPECT_FALSE(
      embeddingGradRows(n, 2, cols, 6, vocab, dout.data(), bad.data(), grad.data(), error));
  EXPECT_EQ(error, "token id 8 at position 3 is outside the vocabulary of 8");
}

TEST(CpuKernelsPack, LaysEveryRanksBlocksSideBySide) {
  // Two inputs: a [2, ways, 3] and b [1, ways, 4]; part r of the bucket is a[:, r, :] then
  // b[:, r, :].
  for (int64_t ways : {1, 3}) {
    const int64_t outers[2] = {2, 1}, chunks[2] = {3, 4};
    const Floats a = randomFloats(2 * ways * 3, -1, 1, 530), b = randomFloats(ways * 4, -1, 1, 531);
    const float *inputs[2] = {a.data(), b.data()};
    const int64_t part = 2 * 3 + 4;
    Floats y(ways * part, NAN);
    pack(2, inputs, outers, chunks, ways, y.data());
    Doubles want;
    for (int64_t r = 0; r < ways; ++r) {
      for (int64_t o = 0; o < 2; ++o)
        for (int64_t j = 0; j < 3; ++j)
          want.push_back(a[(o * ways + r) * 3 + j]);
      for (int64_t j = 0; j < 4; ++j)
        want.push_back(b[r * 4 + j]);
    }
    expectClose(y, want, 0, 0, "pack with " + std::to_string(ways) + " ways");
  }
}

} // namespace
