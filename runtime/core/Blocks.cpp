//===- Blocks.cpp - Each rank's block of a split tensor -------------------===//

#include "runtime/core/Blocks.h"

#include "common/layout/HeadTail.h"

#include <cstring>

namespace tessel::rt {

namespace {

int64_t product(const std::vector<int64_t> &v) {
  int64_t n = 1;
  for (int64_t x : v)
    n *= x;
  return n;
}

/// Where index `i` of dim `d` of block `b` lies in the whole dim.
int64_t wholeIndex(const Block &b, size_t d, int64_t i) {
  const int64_t half = b.local[d] / 2;
  if (b.tail.empty() || b.tail[d] < 0 || i < half)
    return b.offset[d] + i;
  return b.tail[d] + i - half;
}

/// Calls f(offset in the whole tensor, offset in the part, elements) for every run of
/// consecutive elements along the innermost dim of block `b` (a head-tail innermost dim has
/// two runs per row).
template <class F> void forEachRun(const Block &b, F f) {
  const size_t rank = b.local.size();
  if (rank == 0)
    return f(int64_t(0), int64_t(0), int64_t(1));
  if (product(b.local) == 0)
    return;
  std::vector<int64_t> index(rank, 0), stride(rank, 1);
  for (size_t d = rank - 1; d > 0; --d)
    stride[d - 1] = stride[d] * b.whole[d];
  const bool splitRows = !b.tail.empty() && b.tail.back() >= 0;
  const int64_t length = splitRows ? b.local.back() / 2 : b.local.back();
  const int64_t runs = product(b.local) / length;
  for (int64_t run = 0; run < runs; ++run) {
    int64_t at = 0;
    for (size_t d = 0; d < rank; ++d)
      at += wholeIndex(b, d, index[d]) * stride[d];
    f(at, run * length, length);
    index.back() += length;
    for (size_t d = rank; d-- > 0;) {
      if (index[d] < b.local[d])
        break;
      index[d] = 0;
      if (d > 0)
        ++index[d - 1];
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
  b.tail.assign(local.size(), -1);
  for (size_t d = 0; d < split.size() && d < local.size(); ++d) {
    if (split[d].empty())
      continue;
    const planfile::Group *g = plan.groupNamed(split[d]);
    if (!g)
      continue;
    const int64_t ways = plan.groupSize(*g), index = plan.groupIndex(*g, rank);
    b.whole[d] = local[d] * ways;
    b.offset[d] = local[d] * index;
    if (headtail::isHeadTail(split[d]) && ways > 1) {
      const int64_t chunk = local[d] / 2;
      b.offset[d] = headtail::chunkOf(index, ways, 0) * chunk;
      b.tail[d] = headtail::chunkOf(index, ways, 1) * chunk;
    }
  }
  return b;
}

void copyFromWhole(const Block &b, const void *whole, void *part) {
  forEachRun(b, [&](int64_t at, int64_t to, int64_t n) {
    std::memcpy(static_cast<char *>(part) + to * 4, static_cast<const char *>(whole) + at * 4,
                static_cast<size_t>(n) * 4);
  });
}

void copyToWhole(const Block &b, const void *part, void *whole) {
  forEachRun(b, [&](int64_t at, int64_t from, int64_t n) {
    std::memcpy(static_cast<char *>(whole) + at * 4, static_cast<const char *>(part) + from * 4,
                static_cast<size_t>(n) * 4);
  });
}

} // namespace tessel::rt
