//===- Ids.h - Range checks of token ids ------------------------*- C++ -*-===//
//
// Private to kernels/cpu: the checks that embedding and cross entropy run before touching data.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_KERNELS_CPU_IDS_H
#define TESSEL_KERNELS_CPU_IDS_H

#include "kernels/KernelTypes.h"

#include <cstdint>
#include <string>

namespace tessel::cpu::detail {

/// True if every ids[i] (i < n) is in [0, limit); otherwise false, with the first bad id named
/// in `error`.
inline bool checkIds(int64_t n, int64_t limit, const int32_t *ids, std::string &error) {
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] >= 0 && ids[i] < limit)
      continue;
    error = "token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
            " is outside the vocabulary of " + std::to_string(limit);
    return false;
  }
  return true;
}

/// As checkIds for an embedding's lookup, which takes a negative id as a padding slot: only
/// ids of `limit` or more are refused.
inline bool checkIdsBelow(int64_t n, int64_t limit, const int32_t *ids, std::string &error) {
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < limit)
      continue;
    error = "token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
            " is outside the vocabulary of " + std::to_string(limit);
    return false;
  }
  return true;
}

/// As checkIds for cross entropy's targets, which may also be kernels::kIgnoredTarget (the
/// same message as checkIds, as the CUDA kernels report either).
inline bool checkTargets(int64_t n, int64_t limit, const int32_t *ids, std::string &error) {
  for (int64_t i = 0; i < n; ++i) {
    if ((ids[i] >= 0 && ids[i] < limit) || ids[i] == kernels::kIgnoredTarget)
      continue;
    error = "token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
            " is outside the vocabulary of " + std::to_string(limit);
    return false;
  }
  return true;
}

} // namespace tessel::cpu::detail

#endif // TESSEL_KERNELS_CPU_IDS_H
