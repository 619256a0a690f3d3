//===- ShardedLoss.cu - Cross entropy over a split class dim --------------===//
//
// The CPU counterparts are in kernels/cpu/ShardedLoss.cpp: a rank holds `cols` of the classes
// from column `first`, and the loss runs as row maxima (all-reduced with max), each rank's
// sums of exp(x - max) and target logits (all-reduced with sum), then the loss or the logit
// gradient from those. One block per row, with the row reductions of Common.cuh; the loss adds
// the rows in a fixed order in f64, as the CPU does. An ignored target's row
// (kernels::kIgnoredTarget) adds nothing and gets a zero gradient, as on the CPU.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

namespace tessel::cuda {

namespace {

using detail::kRowThreads;

/// The column of this rank that class `target` is, or -1; a class outside [0, classes) is
/// recorded (by the caller's one thread) and is no column.
__device__ inline int64_t localColumn(int32_t target, int64_t row, int64_t cols, int64_t first,
                                      int64_t classes, IdError *error) {
  if (target < 0 || target >= classes) {
    if (error)
      detail::reportBadId(error, target, row, classes);
    return -1;
  }
  const int64_t local = static_cast<int64_t>(target) - first;
  return local >= 0 && local < cols ? local : -1;
}

__global__ void maxKernel(int64_t cols, const float *logits, float *m) {
  __shared__ float scratch[32];
  const float *xr = logits + blockIdx.x * cols;
  float max = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    max = fmaxf(max, xr[j]);
  max = detail::blockMax(max, scratch);
  if (threadIdx.x == 0)
    m[blockIdx.x] = max;
}

__global__ void sumsKernel(int64_t cols, int64_t first, int64_t classes, const float *logits,
                           const int32_t *targets, const float *m, float *s, float *t,
                           IdError *error) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  if (targets[r] == kernels::kIgnoredTarget) {
    // s = 0 from every rank marks the row for lossKernel (as the CPU's ceSums).
    if (threadIdx.x == 0)
      s[r] = t[r] = 0.0f;
    return;
  }
  const float *xr = logits + r * cols;
  const float max = m[r];
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    sum += expf(xr[j] - max);
  sum = detail::blockSum(sum, scratch);
  if (threadIdx.x != 0)
    return;
  s[r] = sum;
  const int64_t local = localColumn(targets[r], r, cols, first, classes, error);
  t[r] = local >= 0 ? xr[local] : 0.0f;
}

__global__ void lossKernel(int64_t rows, const float *m, const float *s, const float *t,
                           double scale, float *loss) {
  __shared__ double partial[kRowThreads];
  double sum = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    if (s[r] != 0.0f) // Not `> 0`: a NaN sum must reach the loss.
      sum += static_cast<double>(m[r]) + log(static_cast<double>(s[r])) - t[r];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width)
      partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    loss[0] = static_cast<float>(partial[0] * scale);
}

__global__ void gradKernel(int64_t cols, int64_t first, int64_t classes, const float *logits,
                           const int32_t *targets, const float *m, const float *s,
                           const float *dloss, double scale, float *dlogits, IdError *error) {
  const int64_t r = blockIdx.x;
  const float *xr = logits + r * cols;
  float *dr = dlogits + r * cols;
  const float max = m[r];
  // As the CPU: the factor and 1 / s formed in f64 and rounded once; (p - 1) at the target,
  // which is exact near p = 1, then times the factor.
  const float factor = static_cast<float>(static_cast<double>(*dloss) * scale);
  if (targets[r] == kernels::kIgnoredTarget) {
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      dr[j] = 0.0f;
    return;
  }
  const float inv = static_cast<float>(1.0 / static_cast<double>(s[r]));
  const int64_t local =
      localColumn(targets[r], r, cols, first, classes, threadIdx.x == 0 ? error : nullptr);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float p = expf(xr[j] - max) * inv;
    if (j == local)
      p -= 1.0f;
    dr[j] = p * factor;
  }
}

bool validRows(int64_t rows, int64_t cols) { return detail::validRows(rows, cols); }

} // namespace

cudaError_t ceMax(int64_t rows, int64_t cols, const float *logits, float *m, cudaStream_t stream) {
  if (!validRows(rows, cols))
    return cudaErrorInvalidValue;
  maxKernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(cols, logits, m);
  return detail::launched();
}

cudaError_t ceSums(int64_t rows, int64_t cols, int64_t first, int64_t classes, const float *logits,
                   const int32_t *targets, const float *m, float *s, float *t, IdError *idError,
                   cudaStream_t stream) {
  if (!validRows(rows, cols) || first < 0 || classes < first + cols)
    return cudaErrorInvalidValue;
  sumsKernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(cols, first, classes, logits,
                                                                      targets, m, s, t, idError);
  return detail::launched();
}

cudaError_t ceLoss(int64_t rows, const float *m, const float *s, const float *t, double scale,
                   float *loss, cudaStream_t stream) {
  if (rows <= 0)
    return cudaErrorInvalidValue;
  lossKernel<<<1, kRowThreads, 0, stream>>>(rows, m, s, t, scale, loss);
  return detail::launched();
}

cudaError_t ceGrad(int64_t rows, int64_t cols, int64_t first, int64_t classes, const float *logits,
                   const int32_t *targets, const float *m, const float *s, const float *dloss,
                   double scale, float *dlogits, IdError *idError, cudaStream_t stream) {
  if (!validRows(rows, cols) || first < 0 || classes < first + cols)
    return cudaErrorInvalidValue;
  gradKernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      cols, first, classes, logits, targets, m, s, dloss, scale, dlogits, idError);
  return detail::launched();
}

} // namespace tessel::cuda
