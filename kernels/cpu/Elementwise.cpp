//===- Elementwise.cpp - Binary, unary, copies and scaling ----------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/ElementwiseRuns.h"
#include "kernels/cpu/Loops.h"
#include "kernels/cpu/Simd.h"

#include <cmath>
#include <cstring>
#include <type_traits>

namespace tessel::cpu {

using detail::collapse;
using detail::Collapsed;
using detail::forEachRun;
using detail::kParallelGrain;

namespace {

// sqrt(2 / pi) and the cubic coefficient of GPT-2's GELU, as PyTorch's gelu(approximate="tanh").
constexpr float kGeluBeta = 0.7978845608028654f;
constexpr float kGeluKappa = 0.044715f;
// 1 / sqrt(2) and 1 / sqrt(2 pi), of the exact GELU x Phi(x) = x (1 + erf(x / sqrt 2)) / 2.
constexpr float kSqrtHalf = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

/// The derivative of the exact GELU: Phi(x) + x phi(x).
inline float geluErfSlope(float x) {
  return 0.5f * (1.0f + std::erf(x * kSqrtHalf)) + x * kInvSqrt2Pi * std::exp(-0.5f * x * x);
}

/// One run of `n` outputs; operand strides of 1 and 0 get their own loops so that the common
/// cases (dense, and an operand broadcast along the run) vectorise.
template <class Op>
void binaryRun(Op op, int64_t n, const float *a, int64_t sa, const float *b, int64_t sb,
               float *out) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = op(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    const float bv = *b;
    for (int64_t i = 0; i < n; ++i)
      out[i] = op(a[i], bv);
  } else if (sa == 0 && sb == 1) {
    const float av = *a;
    for (int64_t i = 0; i < n; ++i)
      out[i] = op(av, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      out[i] = op(a[i * sa], b[i * sb]);
  }
}

template <class Op>
void binaryWith(Op op, const Shape &shape, const float *a, const Strides &sa, const float *b,
                const Strides &sb, float *out) {
  const Strides *ops[2] = {&sa, &sb};
  // Collapsing merges a dense operand to one dim and a bias broadcast ([B,S,E] + [E]) to two,
  // so both run as long vectorised loops.
  const Collapsed<2> c = collapse(shape, ops);
  const int inner = c.rank - 1;
  const int64_t innerA = c.stride[0][inner], innerB = c.stride[1][inner];
  forEachRun(c, [&](int64_t linear, const int64_t *at, int64_t n) {
    binaryRun(op, n, a + at[0], innerA, b + at[1], innerB, out + linear);
  });
}

/// 1 where the comparison `kind` holds, else 0.
inline float compare(BinaryKind kind, float p, float q) {
  switch (kind) {
  case BinaryKind::Lt:
    return p < q ? 1.0f : 0.0f;
  case BinaryKind::Le:
    return p <= q ? 1.0f : 0.0f;
  case BinaryKind::Gt:
    return p > q ? 1.0f : 0.0f;
  case BinaryKind::Ge:
    return p >= q ? 1.0f : 0.0f;
  case BinaryKind::Eq:
    return p == q ? 1.0f : 0.0f;
  default:
    return p != q ? 1.0f : 0.0f;
  }
}

/// Elements per parallel task of the vectorised maps (a multiple of the vector width).
constexpr int64_t kMapChunk = 8192;

/// y[i] = f(x[i]) on one thread; f is generic over float and Vec.
template <class F> void unaryWith(F f, int64_t n, const float *x, float *y) {
  detail::mapVec(n, x, y, f);
}

/// dx[i] = g(in[i], dy[i]), where `in` is x or y, whichever the derivative needs.
template <class G> void unaryGradWith(G g, int64_t n, const float *in, const float *dy, float *dx) {
  detail::mapVec2(n, in, dy, dx, g);
}

/// Runs `run(begin, length)` over [0, n) in chunks of kMapChunk, over threads when n is large.
template <class Run> void inChunks(int64_t n, Run run) {
  const int64_t chunks = (n + kMapChunk - 1) / kMapChunk;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kMapChunk;
    run(begin, std::min(kMapChunk, n - begin));
  }
}

/// A scalar function applied lane by lane (for the rare ones with no vector form).
template <class F> auto lanes(F f) {
  return [f](auto v) {
    if constexpr (std::is_same_v<decltype(v), float>) {
      return f(v);
    } else {
      for (int i = 0; i < detail::kLanes; ++i)
        v[i] = f(v[i]);
      return v;
    }
  };
}

} // namespace

