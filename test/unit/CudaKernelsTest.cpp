//===- CudaKernelsTest.cpp - The CUDA kernels against the CPU kernels -----===//
//
// Each kernel of kernels/cuda runs on random inputs of odd shapes and is compared with its CPU
// counterpart of kernels/cpu on the same inputs, within f32 tolerances (the two add in
// different orders). Built only where CMake found the CUDA toolkit; on a machine without a GPU
// every test is skipped with "skipped: no CUDA device" and the reason, never passed.
//
//===----------------------------------------------------------------------===//

#include "common/support/Float16.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cuda/CudaKernels.h"
#include "test/unit/CudaPresence.h"
#include "test/unit/DeviceArray.h"
#include "test/unit/KernelShapes.h"
#include "test/unit/PagedScene.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace cpu = tessel::cpu;
namespace cuda = tessel::cuda;

namespace {

using Floats = std::vector<float>;

using tessel::test::attentionOf;
using tessel::test::describe;
using tessel::test::randomFloats;
using tessel::test::shapeOf;
using tessel::test::stridesOf;

using tessel::test::DeviceArray;

/// |gpu - cpu| <= atol + rtol |cpu| everywhere (f32: the kernels add in different orders).
void expectClose(const Floats &cpuValues, const Floats &gpuValues, const std::string &what,
                 float atol = 1e-5f, float rtol = 1e-4f) {
  ASSERT_EQ(cpuValues.size(), gpuValues.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < cpuValues.size(); ++i) {
    const float ref = cpuValues[i], got = gpuValues[i];
    // NaN where the CPU has NaN; equal values, infinities of one sign among them.
    if ((std::isnan(ref) && std::isnan(got)) || got == ref)
      continue;
    if (std::fabs(got - ref) <= atol + rtol * std::fabs(ref))
      continue;
    ADD_FAILURE() << what << ": element " << i << " is " << got << " on the GPU, " << ref
                  << " on the CPU";
    if (++reported == 5)
      return;
  }
}

class CudaKernels : public ::testing::Test {
protected:
  void SetUp() override {
    const std::string why = tessel::test::noCudaDevice();
    if (!why.empty())
      GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  }
  void TearDown() override {
    if (blas_.handle)
      blas_.lt->cublasLtDestroy(blas_.handle);
    cudaFree(blas_.workspace);
  }
  /// cuBLASLt, a handle and a workspace, as the device makes them, created on first use.
  const cuda::BlasContext &blas() {
    if (!blas_.handle) {
      std::string why;
      blas_.lt = cuda::loadBlasLt(why);
      EXPECT_TRUE(blas_.lt) << why;
      if (!blas_.lt)
        return blas_;
      EXPECT_EQ(blas_.lt->cublasLtCreate(&blas_.handle), CUBLAS_STATUS_SUCCESS);
      blas_.workspaceBytes = cuda::kBlasWorkspaceBytes;
      blas_.plans = &plans_;
      EXPECT_EQ(cudaMalloc(&blas_.workspace, blas_.workspaceBytes), cudaSuccess);
    }
    return blas_;
  }
  cudaStream_t stream = nullptr; // the legacy default stream

private:
  cuda::BlasContext blas_;
  cuda::BlasPlans plans_;
};

const cpu::UnaryKind kUnaryKinds[] = {
    cpu::UnaryKind::Neg,    cpu::UnaryKind::Exp,     cpu::UnaryKind::Log,    cpu::UnaryKind::Sqrt,
    cpu::UnaryKind::Rsqrt,  cpu::UnaryKind::Tanh,    cpu::UnaryKind::Gelu,   cpu::UnaryKind::Silu,
    cpu::UnaryKind::Relu,   cpu::UnaryKind::Sigmoid, cpu::UnaryKind::Square, cpu::UnaryKind::Pow,
    cpu::UnaryKind::GeluErf};

/// Inputs in the function's domain: positive for log, the roots and pow.
Floats unaryInputs(cpu::UnaryKind kind, size_t n, uint32_t seed) {
  const bool positive = kind == cpu::UnaryKind::Log || kind == cpu::UnaryKind::Sqrt ||
                        kind == cpu::UnaryKind::Rsqrt || kind == cpu::UnaryKind::Pow;
  return positive ? randomFloats(n, 0.1f, 3.0f, seed) : randomFloats(n, -4.0f, 4.0f, seed);
}

TEST_F(CudaKernels, FillAndPositions) {
  const int64_t n = 1237;
  DeviceArray<float> y(n), p(n);
  ASSERT_EQ(cuda::fill(n, 2.5f, y.get(), stream), cudaSuccess);
  ASSERT_EQ(cuda::positions(n, p.get(), stream), cudaSuccess);
  Floats positions(n);
  cpu::positions(n, positions.data());
  expectClose(Floats(n, 2.5f), y.host(), "fill", 0, 0);
  expectClose(positions, p.host(), "positions", 0, 0);
}

TEST_F(CudaKernels, UnaryMatchesCpu) {
  const int64_t n = 4099;
  for (cpu::UnaryKind kind : kUnaryKinds) {
    const Floats x = unaryInputs(kind, n, 7 + static_cast<int>(kind));
    Floats ref(n);
    cpu::unary(kind, n, x.data(), ref.data(), 2.5f);
    DeviceArray<float> dx(x), dy(n);
    ASSERT_EQ(cuda::unary(kind, n, dx.get(), dy.get(), 2.5f, stream), cudaSuccess);
    expectClose(ref, dy.host(), "unary " + std::to_string(static_cast<int>(kind)));
  }
}

TEST_F(CudaKernels, UnaryGradMatchesCpu) {
  const int64_t n = 2053;
  for (cpu::UnaryKind kind : kUnaryKinds) {
    const Floats x = unaryInputs(kind, n, 11 + static_cast<int>(kind));
    const Floats dy = randomFloats(n, -1.0f, 1.0f, 3);
    Floats y(n), ref(n);
    cpu::unary(kind, n, x.data(), y.data(), 2.5f);
    cpu::unaryGrad(kind, n, x.data(), y.data(), dy.data(), ref.data(), 2.5f);
    DeviceArray<float> gx(x), gy(y), gdy(dy), gdx(n);
    ASSERT_EQ(cuda::unaryGrad(kind, n, gx.get(), gy.get(), gdy.get(), gdx.get(), 2.5f, stream),
              cudaSuccess);
    expectClose(ref, gdx.host(), "unary_grad " + std::to_string(static_cast<int>(kind)));
  }
}

TEST_F(CudaKernels, BinaryBroadcastsAndPermutesAsCpu) {
  // [3, 5, 7]: a is stored as [7, 3, 5] (permuted), b is [3, 7] broadcast along dim 1. Small
  // integers, so the comparisons meet equal values too.
  const cpu::Shape shape = shapeOf({3, 5, 7});
  const cpu::Strides sa = stridesOf({5, 1, 15}), sb = stridesOf({7, 0, 1});
  Floats a = randomFloats(105, -3, 3, 1), b = randomFloats(21, -3, 3, 2);
  for (float &v : a)
    v = std::round(v);
  for (float &v : b)
    v = std::round(v);
  const cpu::BinaryKind kinds[] = {cpu::BinaryKind::Add, cpu::BinaryKind::Sub, cpu::BinaryKind::Mul,
                                   cpu::BinaryKind::Div, cpu::BinaryKind::Lt,  cpu::BinaryKind::Le,
                                   cpu::BinaryKind::Gt,  cpu::BinaryKind::Ge,  cpu::BinaryKind::Eq,
                                   cpu::BinaryKind::Ne};
  DeviceArray<float> da(a), db(b), out(105);
  for (cpu::BinaryKind kind : kinds) {
    Floats ref(105);
    cpu::binary(kind, shape, a.data(), sa, b.data(), sb, ref.data());
    ASSERT_EQ(cuda::binary(kind, shape, da.get(), sa, db.get(), sb, out.get(), stream),
              cudaSuccess);
    expectClose(ref, out.host(), "binary " + std::to_string(static_cast<int>(kind)));
  }
}

TEST_F(CudaKernels, SelectAndStridedCopyMatchCpu) {
  const cpu::Shape shape = shapeOf({4, 9, 5});
  const cpu::Strides dense = cpu::denseStrides(shape), transposed = stridesOf({1, 20, 4});
  const cpu::Strides rowBroadcast = stridesOf({0, 5, 1});
  Floats c = randomFloats(180, -1, 1, 4), a = randomFloats(180, -1, 1, 5),
         b = randomFloats(45, -1, 1, 6);
  for (float &v : c)
    v = v > 0 ? 1.0f : 0.0f;
  Floats ref(180), refCopy(180);
  cpu::select(shape, c.data(), dense, a.data(), transposed, b.data(), rowBroadcast, ref.data());
  cpu::stridedCopy(shape, a.data(), transposed, refCopy.data());
  DeviceArray<float> dc(c), da(a), dbb(b), out(180), copied(180);
  ASSERT_EQ(cuda::select(shape, dc.get(), dense, da.get(), transposed, dbb.get(), rowBroadcast,
                         out.get(), stream),
            cudaSuccess);
  ASSERT_EQ(cuda::stridedCopy(shape, da.get(), transposed, copied.get(), stream), cudaSuccess);
  expectClose(ref, out.host(), "select", 0, 0);
  expectClose(refCopy, copied.host(), "copy", 0, 0);
}

TEST_F(CudaKernels, DenseElementwiseMatchesCpuAtAnyAlignment) {
  // Dense operands run in groups of eight, 16 bytes at a time where every operand is aligned:
  // at offset 0 the whole groups take that path and a tail of 3 the scalar one; at offset 1
  // (one float off the grid) everything is scalar. Every path gives the CPU's values.
  const int64_t n = 4099;
  const cpu::Shape shape = shapeOf({n});
  const cpu::Strides dense = cpu::denseStrides(shape);
  const Floats x = randomFloats(n + 1, -3, 3, 670), y = randomFloats(n + 1, -3, 3, 671);
  Floats c = randomFloats(n + 1, -1, 1, 672);
  for (float &v : c)
    v = v > 0 ? 1.0f : 0.0f;
  DeviceArray<float> gx(x), gy(y), gc(c), out(n + 1);
  for (int64_t offset : {0, 1}) {
    const std::string at = " at offset " + std::to_string(offset);
    const float *hx = x.data() + offset, *hy = y.data() + offset, *hc = c.data() + offset;
    float *dout = out.get() + offset;
    auto got = [&] {
      const Floats all = out.host();
      return Floats(all.begin() + offset, all.begin() + offset + n);
    };
    Floats ref(n), grad(n);
    cpu::unary(cpu::UnaryKind::Gelu, n, hx, ref.data(), 0.0f);
    ASSERT_EQ(cuda::unary(cpu::UnaryKind::Gelu, n, gx.get() + offset, dout, 0.0f, stream),
              cudaSuccess);
    expectClose(ref, got(), "gelu" + at);
    cpu::unaryGrad(cpu::UnaryKind::Gelu, n, hx, ref.data(), hy, grad.data(), 0.0f);
    DeviceArray<float> gref(ref);
    ASSERT_EQ(cuda::unaryGrad(cpu::UnaryKind::Gelu, n, gx.get() + offset, gref.get(),
                              gy.get() + offset, dout, 0.0f, stream),
              cudaSuccess);
    expectClose(grad, got(), "gelu_grad" + at);
    for (cpu::BinaryKind kind : {cpu::BinaryKind::Add, cpu::BinaryKind::Mul, cpu::BinaryKind::Lt}) {
      cpu::binary(kind, shape, hx, dense, hy, dense, ref.data());
      ASSERT_EQ(cuda::binary(kind, shape, gx.get() + offset, dense, gy.get() + offset, dense, dout,
                             stream),
                cudaSuccess);
      expectClose(ref, got(), "binary " + std::to_string(static_cast<int>(kind)) + at, 0, 0);
    }
    cpu::select(shape, hc, dense, hx, dense, hy, dense, ref.data());
    ASSERT_EQ(cuda::select(shape, gc.get() + offset, dense, gx.get() + offset, dense,
                           gy.get() + offset, dense, dout, stream),
              cudaSuccess);
    expectClose(ref, got(), "select" + at, 0, 0);
    ASSERT_EQ(cuda::stridedCopy(shape, gx.get() + offset, dense, dout, stream), cudaSuccess);
    expectClose(Floats(hx, hx + n), got(), "dense copy" + at, 0, 0);
    ASSERT_EQ(cuda::fill(n, -1.25f, dout, stream), cudaSuccess);
    expectClose(Floats(n, -1.25f), got(), "fill" + at, 0, 0);
  }
  // In place, as `accumulate` adds into its output.
  Floats sum(n);
  cpu::binary(cpu::BinaryKind::Add, shape, x.data(), dense, y.data(), dense, sum.data());
  ASSERT_EQ(
      cuda::binary(cpu::BinaryKind::Add, shape, gx.get(), dense, gy.get(), dense, gx.get(), stream),
      cudaSuccess);
  const Floats inPlace = gx.host();
  expectClose(sum, Floats(inPlace.begin(), inPlace.begin() + n), "binary in place", 0, 0);
}

/// The first and one past the last offset that `strides` reach over `shape` (negative strides
/// reach below 0).
std::pair<int64_t, int64_t> spanOf(const cpu::Shape &shape, const cpu::Strides &strides) {
  int64_t low = 0, high = 0;
  for (int d = 0; d < shape.rank; ++d) {
    const int64_t reach = (shape.size[d] - 1) * strides.stride[d];
    (reach < 0 ? low : high) += reach;
  }
  return {low, high + 1};
}

TEST_F(CudaKernels, BroadcastElementwiseMatchesCpuOnEveryPath) {
  // Operands that each read the innermost dim in order or repeat one value along it run as
  // rows in groups of eight (16 bytes at a time where every group starts aligned, so at offset
  // 0 in most cases here and never at offset 1); others run element by element. Offsets are
  // computed in 32 bits unless a stride is negative. Every path gives the CPU's bits.
  struct Case {
    const char *what;
    cpu::Shape shape;
    cpu::Strides sa, sb;
  };
  const Case cases[] = {
      {"bias", shapeOf({6, 5, 24}), stridesOf({120, 24, 1}), stridesOf({0, 0, 1})},
      {"bias on odd rows", shapeOf({37, 13}), stridesOf({13, 1}), stridesOf({0, 1})},
      {"a value per row", shapeOf({37, 16}), stridesOf({16, 1}), stridesOf({1, 0})},
      {"permuted rows", shapeOf({4, 6, 16}), stridesOf({16, 64, 1}), stridesOf({0, 16, 1})},
      {"short rows", shapeOf({50, 3}), stridesOf({3, 1}), stridesOf({0, 1})},
      {"scalar", shapeOf({1000}), stridesOf({1}), stridesOf({0})},
      {"reversed rows", shapeOf({9, 24}), stridesOf({-24, 1}), stridesOf({0, 1})},
      {"transposed", shapeOf({7, 9}), stridesOf({1, 7}), stridesOf({9, 1})},
      {"reversed", shapeOf({40}), stridesOf({-1}), stridesOf({1})},
  };
  uint32_t seed = 700;
  for (const Case &t : cases) {
    const int64_t n = t.shape.numElements();
    const auto [lowA, endA] = spanOf(t.shape, t.sa);
    const auto [lowB, endB] = spanOf(t.shape, t.sb);
    Floats a = randomFloats(endA - lowA + 1, -3, 3, seed++),
           b = randomFloats(endB - lowB + 1, -3, 3, seed++),
           c = randomFloats(endA - lowA + 1, -1, 1, seed++);
    for (float &v : a)
      v = std::round(v * 4) / 4; // equal values too, for the comparisons
    for (float &v : b)
      v = std::round(v * 4) / 4;
    for (float &v : c)
      v = v > 0 ? 1.0f : 0.0f;
    DeviceArray<float> ga(a), gb(b), gc(c), out(n + 1);
    for (int64_t offset : {0, 1}) {
      const std::string at = std::string(" ") + t.what + " at offset " + std::to_string(offset);
      // Element 0 of each operand, `offset` elements into its buffer.
      const float *ha = a.data() + offset - lowA, *hb = b.data() + offset - lowB,
                  *hc = c.data() + offset - lowA;
      const float *da = ga.get() + offset - lowA, *db = gb.get() + offset - lowB,
                  *dc = gc.get() + offset - lowA;
      float *dout = out.get() + offset;
      auto got = [&] {
        const Floats all = out.host();
        return Floats(all.begin() + offset, all.begin() + offset + n);
      };
      Floats ref(n);
      for (cpu::BinaryKind kind : {cpu::BinaryKind::Add, cpu::BinaryKind::Sub, cpu::BinaryKind::Mul,
                                   cpu::BinaryKind::Lt}) {
        cpu::binary(kind, t.shape, ha, t.sa, hb, t.sb, ref.data());
        ASSERT_EQ(cuda::binary(kind, t.shape, da, t.sa, db, t.sb, dout, stream), cudaSuccess);
        expectClose(ref, got(), "binary " + std::to_string(static_cast<int>(kind)) + at, 0, 0);
      }
      cpu::select(t.shape, hc, t.sa, hb, t.sb, ha, t.sa, ref.data());
      ASSERT_EQ(cuda::select(t.shape, dc, t.sa, db, t.sb, da, t.sa, dout, stream), cudaSuccess);
      expectClose(ref, got(), "select" + at, 0, 0);
    }
  }
}

/// `values` rounded to bf16 (to nearest even), as bits.
std::vector<uint16_t> bf16Bits(const Floats &values) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    bits[i] = tessel::floatToBf16(values[i]);
  return bits;
}

