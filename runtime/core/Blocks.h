//===- Blocks.h - Each rank's block of a split tensor -----------*- C++ -*-===//
//
// A plan gives every state tensor and port the shape of one rank's part and, per dim, the
// group that splits it (`split`). A rank at index i of a group of k ranks holds block i of each
// dim that group splits, so the whole dim is k times the rank's. The host works with whole
// tensors — it samples whole batches, initialises and checkpoints whole parameters — and these
// functions cut them into the ranks' blocks and put them back together. Under context
// parallelism a rank's block of the sequence is two chunks, one from the head and one from the
// tail (common/layout/HeadTail.h).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_CORE_BLOCKS_H
#define TESSEL_RUNTIME_CORE_BLOCKS_H

#include "common/plan/PlanFile.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::rt {

/// One rank's block: its shape, the whole tensor's, and where the block starts in each dim.
/// A dim split head-tail (common/layout/HeadTail.h) holds two chunks: the first half of the block
/// starts at `offset`, the second at `tail` (-1 in every other dim).
struct Block {
  std::vector<int64_t> local, whole, offset, tail;
  int64_t localElements() const;
  int64_t wholeElements() const;
};

/// The block of `rank` of a tensor whose part has shape `local`, split by `split` (one group
/// name or "" per dim, or empty). The plan must have passed validatePlan.
Block blockOf(const planfile::Plan &plan, const std::vector<int64_t> &local,
              const std::vector<std::string> &split, uint32_t rank);

/// Copies block `b` out of a whole tensor into `part`, or from `part` into the whole tensor.
/// Elements are 4 bytes (f32 or i32).
void copyFromWhole(const Block &b, const void *whole, void *part);
void copyToWhole(const Block &b, const void *part, void *whole);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_CORE_BLOCKS_H
