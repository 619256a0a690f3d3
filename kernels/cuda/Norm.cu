//===- Norm.cu - LayerNorm and RMSNorm, forward and backward --------------===//
//
// One block per row computes the row's statistics and its outputs; the backward pass keeps
// each row's statistics in the workspace, and two more kernels sum the parameter gradients
// over rows: a block per 32 columns and 128 rows, whose 8 thread rows take every 8th row,
// writes its partial sums, and one thread per column adds them up, every sum in a fixed order,
// so the gradients never change between runs.
// kernels/cpu/Norm.cpp is the reference.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

namespace tessel::cuda {

namespace {

using detail::kRowThreads;

constexpr int kColumnTile = 32, kRowLanes = 8;

/// The mean and 1 / sqrt(var + eps) of a row (two passes: the variance from the deviations).
template <class In>
__device__ inline float2 layerNormStats(int64_t cols, In xr, float eps, float *scratch) {
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    sum += detail::load(xr + j);
  const float mean = detail::blockSum(sum, scratch) / static_cast<float>(cols);
  float squares = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float d = detail::load(xr + j) - mean;
    squares += d * d;
  }
  const float var = detail::blockSum(squares, scratch) / static_cast<float>(cols);
  return make_float2(mean, 1.0f / sqrtf(var + eps));
}

/// 1 / sqrt(mean(x^2) + eps) of a row.
template <class In>
__device__ inline float rmsFactor(int64_t cols, In xr, float eps, float *scratch) {
  float squares = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float v = detail::load(xr + j);
    squares += v * v;
  }
  return 1.0f / sqrtf(detail::blockSum(squares, scratch) / static_cast<float>(cols) + eps);
}

template <class In, class Out>
__global__ void layerNormKernel(int64_t cols, In x, In g, In b, float eps, Out y) {
  __shared__ float scratch[32];
  const In xr = x + blockIdx.x * cols;
  const Out yr = y + blockIdx.x * cols;
  const float2 s = layerNormStats(cols, xr, eps, scratch);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    detail::store(yr + j,
                  (detail::load(xr + j) - s.x) * s.y * detail::load(g + j) + detail::load(b + j));
}

/// dx of one row, and the row's (mean, rstd) into stats.
template <class In, class Out>
__global__ void layerNormGradRows(int64_t cols, In x, In g, In dy, float eps, Out dx,
                                  float2 *stats) {
  __shared__ float scratch[32];
  const In xr = x + blockIdx.x * cols, dyr = dy + blockIdx.x * cols;
  const Out dxr = dx + blockIdx.x * cols;
  const float2 s = layerNormStats(cols, xr, eps, scratch);
  if (threadIdx.x == 0)
    stats[blockIdx.x] = s;
  // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * g.
  float d = 0.0f, dxh = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float dxhat = detail::load(dyr + j) * detail::load(g + j);
    d += dxhat;
    dxh += dxhat * (detail::load(xr + j) - s.x) * s.y;
  }
  const float meanD = detail::blockSum(d, scratch) / static_cast<float>(cols);
  const float meanDX = detail::blockSum(dxh, scratch) / static_cast<float>(cols);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float xhat = (detail::load(xr + j) - s.x) * s.y;
    const float dxhat = detail::load(dyr + j) * detail::load(g + j);
    detail::store(dxr + j, (dxhat - meanD - xhat * meanDX) * s.y);
  }
}

template <class In, class Out>
__global__ void rmsNormKernel(int64_t cols, In x, In g, float eps, Out y) {
  __shared__ float scratch[32];
  const In xr = x + blockIdx.x * cols;
  const Out yr = y + blockIdx.x * cols;
  const float f = rmsFactor(cols, xr, eps, scratch);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    detail::store(yr + j, detail::load(xr + j) * f * detail::load(g + j));
}

