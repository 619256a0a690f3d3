//===- Loss.cu - Cross entropy over the last dim and its logit gradient ---===//
//
// The loss: one block per row writes the row's -log softmax[target], then one block adds the
// rows in a fixed order (in double, as the CPU does) and scales the total. The gradient is one
// block per row. A row whose target is kernels::kIgnoredTarget adds 0 and gets a zero gradient.
// kernels/cpu/Loss.cpp is the reference.
//
// The rows are a vocabulary long and the kernels are bound by reading them: each row's softmax
// normaliser comes from one pass (RowGroups.cuh's MaxSum), read in 16-byte groups, with kernels
// instantiated on the element type where the operands share one, so that the gradient reads a
// row twice and writes it once and the loss reads it once.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/RowGroups.cuh"

namespace tessel::cuda {

namespace {

using detail::kRowThreads;

template <class In>
__global__ void rowLosses(int64_t cols, In logits, bool vector, const int32_t *targets,
                          float *perRow, IdError *idError) {
  __shared__ float scratch[64];
  const In xr = logits + blockIdx.x * cols;
  const int32_t target = targets[blockIdx.x];
  if (target == kernels::kIgnoredTarget) {
    if (threadIdx.x == 0)
      perRow[blockIdx.x] = 0.0f;
    return;
  }
  const detail::MaxSum s = detail::rowMaxSum(cols, xr, vector, scratch);
  if (threadIdx.x != 0)
    return;
  if (target < 0 || target >= cols) {
    detail::reportBadId(idError, target, blockIdx.x, cols);
    perRow[blockIdx.x] = NAN;
    return;
  }
  perRow[blockIdx.x] = s.max + logf(s.sum) - detail::load(xr + target);
}

/// loss = factor * the sum of perRow, in double; factor = 1 / rows, or scale when scaled.
__global__ void sumRows(int64_t rows, const float *perRow, bool scaled, double scale, float *loss) {
  __shared__ double partial[kRowThreads];
  double sum = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    sum += perRow[r];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width)
      partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    loss[0] =
        static_cast<float>(scaled ? partial[0] * scale : partial[0] / static_cast<double>(rows));
}

template <class In, class Out>
__global__ void rowGrads(int64_t rows, int64_t cols, In logits, const int32_t *targets,
                         const float *dloss, bool scaled, double scale, Out dlogits, bool vector,
                         IdError *idError) {
  __shared__ float scratch[64];
  const In xr = logits + blockIdx.x * cols;
  const Out dr = dlogits + blockIdx.x * cols;
  const int32_t target = targets[blockIdx.x];
  const int64_t groups = detail::groupsOf(cols);
  float v[detail::kGroup];
  // As the CPU: dloss / rows in f32, or dloss * scale in double, rounded once.
  const float factor = scaled ? static_cast<float>(static_cast<double>(dloss[0]) * scale)
                              : dloss[0] / static_cast<float>(rows);
  if (target == kernels::kIgnoredTarget) {
    for (float &x : v)
      x = 0.0f;
    for (int64_t g = threadIdx.x; g < groups; g += blockDim.x)
      detail::storeGroup(dr, g, detail::groupCount(cols, g), vector, v);
    return;
  }
  const detail::MaxSum s = detail::rowMaxSum(cols, xr, vector, scratch);
  const float inv = 1.0f / s.sum;
  const bool valid = target >= 0 && target < cols;
  if (!valid && threadIdx.x == 0)
    detail::reportBadId(idError, target, blockIdx.x, cols);
  for (int64_t g = threadIdx.x; g < groups; g += blockDim.x) {
    const int count = detail::loadGroup(xr, cols, g, vector, v);
    for (int i = 0; i < count; ++i) {
      float p = expf(v[i] - s.max) * inv;
      // (p - 1) is exact near p = 1, where p * factor - factor would cancel.
      if (g * detail::kGroup + i == target)
        p -= 1.0f;
      v[i] = p * factor;
    }
    detail::storeGroup(dr, g, count, vector, v);
  }
}

} // namespace

int64_t crossEntropyWorkspace(int64_t rows) { return rows; }

cudaError_t crossEntropy(int64_t rows, int64_t cols, ConstFloats logits, const int32_t *targets,
                         bool scaled, double scale, float *loss, float *workspace, IdError *idError,
                         cudaStream_t stream) {
  if (!detail::validRows(rows, cols) || cols > 0x7fffffff || !workspace || !idError)
    return cudaErrorInvalidValue;
  const unsigned blocks = static_cast<unsigned>(rows);
  const bool vector = detail::vectorOperands(cols, logits);
  detail::withElementType(
      [&](auto x) {
        rowLosses<<<blocks, kRowThreads, 0, stream>>>(cols, x, vector, targets, workspace, idError);
      },
      logits);
  if (cudaError_t e = detail::launched(); e != cudaSuccess)
    return e;
  sumRows<<<1, kRowThreads, 0, stream>>>(rows, workspace, scaled, scale, loss);
  return detail::launched();
}

cudaError_t crossEntropyGrad(int64_t rows, int64_t cols, ConstFloats logits, const int32_t *targets,
                             const float *dloss, bool scaled, double scale, Floats dlogits,
                             IdError *idError, cudaStream_t stream) {
  if (!detail::validRows(rows, cols) || cols > 0x7fffffff || !idError)
    return cudaErrorInvalidValue;
  const unsigned blocks = static_cast<unsigned>(rows);
  const bool vector = detail::vectorOperands(cols, logits, dlogits);
  detail::withElementType(
      [&](auto x, auto dx) {
        rowGrads<<<blocks, kRowThreads, 0, stream>>>(rows, cols, x, targets, dloss, scaled, scale,
                                                     dx, vector, idError);
      },
      logits, dlogits);
  return detail::launched();
}

} // namespace tessel::cuda
