//===- MixedPrecision.cpp - 16-bit activations and working weights --------===//
//
// Runs on the plan, where every buffer and every kernel that touches it is known: the
// catalogue says which operands must stay f32, so the choice is one walk per program rather
// than a rule per graph op (and covers the scratch buffers the lowering invents, which the
// graph never shows).
//
//===----------------------------------------------------------------------===//

#include "tessel/Transforms/Passes.h"
#include "tessel/Transforms/TrainSettings.h"

#include "Plan/PlanDialect.h"

#include "common/KernelCatalogue.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <functional>

namespace tessel {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "tessel/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

namespace cat = tessel::catalogue;

/// The op that owns `v`'s bytes: a plan.alloc, plan.state or plan.input, through views.
Operation *ownerOf(Value v) {
  while (auto view = v.getDefiningOp<plan::ViewOp>())
    v = view.getSource();
  return v.getDefiningOp();
}

/// How kernel `k` declares its operand `index` (ins first, then outs); the last declaration
/// of a direction covers a variadic tail.
const cat::OperandInfo &declaration(const cat::KernelInfo &k, plan::KernelOp op, unsigned index) {
  unsigned ins = op.getIns().size();
  const std::vector<cat::OperandInfo> &decl = index < ins ? k.ins : k.outs;
  unsigned at = index < ins ? index : index - ins;
  return decl[std::min<size_t>(at, decl.size() - 1)];
}

/// Whether `op`'s operand `index` may be 16-bit: an operand of a compute kernel that the
/// catalogue lets take any float type.
bool narrowable(plan::KernelOp op, unsigned index) {
  const cat::KernelInfo *k = cat::findKernel(op.getName().str());
  if (!k || k->family != cat::Family::Compute)
    return false;
  if (index >= op.getIns().size()) {
    // A buffer the kernel adds into carries a sum over calls: rounding it at every call
    // would lose what the f32 accumulation is for.
    auto acc = dyn_cast_or_null<IntegerAttr>(op.getParams().get("accumulate"));
    if (acc && acc.getInt() != 0)
      return false;
  }
  return declaration(*k, op, index).types == cat::OperandTypes::Float;
}

MemRefType withElement(Type t, Type element) {
  auto m = cast<MemRefType>(t);
  return MemRefType::get(m.getShape(), element, m.getLayout(), m.getMemorySpace());
}

/// Gives `v` (an alloc's or a view's result) and every view of it the element type `element`.
void retype(Value v, Type element) {
  v.setType(withElement(v.getType(), element));
  for (Operation *user : v.getUsers())
    if (auto view = dyn_cast<plan::ViewOp>(user))
      if (view.getSource() == v)
        retype(view.getResult(), element);
}

/// The reads of `v` (through views) that may take a 16-bit working copy.
void narrowableReads(Value v, SmallVectorImpl<OpOperand *> &reads) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (auto view = dyn_cast<plan::ViewOp>(user)) {
      narrowableReads(view.getResult(), reads);
      continue;
    }
    auto k = dyn_cast<plan::KernelOp>(user);
    if (k && use.getOperandNumber() < k.getIns().size() && narrowable(k, use.getOperandNumber()))
      reads.push_back(&use);
  }
}

