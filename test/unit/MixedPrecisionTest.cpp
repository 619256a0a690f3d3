//===- MixedPrecisionTest.cpp - 16-bit storage on the CPU device ----------===//
//
// The conversions of common/support/Float16.h (rounding to nearest even, NaN, infinities, subnormals,
// overflow), the bulk conversions of the CPU kernels, and the CPU device's widening wrapper:
// which calls meet it, what a 16-bit call computes, in-place and accumulating outputs, and
// what it refuses.
//
//===----------------------------------------------------------------------===//

#include "common/support/Float16.h"
#include "kernels/cpu/CpuKernels.h"
#include "runtime/core/Executor.h"
#include "runtime/device/Device.h"
#include "runtime/device/cpu/CpuKernelCalls.h"

#include "test/unit/ExecutorState.h"
#include "test/unit/PlanBuilders.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace tessel;
using namespace tessel::planfile;
using rt::Executor;

namespace {

//===----------------------------------------------------------------------===//
// Scalar conversions
//===----------------------------------------------------------------------===//

TEST(Float16, Bf16RoundsToNearestTiesToEven) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: the tie goes to 1 (even mantissa).
  EXPECT_EQ(floatToBf16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6: it goes up.
  EXPECT_EQ(floatToBf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  // Just above a tie rounds up, just below rounds down.
  EXPECT_EQ(floatToBf16(floatOfBits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(floatToBf16(floatOfBits(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(floatToBf16(-1.0f - 0x1p-8f), 0xbf80);
}

TEST(Float16, Bf16KeepsInfinitiesNanAndSubnormals) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToBf16(inf), 0x7f80);
  EXPECT_EQ(floatToBf16(-inf), 0xff80);
  // Past the largest finite bf16 (0x7f7f) by more than half a step: infinity.
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7f80);
  // A NaN whose payload lies only in the dropped bits stays a NaN (quiet).
  uint16_t nan = floatToBf16(floatOfBits(0x7f800001u));
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  EXPECT_TRUE(std::isnan(bf16ToFloat(nan)));
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(-std::nanf("")))));
  // Subnormals: bf16 has f32's exponent range, so they round like any value.
  EXPECT_EQ(floatToBf16(0x1p-133f), 0x0001);   // the smallest bf16 subnormal, 2^-133
  EXPECT_EQ(floatToBf16(0x1p-134f), 0x0000);   // half of it: a tie, to even (zero)
  EXPECT_EQ(floatToBf16(0x1.8p-133f), 0x0002); // 1.5 of it: a tie, to even (2)
  EXPECT_EQ(floatToBf16(-0.0f), 0x8000);
}

TEST(Float16, HalfRoundsToNearestTiesToEvenWithSubnormalsAndOverflow) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3c00);     // a tie, to even
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02); // a tie, to even (up)
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);            // the largest finite
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);            // below the midpoint to 2^16
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);            // the midpoint: to even, infinity
  EXPECT_EQ(floatToHalf(-1e10f), 0xfc00);
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);     // the smallest subnormal
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);     // half of it: a tie, to zero
  EXPECT_EQ(floatToHalf(0x1.8p-24f), 0x0002);   // 1.5 of it: a tie, to 2
  EXPECT_EQ(floatToHalf(0x1p-14f), 0x0400);     // the smallest normal
  EXPECT_EQ(floatToHalf(0x1.ffcp-15f), 0x0400); // the largest subnormal's upper tie: normal
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(std::nanf("")))));
  EXPECT_EQ(halfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(halfToFloat(0xfc00), -std::numeric_limits<float>::infinity());
}

TEST(Float16, EveryValueWidensExactlyAndNarrowsBack) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t x = static_cast<uint16_t>(h);
    float b = bf16ToFloat(x), f = halfToFloat(x);
    if (!std::isnan(b)) {
      ASSERT_EQ(floatToBf16(b), x) << std::hex << h;
    }
    if (!std::isnan(f)) {
      ASSERT_EQ(floatToHalf(f), x) << std::hex << h;
    }
  }
}

/// Narrowing agrees with rounding done in double: the nearest representable value, ties to
/// the even one, over f32 values spread across the whole range.
TEST(Float16, NarrowingIsTheNearestValue) {
  for (uint64_t u = 0; u < (1ull << 32); u += 104729) {
    const float x = floatOfBits(static_cast<uint32_t>(u));
    if (!std::isfinite(x))
      continue;
    const uint16_t r = floatToBf16(x);
    const double got = bf16ToFloat(r);
    if (std::isinf(got))
      continue; // overflow, checked above
    // Neighbours of the result: neither may be strictly nearer to x.
    for (int d : {-1, 1}) {
      const uint16_t n = static_cast<uint16_t>(r + d);
      const double other = bf16ToFloat(n);
      if (std::isnan(other) || (n & 0x7fff) == 0x7f80 || ((n ^ r) & 0x8000))
        continue;
      ASSERT_LE(std::fabs(got - x), std::fabs(other - x)) << std::hex << u;
    }
  }
}

