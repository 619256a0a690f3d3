//===- CpuReduceAndNormKernelsTest.cpp - Reductions, softmax and norms ----===//
//
// The CPU's sums over dims (and the order of their additions, which the CUDA kernel meets bit
// for bit), the sum of squares, top-k routing, softmax, layer norm and RMS norm against naive
// double-precision references, every gradient against central finite differences of them.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "test/unit/CpuKernelsTestSupport.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

using namespace tessel::cpu;

namespace {

using namespace tessel::test;

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

TEST(CpuKernelsReduce, ReduceSumMatchesReference) {
  struct Case {
    const char *name;
    Shape shape;
    Strides so;
    int64_t outElements;
    float scale;
  };
  const Case cases[] = {
      {"leading", shapeOf({4, 6, 70}), stridesOf({0, 0, 1}), 70, 1},
      {"trailing", shapeOf({5, 7, 9}), stridesOf({1, 0, 0}), 5, 1},
      {"middle-mean", shapeOf({3, 40, 5}), stridesOf({5, 0, 1}), 15, 1.0f / 40},
      {"non-adjacent", shapeOf({4, 5, 6, 7}), stridesOf({0, 7, 0, 1}), 35, 1},
      {"alternate", shapeOf({4, 5, 6, 7}), stridesOf({6, 0, 1, 0}), 24, 1},
      {"all", shapeOf({3, 4, 5}), stridesOf({0, 0, 0}), 1, 0.5f},
      {"none", shapeOf({3, 4}), stridesOf({4, 1}), 12, 2},
      // Output stored transposed: [7,5] written as out[j * 5 + i] for x [6,5,7] over dim 0.
      {"transposed-out", shapeOf({6, 5, 7}), stridesOf({0, 1, 5}), 35, 1},
      // Large ones, split over threads: a column sum and a row sum.
      {"large-columns", shapeOf({300, 130}), stridesOf({0, 1}), 130, 1},
      {"large-rows", shapeOf({130, 300}), stridesOf({1, 0}), 130, 1},
  };
  uint32_t seed = 70;
  for (const Case &c : cases) {
    const int64_t n = c.shape.numElements();
    const Floats x = randomFloats(static_cast<size_t>(n), -1, 1, seed++);
    Floats out(static_cast<size_t>(c.outElements), NAN);
    reduceSum(c.shape, x.data(), c.so, c.outElements, c.scale, out.data());
    Doubles want(static_cast<size_t>(c.outElements), 0.0);
    for (int64_t i = 0; i < n; ++i)
      want[offsetOf(c.shape, c.so, i)] += x[i];
    for (double &w : want)
      w *= c.scale;
    expectClose(out, want, 1e-6, 1e-6, c.name);
  }
}

// Each output sums its terms in runs of kReduceRun (in f64, in order), then the runs in order:
// the contract the CUDA kernel meets bit for bit. Column sums, row sums whose runs end inside
// a row, and a reduction over several dims whose rows are shorter than a run.
TEST(CpuKernelsReduce, ReduceSumAddsRunsInOrder) {
  struct Case {
    const char *name;
    Shape shape;
    Strides so;
    int64_t outElements;
  };
  const Case cases[] = {
      {"columns", shapeOf({1000, 3}), stridesOf({0, 1}), 3},
      {"rows", shapeOf({3, 1000}), stridesOf({1, 0}), 3},
      {"short rows", shapeOf({300, 2, 5}), stridesOf({0, 1, 0}), 2},
      {"all", shapeOf({7, 130}), stridesOf({0, 0}), 1},
  };
  uint32_t seed = 90;
  for (const Case &c : cases) {
    const int64_t n = c.shape.numElements();
    const Floats x = randomFloats(static_cast<size_t>(n), -1, 1, seed++);
    Floats out(static_cast<size_t>(c.outElements), NAN);
    reduceSum(c.shape, x.data(), c.so, c.outElements, 0.5f, out.data());
    // Each output's terms in increasing index order, then summed run by run.
    std::vector<Doubles> terms(static_cast<size_t>(c.outElements));
    for (int64_t i = 0; i < n; ++i)
      terms[offsetOf(c.shape, c.so, i)].push_back(x[i]);
    for (size_t o = 0; o < terms.size(); ++o) {
      ASSERT_GT(terms[o].size(), size_t(kReduceRun)) << c.name;
      double total = 0.0, run = 0.0;
      for (size_t t = 0; t < terms[o].size(); ++t) {
        run += terms[o][t];
        if ((t + 1) % kReduceRun == 0) {
          total += run;
          run = 0.0;
        }
      }
      const float want = static_cast<float>((total + run) * 0.5f);
      EXPECT_EQ(out[o], want) << c.name << ", output " << o;
    }
  }
}

TEST(CpuKernelsReduce, SumOfSquares) {
  const Floats x = randomFloats(10001, -2, 2, 80);
  double want = 0;
  for (float v : x)
    want += static_cast<double>(v) * v;
  EXPECT_NEAR(sumOfSquares(10001, x.data()), want, 1e-9 * want);
  EXPECT_EQ(sumOfSquares(0, x.data()), 0.0);
}

//===----------------------------------------------------------------------===//
// Softmax and norms
//===----------------------------------------------------------------------===//

Doubles softmaxRef(int64_t rows, int64_t cols, const Doubles &x) {
  Doubles y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < cols; ++j)
      max = std::max(max, x[r * cols + j]);
    for (int64_t j = 0; j < cols; ++j)
      sum += std::exp(x[r * cols + j] - max);
    for (int64_t j = 0; j < cols; ++j)
      y[r * cols + j] = std::exp(x[r * cols + j] - max) / sum;
  }
  return y;
}