void binary(BinaryKind kind, const Shape &shape, const float *a, const Strides &sa, const float *b,
            const Strides &sb, float *out) {
  if (shape.numElements() == 0)
    return;
  switch (kind) {
  case BinaryKind::Add:
    return binaryWith([](float p, float q) { return p + q; }, shape, a, sa, b, sb, out);
  case BinaryKind::Sub:
    return binaryWith([](float p, float q) { return p - q; }, shape, a, sa, b, sb, out);
  case BinaryKind::Mul:
    return binaryWith([](float p, float q) { return p * q; }, shape, a, sa, b, sb, out);
  case BinaryKind::Div:
    return binaryWith([](float p, float q) { return p / q; }, shape, a, sa, b, sb, out);
  case BinaryKind::Lt:
    return binaryWith([](float p, float q) { return p < q ? 1.0f : 0.0f; }, shape, a, sa, b, sb,
                      out);
  case BinaryKind::Le:
    return binaryWith([](float p, float q) { return p <= q ? 1.0f : 0.0f; }, shape, a, sa, b, sb,
                      out);
  case BinaryKind::Gt:
    return binaryWith([](float p, float q) { return p > q ? 1.0f : 0.0f; }, shape, a, sa, b, sb,
                      out);
  case BinaryKind::Ge:
    return binaryWith([](float p, float q) { return p >= q ? 1.0f : 0.0f; }, shape, a, sa, b, sb,
                      out);
  case BinaryKind::Eq:
    return binaryWith([](float p, float q) { return p == q ? 1.0f : 0.0f; }, shape, a, sa, b, sb,
                      out);
  case BinaryKind::Ne:
    return binaryWith([](float p, float q) { return p != q ? 1.0f : 0.0f; }, shape, a, sa, b, sb,
                      out);
  }
}

void select(const Shape &shape, const float *c, const Strides &sc, const float *a,
            const Strides &sa, const float *b, const Strides &sb, float *out) {
  if (shape.numElements() == 0)
    return;
  const Strides *ops[3] = {&sc, &sa, &sb};
  const Collapsed<3> col = collapse(shape, ops);
  const int inner = col.rank - 1;
  const int64_t ic = col.stride[0][inner], ia = col.stride[1][inner], ib = col.stride[2][inner];
  forEachRun(col, [&](int64_t linear, const int64_t *at, int64_t n) {
    const float *cp = c + at[0], *ap = a + at[1], *bp = b + at[2];
    float *dst = out + linear;
    for (int64_t i = 0; i < n; ++i)
      dst[i] = cp[i * ic] != 0.0f ? ap[i * ia] : bp[i * ib];
  });
}

void positions(int64_t n, float *y) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<float>(i);
}

