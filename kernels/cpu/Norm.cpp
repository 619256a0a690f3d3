//===- Norm.cpp - Softmax, layer norm and RMS norm ------------------------===//
//
// Row statistics are float terms summed in double (sumTerms); the elementwise work is in
// float, as PyTorch's. Rows are independent and split over threads; the parameter gradients,
// sums over rows, are split over column blocks that add the rows in order, so no result depends
// on the thread count.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Loops.h"
#include "kernels/cpu/Simd.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessel::cpu {

using detail::fastExp;
using detail::forEachLane;
using detail::kLanes;
using detail::kParallelGrain;
using detail::load;
using detail::store;
using detail::sumTerms;

namespace {

/// Columns one task owns in the row-order parameter-gradient sums.
constexpr int64_t kColumnBlock = 16;

struct RowStats {
  float mean, rstd;
};

RowStats layerNormStats(int64_t cols, const float *x, float eps) {
  const double n = static_cast<double>(cols);
  const float mean =
      static_cast<float>(sumTerms(cols, [&](int64_t j, auto t) { return load(x + j, t); }) / n);
  const double squares = sumTerms(cols, [&](int64_t j, auto t) {
    const auto d = load(x + j, t) - mean;
    return d * d;
  });
  return {mean, static_cast<float>(1.0 / std::sqrt(squares / n + eps))};
}

float rmsNormFactor(int64_t cols, const float *x, float eps) {
  const double squares = sumTerms(cols, [&](int64_t j, auto t) {
    const auto v = load(x + j, t);
    return v * v;
  });
  return static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(cols) + eps));
}

/// outs[k][j] = sum over rows r, in order, of term(r, j, tag, k), in double, for every column
/// j and each of the N outputs; term follows sumTerms' convention. Threads own blocks of
/// columns, whose sums stay in registers while the rows stream past.
template <int N, class Term>
void sumRowsPerColumn(int64_t rows, int64_t cols, Term term, float *const (&outs)[N]) {
  typedef detail::VecDouble VecDouble;
  constexpr int64_t kVectors = kColumnBlock / kLanes;
  const int64_t blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain && blocks > 1)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t first = block * kColumnBlock;
    const int64_t width = std::min(kColumnBlock, cols - first);
    float *out[N];
    for (int k = 0; k < N; ++k)
      out[k] = outs[k] + first;
    if (width < kColumnBlock) {
      // The last, narrow block: one column at a time.
      for (int64_t j = 0; j < width; ++j)
        for (int k = 0; k < N; ++k) {
          double acc = 0.0;
          for (int64_t r = 0; r < rows; ++r)
            acc += term(r, first + j, 0.0f, k);
          out[k][j] = static_cast<float>(acc);
        }
      continue;
    }
    VecDouble low[N][kVectors] = {}, high[N][kVectors] = {};
    for (int64_t r = 0; r < rows; ++r)
      for (int k = 0; k < N; ++k)
        for (int64_t v = 0; v < kVectors; ++v) {
          const detail::Vec t = term(r, first + v * kLanes, detail::Vec{}, k);
          low[k][v] += detail::lowHalf(t);
          high[k][v] += detail::highHalf(t);
        }
    for (int k = 0; k < N; ++k)
      for (int64_t v = 0; v < kVectors; ++v) {
        float *o = out[k] + v * kLanes;
        o[0] = static_cast<float>(low[k][v][0]);
        o[1] = static_cast<float>(low[k][v][1]);
        o[2] = static_cast<float>(high[k][v][0]);
        o[3] = static_cast<float>(high[k][v][1]);
      }
  }
}

} // namespace

void softmax(int64_t rows, int64_t cols, const float *x, float *y) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    const float max = detail::maxOf(cols, xr);
    detail::mapVec(cols, xr, yr, [max](auto v) { return fastExp(v - max); });
    const double sum = sumTerms(cols, [&](int64_t j, auto t) { return load(yr + j, t); });
    const float inv = static_cast<float>(1.0 / sum);
    detail::mapVec(cols, yr, yr, [inv](auto v) { return v * inv; });
  }
}