Floats widened(const std::vector<uint16_t> &bits) {
  Floats values(bits.size());
  for (size_t i = 0; i < bits.size(); ++i)
    values[i] = tessel::bf16ToFloat(bits[i]);
  return values;
}

/// Element i of `got` (bits of `n` outputs from `offset`) is `want[i]`'s bits.
void expectBits(const std::vector<uint16_t> &want, const std::vector<uint16_t> &got, int64_t offset,
                const std::string &what) {
  ASSERT_GE(static_cast<int64_t>(got.size()), offset + static_cast<int64_t>(want.size())) << what;
  int reported = 0;
  for (size_t i = 0; i < want.size() && reported < 5; ++i)
    if (got[offset + i] != want[i]) {
      ADD_FAILURE() << what << ": element " << i << " has bits " << got[offset + i] << ", want "
                    << want[i];
      ++reported;
    }
}

TEST_F(CudaKernels, Bf16ElementwiseKeepsTheBitsOnEveryPath) {
  // A call whose operands are all bf16 runs on bf16 pointers (16 bytes a group where aligned:
  // at offset 0 here, never at offset 1); one with an f32 operand runs on operands typed per
  // call. Both compute in f32 and round to nearest even, so both give the bits of the CPU's
  // f32 result rounded, and of each other.
  constexpr auto kBf16 = cuda::DType::BF16;
  auto in = [](const uint16_t *p) { return cuda::ConstFloats(p, kBf16); };
  auto out = [](uint16_t *p) { return cuda::Floats(p, kBf16); };
  struct Case {
    const char *what;
    cpu::Shape shape;
    cpu::Strides sb;
  };
  const Case cases[] = {
      // GPT-2's bias add, smaller: [batch, seq, heads, head] + [heads, head].
      {"bias", shapeOf({3, 5, 4, 8}), stridesOf({0, 0, 8, 1})},
      {"bias on odd rows", shapeOf({7, 13}), stridesOf({0, 1})},
      {"dense", shapeOf({4099}), stridesOf({1})},
      {"transposed", shapeOf({9, 11}), stridesOf({1, 9})},
  };
  uint32_t seed = 800;
  for (const Case &t : cases) {
    const int64_t n = t.shape.numElements();
    const cpu::Strides sa = cpu::denseStrides(t.shape);
    const int64_t nb = spanOf(t.shape, t.sb).second;
    const std::vector<uint16_t> a = bf16Bits(randomFloats(n + 1, -3, 3, seed++)),
                                b = bf16Bits(randomFloats(nb + 1, -3, 3, seed++));
    const Floats wa = widened(a), wb = widened(b);
    DeviceArray<uint16_t> ga(a), gb(b), gout(n + 1);
    DeviceArray<float> gwb(wb);
    for (int64_t offset : {0, 1}) {
      const std::string at = std::string(" ") + t.what + " at offset " + std::to_string(offset);
      Floats ref(n);
      for (cpu::BinaryKind kind : {cpu::BinaryKind::Add, cpu::BinaryKind::Mul}) {
        const std::string what = "binary " + std::to_string(static_cast<int>(kind)) + at;
        cpu::binary(kind, t.shape, wa.data() + offset, sa, wb.data() + offset, t.sb, ref.data());
        ASSERT_EQ(cuda::binary(kind, t.shape, in(ga.get() + offset), sa, in(gb.get() + offset),
                               t.sb, out(gout.get() + offset), stream),
                  cudaSuccess);
        expectBits(bf16Bits(ref), gout.host(), offset, what);
        ASSERT_EQ(cuda::binary(kind, t.shape, in(ga.get() + offset), sa, gwb.get() + offset, t.sb,
                               out(gout.get() + offset), stream),
                  cudaSuccess);
        expectBits(bf16Bits(ref), gout.host(), offset, what + " (b in f32)");
      }
    }
  }
  // The maps, a fill and the converting copies, dense, of odd length.
  const int64_t n = 4099;
  const std::vector<uint16_t> x = bf16Bits(randomFloats(n + 1, -4, 4, 810)),
                              dy = bf16Bits(randomFloats(n + 1, -1, 1, 811));
  const Floats wx = widened(x), wdy = widened(dy), raw = randomFloats(n + 1, -4, 4, 812);
  DeviceArray<uint16_t> gx(x), gdy(dy), gy(n + 1), gdx(n + 1), gdxMixed(n + 1);
  DeviceArray<float> gwdy(wdy), graw(raw), gf(n + 1);
  for (int64_t offset : {0, 1}) {
    const std::string at = " at offset " + std::to_string(offset);
    const int64_t o = offset;
    Floats y(n), dx(n);
    ASSERT_EQ(
        cuda::unary(cpu::UnaryKind::Gelu, n, in(gx.get() + o), out(gy.get() + o), 0.0f, stream),
        cudaSuccess);
    cpu::unary(cpu::UnaryKind::Gelu, n, wx.data() + o, y.data(), 0.0f);
    const std::vector<uint16_t> gotY = gy.host();
    const Floats gotYValues =
        widened(std::vector<uint16_t>(gotY.begin() + o, gotY.begin() + o + n));
    expectClose(y, gotYValues, "gelu" + at, 1e-2f, 8e-3f);
    // The derivative from x and the (bf16) y, all bf16, and again with dy in f32.
    ASSERT_EQ(cuda::unaryGrad(cpu::UnaryKind::Gelu, n, in(gx.get() + o), in(gy.get() + o),
                              in(gdy.get() + o), out(gdx.get() + o), 0.0f, stream),
              cudaSuccess);
    ASSERT_EQ(cuda::unaryGrad(cpu::UnaryKind::Gelu, n, in(gx.get() + o), in(gy.get() + o),
                              gwdy.get() + o, out(gdxMixed.get() + o), 0.0f, stream),
              cudaSuccess);
    const std::vector<uint16_t> gotDx = gdx.host();
    expectBits(std::vector<uint16_t>(gotDx.begin() + o, gotDx.begin() + o + n), gdxMixed.host(), o,
               "gelu_grad, typed against typed per call" + at);
    cpu::unaryGrad(cpu::UnaryKind::Gelu, n, wx.data() + o, gotYValues.data(), wdy.data() + o,
                   dx.data(), 0.0f);
    expectClose(dx, widened(std::vector<uint16_t>(gotDx.begin() + o, gotDx.begin() + o + n)),
                "gelu_grad" + at, 1e-2f, 8e-3f);
    ASSERT_EQ(cuda::fill(n, 0.3f, out(gdx.get() + o), stream), cudaSuccess);
    expectBits(std::vector<uint16_t>(n, tessel::floatToBf16(0.3f)), gdx.host(), o, "fill" + at);
    // f32 to bf16 rounds, bf16 to f32 widens.
    const cpu::Shape flat = shapeOf({n});
    const cpu::Strides dense = cpu::denseStrides(flat);
    ASSERT_EQ(cuda::stridedCopy(flat, graw.get() + o, dense, out(gdx.get() + o), stream),
              cudaSuccess);
    expectBits(bf16Bits(Floats(raw.begin() + o, raw.begin() + o + n)), gdx.host(), o,
               "copy to bf16" + at);
    ASSERT_EQ(cuda::stridedCopy(flat, in(gx.get() + o), dense, gf.get() + o, stream), cudaSuccess);
    const Floats widenedBack = gf.host();
    expectClose(Floats(wx.begin() + o, wx.begin() + o + n),
                Floats(widenedBack.begin() + o, widenedBack.begin() + o + n), "copy to f32" + at, 0,
                0);
  }
}

