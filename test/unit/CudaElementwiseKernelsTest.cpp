//===- CudaElementwiseKernelsTest.cpp - The CUDA elementwise kernels ------===//
//
// Fill, positions, the unary maps and their gradients, the binary and select kernels (dense at
// any alignment, broadcast, permuted, on bf16 operands) and the strided copies of kernels/cuda
// against their CPU counterparts of kernels/cpu on the same random inputs, then a fused
// elementwise body.
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
#include "test/unit/KernelShapes.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace cpu = tessel::cpu;
namespace cuda = tessel::cuda;

namespace {

using namespace tessel::test;

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

//===----------------------------------------------------------------------===//
// Fused bodies
//===----------------------------------------------------------------------===//

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

} // namespace
