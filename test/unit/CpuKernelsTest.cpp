//===- CpuKernelsTest.cpp - The CPU kernels against double references -----===//
//
// Each kernel runs on small random inputs (odd shapes, broadcasts, permutations, batches) and
// is compared with a naive double-precision reference written here; every gradient kernel is
// compared with central finite differences of that reference. Large cases run again on 1, 2
// and 3 threads and must give the same bits.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "test/unit/KernelShapes.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <vector>

using namespace tessel::cpu;

namespace {

using Floats = std::vector<float>;
using Doubles = std::vector<double>;

using tessel::test::randomFloats;
using tessel::test::attentionOf;

std::vector<int32_t> randomIds(size_t n, int32_t limit, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, limit - 1);
  std::vector<int32_t> ids(n);
  for (int32_t &id : ids)
    id = dist(rng);
  return ids;
}

Doubles toDoubles(const Floats &v) { return Doubles(v.begin(), v.end()); }

Shape makeShape(std::initializer_list<int64_t> sizes) {
  Shape s;
  for (int64_t size : sizes)
    s.size[s.rank++] = size;
  return s;
}

Strides makeStrides(std::initializer_list<int64_t> strides) {
  Strides s;
  int d = 0;
  for (int64_t stride : strides)
    s.stride[d++] = stride;
  return s;
}

/// The offset of dense index `linear` of `shape` in an operand with strides `s`.
int64_t offsetOf(const Shape &shape, const Strides &s, int64_t linear) {
  int64_t offset = 0;
  for (int d = shape.rank - 1; d >= 0; --d) {
    offset += (linear % shape.size[d]) * s.stride[d];
    linear /= shape.size[d];
  }
  return offset;
}

/// Expects |got - want| <= atol + rtol * |want| element by element; reports the worst one.
void expectClose(const Floats &got, const Doubles &want, double rtol, double atol,
                 const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t worst = 0, bad = 0;
  double worstExcess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double limit = atol + rtol * std::fabs(want[i]);
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= limit))
      ++bad;
    if (!(err - limit <= worstExcess)) {
      worstExcess = err - limit;
      worst = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements off; worst at "
                     << worst << ": got " << got[worst] << ", want " << want[worst];
}

/// d/dx[i] of f at x for every i, by central differences in double.
Doubles numericGradient(const std::function<double(const Doubles &)> &f, Doubles x,
                        double h = 1e-6) {
  Doubles grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double plus = f(x);
    x[i] = saved - h;
    const double minus = f(x);
    x[i] = saved;
    grad[i] = (plus - minus) / (2 * h);
  }
  return grad;
}

