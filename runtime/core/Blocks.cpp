//===- Blocks.cpp - Each rank's block of a split tensor -------------------===//

#include "runtime/core/Blocks.h"

#include <cstring>

namespace tessel::rt {

namespace {

int64_t product(const std::vector<int64_t> &v) {
  int64_t n = 1;
  for (int64_t x : v)
    n *= x;
  return n;
}

/// Calls f(offset in the whole tensor, offset in the part) for every run of consecutive
/// elements along the innermost dim of block `b`.
template <class F> void forEachRun(const Block &b, F f) {
  const size_t rank = b.local.size();
  if (rank == 0)
    return f(int64_t(0), int64_t(0));
  if (product(b.local) == 0)
    return;
  std::vector<int64_t> index(rank, 0), stride(rank, 1);
  for (size_t d = rank - 1; d > 0; --d)
    stride[d - 1] = stride[d] * b.whole[d];
  const int64_t runs = product(b.local) / b.local.back();
  for (int64_t run = 0; run < runs; ++run) {
    int64_t at = 0;
    for (size_t d = 0; d < rank; ++d)
      at += (b.offset[d] + index[d]) * stride[d];
    f(at, run * b.local.back());
    for (size_t d = rank - 1; d-- > 0;) {
      if (++index[d] < b.local[d])
        break;
      index[d] = 0;
    }
  }
}

} // namespace

int64_t Block::localElements() const { return product(local); }
int64_t Block::wholeElements() const { return product(whole); }

Block blockOf(const planfile::Plan &plan, const std::vector<int64_t> &local,
              const std::vector<std::string> &split, uint32_t rank) {
  Block b;
  b.local = local;
  b.whole = local;
  b.offset.assign(local.size(), 0);
  for (size_t d = 0; d < split.size() && d < local.size(); ++d) {
    if (split[d].empty())
      continue;
    const planfile::Group *g = plan.groupNamed(split[d]);
    if (!g)
      continue;
    b.whole[d] = local[d] * static_cast<int64_t>(plan.groupSize(*g));
    b.offset[d] = local[d] * static_cast<int64_t>(plan.groupIndex(*g, rank));
  }
  return b;
}

void copyFromWhole(const Block &b, const void *whole, void *part) {
  const size_t run = (b.local.empty() ? 1 : static_cast<size_t>(b.local.back())) * 4;
  forEachRun(b, [&](int64_t at, int64_t to) {
    std::memcpy(static_cast<char *>(part) + to * 4, static_cast<const char *>(whole) + at * 4, run);
  });
}

void copyToWhole(const Block &b, const void *part, void *whole) {
  const size_t run = (b.local.empty() ? 1 : static_cast<size_t>(b.local.back())) * 4;
  forEachRun(b, [&](int64_t at, int64_t from) {
    std::memcpy(static_cast<char *>(whole) + at * 4, static_cast<const char *>(part) + from * 4,
                run);
  });
}

} // namespace tessel::rt
