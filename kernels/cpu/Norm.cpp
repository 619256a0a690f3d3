//===- Norm.cpp - Softmax, layer norm and RMS norm ------------------------===//
//
// Row statistics are float terms summed in double (sumTerms); the elementwise work is in
// float, as PyTorch's. Rows are independent and split over threads; the parameter gradients,
// sums over rows, are split over column blocks that add the rows in order, so no result depends
// on the thread count.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/FastMath.h"
#include "kernels/cpu/Loops.h"

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

/// Columns one thread owns in the row-order parameter-gradient sums.
constexpr int64_t kColumnBlock = 64;

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

/// out[j] = sum over rows r, in order, of term(r, j, tag), in double, for every column j;
/// term follows sumTerms' convention. Threads own blocks of columns.
template <class Term> void sumRowsPerColumn(int64_t rows, int64_t cols, Term term, float *out) {
  typedef detail::VecDouble VecDouble;
  const int64_t blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain && blocks > 1)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t first = block * kColumnBlock;
    const int64_t width = std::min(kColumnBlock, cols - first);
    const int64_t vectors = width / kLanes;
    VecDouble acc[kColumnBlock / kLanes] = {};
    double tail[kLanes] = {};
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t v = 0; v < vectors; ++v)
        acc[v] += __builtin_convertvector(term(r, first + v * kLanes, detail::Vec{}), VecDouble);
      for (int64_t j = vectors * kLanes; j < width; ++j)
        tail[j - vectors * kLanes] += term(r, first + j, 0.0f);
    }
    for (int64_t v = 0; v < vectors; ++v)
      for (int l = 0; l < kLanes; ++l)
        out[first + v * kLanes + l] = static_cast<float>(acc[v][l]);
    for (int64_t j = vectors * kLanes; j < width; ++j)
      out[first + j] = static_cast<float>(tail[j - vectors * kLanes]);
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

void layerNormGrad(int64_t rows, int64_t cols, const float *x, const float *g,
                   const float *dy, float eps, float *dx, float *dg, float *db) {
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
        sumTerms(cols, [&](int64_t j, auto t) { return load(dyr + j, t) * load(g + j, t); }) /
        n);
    const float meanDX = static_cast<float>(sumTerms(cols, [&](int64_t j, auto t) {
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
  sumRowsPerColumn(
      rows, cols,
      [&](int64_t r, int64_t j, auto t) {
        return load(dy + r * cols + j, t) * ((load(x + r * cols + j, t) - stats[r].mean) *
                                             stats[r].rstd);
      },
      dg);
  sumRowsPerColumn(
      rows, cols, [&](int64_t r, int64_t j, auto t) { return load(dy + r * cols + j, t); }, db);
}

void rmsNorm(int64_t rows, int64_t cols, const float *x, const float *g, float eps, float *y) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    const float factor = rmsNormFactor(cols, xr, eps);
    forEachLane(cols, [&](int64_t j, auto t) {
      store(yr + j, load(xr + j, t) * factor * load(g + j, t));
    });
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
    const float c =
        static_cast<float>(dot / static_cast<double>(cols)) * factor * factor * factor;
    forEachLane(cols, [&](int64_t j, auto t) {
      store(dxr + j,
            load(g + j, t) * load(dyr + j, t) * factor - load(xr + j, t) * c);
    });
  }
  sumRowsPerColumn(
      rows, cols,
      [&](int64_t r, int64_t j, auto t) {
        return load(dy + r * cols + j, t) * (load(x + r * cols + j, t) * factors[r]);
      },
      dg);
}

} // namespace tessel::cpu