TEST_F(CudaKernels, SixteenBitStridedCopyMovesBits) {
  const cpu::Shape shape = shapeOf({4, 9, 5});
  const cpu::Strides transposed = stridesOf({1, 20, 4});
  std::vector<uint16_t> x(180), ref(180);
  std::mt19937 rng(12);
  for (uint16_t &v : x)
    v = static_cast<uint16_t>(rng()); // every pattern, NaNs and subnormals too
  // The CPU's strided copy of the same positions, on the indices.
  Floats index(180), moved(180);
  for (size_t i = 0; i < index.size(); ++i)
    index[i] = static_cast<float>(i);
  cpu::stridedCopy(shape, index.data(), transposed, moved.data());
  for (size_t i = 0; i < ref.size(); ++i)
    ref[i] = x[static_cast<size_t>(moved[i])];
  DeviceArray<uint16_t> dx(x), dy(180);
  ASSERT_EQ(cuda::stridedCopyBits16(shape, dx.get(), transposed, dy.get(), stream), cudaSuccess);
  EXPECT_EQ(dy.host(), ref);
}

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

TEST_F(CudaKernels, CrossEntropyLossAndGradMatchCpu) {
  // Rows read one element at a time (1031) and in 16-byte groups (1032).
  for (const int64_t cols : {int64_t(1031), int64_t(1032)}) {
    const int64_t rows = 53;
    const Floats logits = randomFloats(rows * cols, -4, 4, 17);
    std::mt19937 rng(18);
    std::vector<int32_t> targets(rows);
    for (int32_t &t : targets)
      t = static_cast<int32_t>(rng() % cols);
    targets[5] = targets[40] = tessel::kernels::kIgnoredTarget; // rows that count nothing
    const Floats dloss = {0.75f};
    DeviceArray<float> gl(logits), gdloss(dloss), loss(1), dlogits(rows * cols),
        work(cuda::crossEntropyWorkspace(rows));
    DeviceArray<int32_t> gt(targets);
    DeviceArray<cuda::IdError> bad(1);
    for (bool scaled : {false, true}) {
      const double scale = 1.0 / 4096;
      float ref = 0;
      Floats refGrad(rows * cols);
      std::string error;
      if (scaled) {
        ASSERT_TRUE(
            cpu::crossEntropy(rows, cols, logits.data(), targets.data(), scale, &ref, error));
        ASSERT_TRUE(cpu::crossEntropyGrad(rows, cols, logits.data(), targets.data(), dloss.data(),
                                          scale, refGrad.data(), error));
      } else {
        ASSERT_TRUE(cpu::crossEntropy(rows, cols, logits.data(), targets.data(), &ref, error));
        ASSERT_TRUE(cpu::crossEntropyGrad(rows, cols, logits.data(), targets.data(), dloss.data(),
                                          refGrad.data(), error));
      }
      ASSERT_EQ(cuda::crossEntropy(rows, cols, gl.get(), gt.get(), scaled, scale, loss.get(),
                                   work.get(), bad.get(), stream),
                cudaSuccess);
      ASSERT_EQ(cuda::crossEntropyGrad(rows, cols, gl.get(), gt.get(), gdloss.get(), scaled, scale,
                                       dlogits.get(), bad.get(), stream),
                cudaSuccess);
      const std::string how = (scaled ? "scaled " : "mean ") + std::to_string(cols);
      expectClose({ref}, loss.host(), "cross_entropy " + how);
      expectClose(refGrad, dlogits.host(), "cross_entropy_grad " + how, 1e-7f);
      EXPECT_EQ(bad.host()[0].flag, 0);
    }
  }
}

