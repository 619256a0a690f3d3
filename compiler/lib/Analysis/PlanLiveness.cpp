//===- PlanLiveness.cpp - When each arena buffer of a program holds a value ---===//

#include "tessel/Analysis/PlanLiveness.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>

using namespace mlir;

namespace tessel::plan {

namespace {

/// The plan.alloc, plan.input or plan.state whose bytes `v` names, through views.
Operation *rootOf(Value v) {
  while (auto view = v.getDefiningOp<ViewOp>())
    v = view.getSource();
  return v.getDefiningOp();
}

bool isArenaRoot(Operation *op) { return op && isa<AllocOp, InputOp>(op); }

} // namespace

std::vector<ArenaLifetime> arenaLifetimes(ProgramOp program) {
  Block &body = program.getBody().front();
  llvm::DenseMap<Operation *, int64_t> index, kernelIndex;
  int64_t ops = 0, kernels = 0;
  for (Operation &op : body) {
    index[&op] = ops++;
    if (isa<KernelOp>(op))
      kernelIndex[&op] = kernels++;
  }

  // Per arena buffer, the kernels that read and write it (through views), in body order.
  struct Uses {
    llvm::SmallVector<KernelOp> readers, writers;
    bool output = false;
  };
  llvm::DenseMap<Operation *, Uses> uses;
  Value loss;
  for (Operation &op : body) {
    if (auto k = dyn_cast<KernelOp>(op)) {
      for (Value v : k.getIns())
        if (Operation *root = rootOf(v); isArenaRoot(root))
          uses[root].readers.push_back(k);
      for (Value v : k.getOuts())
        if (Operation *root = rootOf(v); isArenaRoot(root))
          uses[root].writers.push_back(k);
    } else if (auto out = dyn_cast<OutputOp>(op)) {
      if (Operation *root = rootOf(out.getValue()); isArenaRoot(root))
        uses[root].output = true;
      if (out.getName() == "loss")
        loss = out.getValue();
    }
  }

  // The buffers the loss depends on, and the kernels that write any of them: the forward pass.
  llvm::DenseSet<Operation *> forward;
  llvm::DenseSet<Operation *> forwardKernels;
  if (loss && isArenaRoot(rootOf(loss))) {
    llvm::SmallVector<Operation *> work{rootOf(loss)};
    forward.insert(work.front());
    while (!work.empty()) {
      Operation *root = work.pop_back_val();
      for (KernelOp k : uses[root].writers) {
        forwardKernels.insert(k);
        for (Value v : k.getIns())
          if (Operation *in = rootOf(v); isArenaRoot(in) && forward.insert(in).second)
            work.push_back(in);
      }
    }
  }

  std::vector<ArenaLifetime> lifetimes;
  for (Operation &op : body) {
    if (!isArenaRoot(&op))
      continue;
    const Uses &u = uses[&op];
    const bool input = isa<InputOp>(op);
    int64_t first = -1, last = -1; // Kernel indices of the first and last kernel using it.
    for (const auto *list : {&u.readers, &u.writers})
      for (KernelOp k : *list) {
        const int64_t at = kernelIndex[k];
        first = first < 0 ? at : std::min(first, at);
        last = std::max(last, at);
      }
    ArenaLifetime life;
    life.owner = &op;
    auto type = cast<MemRefType>(op.getResult(0).getType());
    life.bytes = type.getNumElements() * (type.getElementTypeBitWidth() / 8);
    // Op indices: from the first use (0 for an input), to the last (the end for an output).
    int64_t firstOp = -1, lastOp = index[&op];
    for (const auto *list : {&u.readers, &u.writers})
      for (KernelOp k : *list) {
        firstOp = firstOp < 0 ? index[k] : std::min(firstOp, index[k]);
        lastOp = std::max(lastOp, index[k]);
      }
    life.begin = input ? 0 : firstOp < 0 ? index[&op] : firstOp;
    life.end = u.output ? ops : lastOp;
    // Kernel indices, the same way: the host writes an input before kernel 0 and reads an
    // output after the last kernel.
    life.firstKernel = input ? 0 : first < 0 ? (u.output ? kernels - 1 : 0) : first;
    life.lastKernel = u.output ? kernels - 1 : input ? std::max<int64_t>(last, 0) : last;

    // Its kind.
    const bool recomputed = !u.writers.empty() && u.writers.front()->hasAttr("plan.recomputed");
    const bool kept = forward.contains(&op) && llvm::any_of(u.readers, [&](KernelOp k) {
                        return !forwardKernels.contains(k);
                      });
    life.kind = input        ? planfile::BufferKind::Input
                : recomputed ? planfile::BufferKind::Recomputed
                : kept       ? planfile::BufferKind::Kept
                             : planfile::BufferKind::Temporary;
    lifetimes.push_back(life);
  }
  return lifetimes;
}

} // namespace tessel::plan
