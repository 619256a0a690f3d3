//===- CudaReduceAndNormKernelsTest.cpp - Softmax, norms and reductions ---===//
//
// The CUDA softmax, top-k routing mask, layer norm and RMS norm (and their gradients) against
// the CPU kernels within f32 tolerances; the sums over dims, the bucket packing and the decode
// programs' running sums bit for bit; launchers refusing bad shapes.
//
// Built only where CMake found the CUDA toolkit; on a machine without a GPU every test is
// skipped with "skipped: no CUDA device" and the reason, never passed.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cuda/CudaKernels.h"
#include "test/unit/CudaKernelsTestSupport.h"
#include "test/unit/DeviceArray.h"
#include "test/unit/KernelShapes.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace cpu = tessel::cpu;
namespace cuda = tessel::cuda;

namespace {

using namespace tessel::test;

TEST_F(CudaKernels, SoftmaxAndGradMatchCpu) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 1021}, {5, 3}, {3, 4099}}) {
    const Floats x = randomFloats(rows * cols, -5, 5, 8), dy = randomFloats(rows * cols, -1, 1, 9);
    Floats y(rows * cols), dx(rows * cols);
    cpu::softmax(rows, cols, x.data(), y.data());
    cpu::softmaxGrad(rows, cols, y.data(), dy.data(), dx.data());
    DeviceArray<float> gx(x), gy(rows * cols), gdy(dy), gdx(rows * cols), gyRef(y);
    ASSERT_EQ(cuda::softmax(rows, cols, gx.get(), gy.get(), stream), cudaSuccess);
    ASSERT_EQ(cuda::softmaxGrad(rows, cols, gyRef.get(), gdy.get(), gdx.get(), stream),
              cudaSuccess);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    expectClose(y, gy.host(), "softmax " + shape, 1e-6f);
    expectClose(dx, gdx.host(), "softmax_grad " + shape, 1e-6f);
  }
}

TEST_F(CudaKernels, TopKMaskMatchesCpu) {
  for (auto [rows, cols, k] :
       {std::tuple<int64_t, int64_t, int64_t>{1001, 8, 2}, {7, 3, 3}, {65, 64, 5}}) {
    Floats x = randomFloats(rows * cols, -1, 1, 14);
    x[0] = x[1]; // a tie, which goes to the lower column on both devices
    Floats y(rows * cols);
    cpu::topKMask(rows, cols, k, x.data(), y.data());
    DeviceArray<float> gx(x), gy(rows * cols);
    ASSERT_EQ(cuda::topKMask(rows, cols, k, gx.get(), gy.get(), stream), cudaSuccess);
    expectClose(y, gy.host(), "top_k_mask " + std::to_string(rows) + "x" + std::to_string(cols), 0,
                0);
  }
}

TEST_F(CudaKernels, LayerNormForwardAndBackwardMatchCpu) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{67, 771}, {3, 5}, {301, 33}}) {
    const int64_t n = rows * cols;
    const Floats x = randomFloats(n, -2, 3, 10), g = randomFloats(cols, 0.5f, 1.5f, 11),
                 b = randomFloats(cols, -0.5f, 0.5f, 12), dy = randomFloats(n, -1, 1, 13);
    const float eps = 1e-5f;
    Floats y(n), dx(n), dg(cols), db(cols);
    cpu::layerNorm(rows, cols, x.data(), g.data(), b.data(), eps, y.data());
    cpu::layerNormGrad(rows, cols, x.data(), g.data(), dy.data(), eps, dx.data(), dg.data(),
                       db.data());
    DeviceArray<float> gx(x), gg(g), gb(b), gdy(dy), gy(n), gdx(n), gdg(cols), gdb(cols),
        work(cuda::normGradWorkspace(rows, cols));
    ASSERT_EQ(cuda::layerNorm(rows, cols, gx.get(), gg.get(), gb.get(), eps, gy.get(), stream),
              cudaSuccess);
    ASSERT_EQ(cuda::layerNormGrad(rows, cols, gx.get(), gg.get(), gdy.get(), eps, gdx.get(),
                                  gdg.get(), gdb.get(), work.get(), stream),
              cudaSuccess);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    expectClose(y, gy.host(), "layernorm " + shape);
    expectClose(dx, gdx.host(), "layernorm_grad dx " + shape, 1e-4f);
    expectClose(dg, gdg.host(), "layernorm_grad dg " + shape, 1e-4f);
    expectClose(db, gdb.host(), "layernorm_grad db " + shape, 1e-4f);
  }
}