/// dx of one row, and the row's (0, factor) into stats.
template <class In, class Out>
__global__ void rmsNormGradRows(int64_t cols, In x, In g, In dy, float eps, Out dx, float2 *stats) {
  __shared__ float scratch[32];
  const In xr = x + blockIdx.x * cols, dyr = dy + blockIdx.x * cols;
  const Out dxr = dx + blockIdx.x * cols;
  const float f = rmsFactor(cols, xr, eps, scratch);
  if (threadIdx.x == 0)
    stats[blockIdx.x] = make_float2(0.0f, f);
  // dx = f g dy - x f^3 mean(dy g x).
  float dot = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    dot += detail::load(dyr + j) * detail::load(g + j) * detail::load(xr + j);
  const float c = detail::blockSum(dot, scratch) / static_cast<float>(cols) * f * f * f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    detail::store(dxr + j,
                  detail::load(g + j) * detail::load(dyr + j) * f - detail::load(xr + j) * c);
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
    normParamFinish<<<blocks, detail::kMapThreads, 0, stream>>>(chunks, cols, partG, partB, dg,
                                                                db, withDb);
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
  const unsigned blocks = static_cast<unsigned>(rows);
  if (detail::allF32(x, g, b, y))
    layerNormKernel<<<blocks, kRowThreads, 0, stream>>>(cols, detail::f32(x), detail::f32(g),
                                                        detail::f32(b), eps, detail::f32(y));
  else
    layerNormKernel<<<blocks, kRowThreads, 0, stream>>>(cols, x, g, b, eps, y);
  return detail::launched();
}

cudaError_t layerNormGrad(int64_t rows, int64_t cols, ConstFloats x, ConstFloats g, ConstFloats dy,
                          float eps, Floats dx, Floats dg, Floats db, float *workspace,
                          cudaStream_t stream) {
  if (!validNorm(rows, cols) || !workspace)
    return cudaErrorInvalidValue;
  float2 *stats = reinterpret_cast<float2 *>(workspace);
  const unsigned blocks = static_cast<unsigned>(rows);
  if (detail::allF32(x, g, dy, dx))
    layerNormGradRows<<<blocks, kRowThreads, 0, stream>>>(
        cols, detail::f32(x), detail::f32(g), detail::f32(dy), eps, detail::f32(dx), stats);
  else
    layerNormGradRows<<<blocks, kRowThreads, 0, stream>>>(cols, x, g, dy, eps, dx, stats);
  if (cudaError_t e = detail::launched(); e != cudaSuccess)
    return e;
  return launchParamGrads(rows, cols, x, dy, stats, dg, db, workspace + 2 * rows, stream);
}

cudaError_t rmsNorm(int64_t rows, int64_t cols, ConstFloats x, ConstFloats g, float eps, Floats y,
                    cudaStream_t stream) {
  if (!validNorm(rows, cols))
    return cudaErrorInvalidValue;
  const unsigned blocks = static_cast<unsigned>(rows);
  if (detail::allF32(x, g, y))
    rmsNormKernel<<<blocks, kRowThreads, 0, stream>>>(cols, detail::f32(x), detail::f32(g), eps,
                                                      detail::f32(y));
  else
    rmsNormKernel<<<blocks, kRowThreads, 0, stream>>>(cols, x, g, eps, y);
  return detail::launched();
}

cudaError_t rmsNormGrad(int64_t rows, int64_t cols, ConstFloats x, ConstFloats g, ConstFloats dy,
                        float eps, Floats dx, Floats dg, float *workspace, cudaStream_t stream) {
  if (!validNorm(rows, cols) || !workspace)
    return cudaErrorInvalidValue;
  float2 *stats = reinterpret_cast<float2 *>(workspace);
  const unsigned blocks = static_cast<unsigned>(rows);
  if (detail::allF32(x, g, dy, dx))
    rmsNormGradRows<<<blocks, kRowThreads, 0, stream>>>(
        cols, detail::f32(x), detail::f32(g), detail::f32(dy), eps, detail::f32(dx), stats);
  else
    rmsNormGradRows<<<blocks, kRowThreads, 0, stream>>>(cols, x, g, dy, eps, dx, stats);
  if (cudaError_t e = detail::launched(); e != cudaSuccess)
    return e;
  return launchParamGrads(rows, cols, x, dy, stats, dg, Floats(), workspace + 2 * rows, stream);
}

} // namespace tessel::cuda
