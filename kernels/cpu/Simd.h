//===- Simd.h - Explicit vectors for the CPU kernels ------------*- C++ -*-===//
//
// Private to kernels/cpu: a 4-lane float vector (SSE2, which every x86-64 has, so no dispatch
// is needed) and what the kernels build on it: maps, double-precision sums, a row maximum and
// a vectorisable exp. GCC will not vectorise a plain loop whose body has a clamp or a select
// (it declines to compute a discarded arm's arithmetic when floating point may trap), so the
// hot loops are written on explicit vectors.
//
// The exp is Cephes' expf (range reduction by ln 2 in two parts, a degree-6 polynomial),
// within about 2 ulp over the whole float range, subnormal results and the overflow to
// infinity included; glibc's expf and tanhf are scalar calls, and they dominated GELU, softmax
// and cross entropy. Code over `Real` (float or Vec) does the same IEEE operations in every
// lane and in the scalar tail, without fused multiply-adds (mulAdd, below, is fused the same
// way in every lane, tail and copy), so an element's result does not depend on where it falls
// in a loop, and so on how the work is split over threads.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_KERNELS_CPU_SIMD_H
#define TESSEL_KERNELS_CPU_SIMD_H

#include "kernels/cpu/Isa.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__FMA__)
#include <immintrin.h>
#endif

namespace tessel::cpu::detail {
inline namespace TESSEL_CPU_ISA {

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

/// The widest vector of the instruction set the file is compiled for (Isa.h): 4 floats on the
/// baseline (then it is Vec), 8 with AVX, 16 with AVX-512. Elementwise code may run on it and
/// give the bits of Vec; sums keep Vec's order (sumTerms).
#if defined(__AVX512F__)
constexpr int kWideLanes = 16;
#elif defined(__AVX__)
constexpr int kWideLanes = 8;
#else
constexpr int kWideLanes = 4;
#endif
#if defined(__AVX__)
typedef float WideVec __attribute__((vector_size(kWideLanes * sizeof(float))));
typedef int32_t WideVecInt __attribute__((vector_size(kWideLanes * sizeof(int32_t))));
inline WideVec clampTo(WideVec x, float lo, float hi) {
  const WideVec l = WideVec{} + lo, h = WideVec{} + hi;
  x = x < l ? l : x;
  return x > h ? h : x;
}
inline WideVecInt truncToInt(WideVec x) { return __builtin_convertvector(x, WideVecInt); }
inline WideVec bitsToFloat(WideVecInt bits) { return (WideVec)bits; }
#else
typedef Vec WideVec;
#endif
/// s + x·b rounded once: the products of attention (SmallGemm.h) accumulate with fused
/// multiply-adds. The AVX2 and AVX-512 copies (built with FMA) issue one instruction per
/// vector; the baseline computes the same correctly rounded result lane by lane with std::fma,
/// slower but the same bits, so the copies still agree.
inline float mulAdd(float x, float b, float s) { return std::fma(x, b, s); }
#if defined(__FMA__)
inline Vec mulAdd(float x, Vec b, Vec s) {
  return (Vec)_mm_fmadd_ps(_mm_set1_ps(x), (__m128)b, (__m128)s);
}
#else
inline Vec mulAdd(float x, Vec b, Vec s) {
  Vec r;
  for (int l = 0; l < kLanes; ++l)
    r[l] = std::fma(x, b[l], s[l]);
  return r;
}
#endif
#if defined(__AVX512F__)
inline WideVec mulAdd(float x, WideVec b, WideVec s) {
  return (WideVec)_mm512_fmadd_ps(_mm512_set1_ps(x), (__m512)b, (__m512)s);
}
#elif defined(__AVX__)
static_assert(sizeof(WideVec) == 32);
#if !defined(__FMA__)
#error "the AVX2 copy of the kernels is built with FMA (kernels/cpu/CMakeLists.txt)"
#endif
inline WideVec mulAdd(float x, WideVec b, WideVec s) {
  return (WideVec)_mm256_fmadd_ps(_mm256_set1_ps(x), (__m256)b, (__m256)s);
}
#endif

/// a·b + s lane by lane, each rounded once: the same bits in every copy, as mulAdd above.
#if defined(__FMA__)
inline Vec mulAdd(Vec a, Vec b, Vec s) {
  return (Vec)_mm_fmadd_ps((__m128)a, (__m128)b, (__m128)s);
}
#else
inline Vec mulAdd(Vec a, Vec b, Vec s) {
  Vec r;
  for (int l = 0; l < kLanes; ++l)
    r[l] = std::fma(a[l], b[l], s[l]);
  return r;
}
#endif
#if defined(__AVX512F__)
inline WideVec mulAdd(WideVec a, WideVec b, WideVec s) {
  return (WideVec)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)s);
}
#elif defined(__AVX__)
inline WideVec mulAdd(WideVec a, WideVec b, WideVec s) {
  return (WideVec)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)s);
}
#endif

inline WideVec loadWide(const float *p) {
  WideVec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void storeWide(float *p, WideVec v) { std::memcpy(p, &v, sizeof v); }

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
template <class F> inline void mapVec2(int64_t n, const float *a, const float *b, float *out, F f) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    storeVec(out + i, f(loadVec(a + i), loadVec(b + i)));
  for (; i < n; ++i)
    out[i] = f(a[i], b[i]);
}

