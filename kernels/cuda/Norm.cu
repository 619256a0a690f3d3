//===- Norm.cu - LayerNorm and RMSNorm, forward and backward --------------===//
//
// A team of threads per row computes the row's statistics and its outputs: a warp for rows of
// up to RowGroups.cuh's kWarpRowCols (a model's hidden size; a block there would mostly idle
// between its barriers), else a block; rows are read in groups of eight elements, 16 bytes at
// a time where the operands allow, through kernels instantiated on the element type where the
// operands share one. The backward pass keeps each row's statistics in the workspace, and two
// more kernels sum the parameter gradients over rows: a block per 32 columns and 128 rows,
// whose 8 thread rows take every 8th row, writes its partial sums, and one thread per column
// adds them up, every sum in a fixed order, so the gradients never change between runs.
// kernels/cpu/Norm.cpp is the reference.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/RowGroups.cuh"

namespace tessel::cuda {

namespace {

using detail::groupsOf;
using detail::kGroup;
using detail::kRowThreads;
using detail::loadGroup;
using detail::storeGroup;

constexpr int kColumnTile = 32, kRowLanes = 8;

/// The mean and 1 / sqrt(var + eps) of a row (two passes: the variance from the deviations).
template <class Team, class In>
__device__ inline float2 layerNormStats(Team team, int64_t cols, In xr, float eps, bool vector,
                                        float *scratch) {
  float v[kGroup];
  float sum = 0.0f;
  for (int64_t q = team.lane(); q < groupsOf(cols); q += team.size()) {
    const int count = loadGroup(xr, cols, q, vector, v);
    for (int i = 0; i < count; ++i)
      sum += v[i];
  }
  const float mean = team.sum(sum, scratch) / static_cast<float>(cols);
  float squares = 0.0f;
  for (int64_t q = team.lane(); q < groupsOf(cols); q += team.size()) {
    const int count = loadGroup(xr, cols, q, vector, v);
    for (int i = 0; i < count; ++i) {
      const float d = v[i] - mean;
      squares += d * d;
    }
  }
  const float var = team.sum(squares, scratch) / static_cast<float>(cols);
  return make_float2(mean, 1.0f / sqrtf(var + eps));
}

/// 1 / sqrt(mean(x^2) + eps) of a row.
template <class Team, class In>
__device__ inline float rmsFactor(Team team, int64_t cols, In xr, float eps, bool vector,
                                  float *scratch) {
  float v[kGroup];
  float squares = 0.0f;
  for (int64_t q = team.lane(); q < groupsOf(cols); q += team.size()) {
    const int count = loadGroup(xr, cols, q, vector, v);
    for (int i = 0; i < count; ++i)
      squares += v[i] * v[i];
  }
  return 1.0f / sqrtf(team.sum(squares, scratch) / static_cast<float>(cols) + eps);
}

template <class Team, class In, class Out>
__global__ void layerNormKernel(Team team, int64_t rows, int64_t cols, In x, In g, In b, float eps,
                                Out y, bool vector) {
  __shared__ float scratch[32];
  const int64_t row = team.row();
  if (row >= rows)
    return;
  const In xr = x + row * cols;
  const Out yr = y + row * cols;
  const float2 s = layerNormStats(team, cols, xr, eps, vector, scratch);
  float v[kGroup], gv[kGroup], bv[kGroup];
  for (int64_t q = team.lane(); q < groupsOf(cols); q += team.size()) {
    const int count = loadGroup(xr, cols, q, vector, v);
    loadGroup(g, cols, q, vector, gv);
    loadGroup(b, cols, q, vector, bv);
    for (int i = 0; i < count; ++i)
      v[i] = (v[i] - s.x) * s.y * gv[i] + bv[i];
    storeGroup(yr, q, count, vector, v);
  }
}

/// dx of one row, and the row's (mean, rstd) into stats.
template <class Team, class In, class Out>
__global__ void layerNormGradRows(Team team, int64_t rows, int64_t cols, In x, In g, In dy,
                                  float eps, Out dx, float2 *stats, bool vector) {
  __shared__ float scratch[32];
  const int64_t row = team.row();
  if (row >= rows)
    return;
  const In xr = x + row * cols, dyr = dy + row * cols;
  const Out dxr = dx + row * cols;
  const float2 s = layerNormStats(team, cols, xr, eps, vector, scratch);
  if (team.lane() == 0)
    stats[row] = s;
  // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * g.
  float v[kGroup], gv[kGroup], dv[kGroup];
  float d = 0.0f, dxh = 0.0f;
  for (int64_t q = team.lane(); q < groupsOf(cols); q += team.size()) {
    const int count = loadGroup(xr, cols, q, vector, v);
    loadGroup(g, cols, q, vector, gv);
    loadGroup(dyr, cols, q, vector, dv);
    for (int i = 0; i < count; ++i) {
      const float dxhat = dv[i] * gv[i];
      d += dxhat;
      dxh += dxhat * (v[i] - s.x) * s.y;
    }
  }
  const float meanD = team.sum(d, scratch) / static_cast<float>(cols);
  const float meanDX = team.sum(dxh, scratch) / static_cast<float>(cols);
  for (int64_t q = team.lane(); q < groupsOf(cols); q += team.size()) {
    const int count = loadGroup(xr, cols, q, vector, v);
    loadGroup(g, cols, q, vector, gv);
    loadGroup(dyr, cols, q, vector, dv);
    for (int i = 0; i < count; ++i) {
      const float xhat = (v[i] - s.x) * s.y;
      const float dxhat = dv[i] * gv[i];
      v[i] = (dxhat - meanD - xhat * meanDX) * s.y;
    }
    storeGroup(dxr, q, count, vector, v);
  }
}

template <class Team, class In, class Out>
__global__ void rmsNormKernel(Team team, int64_t rows, int64_t cols, In x, In g, float eps, Out y,
                              bool vector) {
  __shared__ float scratch[32];
  const int64_t row = team.row();
  if (row >= rows)
    return;
  const In xr = x + row * cols;
  const Out yr = y + row * cols;
  const float f = rmsFactor(team, cols, xr, eps, vector, scratch);
  float v[kGroup], gv[kGroup];
  for (int64_t q = team.lane(); q < groupsOf(cols); q += team.size()) {
    const int count = loadGroup(xr, cols, q, vector, v);
    loadGroup(g, cols, q, vector, gv);
    for (int i = 0; i < count; ++i)
      v[i] = v[i] * f * gv[i];
    storeGroup(yr, q, count, vector, v);
  }
}

/// dx of one row, and the row's (0, factor) into stats.
template <class Team, class In, class Out>
__global__ void rmsNormGradRows(Team team, int64_t rows, int64_t cols, In x, In g, In dy, float eps,
                                Out dx, float2 *stats, bool vector) {
  __shared__ float scratch[32];
  const int64_t row = team.row();
  if (row >= rows)
    return;
  const In xr = x + row * cols, dyr = dy + row * cols;
  const Out dxr = dx + row * cols;
  const float f = rmsFactor(team, cols, xr, eps, vector, scratch);
  if (team.lane() == 0)
    stats[row] = make_float2(0.0f, f);
  // dx = f g dy - x f^3 mean(dy g x).
  float v[kGroup], gv[kGroup], dv[kGroup];
  float dot = 0.0f;
  for (int64_t q = team.lane(); q < groupsOf(cols); q += team.size()) {
    const int count = loadGroup(xr, cols, q, vector, v);
    loadGroup(g, cols, q, vector, gv);
    loadGroup(dyr, cols, q, vector, dv);
    for (int i = 0; i < count; ++i)
      dot += dv[i] * gv[i] * v[i];
  }
  const float c = team.sum(dot, scratch) / static_cast<float>(cols) * f * f * f;
  for (int64_t q = team.lane(); q < groupsOf(cols); q += team.size()) {
    const int count = loadGroup(xr, cols, q, vector, v);
    loadGroup(g, cols, q, vector, gv);
    loadGroup(dyr, cols, q, vector, dv);
    for (int i = 0; i < count; ++i)
      v[i] = gv[i] * dv[i] * f - v[i] * c;
    storeGroup(dxr, q, count, vector, v);
  }
}

/// Rows per partial sum of the parameter gradients.
constexpr int64_t kChunkRows = 128;

int64_t chunksOf(int64_t rows) { return (rows + kChunkRows - 1) / kChunkRows; }

/// The partial sums of dg[j] (dy * (x - mean) * rstd; RMSNorm: mean 0, rstd the factor) and
/// db[j] (dy) over chunk blockIdx.y of kChunkRows rows, for 32 columns: block (kColumnTile,
/// kRowLanes), lane y taking every kRowLanes-th row of the chunk, the lanes added in order.
template <class In>
__global__ void normParamPartials(int64_t rows, int64_t cols, In x, In dy, const float2 *stats,
                                  float *partG, float *partB) {
  __shared__ float laneG[kRowLanes][kColumnTile + 1], laneB[kRowLanes][kColumnTile + 1];
  const int64_t j = blockIdx.x * int64_t(kColumnTile) + threadIdx.x;
  const int64_t first = blockIdx.y * kChunkRows;
  const int64_t end = first + kChunkRows < rows ? first + kChunkRows : rows;
  float sumG = 0.0f, sumB = 0.0f;
  if (j < cols)
    for (int64_t r = first + threadIdx.y; r < end; r += kRowLanes) {
      const float d = detail::load(dy + r * cols + j);
      const float2 s = stats[r];
      sumG += d * ((detail::load(x + r * cols + j) - s.x) * s.y);
      sumB += d;
    }
  laneG[threadIdx.y][threadIdx.x] = sumG;
  laneB[threadIdx.y][threadIdx.x] = sumB;
  __syncthreads();
  if (threadIdx.y != 0 || j >= cols)
    return;
  for (int lane = 1; lane < kRowLanes; ++lane) {
    sumG += laneG[lane][threadIdx.x];
    sumB += laneB[lane][threadIdx.x];
  }
  partG[blockIdx.y * cols + j] = sumG;
  partB[blockIdx.y * cols + j] = sumB;
}

/// dg[j] (and db[j] if withDb): column j's partial sums, added in chunk order.
template <class Out>
__global__ void normParamFinish(int64_t chunks, int64_t cols, const float *partG,
                                const float *partB, Out dg, Out db, bool withDb) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < cols;
       j += int64_t(gridDim.x) * blockDim.x) {
    float sumG = 0.0f, sumB = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) {
      sumG += partG[c * cols + j];
      sumB += partB[c * cols + j];
    }
    detail::store(dg + j, sumG);
    if (withDb)
      detail::store(db + j, sumB);
  }
}

