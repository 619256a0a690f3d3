//===- Embedding.cpp - Table lookups and their gradient -------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Ids.h"
#include "kernels/cpu/Loops.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace tessel::cpu {

using detail::kParallelGrain;

bool embedding(int64_t n, int64_t rows, int64_t cols, const float *table, const int32_t *ids,
               float *out, std::string &error) {
  if (!detail::checkIds(n, rows, ids, error))
    return false;
#pragma omp parallel for schedule(static) if (n * cols >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out + i * cols, table + static_cast<int64_t>(ids[i]) * cols,
                static_cast<size_t>(cols) * sizeof(float));
  return true;
}

bool embeddingGrad(int64_t n, int64_t rows, int64_t cols, const float *dout, const int32_t *ids,
                   float *dtable, std::string &error) {
  if (!detail::checkIds(n, rows, ids, error))
    return false;
  // Group the positions by id, keeping them in increasing order (a counting sort), so that each
  // table row is summed by one thread in the order of i.
  std::vector<int64_t> first(static_cast<size_t>(rows) + 1, 0);
  for (int64_t i = 0; i < n; ++i)
    ++first[ids[i] + 1];
  for (int64_t r = 0; r < rows; ++r)
    first[r + 1] += first[r];
  std::vector<int64_t> positions(static_cast<size_t>(n));
  {
    std::vector<int64_t> next(first.begin(), first.end() - 1);
    for (int64_t i = 0; i < n; ++i)
      positions[next[ids[i]]++] = i;
  }
#pragma omp parallel if ((n + rows) * cols >= kParallelGrain)
  {
    std::vector<double> acc(static_cast<size_t>(cols));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      float *row = dtable + r * cols;
      const int64_t begin = first[r], end = first[r + 1];
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

} // namespace tessel::cpu