TEST(CpuKernelsRouting, TopKMaskChoosesTheLargestAndBreaksTiesByColumn) {
  // Row 0: plain; row 1: a tie between columns 1 and 3 for the second place; row 2: a NaN,
  // which ranks first; row 3: k = cols chooses everything.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {0.1f, 0.7f, 0.3f, 0.2f, //
                                0.9f, 0.5f, 0.1f, 0.5f, //
                                0.2f, nan,  0.8f, 0.1f};
  std::vector<float> y(12);
  topKMask(3, 4, 2, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{0, 1, 1, 0, 1, 1, 0, 0, 0, 1, 1, 0}));
  std::vector<float> all(4);
  topKMask(1, 4, 4, x.data(), all.data());
  EXPECT_EQ(all, (std::vector<float>{1, 1, 1, 1}));
}

TEST(CpuKernelsNorm, SoftmaxAndGrad) {
  const int64_t rows = 6, cols = 13;
  Floats x = randomFloats(rows * cols, -5, 5, 300);
  x[0] = 80; // exp(80) overflows float unless the row max is subtracted
  Floats y(x.size());
  softmax(rows, cols, x.data(), y.data());
  expectClose(y, softmaxRef(rows, cols, toDoubles(x)), 1e-5, 1e-7, "softmax");

  const Floats w = randomFloats(x.size(), -1, 1, 301);
  Floats dx(x.size());
  softmaxGrad(rows, cols, y.data(), w.data(), dx.data());
  const Doubles wd = toDoubles(w);
  const Doubles want = numericGradient(
      [&](const Doubles &xd) { return dot(wd, softmaxRef(rows, cols, xd)); }, toDoubles(x));
  expectClose(dx, want, 1e-4, 1e-5, "softmaxGrad");
}

Doubles layerNormRef(int64_t rows, int64_t cols, const Doubles &x, const Doubles &g,
                     const Doubles &b, double eps) {
  Doubles y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j)
      mean += x[r * cols + j] / cols;
    for (int64_t j = 0; j < cols; ++j)
      var += (x[r * cols + j] - mean) * (x[r * cols + j] - mean) / cols;
    for (int64_t j = 0; j < cols; ++j)
      y[r * cols + j] = (x[r * cols + j] - mean) / std::sqrt(var + eps) * g[j] + b[j];
  }
  return y;
}