TEST_F(CudaKernels, CrossEntropyRecordsAnOutOfRangeTarget) {
  const int64_t rows = 4, cols = 9;
  DeviceArray<float> logits(randomFloats(rows * cols, -1, 1, 19)), loss(1),
      work(cuda::crossEntropyWorkspace(rows));
  DeviceArray<int32_t> targets(std::vector<int32_t>{1, 2, 9, 0});
  DeviceArray<cuda::IdError> bad(1);
  ASSERT_EQ(cuda::crossEntropy(rows, cols, logits.get(), targets.get(), false, 0, loss.get(),
                               work.get(), bad.get(), stream),
            cudaSuccess);
  const cuda::IdError e = bad.host()[0];
  EXPECT_EQ(e.flag, 1);
  EXPECT_EQ(e.id, 9);
  EXPECT_EQ(e.position, 2);
  EXPECT_EQ(e.limit, 9);
  EXPECT_TRUE(std::isnan(loss.host()[0]));
}

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

//===----------------------------------------------------------------------===//
// Embedding, RoPE
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, EmbeddingAndGradMatchCpuOnARowBlock) {
  // This rank holds rows [14, 21) of a table of 35; ids repeat and fall on every rank's rows.
  const int64_t n = 211, rows = 7, cols = 45, first = 14, vocab = 35;
  std::mt19937 rng(400);
  std::vector<int32_t> ids(n);
  for (int32_t &id : ids)
    id = static_cast<int32_t>(rng() % vocab);
  ids[3] = 14;
  ids[4] = 20; // this rank's first and last rows
  const Floats table = randomFloats(rows * cols, -1, 1, 401),
               dout = randomFloats(n * cols, -1, 1, 402);
  Floats out(n * cols), dtable(rows * cols);
  std::string error;
  ASSERT_TRUE(
      cpu::embeddingRows(n, rows, cols, first, vocab, table.data(), ids.data(), out.data(), error));
  ASSERT_TRUE(cpu::embeddingGradRows(n, rows, cols, first, vocab, dout.data(), ids.data(),
                                     dtable.data(), error));
  DeviceArray<float> gt(table), gdout(dout), gout(n * cols), gdtable(Floats(rows * cols, 7.0f));
  DeviceArray<int32_t> gids(ids);
  DeviceArray<cuda::IdError> bad(1);
  const size_t bytes = cuda::embeddingGradWorkspace(n, rows);
  DeviceArray<char> work(bytes);
  ASSERT_EQ(cuda::embedding(n, rows, cols, first, vocab, gt.get(), gids.get(), gout.get(),
                            bad.get(), stream),
            cudaSuccess);
  ASSERT_EQ(cuda::embeddingGrad(n, rows, cols, first, vocab, gdout.get(), gids.get(), gdtable.get(),
                                work.get(), bytes, bad.get(), stream),
            cudaSuccess);
  expectClose(out, gout.host(), "embedding", 0, 0);
  // Each row sums its positions in increasing order in f64, as the CPU: the same bits.
  expectClose(dtable, gdtable.host(), "embedding_grad", 0, 0);
  EXPECT_EQ(bad.host()[0].flag, 0);
}

