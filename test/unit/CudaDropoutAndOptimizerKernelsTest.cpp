//===- CudaDropoutAndOptimizerKernelsTest.cpp - Dropout and optimizers ----===//
//
// The CUDA dropout mask against the CPU's, the gradient norm (sums of squares over many
// tensors, clipping) and the non-finite check, and AdamW and SGD over many tensors and steps
// against the CPU's optimizers.
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

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace cpu = tessel::cpu;
namespace cuda = tessel::cuda;

namespace {

using namespace tessel::test;

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, DropoutDropsTheCpusElements) {
  // A [3, 10, 6] block at offset [3, 0, 12] of a [12, 10, 24] tensor; then with its last dim
  // split head-tail: positions 6..8 and 18..20 of 24.
  const std::vector<int64_t> shape = {3, 10, 6}, whole = {12, 10, 24};
  const std::vector<int64_t> offsets[] = {{3, 0, 12}, {3, 0, 6}};
  const std::vector<int64_t> tails[] = {{-1, -1, -1}, {-1, -1, 18}};
  const Floats x = randomFloats(180, 0.5f, 1.5f, 620);
  for (int layout = 0; layout < 2; ++layout)
    for (float rate : {0.0f, 0.1f, 0.5f}) {
      Floats ref(180);
      cpu::dropoutBlock(shape, offsets[layout], tails[layout], whole, rate, 0x1234abcdull, x.data(),
                        ref.data());
      DeviceArray<float> gx(x), gy(180);
      ASSERT_EQ(cuda::dropoutBlock(shape, offsets[layout], tails[layout], whole, rate,
                                   0x1234abcdull, gx.get(), gy.get(), stream),
                cudaSuccess);
      expectClose(ref, gy.host(),
                  "dropout layout " + std::to_string(layout) + " rate " + std::to_string(rate), 0,
                  0);
    }
}

//===----------------------------------------------------------------------===//
// The gradient norm
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, SumOfSquaresAndClippingMatchCpu) {
  const Floats a = randomFloats(100003, -1, 1, 640), b = randomFloats(77, -3, 3, 641);
  const double ref = cpu::sumOfSquares(100003, a.data()) + cpu::sumOfSquares(77, b.data());
  DeviceArray<float> ga(a), gb(b), sum(1), norm(1), clip(1);
  const float *inputs[] = {ga.get(), gb.get()};
  const int64_t sizes[] = {100003, 77};
  DeviceArray<double> work(cuda::sumOfSquaresWorkspace(2, sizes));
  ASSERT_EQ(cuda::sumOfSquares(2, inputs, sizes, false, sum.get(), work.get(), stream),
            cudaSuccess);
  ASSERT_EQ(cuda::sumOfSquares(2, inputs, sizes, true, norm.get(), work.get(), stream),
            cudaSuccess);
  ASSERT_EQ(cuda::clipCoefficient(norm.get(), 1.0f, clip.get(), stream), cudaSuccess);
  // f64 sums in another order: equal once rounded to f32 but for the last bit.
  expectClose({static_cast<float>(ref)}, sum.host(), "sum_squares", 0, 1e-6f);
  const float refNorm = static_cast<float>(std::sqrt(ref));
  expectClose({refNorm}, norm.host(), "global_norm", 0, 1e-6f);
  expectClose({std::min(1.0f / (norm.host()[0] + 1e-6f), 1.0f)}, clip.host(), "clip", 0, 0);
}

TEST_F(CudaKernels, SumOfSquaresOverManyTensorsMatchesCpu) {
  // More tensors than one launch's table holds, one of them longer than a launch's chunks,
  // and inputs that start off the 16-byte grid.
  const int64_t count = 50;
  std::vector<int64_t> sizes(count);
  int64_t total = 0;
  for (int64_t k = 0; k < count; ++k)
    total += sizes[k] = k == 7 ? 21'000'003 : 1 + (k * 7919) % 90'001;
  const Floats all = randomFloats(total + count, -2, 2, 660);
  DeviceArray<float> gall(all), sum(1);
  std::vector<const float *> inputs(count);
  double ref = 0;
  int64_t at = 0;
  for (int64_t k = 0; k < count; ++k) {
    at += k % 3 == 1; // a one-float gap: this input is misaligned
    inputs[k] = gall.get() + at;
    ref += cpu::sumOfSquares(sizes[k], all.data() + at);
    at += sizes[k];
  }
  DeviceArray<double> work(cuda::sumOfSquaresWorkspace(count, sizes.data()));
  ASSERT_EQ(
      cuda::sumOfSquares(count, inputs.data(), sizes.data(), false, sum.get(), work.get(), stream),
      cudaSuccess);
  expectClose({static_cast<float>(ref)}, sum.host(), "sum_squares of 50 tensors", 0, 1e-6f);
  const float first = sum.host()[0];
  ASSERT_EQ(
      cuda::sumOfSquares(count, inputs.data(), sizes.data(), false, sum.get(), work.get(), stream),
      cudaSuccess);
  EXPECT_EQ(sum.host()[0], first) << "the same bits on every run";
}