/// The parameter gradients from the rows' statistics, in two launches whose sums are added in
/// a fixed order: the same bits on every run, with blocks for every chunk of rows.
cudaError_t launchParamGrads(int64_t rows, int64_t cols, ConstFloats x, ConstFloats dy,
                             const float2 *stats, Floats dg, Floats db, float *partials,
                             cudaStream_t stream) {
  const int64_t chunks = chunksOf(rows);
  const dim3 grid(static_cast<unsigned>((cols + kColumnTile - 1) / kColumnTile),
                  static_cast<unsigned>(chunks));
  const dim3 block(kColumnTile, kRowLanes);
  float *partG = partials, *partB = partials + chunks * cols;
  if (detail::allF32(x, dy))
    normParamPartials<<<grid, block, 0, stream>>>(rows, cols, detail::f32(x), detail::f32(dy),
                                                  stats, partG, partB);
  else
    normParamPartials<<<grid, block, 0, stream>>>(rows, cols, x, dy, stats, partG, partB);
  if (cudaError_t e = detail::launched(); e != cudaSuccess)
    return e;
  const bool withDb = db.data != nullptr;
  const unsigned blocks = detail::mapBlocks(cols);
  if (detail::allF32(dg, withDb ? db : dg))
    normParamFinish<<<blocks, detail::kMapThreads, 0, stream>>>(
        chunks, cols, partG, partB, detail::f32(dg), detail::f32(db), withDb);
  else
    normParamFinish<<<blocks, detail::kMapThreads, 0, stream>>>(chunks, cols, partG, partB, dg, db,
                                                                withDb);
  return detail::launched();
}