double dot(const Doubles &a, const Doubles &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

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
  const Shape s3 = makeShape({3, 5, 7});
  cases.push_back({"dense", s3, denseStrides(s3), denseStrides(s3), 105, 105});
  // [3,5,7] + [7]: a bias along the leading dims.
  cases.push_back({"bias", s3, denseStrides(s3), makeStrides({0, 0, 1}), 105, 7});
  // [3,5,7] * [3,5,1]: a per-row scalar.
  cases.push_back({"row-scalar", s3, denseStrides(s3), makeStrides({5, 1, 0}), 105, 15});
  // [3,1,7] - [1,5,7] broadcast on both sides; a is the lhs, b the rhs.
  cases.push_back({"both-broadcast", s3, makeStrides({7, 0, 1}), makeStrides({0, 7, 1}), 21, 35});
  // a read transposed: a is stored [7,5,3] and viewed as [3,5,7].
  cases.push_back({"permuted", s3, makeStrides({1, 3, 15}), denseStrides(s3), 105, 105});
  // Scalar rhs, and a size-1 dim in the middle.
  const Shape s4 = makeShape({2, 1, 4, 6});
  cases.push_back({"scalar", s4, denseStrides(s4), makeStrides({0, 0, 0, 0}), 48, 1});
  // Large enough for several threads: a permuted lhs plus a bias, [3,70,200].
  const Shape big = makeShape({3, 70, 200});
  cases.push_back({"large", big, makeStrides({200, 600, 1}), makeStrides({0, 0, 1}), 42000, 200});
  // Large with the broadcast dim innermost: [300,2,70] + [300,1,1].
  const Shape big2 = makeShape({300, 2, 70});
  cases.push_back({"large-row", big2, denseStrides(big2), makeStrides({1, 0, 0}), 42000, 300});
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
  const Shape s = makeShape({3, 3});
  const Floats pos = {0, 1, 2};
  Floats out(9);
  binary(BinaryKind::Le, s, pos.data(), makeStrides({1, 0}), pos.data(), makeStrides({0, 1}),
         out.data());
  EXPECT_EQ(out, (Floats{1, 1, 1, 0, 1, 1, 0, 0, 1}));
  binary(BinaryKind::Lt, s, pos.data(), makeStrides({1, 0}), pos.data(), makeStrides({0, 1}),
         out.data());
  EXPECT_EQ(out, (Floats{0, 1, 1, 0, 0, 1, 0, 0, 0}));
  binary(BinaryKind::Eq, s, pos.data(), makeStrides({1, 0}), pos.data(), makeStrides({0, 1}),
         out.data());
  EXPECT_EQ(out, (Floats{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  const Floats nan = {NAN};
  binary(BinaryKind::Ne, makeShape({1}), nan.data(), makeStrides({1}), nan.data(), makeStrides({1}),
         out.data());
  EXPECT_EQ(out[0], 1.0f); // NaN differs from everything, itself included, as in IEEE 754.
}

TEST(CpuKernelsElementwise, SelectBroadcastsEachOperand) {
  // where(mask [3, 3], scores [2, 3, 3], -inf): the mask broadcast over the leading dim.
  const Shape s = makeShape({2, 3, 3});
  const Floats mask = {1, 1, 1, 0, 1, 1, 0, 0, 1};
  Floats scores(18);
  for (size_t i = 0; i < scores.size(); ++i)
    scores[i] = static_cast<float>(i);
  const Floats fill = {-INFINITY};
  Floats out(18);
  select(s, mask.data(), makeStrides({0, 3, 1}), scores.data(), denseStrides(s), fill.data(),
         makeStrides({0, 0, 0}), out.data());
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(out[i], mask[i % 9] != 0 ? scores[i] : -INFINITY) << i;
}

TEST(CpuKernelsElementwise, PositionsCount) {
  Floats out(5, NAN);
  positions(5, out.data());
  EXPECT_EQ(out, (Floats{0, 1, 2, 3, 4}));
}

TEST(CpuKernelsElementwise, BinarySubtractsInOperandOrder) {
  const Shape s = makeShape({2, 2});
  const Floats a = {10, 20, 30, 40}, b = {1, 2};
  Floats out(4);
  binary(BinaryKind::Sub, s, a.data(), denseStrides(s), b.data(), makeStrides({0, 1}), out.data());
  EXPECT_EQ(out, (Floats{9, 18, 29, 38}));
  binary(BinaryKind::Div, s, a.data(), denseStrides(s), b.data(), makeStrides({1, 0}), out.data());
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
  const Shape stored = makeShape({2, 3, 4, 5});
  const Strides ds = denseStrides(stored);
  const Floats x = randomFloats(120, -1, 1, 50);
  struct Case {
    Shape shape;
    Strides strides;
  };
  const Case cases[] = {
      {makeShape({5, 3, 2, 4}),
       makeStrides({ds.stride[3], ds.stride[1], ds.stride[0], ds.stride[2]})},
      {makeShape({2, 4, 3, 5}),
       makeStrides({ds.stride[0], ds.stride[2], ds.stride[1], ds.stride[3]})},
      // Broadcast a [3] vector to [4,3] and a scalar to [2,2].
      {makeShape({4, 3}), makeStrides({0, 1})},
      {makeShape({2, 2}), makeStrides({0, 0})},
      // A strided slice: every other element of each row of [4,30].
      {makeShape({4, 15}), makeStrides({30, 2})},
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
  const Shape t = makeShape({30, 40, 64});
  const Strides ts = makeStrides({1, 30, 1200});
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

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

TEST(CpuKernelsReduce, ReduceSumMatchesReference) {
  struct Case {
    const char *name;
    Shape shape;
    Strides so;
    int64_t outElements;
    float scale;
  };
  const Case cases[] = {
      {"leading", makeShape({4, 6, 70}), makeStrides({0, 0, 1}), 70, 1},
      {"trailing", makeShape({5, 7, 9}), makeStrides({1, 0, 0}), 5, 1},
      {"middle-mean", makeShape({3, 40, 5}), makeStrides({5, 0, 1}), 15, 1.0f / 40},
      {"non-adjacent", makeShape({4, 5, 6, 7}), makeStrides({0, 7, 0, 1}), 35, 1},
      {"alternate", makeShape({4, 5, 6, 7}), makeStrides({6, 0, 1, 0}), 24, 1},
      {"all", makeShape({3, 4, 5}), makeStrides({0, 0, 0}), 1, 0.5f},
      {"none", makeShape({3, 4}), makeStrides({4, 1}), 12, 2},
      // Output stored transposed: [7,5] written as out[j * 5 + i] for x [6,5,7] over dim 0.
      {"transposed-out", makeShape({6, 5, 7}), makeStrides({0, 1, 5}), 35, 1},
      // Large ones, split over threads: a column sum and a row sum.
      {"large-columns", makeShape({300, 130}), makeStrides({0, 1}), 130, 1},
      {"large-rows", makeShape({130, 300}), makeStrides({1, 0}), 130, 1},
  };
  uint32_t seed = 70;
  for (const Case &c : cases) {
    const int64_t n = c.shape.numElements();
    const Floats x = randomFloats(static_cast<size_t>(n), -1, 1, seed++);
    Floats out(static_cast<size_t>(c.outElements), NAN);
    reduceSum(c.shape, x.data(), c.so, c.outElements, c.scale, out.data());
    Doubles want(static_cast<size_t>(c.outElements), 0.0);
    for (int64_t i = 0; i < n; ++i)
      want[offsetOf(c.shape, c.so, i)] += x[i];
    for (double &w : want)
      w *= c.scale;
    expectClose(out, want, 1e-6, 1e-6, c.name);
  }
}

// Each output sums its terms in runs of kReduceRun (in f64, in order), then the runs in order:
// the contract the CUDA kernel meets bit for bit. Column sums, row sums whose runs end inside
// a row, and a reduction over several dims whose rows are shorter than a run.
TEST(CpuKernelsReduce, ReduceSumAddsRunsInOrder) {
  struct Case {
    const char *name;
    Shape shape;
    Strides so;
    int64_t outElements;
  };
  const Case cases[] = {
      {"columns", makeShape({1000, 3}), makeStrides({0, 1}), 3},
      {"rows", makeShape({3, 1000}), makeStrides({1, 0}), 3},
      {"short rows", makeShape({300, 2, 5}), makeStrides({0, 1, 0}), 2},
      {"all", makeShape({7, 130}), makeStrides({0, 0}), 1},
  };
  uint32_t seed = 90;
  for (const Case &c : cases) {
    const int64_t n = c.shape.numElements();
    const Floats x = randomFloats(static_cast<size_t>(n), -1, 1, seed++);
    Floats out(static_cast<size_t>(c.outElements), NAN);
    reduceSum(c.shape, x.data(), c.so, c.outElements, 0.5f, out.data());
    // Each output's terms in increasing index order, then summed run by run.
    std::vector<Doubles> terms(static_cast<size_t>(c.outElements));
    for (int64_t i = 0; i < n; ++i)
      terms[offsetOf(c.shape, c.so, i)].push_back(x[i]);
    for (size_t o = 0; o < terms.size(); ++o) {
      ASSERT_GT(terms[o].size(), size_t(kReduceRun)) << c.name;
      double total = 0.0, run = 0.0;
      for (size_t t = 0; t < terms[o].size(); ++t) {
        run += terms[o][t];
        if ((t + 1) % kReduceRun == 0) {
          total += run;
          run = 0.0;
        }
      }
      const float want = static_cast<float>((total + run) * 0.5f);
      EXPECT_EQ(out[o], want) << c.name << ", output " << o;
    }
  }
}

TEST(CpuKernelsReduce, SumOfSquares) {
  const Floats x = randomFloats(10001, -2, 2, 80);
  double want = 0;
  for (float v : x)
    want += static_cast<double>(v) * v;
  EXPECT_NEAR(sumOfSquares(10001, x.data()), want, 1e-9 * want);
  EXPECT_EQ(sumOfSquares(0, x.data()), 0.0);
}

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

GemmArgs gemmArgs(int64_t batch, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  GemmArgs g;
  g.batch = batch;
  g.m = m;
  g.n = n;
  g.k = k;
  g.transA = ta;
  g.transB = tb;
  g.lda = ta ? m : k;
  g.ldb = tb ? k : n;
  g.ldc = n;
  g.strideA = m * k;
  g.strideB = k * n;
  g.strideC = m * n;
  return g;
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

//===----------------------------------------------------------------------===//
// Softmax and norms
//===----------------------------------------------------------------------===//

Doubles softmaxRef(int64_t rows, int64_t cols, const Doubles &x) {
  Doubles y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < cols; ++j)
      max = std::max(max, x[r * cols + j]);
    for (int64_t j = 0; j < cols; ++j)
      sum += std::exp(x[r * cols + j] - max);
    for (int64_t j = 0; j < cols; ++j)
      y[r * cols + j] = std::exp(x[r * cols + j] - max) / sum;
  }
  return y;
}

TEST(CpuKernelsRouting, TopKMaskChoosesTheLargestAndBreaksTiesByColumn) {
  // Row 0: plain; row 1: a tie between columns 1 and 3 for the second place; row 2: a NaN,
  // which ranks first; row 3: k = cols chooses everything.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {0.1f, 0.7f, 0.3f, 0.2f, //
                                0.9f, 0.5f, 0.1f, 0.5f, //
                                0.2f, nan,  0.8f, 0.1f};
  std::vector<float> y(12);
  topKMask(3, 4, 2, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{0, 1, 1, 0, 1, 1, 0, 0, 0, 1, 1, 0}));
  std::vector<float> all(4);
  topKMask(1, 4, 4, x.data(), all.data());
  EXPECT_EQ(all, (std::vector<float>{1, 1, 1, 1}));
}

TEST(CpuKernelsNorm, SoftmaxAndGrad) {
  const int64_t rows = 6, cols = 13;
  Floats x = randomFloats(rows * cols, -5, 5, 300);
  x[0] = 80; // exp(80) overflows float unless the row max is subtracted
  Floats y(x.size());
  softmax(rows, cols, x.data(), y.data());
  expectClose(y, softmaxRef(rows, cols, toDoubles(x)), 1e-5, 1e-7, "softmax");

  const Floats w = randomFloats(x.size(), -1, 1, 301);
  Floats dx(x.size());
  softmaxGrad(rows, cols, y.data(), w.data(), dx.data());
  const Doubles wd = toDoubles(w);
  const Doubles want = numericGradient(
      [&](const Doubles &xd) { return dot(wd, softmaxRef(rows, cols, xd)); }, toDoubles(x));
  expectClose(dx, want, 1e-4, 1e-5, "softmaxGrad");
}

Doubles layerNormRef(int64_t rows, int64_t cols, const Doubles &x, const Doubles &g,
                     const Doubles &b, double eps) {
  Doubles y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j)
      mean += x[r * cols + j] / cols;
    for (int64_t j = 0; j < cols; ++j)
      var += (x[r * cols + j] - mean) * (x[r * cols + j] - mean) / cols;
    for (int64_t j = 0; j < cols; ++j)
      y[r * cols + j] = (x[r * cols + j] - mean) / std::sqrt(var + eps) * g[j] + b[j];
  }
  return y;
}