/// mapVec on the widest vectors, then Vec and float for the tail: the same operations per
/// element, so the same bits as mapVec.
template <class F> inline void mapWide(int64_t n, const float *x, float *y, F f) {
  int64_t i = 0;
  if constexpr (kWideLanes > kLanes)
    for (; i + kWideLanes <= n; i += kWideLanes)
      storeWide(y + i, f(loadWide(x + i)));
  mapVec(n - i, x + i, y + i, f);
}

/// mapVec2 on the widest vectors.
template <class F>
inline void mapWide2(int64_t n, const float *a, const float *b, float *out, F f) {
  int64_t i = 0;
  if constexpr (kWideLanes > kLanes)
    for (; i + kWideLanes <= n; i += kWideLanes)
      storeWide(out + i, f(loadWide(a + i), loadWide(b + i)));
  mapVec2(n - i, a + i, b + i, out + i, f);
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

/// Two doubles: a Vec's lanes widen into a pair of these (16-byte vectors stay in registers
/// on every x86-64; wider ones would live on the stack without AVX).
typedef double VecDouble __attribute__((vector_size(2 * sizeof(double))));
inline VecDouble lowHalf(Vec v) {
  return __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1), VecDouble);
}
inline VecDouble highHalf(Vec v) {
  return __builtin_convertvector(__builtin_shufflevector(v, v, 2, 3), VecDouble);
}

/// The sum over i < n of term(i, tag), accumulated in double: term returns element i's term as
/// a float when tag is a float and the terms of elements i .. i + kLanes - 1 as a Vec when it
/// is a Vec. Eight running sums (two vectors' lanes, so that the additions overlap) take every
/// eighth term; they are added in a fixed tree, then the tail. The order depends on n alone.
template <class Term> inline double sumTerms(int64_t n, Term term) {
  static_assert(kLanes == 4, "sumTerms splits a Vec into two halves of two lanes");
  VecDouble s0 = {}, s1 = {}, s2 = {}, s3 = {};
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const Vec t0 = term(i, Vec{}), t1 = term(i + kLanes, Vec{});
    s0 += lowHalf(t0);
    s1 += highHalf(t0);
    s2 += lowHalf(t1);
    s3 += highHalf(t1);
  }
  if (i + kLanes <= n) {
    const Vec t0 = term(i, Vec{});
    s0 += lowHalf(t0);
    s1 += highHalf(t0);
    i += kLanes;
  }
  const VecDouble s = (s0 + s1) + (s2 + s3);
  double sum = s[0] + s[1];
  for (; i < n; ++i)
    sum += term(i, 0.0f);
  return sum;
}

/// The largest of x[0 .. n) (n > 0); -inf if all are -inf. (A maximum does not depend on the
/// order it is taken in, so any vector width gives the same.)
inline float maxOf(int64_t n, const float *x) {
  WideVec best = WideVec{} - __builtin_inff();
  int64_t i = 0;
  for (; i + kWideLanes <= n; i += kWideLanes) {
    const WideVec v = loadWide(x + i);
    best = v > best ? v : best;
  }
  float m = -__builtin_inff();
  for (int l = 0; l < kWideLanes; ++l)
    m = best[l] > m ? best[l] : m;
  for (; i < n; ++i)
    m = x[i] > m ? x[i] : m;
  return m;
}

/// The running sums of dot16: as many as the widest vector has lanes in any copy.
constexpr int kDotLanes = 16;

/// The end of a dot16: the tail's products added to their running sums (`sums`, kDotLanes of
/// them as vectors of the widest width, which have summed elements [0, from)), and the sums
/// added in a fixed tree.
inline float finishDot16(const WideVec *sums, int64_t from, int64_t n, const float *x,
                         const float *y) {
  constexpr int kSums = kDotLanes / kWideLanes;
  float lanes[kDotLanes];
#pragma GCC unroll 4
  for (int v = 0; v < kSums; ++v)
    storeWide(lanes + v * kWideLanes, sums[v]);
  for (int64_t i = from; i < n; ++i)
    lanes[i % kDotLanes] = std::fma(x[i], y[i], lanes[i % kDotLanes]);
  const Vec r = (loadVec(lanes) + loadVec(lanes + 8)) + (loadVec(lanes + 4) + loadVec(lanes + 12));
  return (r[0] + r[2]) + (r[1] + r[3]);
}

/// x·y over n elements, the same bits at every vector width: running sum l of kDotLanes adds
/// the products of elements l, l + 16, l + 32, ... in order, each with a fused multiply-add, and
/// the sums are added in a fixed tree. For dot products of rows that are not in one matrix
/// (paged attention's keys), where smallGemm's broadcast form would need them transposed.
inline float dot16(int64_t n, const float *x, const float *y) {
  static_assert(kDotLanes % kWideLanes == 0 && kDotLanes == 4 * kLanes);
  constexpr int kSums = kDotLanes / kWideLanes;
  WideVec sums[kSums] = {};
  int64_t i = 0;
  for (; i + kDotLanes <= n; i += kDotLanes)
#pragma GCC unroll 4
    for (int v = 0; v < kSums; ++v)
      sums[v] = mulAdd(loadWide(x + i + v * kWideLanes), loadWide(y + i + v * kWideLanes), sums[v]);
  return finishDot16(sums, i, n, x, y);
}

} // namespace TESSEL_CPU_ISA
} // namespace tessel::cpu::detail

#endif // TESSEL_KERNELS_CPU_SIMD_H