TEST_F(CudaKernels, EmbeddingRecordsAnOutOfRangeId) {
  const int64_t n = 4, rows = 5, cols = 3;
  DeviceArray<float> table(randomFloats(rows * cols, -1, 1, 410)), out(n * cols),
      dtable(rows * cols), dout(randomFloats(n * cols, -1, 1, 411));
  // The lookup takes a negative id for a padding slot (a zero row, as the CPU) and reports an
  // id at or past the vocabulary; the gradient reports both.
  DeviceArray<int32_t> ids(std::vector<int32_t>{1, 4, -2, 0});
  DeviceArray<cuda::IdError> padding(1);
  ASSERT_EQ(cuda::embedding(n, rows, cols, 0, rows, table.get(), ids.get(), out.get(),
                            padding.get(), stream),
            cudaSuccess);
  EXPECT_EQ(padding.host()[0].flag, 0);
  const Floats got = out.host();
  for (int64_t j = 0; j < cols; ++j)
    EXPECT_EQ(got[2 * cols + j], 0.0f);
  DeviceArray<int32_t> pastEnd(std::vector<int32_t>{1, 4, 0, 7});
  DeviceArray<cuda::IdError> bad(1);
  ASSERT_EQ(cuda::embedding(n, rows, cols, 0, rows, table.get(), pastEnd.get(), out.get(),
                            bad.get(), stream),
            cudaSuccess);
  cuda::IdError e = bad.host()[0];
  EXPECT_EQ(e.flag, 1);
  EXPECT_EQ(e.id, 7);
  EXPECT_EQ(e.position, 3);
  EXPECT_EQ(e.limit, rows);
  const Floats past = out.host();
  for (int64_t j = 0; j < cols; ++j)
    EXPECT_EQ(past[3 * cols + j], 0.0f);
  DeviceArray<cuda::IdError> bad2(1);
  const size_t bytes = cuda::embeddingGradWorkspace(n, rows);
  DeviceArray<char> work(bytes);
  ASSERT_EQ(cuda::embeddingGrad(n, rows, cols, 0, rows, dout.get(), ids.get(), dtable.get(),
                                work.get(), bytes, bad2.get(), stream),
            cudaSuccess);
  EXPECT_EQ(bad2.host()[0].id, -2);
}

TEST_F(CudaKernels, RopeAndItsInverseMatchCpu) {
  const int64_t batch = 3, seq = 37, heads = 5, head = 22, n = batch * seq * heads * head;
  const Floats x = randomFloats(n, -2, 2, 420);
  for (bool inverse : {false, true}) {
    Floats y(n);
    cpu::rope(batch, seq, heads, head, 10000.0f, inverse, x.data(), y.data());
    DeviceArray<float> gx(x), gy(n);
    ASSERT_EQ(cuda::rope(batch, seq, heads, head, 10000.0f, inverse, gx.get(), gy.get(), stream),
              cudaSuccess);
    expectClose(y, gy.host(), inverse ? "rope inverse" : "rope", 1e-6f, 1e-6f);
  }
  // A head-tail block: positions 8..25 and 56..73 of a longer sequence (seq 36 here).
  {
    const int64_t s2 = 36, n2 = batch * s2 * heads * head;
    const Floats x2 = randomFloats(n2, -2, 2, 421);
    Floats y2(n2);
    cpu::rope(batch, s2, heads, head, 10000.0f, false, x2.data(), y2.data(), 8, 56);
    DeviceArray<float> gx2(x2), gy2(n2);
    ASSERT_EQ(
        cuda::rope(batch, s2, heads, head, 10000.0f, false, gx2.get(), gy2.get(), stream, 8, 56),
        cudaSuccess);
    expectClose(y2, gy2.host(), "rope head-tail", 1e-6f, 1e-6f);
  }
  DeviceArray<float> gx(x), gy(n);
  EXPECT_EQ(cuda::rope(batch, seq, heads, 7, 10000.0f, false, gx.get(), gy.get(), stream),
            cudaErrorInvalidValue);
}