TEST(Float16, BulkConversionsAreTheScalarOnes) {
  std::vector<float> x(100000);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(static_cast<float>(i)) * std::exp2(static_cast<float>(i % 60) - 30);
  for (cpu::DType type : {cpu::DType::BF16, cpu::DType::F16}) {
    std::vector<uint16_t> h(x.size());
    std::vector<float> back(x.size());
    cpu::narrow(type, static_cast<int64_t>(x.size()), x.data(), h.data());
    cpu::widen(type, static_cast<int64_t>(x.size()), h.data(), back.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t want = type == cpu::DType::BF16 ? floatToBf16(x[i]) : floatToHalf(x[i]);
      ASSERT_EQ(h[i], want) << i;
      ASSERT_EQ(back[i], type == cpu::DType::BF16 ? bf16ToFloat(want) : halfToFloat(want));
    }
  }
}

//===----------------------------------------------------------------------===//
// The CPU device's widening wrapper
//===----------------------------------------------------------------------===//

float roundBf16(float x) { return bf16ToFloat(floatToBf16(x)); }

/// A state tensor `name` of `n` f32 elements.
StateTensor stateTensor(const std::string &name, int64_t n) {
  StateTensor t;
  t.name = name;
  t.role = "param";
  t.shape = {n};
  return t;
}

BufferRef stateRef(uint32_t index, uint64_t elements) {
  return {Storage::State, index, 0, elements * 4, DType::F32};
}

BufferRef halfRef(uint64_t byteOffset, uint64_t elements, DType type = DType::BF16) {
  return {Storage::Arena, 0, byteOffset, elements * 2, type};
}

TEST(MixedPrecision, OnlyCallsWithSixteenBitOperandsMeetTheWrapper) {
  auto device = rt::createCpuDevice();
  const catalogue::KernelInfo &unary = *catalogue::findKernel("unary");
  std::string error;
  rt::KernelFn f32 = device->kernel(unary, {DType::F32}, {DType::F32}, error);
  EXPECT_EQ(f32, rt::cpuKernel(unary.id)); // the f32 handler itself: nothing in between
  rt::KernelFn bf16 = device->kernel(unary, {DType::F32}, {DType::BF16}, error);
  ASSERT_NE(bf16, nullptr) << error;
  EXPECT_NE(bf16, f32);
  EXPECT_EQ(device->kernel(unary, {DType::F16}, {DType::F16}, error), bf16);
}

TEST(MixedPrecision, CollectivesTakeSixteenBitOperandsAndControlKernelsDoNot) {
  auto device = rt::createCpuDevice();
  std::string error;
  // A communicator moves 16-bit elements and sums them in f32 (HalfCollectivesTest.cpp).
  EXPECT_NE(
      device->kernel(*catalogue::findKernel("all_reduce"), {DType::BF16}, {DType::BF16}, error),
      nullptr)
      << error;
  EXPECT_EQ(device->kernel(*catalogue::findKernel("guard_finite"), {DType::BF16}, {}, error),
            nullptr);
  EXPECT_NE(error.find("16-bit operand of a control kernel"), std::string::npos) << error;
}

/// w16 = bf16(w); y = exp(w16) in bf16; w = y + y in f32: every 16-bit value is the f32
/// kernel's result rounded to nearest even, and a bf16 operand is read exactly.
TEST(MixedPrecision, SixteenBitCallsComputeInF32AndRoundOnStore) {
  for (DType type : {DType::BF16, DType::F16}) {
    Plan plan;
    plan.model = "test";
    plan.state.push_back(stateTensor("w", 5));
    Program p;
    p.name = "step";
    p.arenaBytes = 128;
    const std::vector<Attr> dense = {{"shape", std::vector<int64_t>{5}},
                                     {"x_strides", std::vector<int64_t>{1}}};
    p.instrs.push_back(test::makeInstr("copy", {stateRef(0, 5)}, {halfRef(0, 5, type)}, dense, ""));
    p.instrs.push_back(test::makeInstr("unary", {halfRef(0, 5, type)}, {halfRef(64, 5, type)},
                                       {{"op", std::string("exp")}, {"n", int64_t(5)}}, ""));
    p.instrs.push_back(test::makeInstr("binary", {halfRef(64, 5, type), halfRef(64, 5, type)},
                                       {stateRef(0, 5)},
                                       {{"op", std::string("add")},
                                        {"shape", std::vector<int64_t>{5}},
                                        {"a_strides", std::vector<int64_t>{1}},
                                        {"b_strides", std::vector<int64_t>{1}}},
                                       ""));
    p.outputs.push_back({"y", type, {5}, {}, halfRef(64, 5, type)});
    plan.programs.push_back(p);
    std::string error;
    auto ex = Executor::create(plan, 0, error);
    ASSERT_TRUE(ex) << error;
    const float w[5] = {0.1f, 1.3f, -2.7f, 3.14159f, 0.0f};
    ASSERT_TRUE(ex->writeState(0, w));
    ASSERT_TRUE(ex->run("step", rt::StepContext{}, error)) << error;
    auto round = [&](float x) {
      return type == DType::BF16 ? roundBf16(x) : halfToFloat(floatToHalf(x));
    };
    for (int e = 0; e < 5; ++e) {
      float y = round(std::exp(round(w[e])));
      EXPECT_EQ(rt::stateAt(*ex, 0, e), y + y) << dtypeName(type) << " element " << e;
    }
    // A 16-bit program result reaches the host widened to f32.
    const float *y = ex->output("step", "y");
    ASSERT_NE(y, nullptr);
    for (int e = 0; e < 5; ++e)
      EXPECT_EQ(y[e], round(std::exp(round(w[e])))) << dtypeName(type) << " element " << e;
    // The rounding shows: bf16(exp(bf16(1.3))) differs from exp(1.3) in f32.
    if (type == DType::BF16) {
      EXPECT_NE(rt::stateAt(*ex, 0, 1), 2 * std::exp(1.3f));
    }
  }
}