TEST(CpuKernelsNorm, LayerNormAndGrad) {
  const int64_t rows = 5, cols = 11;
  const float eps = 1e-5f;
  const Floats x = randomFloats(rows * cols, -2, 3, 310);
  const Floats g = randomFloats(cols, 0.5f, 1.5f, 311), b = randomFloats(cols, -1, 1, 312);
  Floats y(x.size());
  layerNorm(rows, cols, x.data(), g.data(), b.data(), eps, y.data());
  const Doubles xd = toDoubles(x), gd = toDoubles(g), bd = toDoubles(b);
  expectClose(y, layerNormRef(rows, cols, xd, gd, bd, eps), 1e-5, 1e-5, "layerNorm");

  const Doubles w = toDoubles(randomFloats(x.size(), -1, 1, 313));
  const Floats dy(w.begin(), w.end());
  Floats dx(x.size()), dg(cols, NAN), db(cols, NAN);
  layerNormGrad(rows, cols, x.data(), g.data(), dy.data(), eps, dx.data(), dg.data(), db.data());
  auto loss = [&](const Doubles &xs, const Doubles &gs, const Doubles &bs) {
    return dot(w, layerNormRef(rows, cols, xs, gs, bs, eps));
  };
  expectClose(dx, numericGradient([&](const Doubles &v) { return loss(v, gd, bd); }, xd), 1e-4,
              1e-5, "layerNormGrad dx");
  expectClose(dg, numericGradient([&](const Doubles &v) { return loss(xd, v, bd); }, gd), 1e-4,
              1e-5, "layerNormGrad dg");
  expectClose(db, numericGradient([&](const Doubles &v) { return loss(xd, gd, v); }, bd), 1e-4,
              1e-5, "layerNormGrad db");
}

TEST(CpuKernelsNorm, LayerNormUsesBiasedVariance) {
  // Row [1, 3]: mean 2, biased variance 1, so y = [-1, 1] (unbiased would give +-0.7071).
  const Floats x = {1, 3}, g = {1, 1}, b = {0, 0};
  Floats y(2);
  layerNorm(1, 2, x.data(), g.data(), b.data(), 0.0f, y.data());
  EXPECT_FLOAT_EQ(y[0], -1.0f);
  EXPECT_FLOAT_EQ(y[1], 1.0f);
}

Doubles rmsNormRef(int64_t rows, int64_t cols, const Doubles &x, const Doubles &g, double eps) {
  Doubles y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t j = 0; j < cols; ++j)
      ms += x[r * cols + j] * x[r * cols + j] / cols;
    for (int64_t j = 0; j < cols; ++j)
      y[r * cols + j] = x[r * cols + j] / std::sqrt(ms + eps) * g[j];
  }
  return y;
}

TEST(CpuKernelsNorm, RmsNormAndGrad) {
  const int64_t rows = 4, cols = 9;
  const float eps = 1e-6f;
  const Floats x = randomFloats(rows * cols, -2, 2, 320);
  const Floats g = randomFloats(cols, 0.5f, 1.5f, 321);
  Floats y(x.size());
  rmsNorm(rows, cols, x.data(), g.data(), eps, y.data());
  const Doubles xd = toDoubles(x), gd = toDoubles(g);
  expectClose(y, rmsNormRef(rows, cols, xd, gd, eps), 1e-5, 1e-6, "rmsNorm");

  const Doubles w = toDoubles(randomFloats(x.size(), -1, 1, 322));
  const Floats dy(w.begin(), w.end());
  Floats dx(x.size()), dg(cols, NAN);
  rmsNormGrad(rows, cols, x.data(), g.data(), dy.data(), eps, dx.data(), dg.data());
  auto loss = [&](const Doubles &xs, const Doubles &gs) {
    return dot(w, rmsNormRef(rows, cols, xs, gs, eps));
  };
  expectClose(dx, numericGradient([&](const Doubles &v) { return loss(v, gd); }, xd), 1e-4, 1e-5,
              "rmsNormGrad dx");
  expectClose(dg, numericGradient([&](const Doubles &v) { return loss(xd, v); }, gd), 1e-4, 1e-5,
              "rmsNormGrad dg");
}

//===----------------------------------------------------------------------===//
// Cross entropy and embedding
//===----------------------------------------------------------------------===//

double crossEntropyRef(int64_t rows, int64_t cols, const Doubles &x,
                       const std::vector<int32_t> &t) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < cols; ++j)
      max = std::max(max, x[r * cols + j]);
    for (int64_t j = 0; j < cols; ++j)
      sum += std::exp(x[r * cols + j] - max);
    total += max + std::log(sum) - x[r * cols + t[r]];
  }
  return total / rows;
}

TEST(CpuKernelsLoss, CrossEntropyAndGrad) {
  const int64_t rows = 7, cols = 10;
  Floats x = randomFloats(rows * cols, -4, 4, 400);
  x[3] = 95; // needs the max subtraction
  const std::vector<int32_t> t = randomIds(rows, cols, 401);
  float loss = NAN;
  std::string error;
  ASSERT_TRUE(crossEntropy(rows, cols, x.data(), t.data(), &loss, error)) << error;
  const Doubles xd = toDoubles(x);
  const double want = crossEntropyRef(rows, cols, xd, t);
  EXPECT_NEAR(loss, want, 1e-5 * std::fabs(want));

  const float dloss = 2.5f;
  Floats dx(x.size());
  ASSERT_TRUE(crossEntropyGrad(rows, cols, x.data(), t.data(), &dloss, dx.data(), error));
  Doubles grad =
      numericGradient([&](const Doubles &v) { return crossEntropyRef(rows, cols, v, t); }, xd);
  for (double &v : grad)
    v *= dloss;
  expectClose(dx, grad, 1e-4, 1e-6, "crossEntropyGrad");
}