TEST_F(CudaKernels, RopeAtGivenPositionsMatchesCpu) {
  // Each row at its own position, padding slots (negative) among them.
  const int64_t batch = 3, seq = 7, heads = 5, head = 22, n = batch * seq * heads * head;
  std::mt19937 rng(430);
  std::vector<int32_t> positions(batch * seq);
  for (int32_t &p : positions)
    p = static_cast<int32_t>(rng() % 500) - 50;
  positions[4] = -1;
  const Floats x = randomFloats(n, -2, 2, 431);
  DeviceArray<int32_t> gpositions(positions);
  for (bool inverse : {false, true}) {
    Floats y(n);
    cpu::rope(batch, seq, heads, head, 10000.0f, inverse, x.data(), y.data(), -1, -1, {},
              positions.data());
    DeviceArray<float> gx(x), gy(n);
    ASSERT_EQ(cuda::rope(batch, seq, heads, head, 10000.0f, inverse, gx.get(), gy.get(), stream, -1,
                         -1, {}, gpositions.get()),
              cudaSuccess);
    expectClose(y, gy.host(), inverse ? "rope at positions, inverse" : "rope at positions", 1e-6f,
                1e-6f);
  }
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
// Attention over paged caches
//===----------------------------------------------------------------------===//

/// The CUDA kernels against the CPU kernel on one call: the output and both caches (copies:
/// the same bits).
void checkPaged(const tessel::test::PagedScene &x, const std::string &what) {
  const cpu::PagedAttentionArgs &a = x.args;
  Floats out(x.q.size()), kCache = x.kCache, vCache = x.vCache;
  cpu::pagedAttention(a, x.q.data(), x.k.data(), x.v.data(), x.positions.data(), x.table.data(),
                      out.data(), kCache.data(), vCache.data());
  DeviceArray<float> gq(x.q), gk(x.k), gv(x.v), gout(Floats(x.q.size(), NAN)), gkCache(x.kCache),
      gvCache(x.vCache), work(static_cast<size_t>(cuda::pagedAttentionWorkspace(a)));
  DeviceArray<int32_t> gpositions(x.positions), gtable(x.table);
  ASSERT_EQ(cuda::pagedAttention(a, gq.get(), gk.get(), gv.get(), gpositions.get(), gtable.get(),
                                 gout.get(), gkCache.get(), gvCache.get(), work.get(), nullptr),
            cudaSuccess)
      << what;
  expectClose(out, gout.host(), "out of " + what, 2e-5f, 1e-4f);
  expectClose(kCache, gkCache.host(), "key cache of " + what, 0, 0);
  expectClose(vCache, gvCache.host(), "value cache of " + what, 0, 0);
}

TEST_F(CudaKernels, PagedAttentionMatchesCpu) {
  // The longer caches are split over several blocks per (token, head), the others not.
  uint32_t seed = 600;
  for (const tessel::test::PagedSpec &spec : tessel::test::pagedSpecs())
    checkPaged(tessel::test::pagedScene(spec, seed += 10), describe(spec));
}

TEST_F(CudaKernels, PagedAttentionSkipsTokensReachingBlocksOutOfRange) {
  // As the CPU test: sequence 0's first block unnamed, sequence 1's past the caches, a token of
  // sequence 2 past its table row; once with one part per (token, head), once split.
  for (size_t spec : {size_t(1), size_t(6)}) {
    tessel::test::PagedScene x = tessel::test::pagedScene(tessel::test::pagedSpecs()[spec], 690);
    const cpu::PagedAttentionArgs &a = x.args;
    x.table[0] = -1;
    x.table[a.maxBlocks] = static_cast<int32_t>(a.blocks);
    x.positions[2 * a.seq] = static_cast<int32_t>(a.maxBlocks * a.blockSize);
    checkPaged(x, "blocks out of range, " + describe(tessel::test::pagedSpecs()[spec]));
  }
}

TEST_F(CudaKernels, PagedAttentionRefusesWhatItCannotTake) {
  const tessel::test::PagedScene x = tessel::test::pagedScene(tessel::test::pagedSpecs()[5], 695);
  DeviceArray<float> buffer(x.kCache.size());
  DeviceArray<int32_t> ids(x.table.size());
  cpu::PagedAttentionArgs a = x.args;
  // Its caches are split, and no workspace is given.
  ASSERT_GT(cuda::pagedAttentionWorkspace(a), 0);
  EXPECT_EQ(cuda::pagedAttention(a, buffer.get(), buffer.get(), buffer.get(), ids.get(), ids.get(),
                                 buffer.get(), buffer.get(), buffer.get(), nullptr, stream),
            cudaErrorInvalidValue);
  a.head = cuda::kMaxAttentionHead + 2;
  EXPECT_EQ(cuda::pagedAttention(a, buffer.get(), buffer.get(), buffer.get(), ids.get(), ids.get(),
                                 buffer.get(), buffer.get(), buffer.get(), buffer.get(), stream),
            cudaErrorInvalidValue);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// Forward and backward on both backends from the same random q, k, v and dout.
void checkAttention(const cpu::AttentionArgs &a, uint32_t seed) {
  const int64_t nq = a.batch * a.seq * a.heads * a.head;
  const int64_t nkv = a.batch * a.kvSeq * a.kvHeads * a.head;
  const Floats q = randomFloats(nq, -1, 1, seed), k = randomFloats(nkv, -1, 1, seed + 1),
               v = randomFloats(nkv, -1, 1, seed + 2), dout = randomFloats(nq, -1, 1, seed + 3);
  const int64_t rows = a.batch * a.seq * a.heads;
  Floats out(nq), lse(rows), dq(nq), dk(nkv), dv(nkv);
  cpu::attention(a, q.data(), k.data(), v.data(), out.data(), lse.data());
  cpu::attentionGrad(a, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data());
  DeviceArray<float> gq(q), gk(k), gv(v), gdout(dout), gout(nq), glse(rows), gdq(nq),
      gdk(Floats(nkv, 5.0f)), gdv(Floats(nkv, 5.0f)), work(cuda::attentionGradWorkspace(a, /*saved=*/false));
  ASSERT_EQ(cuda::attention(a, gq.get(), gk.get(), gv.get(), gout.get(), glse.get(), nullptr),
            cudaSuccess)
      << describe(a);
  ASSERT_EQ(cuda::attentionGrad(a, gq.get(), gk.get(), gv.get(), gdout.get(), nullptr, nullptr,
                                gdq.get(), gdk.get(), gdv.get(), work.get(), nullptr),
            cudaSuccess)
      << describe(a);
  expectClose(out, gout.host(), "out of " + describe(a), 2e-5f, 1e-4f);
  expectClose(lse, glse.host(), "lse of " + describe(a), 2e-5f, 1e-4f);
  const Floats gotQ = gdq.host(), gotK = gdk.host(), gotV = gdv.host();
  expectClose(dq, gotQ, "dq of " + describe(a), 2e-5f, 1e-3f);
  expectClose(dk, gotK, "dk of " + describe(a), 2e-5f, 1e-3f);
  expectClose(dv, gotV, "dv of " + describe(a), 2e-5f, 1e-3f);
  // From the forward call's output and lse, the forward pass is not run again: the rows it
  // would recompute are those bits, so the gradients are the same bits.
  // Its workspace holds only the rows' statistics.
  DeviceArray<float> sdq(nq), sdk(Floats(nkv, 5.0f)), sdv(Floats(nkv, 5.0f)),
      savedWork(cuda::attentionGradWorkspace(a, /*saved=*/true));
  ASSERT_EQ(cuda::attentionGrad(a, gq.get(), gk.get(), gv.get(), gdout.get(), gout.get(),
                                glse.get(), sdq.get(), sdk.get(), sdv.get(), savedWork.get(),
                                nullptr),
            cudaSuccess)
      << describe(a);
  EXPECT_TRUE(sdq.host() == gotQ && sdk.host() == gotK && sdv.host() == gotV)
      << describe(a) << ": the gradients from the saved lse differ from the recomputed ones";
}

TEST_F(CudaKernels, AttentionMatchesCpuCausalAndFull) {
  // Causal over several tiles, a ragged last tile, grouped kv heads.
  checkAttention(attentionOf(2, 77, 4, 77, 2, 24, true, 0), 500);
  // Full attention over fewer keys than queries, one kv head per head.
  checkAttention(attentionOf(1, 45, 3, 70, 3, 64, false, 0), 510);
  // One query, one key.
  checkAttention(attentionOf(1, 1, 1, 1, 1, 8, true, 0), 520);
  // An odd head size.
  checkAttention(attentionOf(2, 33, 2, 33, 1, 13, true, 0), 530);
}

TEST_F(CudaKernels, AttentionMatchesCpuWithASlidingWindow) {
  checkAttention(attentionOf(2, 99, 2, 99, 1, 32, true, 5), 540);
  checkAttention(attentionOf(1, 70, 4, 70, 4, 16, true, 40), 550);
}

TEST_F(CudaKernels, AttentionMatchesCpuAtTheLargestHead) {
  checkAttention(attentionOf(1, 65, 2, 65, 2, 128, true, 0), 560);
  checkAttention(attentionOf(1, 40, 1, 50, 1, 128, false, 0), 570);
}

TEST_F(CudaKernels, AttentionMatchesCpuOnABlockOfQueryHeads) {
  // Heads 2 and 3 of 8 over 2 kv heads (4 query heads each): both read kv head 0, and kv head
  // 1's gradients are zero here.
  cpu::AttentionArgs a = attentionOf(2, 41, 2, 41, 2, 16, true, 0);
  a.firstHead = 2;
  a.group = 4;
  checkAttention(a, 580);
  // Heads 3 and 4 of 8: they straddle the two kv heads.
  a.firstHead = 3;
  checkAttention(a, 590);
}

TEST_F(CudaKernels, AttentionMatchesCpuOnHeadTailQueries) {
  // Context parallelism, rank 1 of 2: 24 queries, chunks 1 and 2 (positions 12..23 and 24..35)
  // of a 48-long key sequence.
  cpu::AttentionArgs a = attentionOf(2, 24, 2, 48, 1, 16, true, 0);
  a.headStart = 12;
  a.tailStart = 24;
  checkAttention(a, 595);
  // Rank 0 of 2: chunks 0 and 3, with a sliding window.
  a.headStart = 0;
  a.tailStart = 36;
  a.window = 7;
  checkAttention(a, 597);
}

/// Step `step` of rank `me` in a ring of `ways`: the CPU's RingBlockArgs, the CUDA kernels'
/// AttentionArgs with both blocks placed, and the random keys and values of the block's rank.
struct RingStep {
  cpu::RingBlockArgs r;
  cuda::AttentionArgs a;
  Floats k, v;
  std::string what;
};

RingStep ringStep(const cpu::AttentionArgs &shape, int64_t ways, int64_t me, int64_t step,
                  uint32_t seed) {
  RingStep s;
  s.r.attention = shape;
  s.r.ways = ways;
  s.r.queryIndex = me;
  s.r.keyIndex = (me - step + ways) % ways;
  const int64_t S = shape.seq, nkv = shape.batch * S * shape.kvHeads * shape.head;
  s.k = randomFloats(nkv, -1, 1, seed + 100 + static_cast<uint32_t>(s.r.keyIndex));
  s.v = randomFloats(nkv, -1, 1, seed + 200 + static_cast<uint32_t>(s.r.keyIndex));
  s.a = shape;
  s.a.headStart = s.r.queryPosition(0);
  s.a.tailStart = s.r.queryPosition(S / 2);
  s.a.keyHeadStart = s.r.keyPosition(0);
  s.a.keyTailStart = s.r.keyPosition(S / 2);
  s.what = "ring of " + std::to_string(ways) + ", rank " + std::to_string(me) + " step " +
           std::to_string(step) + ": " + describe(s.a);
  return s;
}

/// One ring of `ways` ranks over random q, k, v (each rank's blocks head-tail; kvSeq = seq):
/// each rank's steps 0 .. ways - 1 forward and backward on both backends. Each step starts from
/// the CPU's state before it, so every step is checked on its own.
void checkRing(const cpu::AttentionArgs &shape, int64_t ways, uint32_t seed) {
  const int64_t nq = shape.batch * shape.seq * shape.heads * shape.head;
  const int64_t nkv = shape.batch * shape.seq * shape.kvHeads * shape.head, rows = nq / shape.head;
  for (int64_t me = 0; me < ways; ++me) {
    const uint32_t mine = seed + 10 * static_cast<uint32_t>(me);
    const Floats q = randomFloats(nq, -1, 1, mine), dout = randomFloats(nq, -1, 1, mine + 1);
    Floats out(nq), lse(rows), dq(nq), dk(nkv), dv(nkv);
    for (int64_t step = 0; step < ways; ++step) {
      const RingStep s = ringStep(shape, ways, me, step, seed);
      DeviceArray<float> gq(q), gk(s.k), gv(s.v), gout(out), glse(lse),
          work(cuda::attentionBlockWorkspace(s.a));
      ASSERT_EQ(cuda::attentionBlock(s.a, gq.get(), gk.get(), gv.get(), step == 0, gout.get(),
                                     glse.get(), work.get(), nullptr),
                cudaSuccess)
          << s.what;
      cpu::attentionBlock(s.r, q.data(), s.k.data(), s.v.data(), step == 0, out.data(), lse.data());
      expectClose(out, gout.host(), "out of " + s.what, 2e-5f, 1e-4f);
      expectClose(lse, glse.host(), "lse of " + s.what, 2e-5f, 1e-5f);
    }
    // Backward from the whole attention's output and log-sum-exp; stale values in the
    // gradients at step 0 must be zeroed.
    for (int64_t step = 0; step < ways; ++step) {
      const RingStep s = ringStep(shape, ways, me, step, seed);
      DeviceArray<float> gq(q), gk(s.k), gv(s.v), gdout(dout), gout(out), glse(lse),
          gdq(step == 0 ? Floats(nq, 5.0f) : dq), gdk(step == 0 ? Floats(nkv, 5.0f) : dk),
          gdv(step == 0 ? Floats(nkv, 5.0f) : dv), work(cuda::attentionBlockGradWorkspace(s.a));
      ASSERT_EQ(cuda::attentionBlockGrad(s.a, gq.get(), gk.get(), gv.get(), gdout.get(), gout.get(),
                                         glse.get(), step == 0, gdq.get(), gdk.get(), gdv.get(),
                                         work.get(), nullptr),
                cudaSuccess)
          << s.what;
      cpu::attentionBlockGrad(s.r, q.data(), s.k.data(), s.v.data(), dout.data(), out.data(),
                              lse.data(), step == 0, dq.data(), dk.data(), dv.data());
      expectClose(dq, gdq.host(), "dq of " + s.what, 2e-5f, 1e-3f);
      expectClose(dk, gdk.host(), "dk of " + s.what, 2e-5f, 1e-3f);
      expectClose(dv, gdv.host(), "dv of " + s.what, 2e-5f, 1e-3f);
    }
  }
}

TEST_F(CudaKernels, RingAttentionStepsMatchCpu) {
  // Two ranks, causal, grouped kv heads, blocks of 2 x 20 positions (a ragged tile).
  checkRing(attentionOf(2, 40, 4, 40, 2, 16, true, 0), 2, 600);
  // Three ranks, causal: blocks no query of a rank sees, and queries that see none of a block.
  checkRing(attentionOf(1, 18, 2, 18, 2, 24, true, 0), 3, 610);
  // Not causal, the largest head.
  checkRing(attentionOf(1, 34, 2, 34, 1, 128, false, 0), 2, 620);
}

TEST_F(CudaKernels, AttentionRefusesHeadsItCannotTake) {
  DeviceArray<float> x(1024);
  EXPECT_EQ(cuda::attention(attentionOf(1, 2, 1, 2, 1, 129, true, 0), x.get(), x.get(), x.get(),
                            x.get(), nullptr, stream),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::attention(attentionOf(1, 2, 1, 3, 1, 8, true, 0), x.get(), x.get(), x.get(),
                            x.get(), nullptr, stream),
            cudaErrorInvalidValue);
}

//===----------------------------------------------------------------------===//
// Reductions, buckets, dropout, fused bodies, the gradient norm
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

TEST_F(CudaKernels, FusedElementwiseMatchesCpu) {
  // x0 [4, 9, 5] dense, x1 a row [5] broadcast, x2 a mask read transposed.
  const cpu::Shape shape = shapeOf({4, 9, 5});
  const Floats x0 = randomFloats(180, -2, 2, 630), x1 = randomFloats(5, -1, 1, 631);
  Floats x2 = randomFloats(180, -1, 1, 632);
  for (float &v : x2)
    v = v > 0 ? 1.0f : 0.0f;
  const std::vector<cpu::Strides> strides = {stridesOf({45, 5, 1}), stridesOf({0, 0, 1}),
                                             stridesOf({1, 4, 36})};
  auto step = [](cpu::FusedStep::Kind kind, std::initializer_list<int32_t> args) {
    cpu::FusedStep s;
    s.kind = kind;
    int k = 0;
    for (int32_t a : args)
      s.args[k++] = a;
    return s;
  };
  // Values: x0 x1 x2 = 0 1 2; t0 = x0 * x1 (3); t1 = gelu t0 (4); t2 = 0.5 (5);
  // t3 = where x2 t1 t2 (6); t4 = tanh_grad(x0, t1, t0) (7); t5 = pow t3 3 (8).
  std::vector<cpu::FusedStep> steps;
  steps.push_back(step(cpu::FusedStep::Kind::Binary, {0, 1}));
  steps.back().binary = cpu::BinaryKind::Mul;
  steps.push_back(step(cpu::FusedStep::Kind::Unary, {3}));
  steps.back().unary = cpu::UnaryKind::Gelu;
  steps.push_back(step(cpu::FusedStep::Kind::Const, {}));
  steps.back().value = 0.5f;
  steps.push_back(step(cpu::FusedStep::Kind::Where, {2, 4, 5}));
  steps.push_back(step(cpu::FusedStep::Kind::UnaryGrad, {0, 4, 3}));
  steps.back().unary = cpu::UnaryKind::Tanh;
  steps.push_back(step(cpu::FusedStep::Kind::Unary, {6}));
  steps.back().unary = cpu::UnaryKind::Pow;
  steps.back().value = 3.0f;
  const std::vector<int32_t> outSteps = {3, 4, 5};
  Floats r0(180), r1(180), r2(180);
  cpu::fusedElementwise(shape, steps, {x0.data(), x1.data(), x2.data()}, strides,
                        {r0.data(), r1.data(), r2.data()}, outSteps);
  DeviceArray<float> g0(x0), g1(x1), g2(x2), o0(180), o1(180), o2(180);
  ASSERT_EQ(cuda::fusedElementwise(shape, steps, {g0.get(), g1.get(), g2.get()}, strides,
                                   {o0.get(), o1.get(), o2.get()}, outSteps, stream),
            cudaSuccess);
  expectClose(r0, o0.host(), "fused where");
  expectClose(r1, o1.host(), "fused tanh_grad");
  expectClose(r2, o2.host(), "fused pow");
  // A step that reads a later step is refused.
  steps[0].args[1] = 7;
  EXPECT_EQ(cuda::fusedElementwise(shape, steps, {g0.get(), g1.get(), g2.get()}, strides,
                                   {o0.get(), o1.get(), o2.get()}, outSteps, stream),
            cudaErrorInvalidValue);
}

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

TEST_F(CudaKernels, ShardedCrossEntropyMatchesCpu) {
  // This rank holds classes [40, 77) of 101; targets fall here and elsewhere.
  const int64_t rows = 29, cols = 37, first = 40, classes = 101;
  const Floats logits = randomFloats(rows * cols, -4, 4, 660);
  std::mt19937 rng(661);
  std::vector<int32_t> targets(rows);
  for (int32_t &t : targets)
    t = static_cast<int32_t>(rng() % classes);
  targets[0] = 40;
  targets[1] = 76;
  targets[7] = tessel::kernels::kIgnoredTarget; // a row that counts nothing
  const Floats dloss = {0.5f};
  const double scale = 1.0 / 512;
  Floats m(rows), s(rows), t(rows), dlogits(rows * cols);
  float loss = 0;
  std::string error;
  cpu::ceMax(rows, cols, logits.data(), m.data());
  ASSERT_TRUE(cpu::ceSums(rows, cols, first, classes, logits.data(), targets.data(), m.data(),
                          s.data(), t.data(), error));
  cpu::ceLoss(rows, m.data(), s.data(), t.data(), scale, &loss);
  ASSERT_TRUE(cpu::ceGrad(rows, cols, first, classes, logits.data(), targets.data(), m.data(),
                          s.data(), dloss.data(), scale, dlogits.data(), error));
  DeviceArray<float> gl(logits), gm(rows), gs(rows), gt(rows), gloss(1), gd(rows * cols),
      gdloss(dloss);
  DeviceArray<int32_t> gtargets(targets);
  DeviceArray<cuda::IdError> bad(1);
  ASSERT_EQ(cuda::ceMax(rows, cols, gl.get(), gm.get(), stream), cudaSuccess);
  ASSERT_EQ(cuda::ceSums(rows, cols, first, classes, gl.get(), gtargets.get(), gm.get(), gs.get(),
                         gt.get(), bad.get(), stream),
            cudaSuccess);
  ASSERT_EQ(cuda::ceLoss(rows, gm.get(), gs.get(), gt.get(), scale, gloss.get(), stream),
            cudaSuccess);
  ASSERT_EQ(cuda::ceGrad(rows, cols, first, classes, gl.get(), gtargets.get(), gm.get(), gs.get(),
                         gdloss.get(), scale, gd.get(), bad.get(), stream),
            cudaSuccess);
  expectClose(m, gm.host(), "ce_max", 0, 0);
  expectClose(s, gs.host(), "ce_sums s", 1e-6f, 1e-5f);
  expectClose(t, gt.host(), "ce_sums t", 0, 0);
  expectClose({loss}, gloss.host(), "ce_loss", 1e-6f, 1e-5f);
  expectClose(dlogits, gd.host(), "ce_grad", 1e-8f, 1e-5f);
  EXPECT_EQ(bad.host()[0].flag, 0);
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