struct MixedPrecision : tessel::impl::MixedPrecisionBase<MixedPrecision> {
  using MixedPrecisionBase::MixedPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string word = precision.empty() ? readTrainSettings(module).precision : precision;
    if (word == "fp32")
      return;
    Builder b(&getContext());
    Type narrow;
    if (word == "bf16")
      narrow = b.getBF16Type();
    else if (word == "fp16")
      narrow = b.getF16Type();
    else {
      module.emitError() << "-tessel-mixed-precision: precision '" << word
                         << "' is not fp32, bf16 or fp16";
      return signalPassFailure();
    }
    llvm::StringSet<> params;
    for (auto t : module.getOps<plan::TensorOp>())
      if (t.getRole() == "param")
        params.insert(t.getSymName());
    for (auto program : module.getOps<plan::ProgramOp>()) {
      narrowActivations(program, narrow);
      addWorkingCopies(program, params, narrow);
    }
  }

  /// Every f32 arena buffer that nothing needs at full width becomes 16-bit.
  void narrowActivations(plan::ProgramOp program, Type narrow) {
    DenseSet<Operation *> wide;
    program.walk([&](Operation *op) {
      if (auto out = dyn_cast<plan::OutputOp>(op))
        wide.insert(ownerOf(out.getValue()));
      if (auto k = dyn_cast<plan::KernelOp>(op))
        for (OpOperand &operand : k->getOpOperands())
          if (!narrowable(k, operand.getOperandNumber()))
            wide.insert(ownerOf(operand.get()));
    });
    program.walk([&](plan::AllocOp alloc) {
      if (!wide.contains(alloc) && alloc.getType().getElementType().isF32())
        retype(alloc.getResult(), narrow);
    });
  }

  /// Before a parameter's first 16-bit read in the program, its working copy; the reads (and
  /// the views they go through) take the copy.
  void addWorkingCopies(plan::ProgramOp program, const llvm::StringSet<> &params, Type narrow) {
    SmallVector<plan::StateOp> states;
    program.walk([&](plan::StateOp s) {
      if (params.contains(s.getName()) && s.getType().getElementType().isF32())
        states.push_back(s);
    });
    for (plan::StateOp state : states) {
      SmallVector<OpOperand *> reads;
      narrowableReads(state.getResult(), reads);
      if (reads.empty())
        continue;
      Operation *first = reads.front()->getOwner();
      for (OpOperand *r : reads)
        if (r->getOwner()->isBeforeInBlock(first))
          first = r->getOwner();
      OpBuilder b(first);
      MemRefType type = state.getType();
      auto copy =
          plan::AllocOp::create(b, state.getLoc(), withElement(type, narrow), IntegerAttr());
      SmallVector<int64_t> strides(type.getRank(), 1);
      for (int64_t d = type.getRank() - 2; d >= 0; --d)
        strides[d] = strides[d + 1] * type.getDimSize(d + 1);
      SmallVector<NamedAttribute> p = {
          b.getNamedAttr("shape", b.getDenseI64ArrayAttr(type.getShape())),
          b.getNamedAttr("x_strides", b.getDenseI64ArrayAttr(strides))};
      plan::KernelOp::create(b, state.getLoc(), b.getStringAttr("copy"),
                             ValueRange{state.getResult()}, ValueRange{copy.getResult()},
                             b.getDictionaryAttr(p));
      // Views of the copy, made once each, right after it (so they come before every read).
      DenseMap<Value, Value> narrowed{{state.getResult(), copy.getResult()}};
      std::function<Value(Value)> narrowedOf = [&](Value v) -> Value {
        if (Value n = narrowed.lookup(v))
          return n;
        auto view = v.getDefiningOp<plan::ViewOp>();
        Value source = narrowedOf(view.getSource());
        auto clone = plan::ViewOp::create(b, view.getLoc(), withElement(v.getType(), narrow),
                                          source, view.getOffsetAttr());
        return narrowed[v] = clone.getResult();
      };
      // The values the reads took, once each (two reads may go through one view).
      llvm::SetVector<Operation *> old;
      for (OpOperand *r : reads) {
        if (auto view = r->get().getDefiningOp<plan::ViewOp>())
          old.insert(view);
        r->set(narrowedOf(r->get()));
      }
      // Views of the master that only those reads used go, and then their sources.
      while (!old.empty()) {
        auto view = cast<plan::ViewOp>(old.pop_back_val());
        if (!view.getResult().use_empty())
          continue;
        if (auto source = view.getSource().getDefiningOp<plan::ViewOp>())
          old.insert(source);
        view.erase();
      }
    }
  }
};

} // namespace