bool validNorm(int64_t rows, int64_t cols) {
  return detail::validRows(rows, cols) && (cols + kColumnTile - 1) / kColumnTile <= 0x7fffffff &&
         chunksOf(rows) <= 65535;
}

} // namespace

int64_t normGradWorkspace(int64_t rows, int64_t cols) {
  return 2 * rows + 2 * chunksOf(rows) * cols;
}

cudaError_t layerNorm(int64_t rows, int64_t cols, ConstFloats x, ConstFloats g, ConstFloats b,
                      float eps, Floats y, cudaStream_t stream) {
  if (!validNorm(rows, cols))
    return cudaErrorInvalidValue;
  const bool vector = detail::vectorOperands(cols, x, g, b, y);
  detail::withRowTeam(rows, cols, [&](auto team, unsigned blocks) {
    detail::withElementType(
        [&](auto tx, auto tg, auto tb, auto ty) {
          layerNormKernel<<<blocks, kRowThreads, 0, stream>>>(team, rows, cols, tx, tg, tb, eps, ty,
                                                              vector);
        },
        x, g, b, y);
  });
  return detail::launched();
}

cudaError_t layerNormGrad(int64_t rows, int64_t cols, ConstFloats x, ConstFloats g, ConstFloats dy,
                          float eps, Floats dx, Floats dg, Floats db, float *workspace,
                          cudaStream_t stream) {
  if (!validNorm(rows, cols) || !workspace)
    return cudaErrorInvalidValue;
  float2 *stats = reinterpret_cast<float2 *>(workspace);
  const bool vector = detail::vectorOperands(cols, x, g, dy, dx);
  detail::withRowTeam(rows, cols, [&](auto team, unsigned blocks) {
    detail::withElementType(
        [&](auto tx, auto tg, auto tdy, auto tdx) {
          layerNormGradRows<<<blocks, kRowThreads, 0, stream>>>(team, rows, cols, tx, tg, tdy, eps,
                                                                tdx, stats, vector);
        },
        x, g, dy, dx);
  });
  if (cudaError_t e = detail::launched(); e != cudaSuccess)
    return e;
  return launchParamGrads(rows, cols, x, dy, stats, dg, db, workspace + 2 * rows, stream);
}

