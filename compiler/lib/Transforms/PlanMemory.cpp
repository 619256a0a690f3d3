//===- PlanMemory.cpp - Static arena offsets from liveness ----------------===//

#include "tessel/Transforms/Passes.h"

#include "Plan/PlanDialect.h"

#include <algorithm>

namespace tessel {
#define GEN_PASS_DEF_PLANMEMORY
#include "tessel/Transforms/Passes.h.inc"
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

/// The last op index at which `v`, or a view of it, is used.
int64_t lastUse(Value v, const DenseMap<Operation *, int64_t> &index, int64_t programEnd) {
  int64_t last = index.lookup(v.getDefiningOp());
  for (Operation *user : v.getUsers()) {
    if (isa<plan::OutputOp>(user))
      return programEnd;
    last = std::max(last, index.lookup(user));
    if (auto view = dyn_cast<plan::ViewOp>(user))
      last = std::max(last, lastUse(view.getResult(), index, programEnd));
  }
  return last;
}

struct PlanMemory : tessel::impl::PlanMemoryBase<PlanMemory> {
  void runOnOperation() override {
    getOperation().walk([&](plan::ProgramOp program) { planProgram(program); });
  }

  void planProgram(plan::ProgramOp program) {
    Block &body = program.getBody().front();
    DenseMap<Operation *, int64_t> index;
    int64_t i = 0;
    for (Operation &op : body)
      index[&op] = i++;
    int64_t end = i;

    std::vector<Interval> intervals;
    for (Operation &op : body) {
      if (!isa<plan::AllocOp, plan::InputOp>(op))
        continue;
      Value v = op.getResult(0);
      // Inputs are written by the host before the program starts.
      int64_t begin = isa<plan::InputOp>(op) ? 0 : index[&op];
      intervals.push_back(
          {&op, begin, lastUse(v, index, end), byteSize(cast<MemRefType>(v.getType()))});
    }

    // Largest first, each at the lowest offset free for its whole lifetime.
    std::vector<Interval *> order;
    for (Interval &iv : intervals)
      order.push_back(&iv);
    std::stable_sort(order.begin(), order.end(),
                     [](const Interval *a, const Interval *b) { return a->bytes > b->bytes; });
    std::vector<Interval *> placed;
    int64_t peak = 0;
    for (Interval *iv : order) {
      std::vector<std::pair<int64_t, int64_t>> busy;
      for (Interval *p : placed)
        if (p->begin <= iv->end && iv->begin <= p->end)
          busy.push_back({p->offset, p->offset + p->bytes});
      std::sort(busy.begin(), busy.end());
      int64_t offset = 0;
      for (auto [from, to] : busy) {
        if (offset + iv->bytes <= from)
          break;
        offset = std::max(offset, to);
      }
      iv->offset = offset;
      placed.push_back(iv);
      peak = std::max(peak, offset + iv->bytes);
    }

    Builder b(program.getContext());
    for (Interval &iv : intervals)
      iv.op->setAttr("offset", b.getI64IntegerAttr(iv.offset));
    program.setArenaBytesAttr(b.getI64IntegerAttr(peak));
  }
};

} // namespace