namespace detail {

void unaryRun(UnaryKind kind, int64_t n, const float *x, float *y, float exponent) {
  using detail::fastExp;
  using detail::fastSigmoid;
  switch (kind) {
  case UnaryKind::Neg:
    return unaryWith([](auto v) { return -v; }, n, x, y);
  case UnaryKind::Exp:
    return unaryWith([](auto v) { return fastExp(v); }, n, x, y);
  case UnaryKind::Log:
    return unaryWith(lanes([](float v) { return std::log(v); }), n, x, y);
  case UnaryKind::Sqrt:
    return unaryWith(lanes([](float v) { return std::sqrt(v); }), n, x, y);
  case UnaryKind::Rsqrt:
    return unaryWith(lanes([](float v) { return 1.0f / std::sqrt(v); }), n, x, y);
  case UnaryKind::Tanh:
    return unaryWith(lanes([](float v) { return std::tanh(v); }), n, x, y);
  case UnaryKind::Gelu:
    // 0.5 x (1 + tanh(u)) = x sigmoid(2u): the same function, without the cancellation of
    // 1 + tanh(u) for negative x.
    return unaryWith(
        [](auto v) {
          const auto u = (v + v * v * v * kGeluKappa) * kGeluBeta;
          return v * fastSigmoid(u + u);
        },
        n, x, y);
  case UnaryKind::Silu:
    return unaryWith([](auto v) { return v * fastSigmoid(v); }, n, x, y);
  case UnaryKind::Relu:
    return unaryWith(lanes([](float v) { return v < 0.0f ? 0.0f : v; }), n, x, y);
  case UnaryKind::Sigmoid:
    return unaryWith([](auto v) { return fastSigmoid(v); }, n, x, y);
  case UnaryKind::Square:
    return unaryWith([](auto v) { return v * v; }, n, x, y);
  case UnaryKind::Pow:
    return unaryWith(lanes([exponent](float v) { return std::pow(v, exponent); }), n, x, y);
  case UnaryKind::GeluErf:
    return unaryWith(lanes([](float v) { return 0.5f * v * (1.0f + std::erf(v * kSqrtHalf)); }), n,
                     x, y);
  }
}

void unaryGradRun(UnaryKind kind, int64_t n, const float *x, const float *y, const float *dy,
                  float *dx, float exponent) {
  using detail::fastSigmoid;
  switch (kind) {
  case UnaryKind::Neg:
    return unaryGradWith([](auto, auto d) { return -d; }, n, dy, dy, dx);
  case UnaryKind::Exp:
    return unaryGradWith([](auto fy, auto d) { return d * fy; }, n, y, dy, dx);
  case UnaryKind::Log:
    return unaryGradWith([](auto fx, auto d) { return d / fx; }, n, x, dy, dx);
  case UnaryKind::Sqrt:
    return unaryGradWith([](auto fy, auto d) { return d / (fy + fy); }, n, y, dy, dx);
  case UnaryKind::Rsqrt:
    // d/dx x^(-1/2) = -x^(-3/2) / 2 = -y^3 / 2.
    return unaryGradWith([](auto fy, auto d) { return d * fy * fy * fy * -0.5f; }, n, y, dy, dx);
  case UnaryKind::Tanh:
    return unaryGradWith([](auto fy, auto d) { return d * (1.0f - fy * fy); }, n, y, dy, dx);
  case UnaryKind::Gelu:
    // With s = sigmoid(2u): 1 + tanh(u) = 2s and 1 - tanh(u)^2 = 4s(1 - s), so
    // d/dx 0.5 x (1 + tanh(u)) = s + 2 x s (1 - s) u', u' = beta (1 + 3 kappa x^2).
    return unaryGradWith(
        [](auto fx, auto d) {
          const auto x2 = fx * fx;
          const auto u = (fx + fx * x2 * kGeluKappa) * kGeluBeta;
          const auto s = fastSigmoid(u + u);
          const auto du = (x2 * (3.0f * kGeluKappa) + 1.0f) * kGeluBeta;
          return d * (s + (fx + fx) * s * (1.0f - s) * du);
        },
        n, x, dy, dx);
  case UnaryKind::Silu:
    return unaryGradWith(
        [](auto fx, auto d) {
          const auto s = fastSigmoid(fx);
          return d * s * (fx * (1.0f - s) + 1.0f);
        },
        n, x, dy, dx);
  case UnaryKind::Relu:
    return unaryGradWith(
        [](auto fx, auto d) {
          // Lane-wise (fx > 0 ? d : 0), written as a mask for the vector case.
          if constexpr (std::is_same_v<decltype(fx), float>)
            return fx > 0.0f ? d : 0.0f;
          else
            return fx > 0.0f ? d : decltype(d){};
        },
        n, x, dy, dx);
  case UnaryKind::Sigmoid:
    return unaryGradWith([](auto fy, auto d) { return d * fy * (1.0f - fy); }, n, y, dy, dx);
  case UnaryKind::Square:
    return unaryGradWith([](auto fx, auto d) { return d * (fx + fx); }, n, x, dy, dx);
  case UnaryKind::Pow:
    // d/dx x^p = p x^(p-1), from x rather than y / x so that x = 0 gives 0 (p > 1), not NaN.
    return unaryGradWith(
        [exponent](auto fx, auto d) {
          if constexpr (std::is_same_v<decltype(fx), float>) {
            return d * exponent * std::pow(fx, exponent - 1.0f);
          } else {
            for (int i = 0; i < detail::kLanes; ++i)
              fx[i] = exponent * std::pow(fx[i], exponent - 1.0f);
            return d * fx;
          }
        },
        n, x, dy, dx);
  case UnaryKind::GeluErf:
    // d/dx x Phi(x) = Phi(x) + x phi(x), phi the standard normal density.
    return unaryGradWith(
        [](auto fx, auto d) {
          if constexpr (std::is_same_v<decltype(fx), float>) {
            return d * geluErfSlope(fx);
          } else {
            for (int i = 0; i < detail::kLanes; ++i)
              fx[i] = geluErfSlope(fx[i]);
            return d * fx;
          }
        },
        n, x, dy, dx);
  }
}

void binaryRun(BinaryKind kind, int64_t n, const float *a, const float *b, float *out) {
  switch (kind) {
  case BinaryKind::Add:
    return ::tessel::cpu::binaryRun([](float p, float q) { return p + q; }, n, a, 1, b, 1, out);
  case BinaryKind::Sub:
    return ::tessel::cpu::binaryRun([](float p, float q) { return p - q; }, n, a, 1, b, 1, out);
  case BinaryKind::Mul:
    return ::tessel::cpu::binaryRun([](float p, float q) { return p * q; }, n, a, 1, b, 1, out);
  case BinaryKind::Div:
    return ::tessel::cpu::binaryRun([](float p, float q) { return p / q; }, n, a, 1, b, 1, out);
  default:
    for (int64_t i = 0; i < n; ++i)
      out[i] = compare(kind, a[i], b[i]);
  }
}

void selectRun(int64_t n, const float *c, const float *a, const float *b, float *out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = c[i] != 0.0f ? a[i] : b[i];
}

} // namespace detail