TEST_F(CudaKernels, RmsNormForwardAndBackwardMatchCpu) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{67, 771}, {3, 5}, {301, 33}}) {
    const int64_t n = rows * cols;
    const Floats x = randomFloats(n, -2, 3, 14), g = randomFloats(cols, 0.5f, 1.5f, 15),
                 dy = randomFloats(n, -1, 1, 16);
    const float eps = 1e-6f;
    Floats y(n), dx(n), dg(cols);
    cpu::rmsNorm(rows, cols, x.data(), g.data(), eps, y.data());
    cpu::rmsNormGrad(rows, cols, x.data(), g.data(), dy.data(), eps, dx.data(), dg.data());
    DeviceArray<float> gx(x), gg(g), gdy(dy), gy(n), gdx(n), gdg(cols),
        work(cuda::normGradWorkspace(rows, cols));
    ASSERT_EQ(cuda::rmsNorm(rows, cols, gx.get(), gg.get(), eps, gy.get(), stream), cudaSuccess);
    ASSERT_EQ(cuda::rmsNormGrad(rows, cols, gx.get(), gg.get(), gdy.get(), eps, gdx.get(),
                                gdg.get(), work.get(), stream),
              cudaSuccess);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    expectClose(y, gy.host(), "rmsnorm " + shape);
    expectClose(dx, gdx.host(), "rmsnorm_grad dx " + shape, 1e-4f);
    expectClose(dg, gdg.host(), "rmsnorm_grad dg " + shape, 1e-4f);
  }
}

//===----------------------------------------------------------------------===//
// Reductions, buckets
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, ReduceMatchesCpuBitForBit) {
  struct Case {
    cpu::Shape shape;
    cpu::Strides so;
    int64_t elements;
  };
  // Summed dims: the first (a bias gradient's), the middle two, the last, all; then sums of
  // several runs (cpu::kReduceRun terms each): a bias gradient's columns over 1000 rows, rows
  // of 1000, and rows of 7 whose runs span several rows.
  const cpu::Shape small = shapeOf({5, 7, 9, 3});
  const Case cases[] = {{small, stridesOf({0, 27, 3, 1}), 189},
                        {small, stridesOf({3, 0, 0, 1}), 15},
                        {small, stridesOf({63, 9, 1, 0}), 315},
                        {small, stridesOf({0, 0, 0, 0}), 1},
                        {small, stridesOf({1, 0, 5, 0}), 45},
                        {shapeOf({1000, 67}), stridesOf({0, 1}), 67},
                        {shapeOf({67, 1000}), stridesOf({1, 0}), 67},
                        {shapeOf({300, 3, 7}), stridesOf({0, 1, 0}), 3}};
  int index = 0;
  for (const Case &c : cases) {
    const cpu::Shape &shape = c.shape;
    const cpu::Strides &so = c.so;
    const Floats x = randomFloats(shape.numElements(), -3, 3, 600 + index);
    DeviceArray<float> gx(x);
    Floats ref(c.elements);
    cpu::reduceSum(shape, x.data(), so, c.elements, 0.25f, ref.data());
    Floats before = randomFloats(c.elements, -1, 1, 601 + index), refSum = before;
    cpu::reduceSum(shape, x.data(), so, c.elements, 0.25f, refSum.data(), true);
    // One thread per output (no workspace), and each output's runs in parallel: both the CPU's
    // order and precision, so the same bits.
    const int64_t workspaceBytes = cuda::reduceSumWorkspaceBytes(shape, so);
    EXPECT_EQ(workspaceBytes > 0, shape.numElements() / c.elements > cpu::kReduceRun);
    DeviceArray<double> workspace(static_cast<size_t>(std::max<int64_t>(workspaceBytes, 8) / 8));
    for (void *w : {static_cast<void *>(nullptr), static_cast<void *>(workspace.get())}) {
      const std::string what = "reduce case " + std::to_string(index) +
                               (w ? " (runs in parallel)" : " (one thread per output)");
      DeviceArray<float> gout(c.elements);
      ASSERT_EQ(cuda::reduceSum(shape, gx.get(), so, 0.25f, gout.get(), stream, false, w),
                cudaSuccess);
      expectClose(ref, gout.host(), what, 0, 0);
      // Added to what is there, as the CPU adds it.
      DeviceArray<float> gsum(before);
      ASSERT_EQ(cuda::reduceSum(shape, gx.get(), so, 0.25f, gsum.get(), stream, true, w),
                cudaSuccess);
      expectClose(refSum, gsum.host(), what + ", accumulating", 0, 0);
    }
    ++index;
  }
}