void softmaxGrad(int64_t rows, int64_t cols, const float *y, const float *dy, float *dx) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float *yr = y + r * cols;
    const float *dyr = dy + r * cols;
    const float d = static_cast<float>(
        sumTerms(cols, [&](int64_t j, auto t) { return load(dyr + j, t) * load(yr + j, t); }));
    detail::mapVec2(cols, yr, dyr, dx + r * cols, [d](auto yv, auto dv) { return yv * (dv - d); });
  }
}

void layerNorm(int64_t rows, int64_t cols, const float *x, const float *g, const float *b,
               float eps, float *y) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    const RowStats s = layerNormStats(cols, xr, eps);
    forEachLane(cols, [&](int64_t j, auto t) {
      store(yr + j, (load(xr + j, t) - s.mean) * s.rstd * load(g + j, t) + load(b + j, t));
    });
  }
}

void layerNormGrad(int64_t rows, int64_t cols, const float *x, const float *g, const float *dy,
                   float eps, float *dx, float *dg, float *db) {
  std::vector<RowStats> stats(static_cast<size_t>(rows));
  const double n = static_cast<double>(cols);
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    const float *dyr = dy + r * cols;
    float *dxr = dx + r * cols;
    const RowStats s = layerNormStats(cols, xr, eps);
    stats[r] = s;
    // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * g.
    const float meanD = static_cast<float>(
        sumTerms(cols, [&](int64_t j, auto t) { return load(dyr + j, t) * load(g + j, t); }) / n);
    const float meanDX =
        static_cast<float>(sumTerms(cols,
                                    [&](int64_t j, auto t) {
                                      const auto xhat = (load(xr + j, t) - s.mean) * s.rstd;
                                      return load(dyr + j, t) * load(g + j, t) * xhat;
                                    }) /
                           n);
    forEachLane(cols, [&](int64_t j, auto t) {
      const auto xhat = (load(xr + j, t) - s.mean) * s.rstd;
      const auto dxhat = load(dyr + j, t) * load(g + j, t);
      store(dxr + j, (dxhat - meanD - xhat * meanDX) * s.rstd);
    });
  }
  float *const outs[2] = {dg, db};
  sumRowsPerColumn(
      rows, cols,
      [&](int64_t r, int64_t j, auto t, int k) {
        const auto d = load(dy + r * cols + j, t);
        if (k == 1)
          return d;
        return d * ((load(x + r * cols + j, t) - stats[r].mean) * stats[r].rstd);
      },
      outs);
}

void rmsNorm(int64_t rows, int64_t cols, const float *x, const float *g, float eps, float *y) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    const float factor = rmsNormFactor(cols, xr, eps);
    forEachLane(
        cols, [&](int64_t j, auto t) { store(yr + j, load(xr + j, t) * factor * load(g + j, t)); });
  }
}

void rmsNormGrad(int64_t rows, int64_t cols, const float *x, const float *g, const float *dy,
                 float eps, float *dx, float *dg) {
  std::vector<float> factors(static_cast<size_t>(rows));
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    const float *dyr = dy + r * cols;
    float *dxr = dx + r * cols;
    const float factor = rmsNormFactor(cols, xr, eps);
    factors[r] = factor;
    // dx = f g dy - x f^3 mean(dy g x), f = rsqrt(mean(x^2) + eps).
    const double dot = sumTerms(cols, [&](int64_t j, auto t) {
      return load(dyr + j, t) * load(g + j, t) * load(xr + j, t);
    });
    const float c = static_cast<float>(dot / static_cast<double>(cols)) * factor * factor * factor;
    forEachLane(cols, [&](int64_t j, auto t) {
      store(dxr + j, load(g + j, t) * load(dyr + j, t) * factor - load(xr + j, t) * c);
    });
  }
  float *const outs[1] = {dg};
  sumRowsPerColumn(
      rows, cols,
      [&](int64_t r, int64_t j, auto t, int) {
        return load(dy + r * cols + j, t) * (load(x + r * cols + j, t) * factors[r]);
      },
      outs);
}

} // namespace tessel::cpu
