//===- CpuElementwiseKernelsTest.cpp - The CPU's elementwise kernels ------===//
//
// The binary, comparison, select, unary (and unary gradient), strided copy and scale kernels on
// small random inputs (odd shapes, broadcasts, permutations) against a naive double-precision
// reference, every gradient against central finite differences of it; the fused elementwise
// bodies against the unfused kernels, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "test/unit/CpuKernelsTestSupport.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using namespace tessel::cpu;

namespace {

using namespace tessel::test;

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

double applyBinary(BinaryKind kind, double a, double b) {
  switch (kind) {
  case BinaryKind::Add:
    return a + b;
  case BinaryKind::Sub:
    return a - b;
  case BinaryKind::Mul:
    return a * b;
  case BinaryKind::Div:
    return a / b;
  case BinaryKind::Lt:
    return a < b;
  case BinaryKind::Le:
    return a <= b;
  case BinaryKind::Gt:
    return a > b;
  case BinaryKind::Ge:
    return a >= b;
  case BinaryKind::Eq:
    return a == b;
  case BinaryKind::Ne:
    return a != b;
  }
  return 0;
}

struct BinaryCase {
  const char *name;
  Shape shape;
  Strides sa, sb;
  size_t sizeA, sizeB;
};

std::vector<BinaryCase> binaryCases() {
  std::vector<BinaryCase> cases;
  const Shape s3 = shapeOf({3, 5, 7});
  cases.push_back({"dense", s3, denseStrides(s3), denseStrides(s3), 105, 105});
  // [3,5,7] + [7]: a bias along the leading dims.
  cases.push_back({"bias", s3, denseStrides(s3), stridesOf({0, 0, 1}), 105, 7});
  // [3,5,7] * [3,5,1]: a per-row scalar.
  cases.push_back({"row-scalar", s3, denseStrides(s3), stridesOf({5, 1, 0}), 105, 15});
  // [3,1,7] - [1,5,7] broadcast on both sides; a is the lhs, b the rhs.
  cases.push_back({"both-broadcast", s3, stridesOf({7, 0, 1}), stridesOf({0, 7, 1}), 21, 35});
  // a read transposed: a is stored [7,5,3] and viewed as [3,5,7].
  cases.push_back({"permuted", s3, stridesOf({1, 3, 15}), denseStrides(s3), 105, 105});
  // Scalar rhs, and a size-1 dim in the middle.
  const Shape s4 = shapeOf({2, 1, 4, 6});
  cases.push_back({"scalar", s4, denseStrides(s4), stridesOf({0, 0, 0, 0}), 48, 1});
  // Large enough for several threads: a permuted lhs plus a bias, [3,70,200].
  const Shape big = shapeOf({3, 70, 200});
  cases.push_back({"large", big, stridesOf({200, 600, 1}), stridesOf({0, 0, 1}), 42000, 200});
  // Large with the broadcast dim innermost: [300,2,70] + [300,1,1].
  const Shape big2 = shapeOf({300, 2, 70});
  cases.push_back({"large-row", big2, denseStrides(big2), stridesOf({1, 0, 0}), 42000, 300});
  return cases;
}

TEST(CpuKernelsElementwise, BinaryMatchesReference) {
  uint32_t seed = 1;
  for (const BinaryCase &c : binaryCases()) {
    const Floats a = randomFloats(c.sizeA, -2, 2, seed++);
    // Divisors away from zero.
    Floats b = randomFloats(c.sizeB, 0.5f, 2, seed++);
    for (size_t i = 0; i < b.size(); i += 2)
      b[i] = -b[i];
    for (BinaryKind kind :
         {BinaryKind::Add, BinaryKind::Sub, BinaryKind::Mul, BinaryKind::Div, BinaryKind::Lt,
          BinaryKind::Le, BinaryKind::Gt, BinaryKind::Ge, BinaryKind::Eq, BinaryKind::Ne}) {
      const int64_t n = c.shape.numElements();
      Floats out(static_cast<size_t>(n), NAN);
      binary(kind, c.shape, a.data(), c.sa, b.data(), c.sb, out.data());
      Doubles want(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        want[i] = applyBinary(kind, a[offsetOf(c.shape, c.sa, i)], b[offsetOf(c.shape, c.sb, i)]);
      expectClose(out, want, 1e-6, 1e-7,
                  std::string(c.name) + " kind " + std::to_string(static_cast<int>(kind)));
    }
  }
}

TEST(CpuKernelsElementwise, ComparisonsGiveOneOrZeroAndMeetAtEquality) {
  // A causal mask from positions: key position k (rows) <= query position q (columns).
  const Shape s = shapeOf({3, 3});
  const Floats pos = {0, 1, 2};
  Floats out(9);
  binary(BinaryKind::Le, s, pos.data(), stridesOf({1, 0}), pos.data(), stridesOf({0, 1}),
         out.data());
  EXPECT_EQ(out, (Floats{1, 1, 1, 0, 1, 1, 0, 0, 1}));
  binary(BinaryKind::Lt, s, pos.data(), stridesOf({1, 0}), pos.data(), stridesOf({0, 1}),
         out.data());
  EXPECT_EQ(out, (Floats{0, 1, 1, 0, 0, 1, 0, 0, 0}));
  binary(BinaryKind::Eq, s, pos.data(), stridesOf({1, 0}), pos.data(), stridesOf({0, 1}),
         out.data());
  EXPECT_EQ(out, (Floats{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  const Floats nan = {NAN};
  binary(BinaryKind::Ne, shapeOf({1}), nan.data(), stridesOf({1}), nan.data(), stridesOf({1}),
         out.data());
  EXPECT_EQ(out[0], 1.0f); // NaN differs from everything, itself included, as in IEEE 754.
}

TEST(CpuKernelsElementwise, SelectBroadcastsEachOperand) {
  // where(mask [3, 3], scores [2, 3, 3], -inf): the mask broadcast over the leading dim.
  const Shape s = shapeOf({2, 3, 3});
  const Floats mask = {1, 1, 1, 0, 1, 1, 0, 0, 1};
  Floats scores(18);
  for (size_t i = 0; i < scores.size(); ++i)
    scores[i] = static_cast<float>(i);
  const Floats fill = {-INFINITY};
  Floats out(18);
  select(s, mask.data(), stridesOf({0, 3, 1}), scores.data(), denseStrides(s), fill.data(),
         stridesOf({0, 0, 0}), out.data());
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(out[i], mask[i % 9] != 0 ? scores[i] : -INFINITY) << i;
}

TEST(CpuKernelsElementwise, PositionsCount) {
  Floats out(5, NAN);
  positions(5, out.data());
  EXPECT_EQ(out, (Floats{0, 1, 2, 3, 4}));
}

TEST(CpuKernelsElementwise, BinarySubtractsInOperandOrder) {
  const Shape s = shapeOf({2, 2});
  const Floats a = {10, 20, 30, 40}, b = {1, 2};
  Floats out(4);
  binary(BinaryKind::Sub, s, a.data(), denseStrides(s), b.data(), stridesOf({0, 1}), out.data());
  EXPECT_EQ(out, (Floats{9, 18, 29, 38}));
  binary(BinaryKind::Div, s, a.data(), denseStrides(s), b.data(), stridesOf({1, 0}), out.data());
  EXPECT_EQ(out, (Floats{10, 20, 15, 20}));
}

const UnaryKind kAllUnary[] = {
    UnaryKind::Neg,    UnaryKind::Exp,  UnaryKind::Log,    UnaryKind::Sqrt, UnaryKind::Rsqrt,
    UnaryKind::Tanh,   UnaryKind::Gelu, UnaryKind::Silu,   UnaryKind::Relu, UnaryKind::Sigmoid,
    UnaryKind::Square, UnaryKind::Pow,  UnaryKind::GeluErf};

/// The exponent the tests give pow (the other kinds ignore it).
constexpr float kPowExponent = 1.5f;

double unaryRef(UnaryKind kind, double x) {
  switch (kind) {
  case UnaryKind::Neg:
    return -x;
  case UnaryKind::Exp:
    return std::exp(x);
  case UnaryKind::Log:
    return std::log(x);
  case UnaryKind::Sqrt:
    return std::sqrt(x);
  case UnaryKind::Rsqrt:
    return 1 / std::sqrt(x);
  case UnaryKind::Tanh:
    return std::tanh(x);
  case UnaryKind::Gelu:
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  case UnaryKind::Silu:
    return x / (1 + std::exp(-x));
  case UnaryKind::Relu:
    return x > 0 ? x : 0;
  case UnaryKind::Sigmoid:
    return 1 / (1 + std::exp(-x));
  case UnaryKind::Square:
    return x * x;
  case UnaryKind::Pow:
    return std::pow(x, static_cast<double>(kPowExponent));
  case UnaryKind::GeluErf:
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  }
  return 0;
}

/// Inputs inside each function's domain, away from Relu's kink.
Floats unaryInputs(UnaryKind kind, size_t n, uint32_t seed) {
  const bool positive = kind == UnaryKind::Log || kind == UnaryKind::Sqrt ||
                        kind == UnaryKind::Rsqrt || kind == UnaryKind::Pow;
  Floats x = positive ? randomFloats(n, 0.2f, 5, seed) : randomFloats(n, -4, 4, seed);
  for (float &v : x)
    if (std::fabs(v) < 1e-2f)
      v = 0.5f;
  return x;
}

TEST(CpuKernelsElementwise, UnaryMatchesReference) {
  uint32_t seed = 10;
  for (UnaryKind kind : kAllUnary) {
    const Floats x = unaryInputs(kind, 1001, seed++);
    Floats y(x.size());
    unary(kind, static_cast<int64_t>(x.size()), x.data(), y.data(), kPowExponent);
    Doubles want(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      want[i] = unaryRef(kind, x[i]);
    expectClose(y, want, 2e-6, 1e-7, "unary " + std::to_string(static_cast<int>(kind)));
  }
}

TEST(CpuKernelsElementwise, GeluIsTheTanhApproximation) {
  // gelu(1) with approximate="tanh" is 0.8411920; the erf form would give 0.8413447.
  const float x = 1.0f;
  float y = 0;
  unary(UnaryKind::Gelu, 1, &x, &y);
  EXPECT_NEAR(y, 0.8411920f, 2e-7f);
}

TEST(CpuKernelsElementwise, GeluErfIsTheExactForm) {
  // gelu(1) = Phi(1) = 0.8413447 exactly; the tanh form gives 0.8411920.
  const float x = 1.0f;
  float y = 0;
  unary(UnaryKind::GeluErf, 1, &x, &y);
  EXPECT_NEAR(y, 0.8413447f, 2e-7f);
}

TEST(CpuKernelsElementwise, UnaryAtTheEndsOfTheFloatRange) {
  const Floats x = {-INFINITY, -200, -104, -100, -87.5f, 88.5f, 88.75f, 200, INFINITY, NAN};
  const size_t n = x.size();
  Floats y(n);
  unary(UnaryKind::Exp, static_cast<int64_t>(n), x.data(), y.data());
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_LE(y[2], 1.5e-45f);                // e^-104 is half the smallest subnormal
  EXPECT_NEAR(y[3], 3.720076e-44f, 2e-45f); // subnormal
  EXPECT_NEAR(y[4] / std::exp(-87.5), 1.0, 1e-6);
  EXPECT_NEAR(y[5] / std::exp(88.5), 1.0, 1e-6);
  EXPECT_EQ(y[6], INFINITY);
  EXPECT_EQ(y[7], INFINITY);
  EXPECT_EQ(y[8], INFINITY);
  EXPECT_TRUE(std::isnan(y[9]));
  unary(UnaryKind::Sigmoid, static_cast<int64_t>(n), x.data(), y.data());
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[7], 1.0f);
  EXPECT_EQ(y[8], 1.0f);
  unary(UnaryKind::Gelu, static_cast<int64_t>(n), x.data(), y.data());
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[7], 200.0f);
  unary(UnaryKind::Silu, static_cast<int64_t>(n), x.data(), y.data());
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[7], 200.0f);
}

TEST(CpuKernelsElementwise, UnaryGivesTheSameBitsAtAnyPosition) {
  // Elements go through vector lanes or the scalar tail depending on where they fall; both
  // must compute the same bits, or results would depend on how work is split.
  const Floats x = randomFloats(37, -6, 6, 40);
  for (UnaryKind kind : {UnaryKind::Exp, UnaryKind::Gelu, UnaryKind::Silu, UnaryKind::Sigmoid}) {
    Floats whole(x.size());
    unary(kind, static_cast<int64_t>(x.size()), x.data(), whole.data());
    Floats grad(x.size());
    unaryGrad(kind, static_cast<int64_t>(x.size()), x.data(), whole.data(), x.data(), grad.data());
    for (size_t offset = 1; offset < 4; ++offset) {
      Floats part(x.size() - offset), partGrad(x.size() - offset);
      unary(kind, static_cast<int64_t>(part.size()), x.data() + offset, part.data());
      unaryGrad(kind, static_cast<int64_t>(part.size()), x.data() + offset, whole.data() + offset,
                x.data() + offset, partGrad.data());
      for (size_t i = 0; i < part.size(); ++i) {
        EXPECT_EQ(part[i], whole[i + offset]) << static_cast<int>(kind) << " at " << i;
        EXPECT_EQ(partGrad[i], grad[i + offset]) << static_cast<int>(kind) << " at " << i;
      }
    }
  }
}

TEST(CpuKernelsElementwise, UnaryGradMatchesFiniteDifferences) {
  uint32_t seed = 30;
  for (UnaryKind kind : kAllUnary) {
    const Floats x = unaryInputs(kind, 301, seed++);
    const Floats dy = randomFloats(x.size(), -1, 1, seed++);
    const int64_t n = static_cast<int64_t>(x.size());
    Floats y(x.size()), dx(x.size());
    unary(kind, n, x.data(), y.data(), kPowExponent);
    unaryGrad(kind, n, x.data(), y.data(), dy.data(), dx.data(), kPowExponent);
    Doubles want(x.size());
    const double h = 1e-6;
    for (size_t i = 0; i < x.size(); ++i)
      want[i] = dy[i] * (unaryRef(kind, x[i] + h) - unaryRef(kind, x[i] - h)) / (2 * h);
    expectClose(dx, want, 1e-4, 1e-6, "unaryGrad " + std::to_string(static_cast<int>(kind)));
  }
}

TEST(CpuKernelsElementwise, StridedCopyPermutesAndBroadcasts) {
  // x is stored [2,3,4,5]; view it with dims permuted to (3,1,0,2) and (0,2,1,3).
  const Shape stored = shapeOf({2, 3, 4, 5});
  const Strides ds = denseStrides(stored);
  const Floats x = randomFloats(120, -1, 1, 50);
  struct Case {
    Shape shape;
    Strides strides;
  };
  const Case cases[] = {
      {shapeOf({5, 3, 2, 4}), stridesOf({ds.stride[3], ds.stride[1], ds.stride[0], ds.stride[2]})},
      {shapeOf({2, 4, 3, 5}), stridesOf({ds.stride[0], ds.stride[2], ds.stride[1], ds.stride[3]})},
      // Broadcast a [3] vector to [4,3] and a scalar to [2,2].
      {shapeOf({4, 3}), stridesOf({0, 1})},
      {shapeOf({2, 2}), stridesOf({0, 0})},
      // A strided slice: every other element of each row of [4,30].
      {shapeOf({4, 15}), stridesOf({30, 2})},
  };
  for (const Case &c : cases) {
    const int64_t n = c.shape.numElements();
    Floats out(static_cast<size_t>(n), NAN);
    stridedCopy(c.shape, x.data(), c.strides, out.data());
    Doubles want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      want[i] = x[offsetOf(c.shape, c.strides, i)];
    expectClose(out, want, 0, 0, "stridedCopy");
  }
  // A large [64,40,30] transposed to [30,40,64], split over threads.
  const Floats big = randomFloats(64 * 40 * 30, -1, 1, 51);
  const Shape t = shapeOf({30, 40, 64});
  const Strides ts = stridesOf({1, 30, 1200});
  Floats out(big.size());
  stridedCopy(t, big.data(), ts, out.data());
  Doubles want(big.size());
  for (int64_t i = 0; i < t.numElements(); ++i)
    want[i] = big[offsetOf(t, ts, i)];
  expectClose(out, want, 0, 0, "large transpose");
}

TEST(CpuKernelsElementwise, Scale) {
  const Floats x = randomFloats(77, -3, 3, 60);
  Floats y(x.size());
  scale(77, x.data(), -0.25f, y.data());
  Doubles want(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    want[i] = x[i] * -0.25;
  expectClose(y, want, 0, 0, "scale");
}

} // namespace

// In a mixed-precision plan the unfused kernels store each value 16-bit; a fused body marks
// those steps rounded, and gives the bits of the unfused kernels with 16-bit buffers between.
TEST(CpuKernelsElementwise, RoundedFusedStepsGiveTheBitsOfSixteenBitBuffers) {
  const Shape shape = shapeOf({3, 2053});
  const int64_t n = shape.numElements();
  const Floats x = randomFloats(static_cast<size_t>(n), -3, 3, 80);
  const Floats b = randomFloats(static_cast<size_t>(n), -1, 1, 81);
  const Strides dense = denseStrides(shape);
  for (DType type : {DType::BF16, DType::F16}) {
    // Unfused: h = x + b stored 16-bit, then y = gelu(h) stored 16-bit, z = y * h in f32.
    auto stored = [&](Floats v) {
      std::vector<uint16_t> bits(v.size());
      narrow(type, n, v.data(), bits.data());
      widen(type, n, bits.data(), v.data());
      return v;
    };
    Floats h(static_cast<size_t>(n)), y(h.size()), z(h.size());
    binary(BinaryKind::Add, shape, x.data(), dense, b.data(), dense, h.data());
    h = stored(h);
    unary(UnaryKind::Gelu, n, h.data(), y.data());
    y = stored(y);
    binary(BinaryKind::Mul, shape, y.data(), dense, h.data(), dense, z.data());

    std::vector<FusedStep> steps(3);
    steps[0].kind = steps[2].kind = FusedStep::Kind::Binary;
    steps[0].binary = BinaryKind::Add, steps[0].args[0] = 0, steps[0].args[1] = 1;
    steps[1].kind = FusedStep::Kind::Unary, steps[1].unary = UnaryKind::Gelu, steps[1].args[0] = 2;
    steps[2].binary = BinaryKind::Mul, steps[2].args[0] = 3, steps[2].args[1] = 2;
    for (int j : {0, 1}) {
      steps[j].rounded = true;
      steps[j].narrow = type;
    }
    Floats out(static_cast<size_t>(n), NAN);
    fusedElementwise(shape, steps, {x.data(), b.data()}, {dense, dense}, {out.data()}, {2});
    EXPECT_EQ(0, std::memcmp(out.data(), z.data(), z.size() * sizeof(float)))
        << (type == DType::BF16 ? "bf16" : "f16");
    // Unrounded, the body computes in f32 throughout: other bits.
    steps[0].rounded = steps[1].rounded = false;
    fusedElementwise(shape, steps, {x.data(), b.data()}, {dense, dense}, {out.data()}, {2});
    EXPECT_NE(0, std::memcmp(out.data(), z.data(), z.size() * sizeof(float)));
  }
}

TEST(CpuKernelsElementwise, FusedGivesTheBitsOfTheUnfusedKernels) {
  // Every step kind over several tiles (and threads): a dense input, a bias read through
  // strides and a permuted one; each step's value must equal, bit for bit, what its own
  // kernel gives on the whole tensor.
  const Shape shape = shapeOf({7, 9, 531});
  const int64_t n = shape.numElements();
  const Floats x = randomFloats(static_cast<size_t>(n), -3, 3, 70);
  const Floats bias = randomFloats(531, -1, 1, 71);
  const Floats perm = randomFloats(static_cast<size_t>(n), -2, 2, 72); // [531, 7, 9]
  const Strides dense = denseStrides(shape), sBias = stridesOf({0, 0, 1}),
                sPerm = stridesOf({9, 1, 63});
  std::vector<FusedStep> steps;
  std::vector<Floats> want;
  auto add = [&](FusedStep s, Floats value) {
    steps.push_back(s);
    want.push_back(std::move(value));
  };
  auto step = [](FusedStep::Kind kind, int32_t a, int32_t b = 0, int32_t c = 0) {
    FusedStep s;
    s.kind = kind;
    s.args[0] = a, s.args[1] = b, s.args[2] = c;
    return s;
  };
  const int32_t kInputs = 3; // x0 = x, x1 = bias, x2 = perm; step j is value kInputs + j.
  Floats h(static_cast<size_t>(n));
  binary(BinaryKind::Add, shape, x.data(), dense, bias.data(), sBias, h.data());
  FusedStep s0 = step(FusedStep::Kind::Binary, 0, 1);
  add(s0, h);
  Floats p(static_cast<size_t>(n));
  stridedCopy(shape, perm.data(), sPerm, p.data());
  const std::vector<UnaryKind> kinds = {
      UnaryKind::Neg,    UnaryKind::Exp,  UnaryKind::Log,    UnaryKind::Sqrt, UnaryKind::Rsqrt,
      UnaryKind::Tanh,   UnaryKind::Gelu, UnaryKind::Silu,   UnaryKind::Relu, UnaryKind::Sigmoid,
      UnaryKind::Square, UnaryKind::Pow,  UnaryKind::GeluErf};
  for (UnaryKind kind : kinds) {
    const float e = kind == UnaryKind::Pow ? 2.5f : 0.0f;
    Floats y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
    unary(kind, n, h.data(), y.data(), e);
    FusedStep u = step(FusedStep::Kind::Unary, kInputs);
    u.unary = kind, u.value = e;
    add(u, y);
    const int32_t yValue = kInputs + static_cast<int32_t>(steps.size()) - 1;
    unaryGrad(kind, n, h.data(), y.data(), p.data(), dx.data(), e);
    FusedStep g = step(FusedStep::Kind::UnaryGrad, kInputs, yValue, 2);
    g.unary = kind, g.value = e;
    add(g, dx);
  }
  for (BinaryKind kind : {BinaryKind::Sub, BinaryKind::Div, BinaryKind::Lt, BinaryKind::Ne}) {
    Floats y(static_cast<size_t>(n));
    binary(kind, shape, h.data(), dense, perm.data(), sPerm, y.data());
    FusedStep b = step(FusedStep::Kind::Binary, kInputs, 2);
    b.binary = kind;
    add(b, y);
  }
  FusedStep c = step(FusedStep::Kind::Const, 0);
  c.value = -0.75f;
  add(c, Floats(static_cast<size_t>(n), -0.75f));
  const int32_t lt = kInputs + static_cast<int32_t>(steps.size()) - 3,
                constant = kInputs + static_cast<int32_t>(steps.size()) - 1;
  Floats sel(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    sel[i] = want[lt - kInputs][i] != 0.0f ? h[i] : -0.75f;
  add(step(FusedStep::Kind::Where, lt, kInputs, constant), sel);

  // Every step is an output, and the last one twice (the second is copied, not computed).
  std::vector<Floats> outs(steps.size() + 1, Floats(static_cast<size_t>(n), NAN));
  std::vector<float *> outPtrs;
  std::vector<int32_t> outSteps;
  for (size_t j = 0; j < outs.size(); ++j) {
    outPtrs.push_back(outs[j].data());
    outSteps.push_back(static_cast<int32_t>(std::min(j, steps.size() - 1)));
  }
  fusedElementwise(shape, steps, {x.data(), bias.data(), perm.data()}, {dense, sBias, sPerm},
                   outPtrs, outSteps);
  for (size_t j = 0; j < outs.size(); ++j) {
    const Floats &w = want[outSteps[j]];
    EXPECT_EQ(0, std::memcmp(outs[j].data(), w.data(), w.size() * sizeof(float)))
        << "step " << outSteps[j];
  }
}
