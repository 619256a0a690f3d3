//===- CpuKernelsTestSupport.h - The CPU kernel tests' helpers --*- C++ -*-===//
//
// What the Cpu*KernelsTest.cpp files share: shapes and strides, random token ids, the
// comparison with a naive double-precision reference (element by element, naming the worst),
// central finite differences of such a reference, and a matrix product's arguments.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TEST_UNIT_CPUKERNELSTESTSUPPORT_H
#define TESSEL_TEST_UNIT_CPUKERNELSTESTSUPPORT_H

#include "kernels/cpu/CpuKernels.h"
#include "test/unit/KernelShapes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

namespace tessel::test {

using Floats = std::vector<float>;
using Doubles = std::vector<double>;

inline std::vector<int32_t> randomIds(size_t n, int32_t limit, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, limit - 1);
  std::vector<int32_t> ids(n);
  for (int32_t &id : ids)
    id = dist(rng);
  return ids;
}

inline Doubles toDoubles(const Floats &v) { return Doubles(v.begin(), v.end()); }

/// The offset of dense index `linear` of `shape` in an operand with strides `s`.
inline int64_t offsetOf(const cpu::Shape &shape, const cpu::Strides &s, int64_t linear) {
  int64_t offset = 0;
  for (int d = shape.rank - 1; d >= 0; --d) {
    offset += (linear % shape.size[d]) * s.stride[d];
    linear /= shape.size[d];
  }
  return offset;
}

/// Expects |got - want| <= atol + rtol * |want| element by element; reports the worst one.
inline void expectClose(const Floats &got, const Doubles &want, double rtol, double atol,
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
inline Doubles numericGradient(const std::function<double(const Doubles &)> &f, Doubles x,
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

inline double dot(const Doubles &a, const Doubles &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

/// A batch of dense row-major products, A [m, k] (or [k, m] transposed) by B [k, n] (or
/// [n, k]), with C = A B.
inline cpu::GemmArgs gemmArgs(int64_t batch, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  cpu::GemmArgs g;
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

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_CPUKERNELSTESTSUPPORT_H
