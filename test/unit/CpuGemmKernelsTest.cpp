//===- CpuGemmKernelsTest.cpp - The CPU's matrix products -----------------===//
//
// Batched products in every transpose, with padded leading dims, shared and accumulated
// operands, split over threads, and the skinny products of a decode step, against a naive
// double-precision reference; a skinny product's rows keep their bits whatever the thread count.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "test/unit/CpuKernelsTestSupport.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace tessel::cpu;

namespace {

using namespace tessel::test;

//===----------------------------------------------------------------------===//
// Gemm
//===----------------------------------------------------------------------===//

/// C[b] = alpha op(A[b]) op(B[b]) + beta C[b] for b in order, in double.
void gemmRef(const GemmArgs &g, const Floats &a, const Floats &b, Doubles &c) {
  for (int64_t bi = 0; bi < g.batch; ++bi)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          const double av = a[bi * g.strideA + (g.transA ? p * g.lda + i : i * g.lda + p)];
          const double bv = b[bi * g.strideB + (g.transB ? j * g.ldb + p : p * g.ldb + j)];
          s += av * bv;
        }
        double &cv = c[bi * g.strideC + i * g.ldc + j];
        cv = g.alpha * s + g.beta * cv;
      }
}

void checkGemm(const GemmArgs &g, const std::string &what, uint32_t seed) {
  const int64_t rowsA = g.transA ? g.k : g.m, rowsB = g.transB ? g.n : g.k;
  const size_t sizeA = static_cast<size_t>((g.batch - 1) * g.strideA + rowsA * g.lda);
  const size_t sizeB = static_cast<size_t>((g.batch - 1) * g.strideB + rowsB * g.ldb);
  const size_t sizeC = static_cast<size_t>((g.batch - 1) * g.strideC + g.m * g.ldc);
  const Floats a = randomFloats(sizeA, -1, 1, seed);
  const Floats b = randomFloats(sizeB, -1, 1, seed + 1);
  Floats c = randomFloats(sizeC, -1, 1, seed + 2);
  Doubles want = toDoubles(c);
  gemmRef(g, a, b, want);
  gemm(g, a.data(), b.data(), c.data());
  expectClose(c, want, 1e-5, 1e-5 * static_cast<double>(g.k), what);
}

TEST(CpuKernelsGemm, AllTransposes) {
  uint32_t seed = 100;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      GemmArgs g = gemmArgs(1, 7, 9, 5, ta, tb);
      checkGemm(g, "plain ta=" + std::to_string(ta) + " tb=" + std::to_string(tb), seed += 3);
      g.alpha = 0.5f;
      g.beta = -1.5f;
      checkGemm(g, "alpha/beta", seed += 3);
      g = gemmArgs(3, 6, 4, 11, ta, tb);
      checkGemm(g, "batched", seed += 3);
    }
}

TEST(CpuKernelsGemm, LeadingDimsAndStrides) {
  // Padded leading dimensions: each matrix is a window of a wider one.
  GemmArgs g = gemmArgs(2, 5, 6, 4, false, true);
  g.lda = 9;
  g.ldb = 7;
  g.ldc = 10;
  g.strideA = 5 * 9 + 3;
  g.strideB = 6 * 7;
  g.strideC = 5 * 10 + 1;
  checkGemm(g, "padded", 200);
  // A batch against one shared B (the collapsed single product), and one shared A.
  g = gemmArgs(4, 8, 5, 6, false, false);
  g.strideB = 0;
  checkGemm(g, "shared B", 210);
  g.transB = true;
  g.ldb = 6;
  checkGemm(g, "shared B transposed", 215);
  g = gemmArgs(4, 8, 5, 6, false, false);
  g.strideA = 8 * 6 + 2;
  g.strideB = 0;
  checkGemm(g, "shared B, gaps between A blocks", 217);
  g = gemmArgs(4, 8, 5, 6, false, false);
  g.strideB = 0;
  g.strideC = 8 * 5 + 1;
  checkGemm(g, "shared B, gaps between C blocks", 218);
  g = gemmArgs(4, 8, 5, 6, true, false);
  g.strideB = 0;
  checkGemm(g, "shared B, A transposed", 220);
  g = gemmArgs(4, 8, 5, 6, false, false);
  g.strideA = 0;
  checkGemm(g, "shared A", 230);
  // Every batch accumulating into one C (strideC 0, beta 1): a sum over the batch.
  g = gemmArgs(5, 3, 4, 6, false, false);
  g.strideC = 0;
  g.beta = 1;
  checkGemm(g, "accumulate over batch", 240);
  // Many small products (the parallel path) and one larger one.
  checkGemm(gemmArgs(64, 16, 16, 8, false, true), "many small", 250);
  checkGemm(gemmArgs(1, 130, 70, 90, true, false), "larger", 260);
}