TEST(CpuKernelsLoss, IgnoredTargetsCountNothing) {
  // Rows whose target is kIgnoredTarget (-1): the loss and gradient of the other rows alone,
  // and exactly zero gradient rows.
  const int64_t rows = 9, cols = 12;
  const Floats x = randomFloats(rows * cols, -4, 4, 410);
  std::vector<int32_t> t = randomIds(rows, cols, 411);
  t[0] = t[4] = t[8] = tessel::kernels::kIgnoredTarget;
  std::vector<int32_t> kept;
  Floats keptX;
  for (int64_t r = 0; r < rows; ++r)
    if (t[r] != tessel::kernels::kIgnoredTarget) {
      kept.push_back(t[r]);
      keptX.insert(keptX.end(), x.begin() + r * cols, x.begin() + (r + 1) * cols);
    }
  const int64_t n = static_cast<int64_t>(kept.size());
  const double scale = 1.0 / static_cast<double>(n);
  const float dloss = 1.5f;
  std::string error;
  float loss = NAN, want = NAN;
  ASSERT_TRUE(crossEntropy(rows, cols, x.data(), t.data(), scale, &loss, error)) << error;
  ASSERT_TRUE(crossEntropy(n, cols, keptX.data(), kept.data(), scale, &want, error)) << error;
  EXPECT_EQ(loss, want);
  Floats dx(x.size(), NAN), wantGrad(keptX.size());
  ASSERT_TRUE(crossEntropyGrad(rows, cols, x.data(), t.data(), &dloss, scale, dx.data(), error));
  ASSERT_TRUE(
      crossEntropyGrad(n, cols, keptX.data(), kept.data(), &dloss, scale, wantGrad.data(), error));
  int64_t k = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      const float got = dx[r * cols + j];
      if (t[r] == tessel::kernels::kIgnoredTarget)
        ASSERT_EQ(got, 0.0f) << "row " << r << " col " << j;
      else
        ASSERT_EQ(got, wantGrad[k * cols + j]) << "row " << r << " col " << j;
      k += j == cols - 1 && t[r] != tessel::kernels::kIgnoredTarget;
    }
  // Every target ignored: the loss is 0 and so is the gradient.
  const std::vector<int32_t> none(rows, tessel::kernels::kIgnoredTarget);
  ASSERT_TRUE(crossEntropy(rows, cols, x.data(), none.data(), &loss, error));
  EXPECT_EQ(loss, 0.0f);
}

TEST(CpuKernelsShardedLoss, IgnoredRowsAreSkippedButNonFiniteSumsAreNot) {
  // ce_sums marks an ignored row with s = 0; a NaN or infinite sum must still reach the loss.
  const Floats m = {0, 0, 0}, t = {0, 0, 0};
  float loss = 0;
  ceLoss(3, m.data(), Floats{1, 0, 1}.data(), t.data(), 1.0, &loss);
  EXPECT_EQ(loss, 0.0f);
  ceLoss(3, m.data(), Floats{1, 0, NAN}.data(), t.data(), 1.0, &loss);
  EXPECT_TRUE(std::isnan(loss));
  ceLoss(3, m.data(), Floats{INFINITY, 0, 1}.data(), t.data(), 1.0, &loss);
  EXPECT_TRUE(std::isinf(loss));
}

TEST(CpuKernelsLoss, CrossEntropyRejectsBadTargets) {
  const int64_t rows = 20, cols = 256;
  const Floats x(rows * cols, 0.0f);
  std::vector<int32_t> t(rows, 5);
  t[17] = 300;
  float loss = 0;
  Floats dx(x.size());
  const float dloss = 1;
  std::string error;
  EXPECT_FALSE(crossEntropy(rows, cols, x.data(), t.data(), &loss, error));
  EXPECT_EQ(error, "token id 300 at position 17 is outside the vocabulary of 256");
  error.clear();
  t[17] = 5;
  t[2] = -2; // -1 is an ignored target
  EXPECT_FALSE(crossEntropyGrad(rows, cols, x.data(), t.data(), &dloss, dx.data(), error));
  EXPECT_EQ(error, "token id -2 at position 2 is outside the vocabulary of 256");
  t[2] = 255;
  EXPECT_TRUE(crossEntropy(rows, cols, x.data(), t.data(), &loss, error));
  EXPECT_NEAR(loss, std::log(256.0), 1e-5);
}

TEST(CpuKernelsEmbedding, LookupAndGrad) {
  const int64_t n = 12, rows = 5, cols = 7;
  const Floats table = randomFloats(rows * cols, -1, 1, 500);
  // Repeated ids, and row 4 never used (its gradient must be zero, not left over).
  const std::vector<int32_t> ids = {0, 3, 3, 1, 0, 2, 3, 1, 0, 0, 2, 3};
  std::string error;
  Floats out(n * cols);
  ASSERT_TRUE(embedding(n, rows, cols, table.data(), ids.data(), out.data(), error));
  Doubles want(out.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < cols; ++j)
      want[i * cols + j] = table[ids[i] * cols + j];
  expectClose(out, want, 0, 0, "embedding");

  const Floats dout = randomFloats(n * cols, -1, 1, 501);
  Floats dtable(rows * cols, NAN);
  ASSERT_TRUE(embeddingGrad(n, rows, cols, dout.data(), ids.data(), dtable.data(), error));
  Doubles wantGrad(dtable.size(), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < cols; ++j)
      wantGrad[ids[i] * cols + j] += dout[i * cols + j];
  expectClose(dtable, wantGrad, 1e-6, 1e-7, "embeddingGrad");
}

TEST(CpuKernelsEmbedding, RejectsBadIds) {
  const int64_t rows = 256, cols = 4;
  const Floats table(rows * cols, 1.0f);
  std::vector<int32_t> ids(20, 7);
  ids[17] = 300;
  Floats out(ids.size() * cols), dtable(table.size());
  std::string error;
  EXPECT_FALSE(embedding(20, rows, cols, table.data(), ids.data(), out.data(), error));
  EXPECT_EQ(error, "token id 300 at position 17 is outside the vocabulary of 256");
  error.clear();
  ids[17] = 256;
  EXPECT_FALSE(embeddingGrad(20, rows, cols, out.data(), ids.data(), dtable.data(), error));
  EXPECT_EQ(error, "token id 256 at position 17 is outside the vocabulary of 256");
}

TEST(CpuKernelsEmbedding, NegativeIdsGiveZeroRows) {
  // Padding slots (negative ids) among real ids, on the whole table and on a rank's block of
  // rows [5, 10) of 15; an id of another rank's rows gives a zero row too.
  const int64_t rows = 5, cols = 6;
  const Floats table = randomFloats(rows * cols, -1, 1, 510);
  const std::vector<int32_t> ids = {-1, 2, -7, 4, 0, -2147483647 - 1};
  for (int64_t first : {int64_t(0), int64_t(5)}) {
    const std::vector<int32_t> here = first == 0 ? ids : std::vector<int32_t>{-1, 7, -7, 9, 2, -3};
    Floats out(here.size() * cols, NAN);
    std::string error;
    ASSERT_TRUE(embeddingRows(static_cast<int64_t>(here.size()), rows, cols, first, 3 * rows,
                              table.data(), here.data(), out.data(), error))
        << error;
    for (size_t i = 0; i < here.size(); ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t row = here[i] - first;
        const float want = here[i] >= 0 && row >= 0 && row < rows ? table[row * cols + j] : 0.0f;
        EXPECT_EQ(out[i * cols + j], want) << "first " << first << ", id " << here[i];
      }
  }
  // An id past the vocabulary is still refused.
  const std::vector<int32_t> past = {-1, 5};
  Floats out(2 * cols);
  std::string error;
  EXPECT_FALSE(embedding(2, rows, cols, table.data(), past.data(), out.data(), error));
  EXPECT_EQ(error, "token id 5 at position 1 is outside the vocabulary of 5");
}

//===----------------------------------------------------------------------===//
// Kernels of tensors split between ranks (the collectives between them done here in order)
//===----------------------------------------------------------------------===//

