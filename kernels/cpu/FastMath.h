//===- FastMath.h - Vectorised exp for the CPU kernels ----------*- C++ -*-===//
//
// Private to kernels/cpu. glibc's expf and tanhf are scalar calls, and they dominate GELU,
// softmax and cross entropy. This exp is Cephes' expf (range reduction by ln 2 in two parts,
// a degree-6 polynomial), accurate to about 2 ulp over the whole float range, subnormal
// results and the overflow to infinity included. It is written once over `Real`, a float or a
// GCC vector of floats: the compiler will not if-convert the clamp of a scalar loop into
// vector code on its own, so the loops below run on explicit vectors. Every lane does the
// same IEEE operations as the scalar tail, so results do not depend on where an element
// falls in a loop, which keeps the kernels' results independent of how work is split.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_KERNELS_CPU_FASTMATH_H
#define TESSEL_KERNELS_CPU_FASTMATH_H

#include <cstdint>
#include <cstring>

namespace tessel::cpu::detail {

constexpr int kLanes = 4;
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t VecInt __attribute__((vector_size(kLanes * sizeof(int32_t))));

inline float clampTo(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }
inline Vec clampTo(Vec x, float lo, float hi) {
  const Vec l = Vec{} + lo, h = Vec{} + hi;
  x = x < l ? l : x;
  return x > h ? h : x;
}
inline int32_t truncToInt(float x) { return static_cast<int32_t>(x); }
inline VecInt truncToInt(Vec x) { return __builtin_convertvector(x, VecInt); }
inline float bitsToFloat(int32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline Vec bitsToFloat(VecInt bits) { return (Vec)bits; }

/// e^x for every x (NaN stays NaN); Real is float or Vec.
template <class Real> inline Real fastExp(Real x) {
  // e^-104 rounds to 0 and e^88.8 overflows to infinity, so clamping to them changes nothing
  // (NaN passes through: its comparisons are false).
  const Real xc = clampTo(x, -104.0f, 88.8f);
  // n = round(x / ln 2) by adding and removing 1.5 * 2^23.
  const float magic = 12582912.0f;
  const Real n = (xc * 1.44269504088896341f + magic) - magic;
  // r = x - n ln 2, with ln 2 split so that n * 0.693359375 is exact.
  const Real r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;
  Real p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // 2^n as two factors, each a normal float, so that n from -150 to 128 fits the exponent
  // field: subnormal results and the overflow to infinity come out of the multiplications.
  const auto ni = truncToInt(n);
  const auto half = ni >> 1;
  return p * bitsToFloat((half + 127) << 23) * bitsToFloat((ni - half + 127) << 23);
}

/// 1 / (1 + e^-x): exactly 0 and 1 at the ends.
template <class Real> inline Real fastSigmoid(Real x) { return 1.0f / (1.0f + fastExp(-x)); }

inline Vec loadVec(const float *p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void storeVec(float *p, Vec v) { std::memcpy(p, &v, sizeof v); }

/// y[i] = f(x[i]) for i < n, f taking and returning float or Vec.
template <class F> inline void mapVec(int64_t n, const float *x, float *y, F f) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    storeVec(y + i, f(loadVec(x + i)));
  for (; i < n; ++i)
    y[i] = f(x[i]);
}

/// out[i] = f(a[i], b[i]) for i < n.
template <class F>
inline void mapVec2(int64_t n, const float *a, const float *b, float *out, F f) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    storeVec(out + i, f(loadVec(a + i), loadVec(b + i)));
  for (; i < n; ++i)
    out[i] = f(a[i], b[i]);
}

/// A float or a vector loaded from p, as `tag`'s type says (for code written over Real).
inline float load(const float *p, float) { return *p; }
inline Vec load(const float *p, Vec) { return loadVec(p); }

inline void store(float *p, float v) { *p = v; }
inline void store(float *p, Vec v) { storeVec(p, v); }

/// Calls f(i, tag) for i = 0, kLanes, 2 kLanes, ... with a Vec tag while a whole vector fits,
/// then for each remaining i with a float tag.
template <class F> inline void forEachLane(int64_t n, F f) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    f(i, Vec{});
  for (; i < n; ++i)
    f(i, 0.0f);
}

typedef double VecDouble __attribute__((vector_size(kLanes * sizeof(double))));

/// The sum over i < n of term(i, tag), accumulated in double: term returns element i's term as
/// a float when tag is a float and the terms of elements i .. i + kLanes - 1 as a Vec when it
/// is a Vec. Each lane sums every kLanes-th term; the lanes are then added in order, then the
/// tail. The order depends on n alone.
template <class Term> inline double sumTerms(int64_t n, Term term) {
  VecDouble acc = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    acc += __builtin_convertvector(term(i, Vec{}), VecDouble);
  double sum = 0.0;
  for (int l = 0; l < kLanes; ++l)
    sum += acc[l];
  for (; i < n; ++i)
    sum += term(i, 0.0f);
  return sum;
}

/// The largest of x[0 .. n) (n > 0); -inf if all are -inf.
inline float maxOf(int64_t n, const float *x) {
  Vec best = Vec{} - __builtin_inff();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const Vec v = loadVec(x + i);
    best = v > best ? v : best;
  }
  float m = -__builtin_inff();
  for (int l = 0; l < kLanes; ++l)
    m = best[l] > m ? best[l] : m;
  for (; i < n; ++i)
    m = x[i] > m ? x[i] : m;
  return m;
}

} // namespace tessel::cpu::detail

#endif // TESSEL_KERNELS_CPU_FASTMATH_H
