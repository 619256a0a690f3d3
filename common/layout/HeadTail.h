//===- HeadTail.h - How context parallelism splits a sequence ---*- C++ -*-===//
//
// Context parallelism (`shard { seq = cp }`) does not give rank i the i-th contiguous block
// of the sequence: under a causal mask the last block would attend to every key and the
// first to almost none. The sequence is cut into 2 × cp chunks and index i of the cp group
// holds chunks i and 2·cp − 1 − i (one from the head, one from the tail, as Llama 3 trains),
// so every rank does the same causal work. A rank's block of such a dim is its two chunks,
// head chunk first.
//
// This is the one statement of that layout. The compiler marks nothing: every dim split over
// the group named `cp` alone is split this way, and each piece of code that places a rank's
// block in the whole — the host's blocks of inputs and state (runtime/core/Blocks.cpp), the
// collectives along the dim (runtime/device/CollectiveCalls.cpp), dropout's mask index, the
// attention kernels' query positions — asks these functions.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_LAYOUT_HEADTAIL_H
#define TESSEL_COMMON_LAYOUT_HEADTAIL_H

#include <cstdint>
#include <string_view>

namespace tessel::headtail {

/// The mesh axis, and the plan's communicator group, whose splits are head-tail.
constexpr std::string_view kAxis = "cp";

/// Whether a dim split over `group` is split head-tail.
inline bool isHeadTail(std::string_view group) { return group == kAxis; }

/// The chunk of the whole dim that half `half` (0: head, 1: tail) of index `index`'s block is,
/// in a group of `ways`.
inline int64_t chunkOf(int64_t index, int64_t ways, int64_t half) {
  return half == 0 ? index : 2 * ways - 1 - index;
}

/// The position in the whole dim of element `local` of index `index`'s block, whose size
/// `block` is even (two chunks of block / 2).
inline int64_t wholePosition(int64_t local, int64_t block, int64_t index, int64_t ways) {
  const int64_t chunk = block / 2, half = local < chunk ? 0 : 1;
  return chunkOf(index, ways, half) * chunk + local - half * chunk;
}

} // namespace tessel::headtail

#endif // TESSEL_COMMON_LAYOUT_HEADTAIL_H
