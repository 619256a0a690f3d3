//===- Pack.cpp - Tensors copied into one bucket --------------------------===//
//
// A bucket gathers many tensors so that one collective does the work of one per tensor. Each
// input is viewed as [outer, ways, chunk]; part r of the bucket holds, input after input, every
// input's blocks [:, r, :], so the rank that keeps part r after a reduce-scatter finds its
// blocks of all the inputs side by side.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Loops.h"

#include <cstring>

namespace tessel::cpu {

using detail::kParallelGrain;

void pack(int64_t count, const float *const *inputs, const int64_t *outers, const int64_t *chunks,
          int64_t ways, float *y) {
  int64_t part = 0;
  for (int64_t i = 0; i < count; ++i)
    part += outers[i] * chunks[i];
#pragma omp parallel for schedule(static) if (ways > 1 && ways * part >= kParallelGrain)
  for (int64_t r = 0; r < ways; ++r) {
    float *out = y + r * part;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t chunk = chunks[i];
      for (int64_t o = 0; o < outers[i]; ++o, out += chunk)
        std::memcpy(out, inputs[i] + (o * ways + r) * chunk,
                    static_cast<size_t>(chunk) * sizeof(float));
    }
  }
}

} // namespace tessel::cpu