TEST_F(CudaKernels, PackMatchesCpu) {
  const int64_t ways = 3, outers[] = {2, 5, 1}, chunks[] = {7, 1, 4};
  std::vector<Floats> inputs;
  std::vector<const float *> host;
  std::vector<std::unique_ptr<DeviceArray<float>>> device;
  std::vector<const float *> onDevice;
  int64_t part = 0;
  for (int i = 0; i < 3; ++i) {
    inputs.push_back(randomFloats(outers[i] * ways * chunks[i], -1, 1, 610 + i));
    part += outers[i] * chunks[i];
  }
  for (int i = 0; i < 3; ++i) {
    host.push_back(inputs[i].data());
    device.push_back(std::make_unique<DeviceArray<float>>(inputs[i]));
    onDevice.push_back(device.back()->get());
  }
  Floats ref(ways * part);
  cpu::pack(3, host.data(), outers, chunks, ways, ref.data());
  DeviceArray<float> y(ways * part);
  ASSERT_EQ(cuda::pack(3, onDevice.data(), outers, chunks, ways, y.get(), stream), cudaSuccess);
  expectClose(ref, y.host(), "pack", 0, 0);
}

//===----------------------------------------------------------------------===//
// Running sums of the decode programs
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, RunningSumMatchesCpu) {
  // A chunk with padding, sequences continuing and starting afresh, one naming no block.
  const int64_t batch = 5, seq = 6, width = 7, blocks = 9, maxBlocks = 2;
  std::mt19937 rng(640);
  std::vector<int32_t> positions(batch * seq, -1), table(batch * maxBlocks);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t start = b % 2 ? 0 : 3 + b, count = 2 + b % 4;
    for (int64_t s = 0; s < std::min(count, seq); ++s)
      positions[b * seq + s] = static_cast<int32_t>(start + s);
    table[b * maxBlocks] = static_cast<int32_t>(b == 3 ? -1 : 2 * b % blocks);
  }
  const Floats x = randomFloats(batch * seq * width, -2, 2, 641);
  Floats totals = randomFloats(blocks * width, -5, 5, 642);
  for (bool inclusive : {false, true}) {
    const cpu::RunningSumArgs a{batch, seq, width, blocks, maxBlocks, inclusive};
    Floats y(x.size()), t = totals;
    cpu::runningSum(a, x.data(), positions.data(), table.data(), y.data(), t.data());
    DeviceArray<float> gx(x), gy(x.size()), gt(totals);
    DeviceArray<int32_t> gpositions(positions), gtable(table);
    ASSERT_EQ(
        cuda::runningSum(a, gx.get(), gpositions.get(), gtable.get(), gy.get(), gt.get(), stream),
        cudaSuccess);
    expectClose(y, gy.host(), "running sums", 0, 0);
    expectClose(t, gt.host(), "running totals", 0, 0);
  }
}

//===----------------------------------------------------------------------===//
// Refusals
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, LaunchersRefuseBadShapes) {
  DeviceArray<float> x(4), y(4);
  EXPECT_EQ(cuda::softmax(0, 4, x.get(), y.get(), stream), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::layerNormGrad(2, 2, x.get(), x.get(), x.get(), 1e-5f, y.get(), y.get(), y.get(),
                                nullptr, stream),
            cudaErrorInvalidValue);
  cpu::Shape tooDeep;
  tooDeep.rank = cpu::kMaxRank + 1;
  EXPECT_EQ(cuda::stridedCopy(tooDeep, x.get(), cpu::Strides{}, y.get(), stream),
            cudaErrorInvalidValue);
}

} // namespace