/// In place: cross_entropy_grad writes the logits' gradient over the logits; the wrapper
/// gives the output the input's scratch, so the kernel still works in place. A kernel that
/// adds into a 16-bit output (`reduce` with `accumulate`) reads the output's old value.
TEST(MixedPrecision, InPlaceAndAccumulatingOutputs) {
  Plan plan;
  plan.model = "test";
  plan.state.push_back(stateTensor("out", 4));
  Program p;
  p.name = "step";
  p.arenaBytes = 256;
  // x = bf16 [1, 2, 3, 4] (filled by fills of one element each), in place y = exp(x).
  for (int e = 0; e < 4; ++e)
    p.instrs.push_back(test::makeInstr("fill", {}, {halfRef(2 * e, 1)},
                                       {{"n", int64_t(1)}, {"value", double(e + 1)}}, ""));
  p.instrs.push_back(test::makeInstr("unary", {halfRef(0, 4)}, {halfRef(0, 4)},
                                     {{"op", std::string("exp")}, {"n", int64_t(4)}}, ""));
  // acc (bf16, one element) = 0.5; then acc += sum(y).
  p.instrs.push_back(
      test::makeInstr("fill", {}, {halfRef(64, 1)}, {{"n", int64_t(1)}, {"value", 0.5}}, ""));
  p.instrs.push_back(test::makeInstr("reduce", {halfRef(0, 4)}, {halfRef(64, 1)},
                                     {{"shape", std::vector<int64_t>{4}},
                                      {"y_strides", std::vector<int64_t>{0}},
                                      {"y_elements", int64_t(1)},
                                      {"scale", 1.0},
                                      {"accumulate", int64_t(1)}},
                                     ""));
  // out = [y0, y1, y2, acc] in f32.
  p.instrs.push_back(test::makeInstr(
      "copy", {halfRef(0, 4)}, {stateRef(0, 4)},
      {{"shape", std::vector<int64_t>{3}}, {"x_strides", std::vector<int64_t>{1}}}, ""));
  BufferRef last = stateRef(0, 4);
  last.offset = 12;
  last.bytes = 4;
  p.instrs.push_back(test::makeInstr(
      "copy", {halfRef(64, 1)}, {last},
      {{"shape", std::vector<int64_t>{1}}, {"x_strides", std::vector<int64_t>{1}}}, ""));
  plan.programs.push_back(p);
  std::string error;
  auto ex = Executor::create(plan, 0, error);
  ASSERT_TRUE(ex) << error;
  ASSERT_TRUE(ex->run("step", rt::StepContext{}, error)) << error;
  float sum = 0;
  for (int e = 0; e < 4; ++e) {
    const float y = roundBf16(std::exp(static_cast<float>(e + 1)));
    sum += y;
    if (e < 3) {
      EXPECT_EQ(rt::stateAt(*ex, 0, e), y) << e;
    }
  }
  EXPECT_EQ(rt::stateAt(*ex, 0, 3), roundBf16(0.5f + sum));
}

/// Element counts are per element type: a bf16 buffer of 8 bytes holds 4 elements, so a
/// kernel asking for 5 is refused at load as it would be for f32.
TEST(MixedPrecision, SixteenBitBuffersAreCheckedInTheirOwnElements) {
  Plan plan;
  plan.model = "test";
  plan.state.push_back(stateTensor("w", 5));
  Program p;
  p.name = "step";
  p.arenaBytes = 64;
  p.instrs.push_back(test::makeInstr("unary", {stateRef(0, 5)}, {halfRef(0, 4)},
                                     {{"op", std::string("exp")}, {"n", int64_t(5)}}, ""));
  plan.programs.push_back(p);
  std::string error;
  EXPECT_FALSE(Executor::create(plan, 0, error));
  EXPECT_NE(error.find("output 0 needs 5 elements but its buffer holds 4"), std::string::npos)
      << error;
}

} // namespace