/// Columns [first, first + cols) of a [rows, whole] matrix.
Floats columns(const Floats &x, int64_t rows, int64_t whole, int64_t first, int64_t cols) {
  Floats out(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    std::copy(x.begin() + r * whole + first, x.begin() + r * whole + first + cols,
              out.begin() + r * cols);
  return out;
}

TEST(CpuKernelsShardedLoss, ScaledCrossEntropyIsAShareOfTheMean) {
  // A batch of 12 rows split in three: each part's loss scaled by 1/12 sums to the mean, and
  // each part's gradient is those rows of the whole gradient.
  const int64_t rows = 12, cols = 9, parts = 3, part = rows / parts;
  const Floats x = randomFloats(rows * cols, -4, 4, 450);
  const std::vector<int32_t> t = randomIds(rows, cols, 451);
  const float dloss = 1.5f;
  std::string error;
  float whole = 0;
  Floats wholeGrad(x.size());
  ASSERT_TRUE(crossEntropy(rows, cols, x.data(), t.data(), &whole, error));
  ASSERT_TRUE(crossEntropyGrad(rows, cols, x.data(), t.data(), &dloss, wholeGrad.data(), error));
  double sum = 0;
  for (int64_t p = 0; p < parts; ++p) {
    float loss = 0;
    Floats grad(part * cols);
    const float *xp = x.data() + p * part * cols;
    ASSERT_TRUE(crossEntropy(part, cols, xp, t.data() + p * part, 1.0 / rows, &loss, error));
    ASSERT_TRUE(crossEntropyGrad(part, cols, xp, t.data() + p * part, &dloss, 1.0 / rows,
                                 grad.data(), error));
    sum += loss;
    Doubles want(wholeGrad.begin() + p * part * cols, wholeGrad.begin() + (p + 1) * part * cols);
    expectClose(grad, want, 1e-6, 1e-9, "gradient of part " + std::to_string(p));
  }
  EXPECT_NEAR(sum, whole, 1e-6 * std::fabs(whole));
}

TEST(CpuKernelsShardedLoss, VocabularySplitMatchesWholeCrossEntropy) {
  const int64_t rows = 9;
  for (int64_t ways : {2, 4}) {
    const int64_t cols = 6, classes = ways * cols;
    Floats x = randomFloats(rows * classes, -5, 5, 460 + static_cast<uint32_t>(ways));
    x[2 * classes + classes - 1] = 60; // One row's max is far out, in the last rank's columns.
    std::vector<int32_t> t = randomIds(rows, static_cast<int32_t>(classes), 470);
    t[2] = static_cast<int32_t>(classes - 1);
    t[5] = tessel::kernels::kIgnoredTarget; // Counts nothing in either form.
    const double scale = 1.0 / rows;
    const float dloss = 0.75f;
    std::string error;
    float whole = 0;
    Floats wholeGrad(x.size());
    ASSERT_TRUE(crossEntropy(rows, classes, x.data(), t.data(), &whole, error));
    ASSERT_TRUE(
        crossEntropyGrad(rows, classes, x.data(), t.data(), &dloss, wholeGrad.data(), error));

    std::vector<Floats> block(ways);
    Floats m(rows, -INFINITY), s(rows, 0.0f), picked(rows, 0.0f);
    for (int64_t r = 0; r < ways; ++r) {
      block[r] = columns(x, rows, classes, r * cols, cols);
      Floats mr(rows);
      ceMax(rows, cols, block[r].data(), mr.data());
      for (int64_t i = 0; i < rows; ++i)
        m[i] = std::max(m[i], mr[i]); // all_reduce max
    }
    for (int64_t r = 0; r < ways; ++r) {
      Floats sr(rows), tr(rows);
      ASSERT_TRUE(ceSums(rows, cols, r * cols, classes, block[r].data(), t.data(), m.data(),
                         sr.data(), tr.data(), error))
          << error;
      for (int64_t i = 0; i < rows; ++i) { // all_reduce sum, in rank order
        s[i] += sr[i];
        picked[i] += tr[i];
      }
    }
    float loss = 0;
    ceLoss(rows, m.data(), s.data(), picked.data(), scale, &loss);
    EXPECT_NEAR(loss, whole, 1e-6 * std::fabs(whole)) << ways << " ways";
    for (int64_t r = 0; r < ways; ++r) {
      Floats grad(rows * cols);
      ASSERT_TRUE(ceGrad(rows, cols, r * cols, classes, block[r].data(), t.data(), m.data(),
                         s.data(), &dloss, scale, grad.data(), error));
      Floats want = columns(wholeGrad, rows, classes, r * cols, cols);
      expectClose(grad, toDoubles(want), 1e-6, 1e-9,
                  "ce_grad of rank " + std::to_string(r) + " of " + std::to_string(ways));
    }
  }
}

TEST(CpuKernelsShardedLoss, RejectsTargetsOutsideTheClasses) {
  const int64_t rows = 3, cols = 4;
  const Floats x(rows * cols, 0.0f), m(rows, 0.0f), s(rows, 1.0f);
  Floats sOut(rows), tOut(rows), grad(rows * cols);
  const std::vector<int32_t> t = {1, 8, 2}; // 8 is outside 2 ranks x 4 classes.
  const float dloss = 1;
  std::string error;
  EXPECT_FALSE(
      ceSums(rows, cols, 4, 8, x.data(), t.data(), m.data(), sOut.data(), tOut.data(), error));
  EXPECT_EQ(error, "token id 8 at position 1 is outside the vocabulary of 8");
  error.clear();
  EXPECT_FALSE(ceGrad(rows, cols, 0, 8, x.data(), t.data(), m.data(), s.data(), &dloss, 1.0,
                      grad.data(), error));
  EXPECT_EQ(error, "token id 8 at position 1 is outside the vocabulary of 8");
}

TEST(CpuKernelsEmbedding, RowSplitTablesAddUpToTheWhole) {
  const int64_t n = 14, vocab = 8, cols = 5;
  const Floats table = randomFloats(vocab * cols, -1, 1, 520);
  const std::vector<int32_t> ids = {7, 0, 3, 3, 6, 1, 0, 5, 2, 7, 7, 4, 0, 6};
  const Floats dout = randomFloats(n * cols, -1, 1, 521);
  std::string error;
  Floats whole(n * cols), wholeGrad(vocab * cols);
  ASSERT_TRUE(embedding(n, vocab, cols, table.data(), ids.data(), whole.data(), error));
  ASSERT_TRUE(embeddingGrad(n, vocab, cols, dout.data(), ids.data(), wholeGrad.data(), error));
  for (int64_t ways : {2, 4}) {
    const int64_t rows = vocab / ways;
    Floats sum(n * cols, 0.0f);
    for (int64_t r = 0; r < ways; ++r) {
      Floats out(n * cols, NAN), grad(rows * cols, NAN);
      const float *part = table.data() + r * rows * cols;
      ASSERT_TRUE(
          embeddingRows(n, rows, cols, r * rows, vocab, part, ids.data(), out.data(), error));
      for (size_t i = 0; i < sum.size(); ++i)
        sum[i] += out[i]; // Each row comes from one rank; the others give zeros.
      ASSERT_TRUE(embeddingGradRows(n, rows, cols, r * rows, vocab, dout.data(), ids.data(),
                                    grad.data(), error));
      Floats want(wholeGrad.begin() + r * rows * cols, wholeGrad.begin() + (r + 1) * rows * cols);
      EXPECT_EQ(std::memcmp(grad.data(), want.data(), want.size() * 4), 0)
          << "gradient rows of rank " << r << " of " << ways;
    }
    EXPECT_EQ(std::memcmp(sum.data(), whole.data(), whole.size() * 4), 0) << ways << " ways";
  }
  Floats out(n * cols), grad(2 * cols);
  std::vector<int32_t> bad = ids;
  bad[3] = 8;
  EXPECT_FALSE(embeddingRows(n, 2, cols, 6, vocab, table.data(), bad.data(), out.data(), error));
  EXPECT_EQ(error, "token id 8 at position 3 is outside the vocabulary of 8");
  error.clear();
  EXPECT_FALSE(
      embeddingGradRows(n, 2, cols, 6, vocab, dout.data(), bad.data(), grad.data(), error));
  EXPECT_EQ(error, "token id 8 at position 3 is outside the vocabulary of 8");
}

TEST(CpuKernelsPack, LaysEveryRanksBlocksSideBySide) {
  // Two inputs: a [2, ways, 3] and b [1, ways, 4]; part r of the bucket is a[:, r, :] then
  // b[:, r, :].
  for (int64_t ways : {1, 3}) {
    const int64_t outers[2] = {2, 1}, chunks[2] = {3, 4};
    const Floats a = randomFloats(2 * ways * 3, -1, 1, 530), b = randomFloats(ways * 4, -1, 1, 531);
    const float *inputs[2] = {a.data(), b.data()};
    const int64_t part = 2 * 3 + 4;
    Floats y(ways * part, NAN);
    pack(2, inputs, outers, chunks, ways, y.data());
    Doubles want;
    for (int64_t r = 0; r < ways; ++r) {
      for (int64_t o = 0; o < 2; ++o)
        for (int64_t j = 0; j < 3; ++j)
          want.push_back(a[(o * ways + r) * 3 + j]);
      for (int64_t j = 0; j < 4; ++j)
        want.push_back(b[r * 4 + j]);
    }
    expectClose(y, want, 0, 0, "pack with " + std::to_string(ways) + " ways");
  }
}

//===----------------------------------------------------------------------===//
// Attention and rope
//===----------------------------------------------------------------------===//

/// Attention in doubles; each query row's log-sum-exp goes to `lse` ([batch, seq, heads]) where
/// given.
Doubles attentionRef(const AttentionArgs &a, const Doubles &q, const Doubles &k, const Doubles &v,
                     Doubles *lse = nullptr) {
  const int64_t S = a.seq, T = a.kvSeq, H = a.heads, KH = a.kvHeads, D = a.head;
  Doubles out(q.size(), 0.0);
  if (lse)
    lse->assign(static_cast<size_t>(a.batch * S * H), 0.0);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / (H / KH);
      for (int64_t i = 0; i < S; ++i) {
        Doubles s(T, -INFINITY);
        double max = -INFINITY;
        for (int64_t j = 0; j < T; ++j) {
          if (a.causal && (j > i || (a.window > 0 && i - j >= a.window)))
            continue;
          double acc = 0;
          for (int64_t d = 0; d < D; ++d)
            acc += q[((b * S + i) * H + h) * D + d] * k[((b * T + j) * KH + kh) * D + d];
          s[j] = acc * a.scale;
          max = std::max(max, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < T; ++j)
          sum += std::exp(s[j] - max);
        if (lse)
          (*lse)[(b * S + i) * H + h] = max + std::log(sum);
        for (int64_t j = 0; j < T; ++j) {
          const double p = std::exp(s[j] - max) / sum;
          for (int64_t d = 0; d < D; ++d)
            out[((b * S + i) * H + h) * D + d] += p * v[((b * T + j) * KH + kh) * D + d];
        }
      }
    }
  return out;
}

AttentionArgs windowed(AttentionArgs a, int64_t window) {
  a.window = window;
  return a;
}

struct AttentionCase {
  const char *name;
  AttentionArgs args;
};

std::vector<AttentionCase> attentionCases() {
  return {
      {"causal", attentionOf(2, 5, 2, 5, 2, 4, true)},
      {"non-causal", attentionOf(2, 5, 2, 5, 2, 4, false)},
      {"gqa causal", attentionOf(2, 6, 4, 6, 2, 6, true)},
      {"mqa", attentionOf(1, 4, 3, 4, 1, 8, true)},
      {"cross", attentionOf(2, 3, 4, 7, 2, 5, false)},
      {"sliding window", windowed(attentionOf(2, 7, 2, 7, 1, 4, true), 3)},
  };
}

TEST(CpuKernelsAttention, ForwardMatchesReference) {
  uint32_t seed = 600;
  for (const AttentionCase &c : attentionCases()) {
    const AttentionArgs &a = c.args;
    const size_t qSize = static_cast<size_t>(a.batch * a.seq * a.heads * a.head);
    const size_t kSize = static_cast<size_t>(a.batch * a.kvSeq * a.kvHeads * a.head);
    const Floats q = randomFloats(qSize, -2, 2, seed++), k = randomFloats(kSize, -2, 2, seed++),
                 v = randomFloats(kSize, -1, 1, seed++);
    Floats out(qSize, NAN);
    attention(a, q.data(), k.data(), v.data(), out.data());
    expectClose(out, attentionRef(a, toDoubles(q), toDoubles(k), toDoubles(v)), 1e-5, 1e-6, c.name);
  }
}

TEST(CpuKernelsAttention, CausalMaskIgnoresLaterKeys) {
  // Changing the last key and value changes no output row but the last.
  AttentionArgs a = attentionOf(1, 4, 1, 4, 1, 3, true);
  const Floats q = randomFloats(12, -1, 1, 650), k = randomFloats(12, -1, 1, 651);
  Floats v = randomFloats(12, -1, 1, 652), k2 = k;
  Floats out(12), out2(12);
  attention(a, q.data(), k.data(), v.data(), out.data());
  for (int d = 9; d < 12; ++d) {
    k2[d] += 5;
    v[d] += 5;
  }
  attention(a, q.data(), k2.data(), v.data(), out2.data());
  for (int i = 0; i < 9; ++i)
    EXPECT_EQ(out[i], out2[i]) << i;
  EXPECT_NE(out[9], out2[9]);
}

TEST(CpuKernelsAttention, GradMatchesFiniteDifferences) {
  uint32_t seed = 700;
  for (const AttentionCase &c : attentionCases()) {
    const AttentionArgs &a = c.args;
    const size_t qSize = static_cast<size_t>(a.batch * a.seq * a.heads * a.head);
    const size_t kSize = static_cast<size_t>(a.batch * a.kvSeq * a.kvHeads * a.head);
    const Floats q = randomFloats(qSize, -2, 2, seed++), k = randomFloats(kSize, -2, 2, seed++),
                 v = randomFloats(kSize, -1, 1, seed++);
    const Floats dout = randomFloats(qSize, -1, 1, seed++);
    Floats dq(qSize, NAN), dk(kSize, NAN), dv(kSize, NAN);
    attentionGrad(a, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data());
    const Doubles qd = toDoubles(q), kd = toDoubles(k), vd = toDoubles(v), w = toDoubles(dout);
    const std::string name = c.name;
    expectClose(
        dq,
        numericGradient([&](const Doubles &x) { return dot(w, attentionRef(a, x, kd, vd)); }, qd),
        1e-4, 1e-5, name + " dq");
    expectClose(
        dk,
        numericGradient([&](const Doubles &x) { return dot(w, attentionRef(a, qd, x, vd)); }, kd),
        1e-4, 1e-5, name + " dk");
    expectClose(
        dv,
        numericGradient([&](const Doubles &x) { return dot(w, attentionRef(a, qd, kd, x)); }, vd),
        1e-4, 1e-5, name + " dv");
  }
}

/// dq, dk, dv of sum(w * attention(q, k, v)), analytically in double.
void attentionGradRef(const AttentionArgs &a, const Doubles &q, const Doubles &k, const Doubles &v,
                      const Doubles &w, Doubles &dq, Doubles &dk, Doubles &dv) {
  const int64_t S = a.seq, T = a.kvSeq, H = a.heads, KH = a.kvHeads, D = a.head;
  dq.assign(q.size(), 0.0);
  dk.assign(k.size(), 0.0);
  dv.assign(v.size(), 0.0);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / (H / KH);
      auto qAt = [&](int64_t i, int64_t d) { return ((b * S + i) * H + h) * D + d; };
      auto kAt = [&](int64_t j, int64_t d) { return ((b * T + j) * KH + kh) * D + d; };
      for (int64_t i = 0; i < S; ++i) {
        const int64_t keys = a.causal ? std::min(i + 1, T) : T;
        const int64_t begin = a.causal && a.window > 0 ? std::max<int64_t>(0, i - a.window + 1) : 0;
        Doubles p(keys), dp(keys);
        double max = -INFINITY, sum = 0, pdp = 0;
        for (int64_t j = begin; j < keys; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += q[qAt(i, d)] * k[kAt(j, d)];
          p[j] = s * a.scale;
          max = std::max(max, p[j]);
        }
        for (int64_t j = begin; j < keys; ++j)
          sum += (p[j] = std::exp(p[j] - max));
        for (int64_t j = begin; j < keys; ++j) {
          p[j] /= sum;
          for (int64_t d = 0; d < D; ++d)
            dp[j] += w[qAt(i, d)] * v[kAt(j, d)];
          pdp += p[j] * dp[j];
        }
        for (int64_t j = begin; j < keys; ++j) {
          const double ds = p[j] * (dp[j] - pdp) * a.scale;
          for (int64_t d = 0; d < D; ++d) {
            dq[qAt(i, d)] += ds * k[kAt(j, d)];
            dk[kAt(j, d)] += ds * q[qAt(i, d)];
            dv[kAt(j, d)] += p[j] * w[qAt(i, d)];
          }
        }
      }
    }
}

