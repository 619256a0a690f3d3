//===- Embedding.cpp - Table lookups and their gradient -------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Ids.h"
#include "kernels/cpu/Loops.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace tessel::cpu {

using detail::kParallelGrain;

bool embeddingRows(int64_t n, int64_t rows, int64_t cols, int64_t first, int64_t vocab,
                   const float *table, const int32_t *ids, float *out, std::string &error) {
  if (!detail::checkIdsBelow(n, vocab, ids, error))
    return false;
#pragma omp parallel for schedule(static) if (n * cols >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    // A negative id (a padding slot) falls before every rank's rows, first being >= 0.
    const int64_t row = static_cast<int64_t>(ids[i]) - first;
    if (row >= 0 && row < rows)
      std::memcpy(out + i * cols, table + row * cols, static_cast<size_t>(cols) * sizeof(float));
    else
      std::fill(out + i * cols, out + (i + 1) * cols, 0.0f);
  }
  return true;
}

bool embedding(int64_t n, int64_t rows, int64_t cols, const float *table, const int32_t *ids,
               float *out, std::string &error) {
  return embeddingRows(n, rows, cols, 0, rows, table, ids, out, error);
}

bool embeddingGradRows(int64_t n, int64_t rows, int64_t cols, int64_t first, int64_t vocab,
                       const float *dout, const int32_t *ids, float *dtable, std::string &error) {
  if (!detail::checkIds(n, vocab, ids, error))
    return false;
  // Group the positions by table row, keeping them in increasing order (a counting sort), so
  // that each row is summed by one thread in the order of i. Ids of other ranks' rows are left
  // out.
  auto rowOf = [&](int64_t i) { return static_cast<int64_t>(ids[i]) - first; };
  auto here = [&](int64_t row) { return row >= 0 && row < rows; };
  std::vector<int64_t> begins(static_cast<size_t>(rows) + 1, 0);
  for (int64_t i = 0; i < n; ++i)
    if (here(rowOf(i)))
      ++begins[rowOf(i) + 1];
  for (int64_t r = 0; r < rows; ++r)
    begins[r + 1] += begins[r];
  std::vector<int64_t> positions(static_cast<size_t>(begins[rows]));
  {
    std::vector<int64_t> next(begins.begin(), begins.end() - 1);
    for (int64_t i = 0; i < n; ++i)
      if (here(rowOf(i)))
        positions[next[rowOf(i)]++] = i;
  }
#pragma omp parallel if ((n + rows) * cols >= kParallelGrain)
  {
    std::vector<double> acc(static_cast<size_t>(cols));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      float *row = dtable + r * cols;
      const int64_t begin = begins[r], end = begins[r + 1];
      if (begin == end) {
        std::fill(row, row + cols, 0.0f);
        continue;
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t p = begin; p < end; ++p) {
        const float *src = dout + positions[p] * cols;
        for (int64_t j = 0; j < cols; ++j)
          acc[j] += src[j];
      }
      for (int64_t j = 0; j < cols; ++j)
        row[j] = static_cast<float>(acc[j]);
    }
  }
  return true;
}

bool embeddingGrad(int64_t n, int64_t rows, int64_t cols, const float *dout, const int32_t *ids,
                   float *dtable, std::string &error) {
  return embeddingGradRows(n, rows, cols, 0, rows, dout, ids, dtable, error);
}

} // namespace tessel::cpu