TEST(CpuKernelsNorm, LayerNormAndGrad) {
  const int64_t rows = 5, cols = 11;
  const float eps = 1e-5f;
  const Floats x = randomFloats(rows * cols, -2, 3, 310);
  const Floats g = randomFloats(cols, 0.5f, 1.5f, 311), b = randomFloats(cols, -1, 1, 312);
  Floats y(x.size());
  layerNorm(rows, cols, x.data(), g.data(), b.data(), eps, y.data());
  const Doubles xd = toDoubles(x), gd = toDoubles(g), bd = toDoubles(b);
  expectClose(y, layerNormRef(rows, cols, xd, gd, bd, eps), 1e-5, 1e-5, "layerNorm");

  const Doubles w = toDoubles(randomFloats(x.size(), -1, 1, 313));
  const Floats dy(w.begin(), w.end());
  Floats dx(x.size()), dg(cols, NAN), db(cols, NAN);
  layerNormGrad(rows, cols, x.data(), g.data(), dy.data(), eps, dx.data(), dg.data(), db.data());
  auto loss = [&](const Doubles &xs, const Doubles &gs, const Doubles &bs) {
    return dot(w, layerNormRef(rows, cols, xs, gs, bs, eps));
  };
  expectClose(dx, numericGradient([&](const Doubles &v) { return loss(v, gd, bd); }, xd), 1e-4,
              1e-5, "layerNormGrad dx");
  expectClose(dg, numericGradient([&](const Doubles &v) { return loss(xd, v, bd); }, gd), 1e-4,
              1e-5, "layerNormGrad dg");
  expectClose(db, numericGradient([&](const Doubles &v) { return loss(xd, gd, v); }, bd), 1e-4,
              1e-5, "layerNormGrad db");
}

TEST(CpuKernelsNorm, LayerNormUsesBiasedVariance) {
  // Row [1, 3]: mean 2, biased variance 1, so y = [-1, 1] (unbiased would give +-0.7071).
  const Floats x = {1, 3}, g = {1, 1}, b = {0, 0};
  Floats y(2);
  layerNorm(1, 2, x.data(), g.data(), b.data(), 0.0f, y.data());
  EXPECT_FLOAT_EQ(y[0], -1.0f);
  EXPECT_FLOAT_EQ(y[1], 1.0f);
}

Doubles rmsNormRef(int64_t rows, int64_t cols, const Doubles &x, const Doubles &g, double eps) {
  Doubles y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t j = 0; j < cols; ++j)
      ms += x[r * cols + j] * x[r * cols + j] / cols;
    for (int64_t j = 0; j < cols; ++j)
      y[r * cols + j] = x[r * cols + j] / std::sqrt(ms + eps) * g[j];
  }
  return y;
}

TEST(CpuKernelsNorm, RmsNormAndGrad) {
  const int64_t rows = 4, cols = 9;
  const float eps = 1e-6f;
  const Floats x = randomFloats(rows * cols, -2, 2, 320);
  const Floats g = randomFloats(cols, 0.5f, 1.5f, 321);
  Floats y(x.size());
  rmsNorm(rows, cols, x.data(), g.data(), eps, y.data());
  const Doubles xd = toDoubles(x), gd = toDoubles(g);
  expectClose(y, rmsNormRef(rows, cols, xd, gd, eps), 1e-5, 1e-6, "rmsNorm");

  const Doubles w = toDoubles(randomFloats(x.size(), -1, 1, 322));
  const Floats dy(w.begin(), w.end());
  Floats dx(x.size()), dg(cols, NAN);
  rmsNormGrad(rows, cols, x.data(), g.data(), dy.data(), eps, dx.data(), dg.data());
  auto loss = [&](const Doubles &xs, const Doubles &gs) {
    return dot(w, rmsNormRef(rows, cols, xs, gs, eps));
  };
  expectClose(dx, numericGradient([&](const Doubles &v) { return loss(v, gd); }, xd), 1e-4, 1e-5,
              "rmsNormGrad dx");
  expectClose(dg, numericGradient([&](const Doubles &v) { return loss(xd, v); }, gd), 1e-4, 1e-5,
              "rmsNormGrad dg");
}

} // namespace