void unary(UnaryKind kind, int64_t n, const float *x, float *y, float exponent) {
  inChunks(n, [&](int64_t begin, int64_t length) {
    detail::unaryRun(kind, length, x + begin, y + begin, exponent);
  });
}

void unaryGrad(UnaryKind kind, int64_t n, const float *x, const float *y, const float *dy,
               float *dx, float exponent) {
  inChunks(n, [&](int64_t begin, int64_t length) {
    detail::unaryGradRun(kind, length, x + begin, y + begin, dy + begin, dx + begin, exponent);
  });
}

void stridedCopy(const Shape &shape, const float *x, const Strides &sx, float *out) {
  if (shape.numElements() == 0)
    return;
  const Strides *ops[1] = {&sx};
  const Collapsed<1> c = collapse(shape, ops);
  const int64_t inner = c.stride[0][c.rank - 1];
  forEachRun(c, [&](int64_t linear, const int64_t *at, int64_t n) {
    const float *src = x + at[0];
    float *dst = out + linear;
    if (inner == 1) {
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    } else if (inner == 0) {
      std::fill(dst, dst + n, *src);
    } else {
      for (int64_t i = 0; i < n; ++i)
        dst[i] = src[i * inner];
    }
  });
}

void scale(int64_t n, const float *x, float factor, float *y) {
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] * factor;
}

} // namespace tessel::cpu
