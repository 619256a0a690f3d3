//===- Embedding.cu - Table lookups and their gradient --------------------===//
//
// The CPU counterparts are in kernels/cpu/Embedding.cpp. The gradient adds many positions
// into one table row; rather than atomics (whose order changes from run to run) it groups the
// positions by row with a stable radix sort, so each row is summed by one thread per column in
// increasing position order, in f64: the CPU's order and precision.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace tessel::cuda {

namespace {

using detail::kMapThreads;
using detail::mapBlocks;

/// The row of the table here that id `id` names, or -1 (another rank's row, or a bad id,
/// which is recorded where `error` is given).
__device__ inline int64_t localRow(int32_t id, int64_t position, int64_t rows, int64_t first,
                                   int64_t vocab, IdError *error) {
  if (id < 0 || id >= vocab) {
    if (error)
      detail::reportBadId(error, id, position, vocab);
    return -1;
  }
  const int64_t row = static_cast<int64_t>(id) - first;
  return row >= 0 && row < rows ? row : -1;
}

template <class In, class Out>
__global__ void embeddingKernel(int64_t n, int64_t rows, int64_t cols, int64_t first, int64_t vocab,
                                In table, const int32_t *ids, Out out, IdError *error) {
  const int64_t total = n * cols;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e / cols, j = e % cols;
    // A negative id is a padding slot (a zero row). Only the row's first column reports a bad
    // id, once per position.
    const int32_t id = ids[i];
    const int64_t row = id < 0 ? -1 : localRow(id, i, rows, first, vocab, j == 0 ? error : nullptr);
    detail::store(out + e, row >= 0 ? detail::load(table + (row * cols + j)) : 0.0f);
  }
}

/// keys[i] = the local row of ids[i], or `rows` (sorted last, then skipped) for ids that are
/// not here; values[i] = i.
__global__ void rowKeysKernel(int64_t n, int64_t rows, int64_t first, int64_t vocab,
                              const int32_t *ids, int32_t *keys, int32_t *values, IdError *error) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = localRow(ids[i], i, rows, first, vocab, error);
    keys[i] = static_cast<int32_t>(row >= 0 ? row : rows);
    values[i] = static_cast<int32_t>(i);
  }
}

/// One block per sorted position; only the block at the start of a run of equal rows works:
/// its threads take the row's columns and add the run's dout rows in order.
template <class In, class Out>
__global__ void sumRunsKernel(int64_t n, int64_t rows, int64_t cols, const int32_t *keys,
                              const int32_t *positions, In dout, Out dtable) {
  const int64_t s = blockIdx.x;
  const int32_t row = keys[s];
  if (row >= rows || (s > 0 && keys[s - 1] == row))
    return;
  int64_t end = s + 1;
  while (end < n && keys[end] == row)
    ++end;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    double sum = 0.0;
    for (int64_t p = s; p < end; ++p)
      sum += detail::load(dout + (static_cast<int64_t>(positions[p]) * cols + j));
    detail::store(dtable + (static_cast<int64_t>(row) * cols + j), static_cast<float>(sum));
  }
}

/// The bits a radix sort of keys in [0, rows] needs.
int keyBits(int64_t rows) {
  int bits = 1;
  while ((int64_t(1) << bits) <= rows)
    ++bits;
  return bits;
}

size_t alignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

/// The sort's own temporary storage; 0 if CUB cannot say.
size_t sortBytes(int64_t n, int64_t rows) {
  size_t bytes = 0;
  if (cub::DeviceRadixSort::SortPairs(
          nullptr, bytes, static_cast<const int32_t *>(nullptr), static_cast<int32_t *>(nullptr),
          static_cast<const int32_t *>(nullptr), static_cast<int32_t *>(nullptr),
          static_cast<int>(n), 0, keyBits(rows)) != cudaSuccess)
    return 0;
  return bytes;
}

} // namespace

cudaError_t embedding(int64_t n, int64_t rows, int64_t cols, int64_t first, int64_t vocab,
                      ConstFloats table, const int32_t *ids, Floats out, IdError *idError,
                      cudaStream_t stream) {
  if (n < 0 || rows <= 0 || cols <= 0 || first < 0 || vocab < rows)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  const unsigned blocks = mapBlocks(n * cols);
  if (detail::allF32(table, out))
    embeddingKernel<<<blocks, kMapThreads, 0, stream>>>(
        n, rows, cols, first, vocab, detail::f32(table), ids, detail::f32(out), idError);
  else
    embeddingKernel<<<blocks, kMapThreads, 0, stream>>>(n, rows, cols, first, vocab, table, ids,
                                                        out, idError);
  return detail::launched();
}

size_t embeddingGradWorkspace(int64_t n, int64_t rows) {
  // Keys and positions, before and after the sort, then the sort's storage.
  return 4 * alignUp(static_cast<size_t>(n) * sizeof(int32_t)) + alignUp(sortBytes(n, rows));
}

cudaError_t embeddingGrad(int64_t n, int64_t rows, int64_t cols, int64_t first, int64_t vocab,
                          ConstFloats dout, const int32_t *ids, Floats dtable, void *workspace,
                          size_t workspaceBytes, IdError *idError, cudaStream_t stream) {
  if (n < 0 || n > 0x7fffffff || rows <= 0 || rows >= 0x7fffffff || cols <= 0 || first < 0 ||
      vocab < rows)
    return cudaErrorInvalidValue;
  // Zero is all-zero bits at every element type.
  if (cudaError_t e = cudaMemsetAsync(
          dtable.data, 0, static_cast<size_t>(rows * cols * elementBytes(dtable.type)), stream);
      e != cudaSuccess || n == 0)
    return e;
  const size_t sort = sortBytes(n, rows);
  if (!workspace || sort == 0 || workspaceBytes < embeddingGradWorkspace(n, rows))
    return cudaErrorInvalidValue;
  char *w = static_cast<char *>(workspace);
  const size_t array = alignUp(static_cast<size_t>(n) * sizeof(int32_t));
  int32_t *keys = reinterpret_cast<int32_t *>(w), *sortedKeys = keys + array / 4;
  int32_t *positions = sortedKeys + array / 4, *sortedPositions = positions + array / 4;
  void *sortStorage = sortedPositions + array / 4;
  rowKeysKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(n, rows, first, vocab, ids, keys,
                                                          positions, idError);
  if (cudaError_t e = detail::launched(); e != cudaSuccess)
    return e;
  size_t sortStorageBytes = sort;
  if (cudaError_t e = cub::DeviceRadixSort::SortPairs(
          sortStorage, sortStorageBytes, keys, sortedKeys, positions, sortedPositions,
          static_cast<int>(n), 0, keyBits(rows), stream);
      e != cudaSuccess)
    return e;
  const unsigned threads = static_cast<unsigned>(std::min<int64_t>(cols, 256));
  if (detail::allF32(dout, dtable))
    sumRunsKernel<<<static_cast<unsigned>(n), threads, 0, stream>>>(
        n, rows, cols, sortedKeys, sortedPositions, detail::f32(dout), detail::f32(dtable));
  else
    sumRunsKernel<<<static_cast<unsigned>(n), threads, 0, stream>>>(n, rows, cols, sortedKeys,
                                                                    sortedPositions, dout, dtable);
  return detail::launched();
}

} // namespace tessel::cuda
