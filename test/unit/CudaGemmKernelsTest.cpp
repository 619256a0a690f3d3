//===- CudaGemmKernelsTest.cpp - The CUDA matrix products -----------------===//
//
// cuBLASLt's and the plain kernel's batched products in every layout, with shared operands and
// accumulation, and the 16-bit products that accumulate in f32, against the CPU's products (C
// starting from random values, so that what must not be written is checked too).
//
// Built only where CMake found the CUDA toolkit; on a machine without a GPU every test is
// skipped with "skipped: no CUDA device" and the reason, never passed.
//
//===----------------------------------------------------------------------===//

#include "common/support/Float16.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cuda/CudaKernels.h"
#include "test/unit/CudaKernelsTestSupport.h"
#include "test/unit/DeviceArray.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace cpu = tessel::cpu;
namespace cuda = tessel::cuda;

namespace {

using namespace tessel::test;

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

/// The elements a batch of row-major products reaches in A, B and C.
struct GemmExtents {
  int64_t a, b, c;
};
GemmExtents extentsOf(const cpu::GemmArgs &g) {
  const int64_t aRows = g.transA ? g.k : g.m, aCols = g.transA ? g.m : g.k;
  const int64_t bRows = g.transB ? g.n : g.k, bCols = g.transB ? g.k : g.n;
  return {(g.batch - 1) * g.strideA + (aRows - 1) * g.lda + aCols,
          (g.batch - 1) * g.strideB + (bRows - 1) * g.ldb + bCols,
          (g.batch - 1) * g.strideC + (g.m - 1) * g.ldc + g.n};
}

cpu::GemmArgs gemmArgs(int64_t batch, int64_t m, int64_t n, int64_t k, bool transA, bool transB,
                       int64_t pad) {
  cpu::GemmArgs g;
  g.batch = batch;
  g.m = m;
  g.n = n;
  g.k = k;
  g.transA = transA;
  g.transB = transB;
  g.lda = (transA ? m : k) + pad;
  g.ldb = (transB ? k : n) + pad;
  g.ldc = n + pad;
  g.strideA = (transA ? k : m) * g.lda + 3;
  g.strideB = (transB ? n : k) * g.ldb + 1;
  g.strideC = m * g.ldc + 2;
  return g;
}

std::string describe(const cpu::GemmArgs &g) {
  return "gemm batch " + std::to_string(g.batch) + " m " + std::to_string(g.m) + " n " +
         std::to_string(g.n) + " k " + std::to_string(g.k) + (g.transA ? " transA" : "") +
         (g.transB ? " transB" : "") + " strides " + std::to_string(g.strideA) + "/" +
         std::to_string(g.strideB) + "/" + std::to_string(g.strideC);
}

/// Runs one product on both backends (C starting from the same random values, so elements the
/// product must not write are checked too) and compares.
void checkGemm(const cuda::BlasContext &blas, const cpu::GemmArgs &g, uint32_t seed) {
  const GemmExtents e = extentsOf(g);
  const Floats a = randomFloats(e.a, -1, 1, seed), b = randomFloats(e.b, -1, 1, seed + 1);
  Floats c = randomFloats(e.c, -1, 1, seed + 2);
  DeviceArray<float> ga(a), gb(b), gc(c);
  cpu::gemm(g, a.data(), b.data(), c.data());
  // Twice where the product overwrites C: the second runs the algorithm the first chose
  // (BlasPlans). Once where it adds to C.
  for (int run = 0; run < (g.beta == 0.0f ? 2 : 1); ++run)
    ASSERT_EQ(cuda::gemm(blas, g, ga.get(), gb.get(), gc.get(), nullptr), CUBLAS_STATUS_SUCCESS)
        << describe(g);
  expectClose(c, gc.host(), describe(g), 2e-5f, 1e-4f);
}

TEST_F(CudaKernels, GemmMatchesCpuInEveryLayout) {
  uint32_t seed = 100;
  for (bool transA : {false, true})
    for (bool transB : {false, true})
      for (int64_t pad : {0, 3}) {
        checkGemm(blas(), gemmArgs(1, 37, 53, 29, transA, transB, pad), seed += 3);
        checkGemm(blas(), gemmArgs(3, 17, 9, 131, transA, transB, pad), seed += 3);
      }
  // Accumulating into C (the plan's `accumulate`: beta = 1).
  cpu::GemmArgs adding = gemmArgs(2, 19, 23, 41, false, true, 1);
  adding.beta = 1.0f;
  checkGemm(blas(), adding, seed += 3);
  // A long contraction and a wide one, in the sizes of a model's layers.
  checkGemm(blas(), gemmArgs(1, 64, 96, 1031, false, true, 0), seed += 3);
  checkGemm(blas(), gemmArgs(2, 129, 257, 65, false, false, 0), seed += 3);
}

TEST_F(CudaKernels, PlainGemmMatchesCpuInEveryLayout) {
  uint32_t seed = 150;
  for (bool transA : {false, true})
    for (bool transB : {false, true})
      for (const cpu::GemmArgs &g : {gemmArgs(1, 37, 53, 29, transA, transB, 3),
                                     gemmArgs(3, 17, 9, 131, transA, transB, 0)}) {
        const GemmExtents e = extentsOf(g);
        const Floats a = randomFloats(e.a, -1, 1, seed), b = randomFloats(e.b, -1, 1, seed + 1);
        Floats c = randomFloats(e.c, -1, 1, seed + 2);
        seed += 3;
        DeviceArray<float> ga(a), gb(b), gc(c);
        cpu::gemm(g, a.data(), b.data(), c.data());
        ASSERT_EQ(cuda::gemmSimple(g, ga.get(), gb.get(), gc.get(), stream), cudaSuccess);
        expectClose(c, gc.host(), "plain " + describe(g), 2e-5f, 1e-4f);
      }
}

TEST_F(CudaKernels, GemmSharesAMatrixWhereAStrideIsZero) {
  uint32_t seed = 200;
  // One B for every batch, A and C contiguous blocks: folded into one product.
  cpu::GemmArgs folded = gemmArgs(4, 13, 21, 11, false, false, 0);
  folded.strideA = folded.m * folded.lda;
  folded.strideB = 0;
  folded.strideC = folded.m * folded.ldc;
  checkGemm(blas(), folded, seed += 3);
  // One B, but A transposed: the batches one by one.
  cpu::GemmArgs shared = gemmArgs(3, 13, 21, 11, true, false, 1);
  shared.strideB = 0;
  checkGemm(blas(), shared, seed += 3);
  // One A for every batch.
  cpu::GemmArgs sharedA = gemmArgs(3, 7, 19, 23, false, true, 0);
  sharedA.strideA = 0;
  checkGemm(blas(), sharedA, seed += 3);
  // Every batch writes the same C: the last product remains.
  cpu::GemmArgs sameC = gemmArgs(3, 5, 6, 7, false, false, 0);
  sameC.strideC = 0;
  checkGemm(blas(), sameC, seed += 3);
}

TEST_F(CudaKernels, SixteenBitGemmsAccumulateInF32AndRoundOnce) {
  // Rows and batches 16-byte aligned, as 16-bit tensor-core products want them; a batch of
  // strided products and one product.
  for (int64_t batch : {2, 1}) {
    cpu::GemmArgs g = gemmArgs(batch, 32, 48, 96, false, true, 0);
    g.strideA = g.m * g.lda;
    g.strideB = g.n * g.ldb;
    g.strideC = g.m * g.ldc;
    const GemmExtents e = extentsOf(g);
    for (cuda::DType ab : {cuda::DType::BF16, cuda::DType::F16})
      for (bool wideOut : {true, false}) {
        const bool bf16 = ab == cuda::DType::BF16;
        const std::string what = std::string(bf16 ? "bf16" : "f16") + " into " +
                                 (wideOut ? "f32 "
                                  : bf16  ? "bf16 "
                                          : "f16 ") +
                                 describe(g);
        const cpu::DType half = bf16 ? cpu::DType::BF16 : cpu::DType::F16;
        auto toHalf = [&](float v) {
          return bf16 ? tessel::floatToBf16(v) : tessel::floatToHalf(v);
        };
        auto toFloat = [&](uint16_t v) {
          return bf16 ? tessel::bf16ToFloat(v) : tessel::halfToFloat(v);
        };
        Floats a = randomFloats(e.a, -1, 1, 300), b = randomFloats(e.b, -1, 1, 301);
        DeviceArray<float> fa(a), fb(b), fc(e.c);
        DeviceArray<uint16_t> ha(static_cast<size_t>(e.a)), hb(static_cast<size_t>(e.b)),
            hc(static_cast<size_t>(e.c));
        ASSERT_EQ(cuda::narrow(half, e.a, fa.get(), ha.get(), stream), cudaSuccess);
        ASSERT_EQ(cuda::narrow(half, e.b, fb.get(), hb.get(), stream), cudaSuccess);
        ASSERT_EQ(cuda::gemmMixed(blas(), g, ab, ha.get(), hb.get(),
                                  wideOut ? cuda::DType::F32 : ab,
                                  wideOut ? static_cast<void *>(fc.get()) : hc.get(), stream),
                  CUBLAS_STATUS_SUCCESS)
            << what;
        // The products of 16-bit values are exact in f32: the reference is the f32 product of
        // the rounded inputs, up to the order of the additions, then (into a 16-bit C) rounded
        // once, which the order can move by an ulp.
        for (float &v : a)
          v = toFloat(toHalf(v));
        for (float &v : b)
          v = toFloat(toHalf(v));
        Floats c(e.c, 0.0f);
        cpu::gemm(g, a.data(), b.data(), c.data());
        if (wideOut) {
          expectClose(c, fc.host(), what, 2e-5f, 1e-4f);
          continue;
        }
        Floats got;
        for (uint16_t v : hc.host())
          got.push_back(toFloat(v));
        for (float &v : c)
          v = toFloat(toHalf(v));
        expectClose(c, got, what, 1e-5f, bf16 ? 8e-3f : 1e-3f);
      }
  }
  // An f32 A with a 16-bit C, or C of the other 16-bit type, is not a mixed product.
  cpu::GemmArgs g = gemmArgs(1, 16, 16, 16, false, false, 0);
  DeviceArray<uint16_t> x(256);
  EXPECT_EQ(cuda::gemmMixed(blas(), g, cuda::DType::F32, x.get(), x.get(), cuda::DType::BF16,
                            x.get(), stream),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cuda::gemmMixed(blas(), g, cuda::DType::BF16, x.get(), x.get(), cuda::DType::F16,
                            x.get(), stream),
            CUBLAS_STATUS_NOT_SUPPORTED);
}

TEST_F(CudaKernels, GemmRefusesSizesCublasCannotTake) {
  cpu::GemmArgs g = gemmArgs(1, 4, 4, 4, false, false, 0);
  g.batch = 0;
  DeviceArray<float> x(64);
  EXPECT_EQ(cuda::gemm(blas(), g, x.get(), x.get(), x.get(), stream), CUBLAS_STATUS_INVALID_VALUE);
  g.batch = 1;
  g.m = int64_t(1) << 33;
  EXPECT_EQ(cuda::gemm(blas(), g, x.get(), x.get(), x.get(), stream), CUBLAS_STATUS_INVALID_VALUE);
}

} // namespace