TEST(CpuKernelsGemm, SlicedProducts) {
  // Products large enough to be split over threads, by rows and by columns, and a few large
  // batches run one after another.
  checkGemm(gemmArgs(1, 300, 100, 80, false, false), "row slices", 270);
  checkGemm(gemmArgs(1, 300, 100, 80, true, true), "row slices, transposed", 271);
  checkGemm(gemmArgs(1, 70, 400, 90, false, true), "column slices", 272);
  checkGemm(gemmArgs(1, 70, 400, 90, true, false), "column slices, transposed", 273);
  GemmArgs g = gemmArgs(6, 50, 100, 80, false, false);
  g.strideB = 0;
  checkGemm(g, "shared B collapsed and sliced", 274);
  checkGemm(gemmArgs(2, 200, 100, 120, false, true), "two large batches", 275);
}

// A few rows against B read transposed or in place (a decode step's products) take
// SkinnyGemm.cpp's path: close to the reference, and every row's bits its own, whatever the
// other rows, the thread count or the vector width.
TEST(CpuKernelsGemm, SkinnyProducts) {
  uint32_t seed = 300;
  for (bool tb : {true, false})
    for (int64_t k : {64, 97, 300})
      for (int64_t m : {1, 5, 8, 13, 16}) {
        const int64_t n = tb ? 150 : 2048 + 37;
        const std::string what =
            "m=" + std::to_string(m) + " k=" + std::to_string(k) + " tb=" + std::to_string(tb);
        checkGemm(gemmArgs(1, m, n, k, false, tb), what, seed += 3);
        // The decode layout: a batch of one-row blocks against a shared B.
        GemmArgs g = gemmArgs(m, 1, n, k, false, tb);
        g.strideB = 0;
        checkGemm(g, what + " batched", seed += 3);
      }
  GemmArgs g = gemmArgs(1, 6, 130, 100, false, true);
  g.alpha = 0.5f;
  g.beta = -1.5f;
  checkGemm(g, "skinny alpha/beta", 400);
  g = gemmArgs(1, 6, 2100, 100, false, true);
  g.lda = 110;
  g.ldb = 120;
  g.ldc = 2200;
  checkGemm(g, "skinny padded", 401);
  g.transB = false;
  g.ldb = 2150;
  checkGemm(g, "skinny padded, B in place", 402);

  for (bool tb : {true, false}) {
    const int64_t m = 11, n = tb ? 3000 : 4100, k = 333;
    const GemmArgs all = gemmArgs(1, m, n, k, false, tb);
    const Floats a = randomFloats(static_cast<size_t>(m * k), -1, 1, 410);
    const Floats b = randomFloats(static_cast<size_t>(n * k), -1, 1, 411);
    Floats c(static_cast<size_t>(m * n)), c1(c.size()), row(static_cast<size_t>(n));
    gemm(all, a.data(), b.data(), c.data());
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    gemm(all, a.data(), b.data(), c1.data());
    omp_set_num_threads(threads);
    EXPECT_EQ(c, c1) << "tb=" << tb << ": the bits depend on the thread count";
    GemmArgs one = all;
    one.m = 1;
    for (int64_t i = 0; i < m; ++i) {
      gemm(one, a.data() + i * k, b.data(), row.data());
      EXPECT_TRUE(std::equal(row.begin(), row.end(), c.begin() + i * n))
          << "tb=" << tb << ": row " << i << " differs when computed alone";
    }
  }
}

TEST(CpuKernelsGemm, EmptyContractionScalesC) {
  GemmArgs g = gemmArgs(2, 2, 3, 0, false, false);
  g.lda = 1;
  g.ldb = 3;
  g.beta = 2;
  const Floats a(1), b(3);
  Floats c = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  gemm(g, a.data(), b.data(), c.data());
  EXPECT_EQ(c, (Floats{2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24}));
}

} // namespace
