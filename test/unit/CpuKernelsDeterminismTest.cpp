//===- CpuKernelsDeterminismTest.cpp - The same bits on any thread count --===//
//
// Large cases of every kernel run again on 1, 2 and 3 threads and must give the same bits: how
// the work is split between threads never changes a result.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "test/unit/CpuKernelsTestSupport.h"
#include "test/unit/KernelShapes.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace tessel::cpu;

namespace {

using namespace tessel::test;

/// Runs `compute` on 1, 2 and 3 threads and expects the same bits each time.
void expectSameBitsOnAnyThreadCount(const std::function<Floats()> &compute,
                                    const std::string &what) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Floats reference = compute();
  for (int threads : {2, 3}) {
    omp_set_num_threads(threads);
    const Floats again = compute();
    ASSERT_EQ(again.size(), reference.size());
    EXPECT_EQ(std::memcmp(again.data(), reference.data(), reference.size() * sizeof(float)), 0)
        << what << " differs between 1 and " << threads << " threads";
  }
  omp_set_num_threads(saved);
}

//===----------------------------------------------------------------------===//
// Determinism
//===----------------------------------------------------------------------===//

TEST(CpuKernelsDeterminism, SameBitsOnAnyThreadCount) {
  const int64_t rows = 1000, cols = 97; // odd column count: uneven blocks
  const Floats x = randomFloats(rows * cols, -2, 2, 1000);
  const Floats dy = randomFloats(rows * cols, -1, 1, 1001);
  const Floats g = randomFloats(cols, 0.5f, 1.5f, 1002), b = randomFloats(cols, -1, 1, 1003);
  const std::vector<int32_t> ids = randomIds(rows, cols, 1004);

  expectSameBitsOnAnyThreadCount(
      [&] {
        const Shape s = shapeOf({10, 100, 97});
        Floats out(x.size());
        binary(BinaryKind::Add, s, x.data(), denseStrides(s), g.data(), stridesOf({0, 0, 1}),
               out.data());
        return out;
      },
      "binary");
  expectSameBitsOnAnyThreadCount(
      [&] {
        Floats out(cols + rows);
        reduceSum(shapeOf({rows, cols}), x.data(), stridesOf({0, 1}), cols, 1, out.data());
        reduceSum(shapeOf({rows, cols}), x.data(), stridesOf({1, 0}), rows, 1, out.data() + cols);
        return out;
      },
      "reduceSum");
  expectSameBitsOnAnyThreadCount(
      [&] {
        Floats out(x.size() + 2 * cols);
        layerNormGrad(rows, cols, x.data(), g.data(), dy.data(), 1e-5f, out.data(),
                      out.data() + x.size(), out.data() + x.size() + cols);
        return out;
      },
      "layerNormGrad");
  expectSameBitsOnAnyThreadCount(
      [&] {
        Floats out(x.size() + cols);
        rmsNormGrad(rows, cols, x.data(), g.data(), dy.data(), 1e-5f, out.data(),
                    out.data() + x.size());
        return out;
      },
      "rmsNormGrad");
  expectSameBitsOnAnyThreadCount(
      [&] {
        Floats out(x.size() + 1);
        std::string error;
        EXPECT_TRUE(crossEntropy(rows, cols, x.data(), ids.data(), &out.back(), error));
        const float dloss = 1;
        EXPECT_TRUE(crossEntropyGrad(rows, cols, x.data(), ids.data(), &dloss, out.data(), error));
        return out;
      },
      "crossEntropy");
  expectSameBitsOnAnyThreadCount(
      [&] {
        Floats out(x.size());
        softmax(rows, cols, x.data(), out.data());
        return out;
      },
      "softmax");
  expectSameBitsOnAnyThreadCount(
      [&] {
        // 1000 positions over a 97-row table: every row gets about ten additions.
        Floats out(cols * cols);
        std::string error;
        EXPECT_TRUE(embeddingGrad(rows, cols, cols, dy.data(), ids.data(), out.data(), error));
        return out;
      },
      "embeddingGrad");
  expectSameBitsOnAnyThreadCount(
      [&] {
        Floats out(2 * x.size());
        const int64_t n = static_cast<int64_t>(x.size());
        unary(UnaryKind::Gelu, n, x.data(), out.data());
        unaryGrad(UnaryKind::Gelu, n, x.data(), out.data(), dy.data(), out.data() + n);
        return out;
      },
      "gelu");
  expectSameBitsOnAnyThreadCount(
      [&] {
        Floats out(x.size());
        layerNorm(rows, cols, x.data(), g.data(), b.data(), 1e-5f, out.data());
        return out;
      },
      "layerNorm");
  expectSameBitsOnAnyThreadCount(
      [&] {
        Floats out(x.size());
        rope(10, 25, 4, 96, 10000.0f, false, x.data(), out.data());
        return out;
      },
      "rope");
  expectSameBitsOnAnyThreadCount(
      [&] {
        AdamWArgs args;
        args.lr = 0.01f;
        args.weightDecay = 0.1f;
        args.step = 3;
        Floats state(3 * x.size());
        const size_t n = x.size();
        std::copy(x.begin(), x.end(), state.begin());
        std::copy(dy.begin(), dy.end(), state.begin() + n);
        for (size_t i = 0; i < n; ++i)
          state[2 * n + i] = dy[i] * dy[i];
        adamw(args, static_cast<int64_t>(n), state.data(), x.data(), state.data() + n,
              state.data() + 2 * n);
        return state;
      },
      "adamw");
  expectSameBitsOnAnyThreadCount(
      [&] {
        Floats out(x.size());
        dropout(static_cast<int64_t>(x.size()), 0.1f, 7, x.data(), out.data());
        return out;
      },
      "dropout");
  expectSameBitsOnAnyThreadCount(
      [&] {
        GemmArgs a = gemmArgs(40, 16, 16, 8, false, true);
        Floats out(40 * 16 * 16);
        gemm(a, x.data(), dy.data(), out.data());
        return out;
      },
      "batched gemm");
  expectSameBitsOnAnyThreadCount(
      [&] {
        GemmArgs a = gemmArgs(1, 300, 97, 100, false, false);
        Floats out(300 * 97);
        gemm(a, x.data(), dy.data(), out.data());
        return out;
      },
      "sliced gemm");

  const AttentionArgs a = attentionOf(4, 32, 4, 32, 2, 16, true);
  const size_t qSize = 4 * 32 * 4 * 16, kSize = 4 * 32 * 2 * 16;
  expectSameBitsOnAnyThreadCount(
      [&] {
        Floats out(qSize);
        attention(a, x.data(), dy.data(), x.data() + qSize, out.data());
        return out;
      },
      "attention");
  expectSameBitsOnAnyThreadCount(
      [&] {
        Floats out(qSize + 2 * kSize);
        attentionGrad(a, x.data(), dy.data(), x.data() + qSize, dy.data() + qSize, out.data(),
                      out.data() + qSize, out.data() + qSize + kSize);
        return out;
      },
      "attentionGrad");
}

} // namespace
