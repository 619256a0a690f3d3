//===- CpuDropoutAndOptimizerKernelsTest.cpp - Dropout, AdamW and SGD -----===//
//
// The CPU's dropout mask (reproducible from its seed, scaled, the same on the backward pass)
// and the optimizer steps: AdamW against a hand computation and the textbook formulas, SGD
// against torch's, and many tensors in one call giving each tensor's own bits.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "test/unit/CpuKernelsTestSupport.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace tessel::cpu;

namespace {

using namespace tessel::test;

//===----------------------------------------------------------------------===//
// Dropout and AdamW
//===----------------------------------------------------------------------===//

TEST(CpuKernelsDropout, MaskIsReproducibleAndScaled) {
  const int64_t n = 100000;
  const float rate = 0.3f;
  const Floats x = randomFloats(n, 0.5f, 1.5f, 900);
  Floats y(n), again(n), other(n), copy(n);
  dropout(n, rate, 42, x.data(), y.data());
  dropout(n, rate, 42, x.data(), again.data());
  dropout(n, rate, 43, x.data(), other.data());
  EXPECT_EQ(y, again);
  EXPECT_NE(y, other);
  int64_t kept = 0;
  const float keepScale = 1.0f / (1.0f - rate);
  for (int64_t i = 0; i < n; ++i) {
    if (y[i] == 0.0f)
      continue;
    ++kept;
    ASSERT_EQ(y[i], x[i] * keepScale) << i;
  }
  // 70000 expected; the standard deviation is about 145.
  EXPECT_NEAR(static_cast<double>(kept), 0.7 * n, 1000);
  // The backward pass on dy with the same seed drops the same elements.
  const Floats dy(n, 1.0f);
  Floats dx(n);
  dropout(n, rate, 42, dy.data(), dx.data());
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(dx[i] == 0.0f, y[i] == 0.0f) << i;
  // Rate 0 copies.
  dropout(n, 0.0f, 42, x.data(), copy.data());
  EXPECT_EQ(copy, x);
}

TEST(CpuKernelsAdamW, TwoStepsMatchHandComputation) {
  AdamWArgs args;
  args.lr = 0.1f;
  args.beta1 = 0.9f;
  args.beta2 = 0.99f;
  args.eps = 1e-3f;
  args.weightDecay = 0.1f;
  args.gradScale = 0.5f;
  Floats p = {1.0f, -2.0f, 0.5f}, m = {0, 0, 0}, v = {0, 0, 0};
  const Floats g1 = {0.4f, -1.0f, 0.0f}, g2 = {-0.2f, 3.0f, 1.0f};
  // Step 1 by hand for p[0]: g = 0.2; p = 1 * (1 - 0.01) = 0.99; m = 0.02, v = 0.0004;
  // m/(1-0.9) = 0.2, v/(1-0.99) = 0.04; p = 0.99 - 0.1 * 0.2 / (0.2 + 0.001) = 0.8904975.
  args.step = 1;
  adamw(args, 3, p.data(), g1.data(), m.data(), v.data());
  EXPECT_NEAR(p[0], 0.99 - 0.1 * 0.2 / 0.201, 1e-6);
  EXPECT_NEAR(m[0], 0.02, 1e-8);
  EXPECT_NEAR(v[0], 0.0004, 1e-9);
  args.step = 2;
  adamw(args, 3, p.data(), g2.data(), m.data(), v.data());
  // Both steps in double from the textbook formulas.
  Doubles pd = {1.0, -2.0, 0.5}, md(3, 0.0), vd(3, 0.0);
  const double lr = 0.1, b1 = 0.9f, b2 = 0.99f, eps = 1e-3f, wd = 0.1f;
  for (int t = 1; t <= 2; ++t)
    for (int i = 0; i < 3; ++i) {
      const double g = (t == 1 ? g1[i] : g2[i]) * 0.5;
      pd[i] -= lr * wd * pd[i];
      md[i] = b1 * md[i] + (1 - b1) * g;
      vd[i] = b2 * vd[i] + (1 - b2) * g * g;
      const double mhat = md[i] / (1 - std::pow(b1, t)), vhat = vd[i] / (1 - std::pow(b2, t));
      pd[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  expectClose(p, pd, 1e-6, 1e-7, "adamw param");
  expectClose(m, md, 1e-6, 1e-9, "adamw m");
  expectClose(v, vd, 1e-6, 1e-10, "adamw v");
}

/// Sizes for the multi-tensor calls: several chunks of the threads' grain (2^15), an empty
/// tensor, one element, and odd sizes.
const std::vector<int64_t> kTensorSizes = {100003, 0, 1, 40000, 7, 32768};

TEST(CpuKernelsAdamW, ManyTensorsInOneCallGiveEachTensorsBits) {
  AdamWArgs args;
  args.lr = 3e-3f;
  args.beta2 = 0.95f;
  args.weightDecay = 0.1f;
  args.gradScale = 0.7f;
  const size_t k = kTensorSizes.size();
  std::vector<Floats> p(k), m(k), v(k), p1, m1, v1;
  for (size_t t = 0; t < k; ++t) {
    p[t] = randomFloats(kTensorSizes[t], -1, 1, 300 + static_cast<uint32_t>(t));
    m[t] = Floats(p[t].size(), 0.0f);
    v[t] = Floats(p[t].size(), 0.0f);
  }
  p1 = p, m1 = m, v1 = v;
  for (int64_t step = 1; step <= 3; ++step) {
    args.step = step;
    std::vector<AdamWTensor> tensors(k);
    std::vector<Floats> g(k);
    for (size_t t = 0; t < k; ++t) {
      g[t] = randomFloats(kTensorSizes[t], -1, 1, 400 + 10 * static_cast<uint32_t>(step) + t);
      tensors[t] = {kTensorSizes[t], p[t].data(), g[t].data(), m[t].data(), v[t].data()};
      adamw(args, kTensorSizes[t], p1[t].data(), g[t].data(), m1[t].data(), v1[t].data());
    }
    adamw(args, tensors.data(), k);
  }
  for (size_t t = 0; t < k; ++t) {
    EXPECT_EQ(p[t], p1[t]) << "param of tensor " << t;
    EXPECT_EQ(m[t], m1[t]) << "m of tensor " << t;
    EXPECT_EQ(v[t], v1[t]) << "v of tensor " << t;
  }
}

TEST(CpuKernelsSgd, ManyTensorsFollowTorchsFormula) {
  SgdArgs args;
  args.lr = 0.05f;
  args.momentum = 0.9f;
  args.weightDecay = 0.01f;
  args.gradScale = 0.5f;
  const size_t k = kTensorSizes.size();
  std::vector<Floats> p(k), buf(k), expected(k), expectedBuf(k);
  for (size_t t = 0; t < k; ++t) {
    p[t] = randomFloats(kTensorSizes[t], -1, 1, 500 + static_cast<uint32_t>(t));
    buf[t] = Floats(p[t].size(), 0.0f);
  }
  expected = p, expectedBuf = buf;
  for (int step = 1; step <= 2; ++step) {
    std::vector<SgdTensor> tensors(k);
    std::vector<Floats> g(k);
    for (size_t t = 0; t < k; ++t) {
      g[t] = randomFloats(kTensorSizes[t], -1, 1, 600 + 10 * static_cast<uint32_t>(step) + t);
      tensors[t] = {kTensorSizes[t], p[t].data(), g[t].data(), buf[t].data()};
      // torch.optim.SGD: d = g + wd p; buf = momentum buf + d (buf = d at the first step,
      // which a zero buffer gives); p -= lr buf.
      for (size_t i = 0; i < g[t].size(); ++i) {
        const float d = g[t][i] * args.gradScale + args.weightDecay * expected[t][i];
        expectedBuf[t][i] = args.momentum * expectedBuf[t][i] + d;
        expected[t][i] -= args.lr * expectedBuf[t][i];
      }
    }
    sgd(args, tensors.data(), k);
  }
  for (size_t t = 0; t < k; ++t) {
    EXPECT_EQ(p[t], expected[t]) << "param of tensor " << t;
    EXPECT_EQ(buf[t], expectedBuf[t]) << "buffer of tensor " << t;
  }
}

} // namespace