TEST(CpuKernelsAttention, LargerShapesMatchReference) {
  // More queries than one block (64), head sizes with a vector tail, GQA, and a key count
  // that is not a multiple of the register block.
  const AttentionCase cases[] = {
      {"causal gqa", attentionOf(2, 70, 4, 70, 2, 12, true)},
      {"non-causal", attentionOf(1, 67, 2, 67, 2, 20, false)},
      {"cross", attentionOf(1, 9, 3, 131, 1, 7, false)},
      {"window 16", windowed(attentionOf(2, 150, 4, 150, 2, 12, true), 16)},
      {"window 70, blocks straddled", windowed(attentionOf(1, 200, 2, 200, 1, 20, true), 70)},
      {"window 1", windowed(attentionOf(1, 70, 2, 70, 2, 8, true), 1)},
      {"window past the start", windowed(attentionOf(1, 40, 2, 40, 2, 8, true), 500)},
  };
  uint32_t seed = 750;
  for (const AttentionCase &c : cases) {
    const AttentionArgs &a = c.args;
    const size_t qSize = static_cast<size_t>(a.batch * a.seq * a.heads * a.head);
    const size_t kSize = static_cast<size_t>(a.batch * a.kvSeq * a.kvHeads * a.head);
    const Floats q = randomFloats(qSize, -2, 2, seed++), k = randomFloats(kSize, -2, 2, seed++),
                 v = randomFloats(kSize, -1, 1, seed++);
    const Floats dout = randomFloats(qSize, -1, 1, seed++);
    Floats out(qSize, NAN), dq(qSize, NAN), dk(kSize, NAN), dv(kSize, NAN);
    attention(a, q.data(), k.data(), v.data(), out.data());
    attentionGrad(a, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data());
    const Doubles qd = toDoubles(q), kd = toDoubles(k), vd = toDoubles(v);
    Doubles wantQ, wantK, wantV, wantLse;
    attentionGradRef(a, qd, kd, vd, toDoubles(dout), wantQ, wantK, wantV);
    const Doubles wantOut = attentionRef(a, qd, kd, vd, &wantLse);
    const std::string name = c.name;
    expectClose(out, wantOut, 1e-5, 1e-6, name + " out");
    expectClose(dq, wantQ, 1e-4, 1e-5, name + " dq");
    expectClose(dk, wantK, 1e-4, 1e-5, name + " dk");
    expectClose(dv, wantV, 1e-4, 1e-5, name + " dv");
    // The forward call that keeps each row's log-sum-exp writes the same output, and the
    // gradient that reads them computes no forward pass and gets the same gradients.
    Floats kept(qSize, NAN), lse(wantLse.size(), NAN);
    attention(a, q.data(), k.data(), v.data(), kept.data(), lse.data());
    EXPECT_EQ(kept, out) << name;
    expectClose(lse, wantLse, 1e-5, 1e-6, name + " lse");
    Floats savedQ(qSize, NAN), savedK(kSize, NAN), savedV(kSize, NAN);
    attentionGrad(a, q.data(), k.data(), v.data(), dout.data(), savedQ.data(), savedK.data(),
                  savedV.data(), kept.data(), lse.data());
    expectClose(savedQ, wantQ, 1e-4, 1e-5, name + " dq from lse");
    expectClose(savedK, wantK, 1e-4, 1e-5, name + " dk from lse");
    expectClose(savedV, wantV, 1e-4, 1e-5, name + " dv from lse");
  }
}