cudaError_t rmsNorm(int64_t rows, int64_t cols, ConstFloats x, ConstFloats g, float eps, Floats y,
                    cudaStream_t stream) {
  if (!validNorm(rows, cols))
    return cudaErrorInvalidValue;
  const bool vector = detail::vectorOperands(cols, x, g, y);
  detail::withRowTeam(rows, cols, [&](auto team, unsigned blocks) {
    detail::withElementType(
        [&](auto tx, auto tg, auto ty) {
          rmsNormKernel<<<blocks, kRowThreads, 0, stream>>>(team, rows, cols, tx, tg, eps, ty,
                                                            vector);
        },
        x, g, y);
  });
  return detail::launched();
}

cudaError_t rmsNormGrad(int64_t rows, int64_t cols, ConstFloats x, ConstFloats g, ConstFloats dy,
                        float eps, Floats dx, Floats dg, float *workspace, cudaStream_t stream) {
  if (!validNorm(rows, cols) || !workspace)
    return cudaErrorInvalidValue;
  float2 *stats = reinterpret_cast<float2 *>(workspace);
  const bool vector = detail::vectorOperands(cols, x, g, dy, dx);
  detail::withRowTeam(rows, cols, [&](auto team, unsigned blocks) {
    detail::withElementType(
        [&](auto tx, auto tg, auto tdy, auto tdx) {
          rmsNormGradRows<<<blocks, kRowThreads, 0, stream>>>(team, rows, cols, tx, tg, tdy, eps,
                                                              tdx, stats, vector);
        },
        x, g, dy, dx);
  });
  if (cudaError_t e = detail::launched(); e != cudaSuccess)
    return e;
  return launchParamGrads(rows, cols, x, dy, stats, dg, Floats(), workspace + 2 * rows, stream);
}

} // namespace tessel::cuda
