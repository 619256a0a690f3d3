//===- PlanMemory.cpp - Static arena offsets from liveness ----------------===//

#include "tessel/Dialect/Plan/Transforms/Passes.h"

#include "tessel/Analysis/PlanLiveness.h"
#include "tessel/Dialect/Plan/IR/PlanDialect.h"

#include <algorithm>
#include <map>

namespace tessel {
#define GEN_PASS_DEF_PLANMEMORY
#include "tessel/Dialect/Plan/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

constexpr int64_t kAlignment = 64;

int64_t byteSize(MemRefType t) {
  int64_t bytes = t.getNumElements() * (t.getElementTypeBitWidth() / 8);
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

struct Interval {
  Operation *op; // The plan.alloc or plan.input that owns the bytes.
  int64_t begin, end, bytes, offset = -1;
};

/// Byte ranges in use, kept as disjoint, non-adjacent [begin, end) ranges: neighbours merge, so
/// a densely packed arena is a handful of ranges however many buffers it holds.
class RangeSet {
public:
  void insert(int64_t begin, int64_t end) {
    if (begin >= end)
      return;
    auto it = ranges_.upper_bound(begin);
    if (it != ranges_.begin() && std::prev(it)->second >= begin)
      --it;
    while (it != ranges_.end() && it->first <= end) {
      begin = std::min(begin, it->first);
      end = std::max(end, it->second);
      it = ranges_.erase(it);
    }
    ranges_.emplace(begin, end);
  }

  /// The end of the last range that overlaps [begin, end), or -1 if none does. No offset from
  /// `begin` up to that end can start a free [offset, offset + end - begin).
  int64_t blockedUntil(int64_t begin, int64_t end) const {
    auto it = ranges_.lower_bound(end);
    if (it == ranges_.begin())
      return -1;
    --it;
    return it->second > begin ? it->second : -1;
  }

private:
  std::map<int64_t, int64_t> ranges_;
};

/// The arena's bytes over a program's time (op indices 0 .. n - 1): placed buffers, each a byte
/// range over an interval of time, in a segment tree over time. A node keeps the ranges of the
/// buffers whose interval covers it (`own`) and of every buffer that covers any part of it
/// (`any`), so the buffers live at some time in [first, last] are those in `any` of the nodes
/// that [first, last] splits into and in `own` of their ancestors: O(log n) sets, not a scan of
/// every buffer.
class ArenaOverTime {
public:
  explicit ArenaOverTime(int64_t times) : times_(std::max<int64_t>(times, 1)) {
    own_.resize(4 * times_);
    any_.resize(4 * times_);
  }

  /// Marks [offset, offset + bytes) in use from time `first` to `last` (inclusive).
  void place(int64_t first, int64_t last, int64_t offset, int64_t bytes) {
    place(1, 0, times_, first, last + 1, offset, offset + bytes);
  }

  /// The lowest offset at which `bytes` bytes are free from time `first` to `last` (inclusive).
  int64_t lowestFree(int64_t first, int64_t last, int64_t bytes) const {
    std::vector<const RangeSet *> sets;
    collect(1, 0, times_, first, last + 1, sets);
    int64_t offset = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (const RangeSet *set : sets) {
        int64_t until = set->blockedUntil(offset, offset + bytes);
        if (until >= 0) {
          offset = until;
          moved = true;
        }
      }
    }
    return offset;
  }

private:
  void place(size_t node, int64_t lo, int64_t hi, int64_t from, int64_t to, int64_t begin,
             int64_t end) {
    if (to <= lo || hi <= from)
      return;
    any_[node].insert(begin, end);
    if (from <= lo && hi <= to) {
      own_[node].insert(begin, end);
      return;
    }
    int64_t mid = lo + (hi - lo) / 2;
    place(2 * node, lo, mid, from, to, begin, end);
    place(2 * node + 1, mid, hi, from, to, begin, end);
  }

  void collect(size_t node, int64_t lo, int64_t hi, int64_t from, int64_t to,
               std::vector<const RangeSet *> &sets) const {
    if (to <= lo || hi <= from)
      return;
    if (from <= lo && hi <= to) {
      sets.push_back(&any_[node]);
      return;
    }
    sets.push_back(&own_[node]);
    int64_t mid = lo + (hi - lo) / 2;
    collect(2 * node, lo, mid, from, to, sets);
    collect(2 * node + 1, mid, hi, from, to, sets);
  }

  int64_t times_;
  std::vector<RangeSet> own_, any_;
};

struct PlanMemory : tessel::impl::PlanMemoryBase<PlanMemory> {
  void runOnOperation() override {
    getOperation().walk([&](plan::ProgramOp program) { planProgram(program); });
  }

  void planProgram(plan::ProgramOp program) {
    // Each buffer over the op indices it holds a value (PlanLiveness.h), at its aligned size.
    std::vector<Interval> intervals;
    for (const plan::ArenaLifetime &life : plan::arenaLifetimes(program))
      intervals.push_back({life.owner, life.begin, life.end,
                           byteSize(cast<MemRefType>(life.owner->getResult(0).getType()))});
    const int64_t end = static_cast<int64_t>(program.getBody().front().getOperations().size());

    // Largest first, each at the lowest offset free for its whole lifetime.
    std::vector<Interval *> order;
    for (Interval &iv : intervals)
      order.push_back(&iv);
    std::stable_sort(order.begin(), order.end(),
                     [](const Interval *a, const Interval *b) { return a->bytes > b->bytes; });
    ArenaOverTime arena(end + 1);
    int64_t peak = 0;
    for (Interval *iv : order) {
      iv->offset = arena.lowestFree(iv->begin, iv->end, iv->bytes);
      arena.place(iv->begin, iv->end, iv->offset, iv->bytes);
      peak = std::max(peak, iv->offset + iv->bytes);
    }

    Builder b(program.getContext());
    for (Interval &iv : intervals)
      iv.op->setAttr("offset", b.getI64IntegerAttr(iv.offset));
    program.setArenaBytesAttr(b.getI64IntegerAttr(peak));
  }
};

} // namespace