TEST_F(CudaKernels, FindNonFiniteSeesNanAndInfinity) {
  Floats x = randomFloats(5000, -1, 1, 650);
  DeviceArray<float> clean(x);
  x[4321] = std::nanf("");
  DeviceArray<float> withNan(x);
  x[4321] = 0;
  x[17] = -INFINITY;
  DeviceArray<float> withInf(x);
  DeviceArray<int> flag(std::vector<int>{0});
  ASSERT_EQ(cuda::findNonFinite(5000, clean.get(), flag.get(), stream), cudaSuccess);
  EXPECT_EQ(flag.host()[0], 0);
  ASSERT_EQ(cuda::findNonFinite(5000, withNan.get(), flag.get(), stream), cudaSuccess);
  EXPECT_EQ(flag.host()[0], 1);
  DeviceArray<int> flag2(std::vector<int>{0});
  ASSERT_EQ(cuda::findNonFinite(5000, withInf.get(), flag2.get(), stream), cudaSuccess);
  EXPECT_EQ(flag2.host()[0], 1);
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

/// Element counts that exercise the multi-tensor tables (MultiTensor.cuh): odd sizes, empty
/// and one-element tensors, more tensors than one table holds (36), and a tensor whose chunks
/// run past one launch's 320 blocks of 64 Ki elements, so it continues in the next.
std::vector<int64_t> multiTensorSizes() {
  std::vector<int64_t> sizes = {3001, 1, 0, 65536, 65537, 320 * 65536 + 5, 129};
  for (int64_t i = 0; i < 40; ++i)
    sizes.push_back(17 + 61 * i);
  return sizes;
}

TEST_F(CudaKernels, AdamWMatchesCpuOverManyTensorsAndSteps) {
  const std::vector<int64_t> sizes = multiTensorSizes();
  const size_t k = sizes.size();
  std::vector<Floats> param(k), m(k), v(k);
  std::vector<std::unique_ptr<DeviceArray<float>>> gp(k), gm(k), gv(k), gg(k);
  std::vector<std::unique_ptr<DeviceArray<uint16_t>>> working(k);
  for (size_t t = 0; t < k; ++t) {
    const size_t n = static_cast<size_t>(sizes[t]);
    param[t] = randomFloats(sizes[t], -1, 1, 20 + static_cast<uint32_t>(t));
    m[t] = Floats(n, 0.0f);
    v[t] = Floats(n, 0.0f);
    gp[t] = std::make_unique<DeviceArray<float>>(param[t]);
    gm[t] = std::make_unique<DeviceArray<float>>(m[t]);
    gv[t] = std::make_unique<DeviceArray<float>>(v[t]);
    working[t] = std::make_unique<DeviceArray<uint16_t>>(n);
  }
  DeviceArray<float> lr(Floats{3e-3f}), scale(Floats{0.5f});
  for (int64_t step = 1; step <= 3; ++step) {
    cpu::AdamWArgs a;
    a.lr = 3e-3f;
    a.beta1 = 0.9f;
    a.beta2 = 0.95f;
    a.eps = 1e-8f;
    a.weightDecay = 0.1f;
    a.step = step;
    a.gradScale = 0.5f;
    cuda::AdamWArgs b;
    b.beta1 = a.beta1;
    b.beta2 = a.beta2;
    b.eps = a.eps;
    b.weightDecay = a.weightDecay;
    b.step = step;
    b.lr = lr.get();
    b.gradScale = scale.get();
    b.workingType = cuda::DType::BF16;
    std::vector<Floats> grad(k);
    std::vector<cpu::AdamWTensor> cpuTensors(k);
    std::vector<cuda::AdamWTensor> gpuTensors(k);
    for (size_t t = 0; t < k; ++t) {
      grad[t] = randomFloats(sizes[t], -1, 1, 1000 * static_cast<uint32_t>(step) + t);
      gg[t] = std::make_unique<DeviceArray<float>>(grad[t]);
      cpuTensors[t] = {sizes[t], param[t].data(), grad[t].data(), m[t].data(), v[t].data()};
      // The parameter's bf16 working copy, written by the same pass: the new parameter rounded.
      gpuTensors[t] = {sizes[t],     gp[t]->get(), gg[t]->get(),
                       gm[t]->get(), gv[t]->get(), working[t]->get()};
    }
    cpu::adamw(a, cpuTensors.data(), k);
    ASSERT_EQ(cuda::adamw(b, gpuTensors.data(), k, stream), cudaSuccess);
    for (size_t t = 0; t < k; ++t) {
      const std::string at = " of tensor " + std::to_string(t) + " (" + std::to_string(sizes[t]) +
                             " elements) after step " + std::to_string(step);
      const Floats updated = gp[t]->host();
      expectClose(param[t], updated, "adamw param" + at, 1e-6f);
      expectClose(m[t], gm[t]->host(), "adamw m" + at, 1e-7f);
      expectClose(v[t], gv[t]->host(), "adamw v" + at, 1e-8f);
      const std::vector<uint16_t> copy = working[t]->host();
      for (int64_t i = 0; i < sizes[t]; ++i)
        ASSERT_EQ(copy[i], tessel::floatToBf16(updated[i])) << "working copy element " << i << at;
    }
  }
}

TEST_F(CudaKernels, SgdMatchesCpuOverManyTensorsAndSteps) {
  const std::vector<int64_t> sizes = multiTensorSizes();
  const size_t k = sizes.size();
  cpu::SgdArgs a;
  a.lr = 0.05f;
  a.gradScale = 0.5f;
  a.momentum = 0.9f;
  a.weightDecay = 0.01f;
  DeviceArray<float> glr(Floats{a.lr}), gscale(Floats{a.gradScale});
  cuda::SgdArgs b;
  b.momentum = a.momentum;
  b.weightDecay = a.weightDecay;
  b.lr = glr.get();
  b.gradScale = gscale.get();
  std::vector<Floats> param(k), buf(k);
  std::vector<std::unique_ptr<DeviceArray<float>>> gp(k), gbuf(k), gg(k);
  for (size_t t = 0; t < k; ++t) {
    param[t] = randomFloats(sizes[t], -1, 1, 670 + static_cast<uint32_t>(t));
    buf[t] = Floats(static_cast<size_t>(sizes[t]), 0.0f);
    gp[t] = std::make_unique<DeviceArray<float>>(param[t]);
    gbuf[t] = std::make_unique<DeviceArray<float>>(buf[t]);
  }
  for (int step = 1; step <= 3; ++step) {
    std::vector<Floats> grad(k);
    std::vector<cpu::SgdTensor> cpuTensors(k);
    std::vector<cuda::SgdTensor> gpuTensors(k);
    for (size_t t = 0; t < k; ++t) {
      grad[t] = randomFloats(sizes[t], -1, 1, 9000 * static_cast<uint32_t>(step) + t);
      gg[t] = std::make_unique<DeviceArray<float>>(grad[t]);
      cpuTensors[t] = {sizes[t], param[t].data(), grad[t].data(), buf[t].data()};
      gpuTensors[t] = {sizes[t], gp[t]->get(), gg[t]->get(), gbuf[t]->get()};
    }
    cpu::sgd(a, cpuTensors.data(), k);
    ASSERT_EQ(cuda::sgd(b, gpuTensors.data(), k, stream), cudaSuccess);
    for (size_t t = 0; t < k; ++t) {
      const std::string at =
          " of tensor " + std::to_string(t) + " after step " + std::to_string(step);
      expectClose(param[t], gp[t]->host(), "sgd param" + at, 1e-7f, 1e-6f);
      expectClose(buf[t], gbuf[t]->host(), "sgd buffer" + at, 1e-7f, 1e-6f);
    }
  }
}

} // namespace