TEST(CpuKernelsAttention, BlockOfQueryHeadsReadsTheirKvHeads) {
  // Tensor parallelism over more ranks than kv heads: each rank holds a block of the query
  // heads (firstHead, group) and every kv head. Its outputs and dq are its block of the whole
  // attention's, and the ranks' dk and dv add up to the whole's, each zero at the kv heads
  // its query heads do not read. 6 query heads in 2 groups over 3 ranks straddle a group.
  struct Split {
    const char *name;
    AttentionArgs whole;
    int64_t ranks;
  };
  const Split splits[] = {
      {"mqa over 2", attentionOf(2, 9, 4, 9, 1, 6, true), 2},
      {"mqa over 4", attentionOf(1, 70, 4, 70, 1, 8, true), 4},
      {"gqa 8/2 over 4", windowed(attentionOf(2, 11, 8, 11, 2, 4, true), 5), 4},
      {"gqa 6/2 over 3", attentionOf(2, 7, 6, 7, 2, 4, false), 3},
  };
  uint32_t seed = 780;
  for (const Split &c : splits) {
    const AttentionArgs &w = c.whole;
    const int64_t S = w.seq, H = w.heads, D = w.head, local = H / c.ranks;
    const size_t qSize = static_cast<size_t>(w.batch * S * H * D);
    const size_t kSize = static_cast<size_t>(w.batch * w.kvSeq * w.kvHeads * D);
    const Floats q = randomFloats(qSize, -2, 2, seed++), k = randomFloats(kSize, -2, 2, seed++),
                 v = randomFloats(kSize, -1, 1, seed++), dout = randomFloats(qSize, -1, 1, seed++);
    const Doubles wantOut = attentionRef(w, toDoubles(q), toDoubles(k), toDoubles(v));
    Doubles wantQ, wantK, wantV;
    attentionGradRef(w, toDoubles(q), toDoubles(k), toDoubles(v), toDoubles(dout), wantQ, wantK,
                     wantV);
    Doubles sumK(kSize, 0.0), sumV(kSize, 0.0);
    for (int64_t r = 0; r < c.ranks; ++r) {
      AttentionArgs a = w;
      a.heads = local;
      a.firstHead = r * local;
      a.group = H / w.kvHeads;
      // This rank's block of the query heads, [batch, seq, local, head].
      auto block = [&](const auto &x) {
        std::vector<typename std::decay_t<decltype(x)>::value_type> out;
        for (int64_t row = 0; row < w.batch * S; ++row)
          out.insert(out.end(), x.begin() + (row * H + r * local) * D,
                     x.begin() + (row * H + (r + 1) * local) * D);
        return out;
      };
      const Floats qr = block(q), doutr = block(dout);
      Floats out(qr.size(), NAN), dq(qr.size(), NAN), dk(kSize, NAN), dv(kSize, NAN);
      Floats lse(qr.size() / static_cast<size_t>(D), NAN);
      attention(a, qr.data(), k.data(), v.data(), out.data(), lse.data());
      // Odd ranks' gradients read the forward call's output and log-sum-exp.
      const bool saved = r % 2 == 1;
      attentionGrad(a, qr.data(), k.data(), v.data(), doutr.data(), dq.data(), dk.data(),
                    dv.data(), saved ? out.data() : nullptr, saved ? lse.data() : nullptr);
      const std::string name = std::string(c.name) + " rank " + std::to_string(r);
      expectClose(out, block(wantOut), 1e-5, 1e-6, name + " out");
      expectClose(dq, block(wantQ), 1e-4, 1e-5, name + " dq");
      for (size_t i = 0; i < kSize; ++i) {
        const int64_t kh = static_cast<int64_t>(i) / D % w.kvHeads;
        const bool read = kh * a.group < (r + 1) * local && (kh + 1) * a.group > r * local;
        if (!read) {
          EXPECT_EQ(dk[i], 0.0f) << name << " dk " << i;
          EXPECT_EQ(dv[i], 0.0f) << name << " dv " << i;
        }
        sumK[i] += dk[i];
        sumV[i] += dv[i];
      }
    }
    expectClose(Floats(sumK.begin(), sumK.end()), wantK, 1e-4, 1e-5, std::string(c.name) + " dk");
    expectClose(Floats(sumV.begin(), sumV.end()), wantV, 1e-4, 1e-5, std::string(c.name) + " dv");
  }
}

Doubles ropeRef(int64_t batch, int64_t seq, int64_t heads, int64_t head, double theta, bool inverse,
                const Doubles &x) {
  Doubles y(x.size());
  const int64_t half = head / 2;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t p = 0; p < seq; ++p)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const double angle = (inverse ? -1 : 1) * p * std::pow(theta, -2.0 * i / head);
          const int64_t base = ((b * seq + p) * heads + h) * head;
          const double lo = x[base + i], hi = x[base + i + half];
          y[base + i] = lo * std::cos(angle) - hi * std::sin(angle);
          y[base + i + half] = hi * std::cos(angle) + lo * std::sin(angle);
        }
  return y;
}

TEST(CpuKernelsAttention, Rope) {
  const int64_t batch = 2, seq = 9, heads = 3, head = 8;
  const float theta = 10000.0f;
  const Floats x = randomFloats(batch * seq * heads * head, -1, 1, 800);
  Floats y(x.size()), back(x.size());
  rope(batch, seq, heads, head, theta, false, x.data(), y.data());
  expectClose(y, ropeRef(batch, seq, heads, head, theta, false, toDoubles(x)), 1e-5, 1e-6, "rope");
  rope(batch, seq, heads, head, theta, true, y.data(), back.data());
  expectClose(back, toDoubles(x), 1e-5, 1e-6, "rope inverse undoes rope");
  // The inverse is the transpose: <rope(x), w> == <x, rope^-1(w)>, so it is the gradient.
  const Floats w = randomFloats(x.size(), -1, 1, 801);
  Floats wBack(x.size());
  rope(batch, seq, heads, head, theta, true, w.data(), wBack.data());
  EXPECT_NEAR(dot(toDoubles(y), toDoubles(w)), dot(toDoubles(x), toDoubles(wBack)), 1e-4);
  // In place.
  Floats inPlace = x;
  rope(batch, seq, heads, head, theta, false, inPlace.data(), inPlace.data());
  EXPECT_EQ(inPlace, y);
}

TEST(CpuKernelsAttention, RopeAtGivenPositionsTurnsAsRopeOverTheWholeSequence) {
  // Rows at positions 6 .. 10 of a sequence (batch 0) and 2 .. 6 (batch 1) turn as those rows
  // of rope over 11 positions, to the bit; a negative position turns by 0.
  const int64_t batch = 2, seq = 5, whole = 11, heads = 3, head = 10;
  const int64_t row = heads * head;
  const Floats longer = randomFloats(batch * whole * row, -1, 1, 820);
  for (bool inverse : {false, true}) {
    Floats turned(longer.size());
    rope(batch, whole, heads, head, 10000.0f, inverse, longer.data(), turned.data());
    const int64_t shifts[] = {6, 2};
    Floats x(batch * seq * row), want(x.size());
    std::vector<int32_t> positions;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t from = (b * whole + shifts[b] + s) * row, to = (b * seq + s) * row;
        std::copy(longer.begin() + from, longer.begin() + from + row, x.begin() + to);
        std::copy(turned.begin() + from, turned.begin() + from + row, want.begin() + to);
        positions.push_back(static_cast<int32_t>(shifts[b] + s));
      }
    Floats y(x.size());
    rope(batch, seq, heads, head, 10000.0f, inverse, x.data(), y.data(), -1, -1, {},
         positions.data());
    EXPECT_EQ(y, want) << (inverse ? "inverse" : "forward");
  }
  // A padding slot (negative position) is left as it is.
  const Floats x = randomFloats(row, -1, 1, 821);
  const std::vector<int32_t> padding = {-3};
  Floats y(row);
  rope(1, 1, heads, head, 10000.0f, false, x.data(), y.data(), -1, -1, {}, padding.data());
  EXPECT_EQ(y, x);
}

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
        const Shape s = makeShape({10, 100, 97});
        Floats out(x.size());
        binary(BinaryKind::Add, s, x.data(), denseStrides(s), g.data(), makeStrides({0, 0, 1}),
               out.data());
        return out;
      },
      "binary");
  expectSameBitsOnAnyThreadCount(
      [&] {
        Floats out(cols + rows);
        reduceSum(makeShape({rows, cols}), x.data(), makeStrides({0, 1}), cols, 1, out.data());
        reduceSum(makeShape({rows, cols}), x.data(), makeStrides({1, 0}), rows, 1,
                  out.data() + cols);
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

// In a mixed-precision plan the unfused kernels store each value 16-bit; a fused body marks
// those steps rounded, and gives the bits of the unfused kernels with 16-bit buffers between.
TEST(CpuKernelsElementwise, RoundedFusedStepsGiveTheBitsOfSixteenBitBuffers) {
  const Shape shape = makeShape({3, 2053});
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
  const Shape shape = makeShape({7, 9, 531});
  const int64_t n = shape.numElements();
  const Floats x = randomFloats(static_cast<size_t>(n), -3, 3, 70);
  const Floats bias = randomFloats(531, -1, 1, 71);
  const Floats perm = randomFloats(static_cast<size_t>(n), -2, 2, 72); // [531, 7, 9]
  const Strides dense = denseStrides(shape), sBias = makeStrides({0, 0, 1}),
                sPerm = makeStrides({9, 1, 63});
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
