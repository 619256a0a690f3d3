//===- MixedPrecision.cpp - 16-bit activations and working weights --------===//
//
// Runs on the plan, where every buffer and every kernel that touches it is known: the
// catalogue says which operands must stay f32, so the choice is one walk per program rather
// than a rule per graph op (and covers the scratch buffers the lowering invents, which the
// graph never shows). The parameters' 16-bit working copies are persistent state, made when
// the masters change (by the optimizer step, and by a program the runtime runs after it
// initialises or restores them), so a step rounds each weight once, not once per micro-batch.
//
//===----------------------------------------------------------------------===//

#include "tessel/Dialect/Plan/Transforms/Passes.h"

#include "tessel/Dialect/Plan/IR/PlanDialect.h"
#include "tessel/Dialect/Settings/IR/SettingsDialect.h"

#include "common/catalogue/KernelCatalogue.h"
#include "common/plan/PlanFile.h"

#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/IR/Builders.h"

#include <functional>

namespace tessel {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "tessel/Dialect/Plan/Transforms/Passes.h.inc"
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

/// Whether operands declared `types` take their type from the data they move: the Moved and
/// Reduced operands of a collective, which must all have one type.
bool followsData(cat::OperandTypes types) {
  return types == cat::OperandTypes::Moved || types == cat::OperandTypes::Reduced;
}

bool isHalf(Type t) { return cast<MemRefType>(t).getElementType().getIntOrFloatBitWidth() == 16; }

/// Whether operand `index` of `op` follows its data and another such operand of the call is
/// 16-bit already: a read of a parameter there takes the working copy.
bool tiedToNarrow(plan::KernelOp op, unsigned index) {
  const cat::KernelInfo *k = cat::findKernel(op.getName().str());
  if (!k || !followsData(declaration(*k, op, index).types))
    return false;
  for (OpOperand &other : op->getOpOperands())
    if (other.getOperandNumber() != index &&
        followsData(declaration(*k, op, other.getOperandNumber()).types) &&
        isHalf(other.get().getType()))
      return true;
  return false;
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
    const unsigned index = use.getOperandNumber();
    if (k && index < k.getIns().size() && (narrowable(k, index) || tiedToNarrow(k, index)))
      reads.push_back(&use);
  }
}

struct MixedPrecision : tessel::impl::MixedPrecisionBase<MixedPrecision> {
  using MixedPrecisionBase::MixedPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string word =
        precision.empty() ? settings::trainOf(module).getPrecision().str() : precision;
    if (word == "fp32")
      return;
    Builder b(&getContext());
    if (word == "bf16")
      narrow_ = b.getBF16Type();
    else if (word == "fp16")
      narrow_ = b.getF16Type();
    else {
      module.emitError() << "-tessel-mixed-precision: precision '" << word
                         << "' is not fp32, bf16 or fp16";
      return signalPassFailure();
    }
    for (auto t : module.getOps<plan::TensorOp>())
      if (t.getRole() == "param" && t.getType().getElementType().isF32())
        params_[t.getSymName()] = t;
    SmallVector<plan::ProgramOp> programs(module.getOps<plan::ProgramOp>());
    narrowCaches(module);
    narrowActivations(programs);
    for (plan::ProgramOp program : programs)
      program.walk([&](plan::KernelOp k) {
        if (k.getName() == "fused_elementwise")
          roundFusedSteps(k);
      });
    // The reads first, so that every working copy exists before the programs that refresh it.
    for (plan::ProgramOp program : programs)
      if (program.getName() != kOptimizerStep)
        readWorkingCopies(program);
    for (plan::ProgramOp program : programs)
      if (program.getName() == kOptimizerStep)
        refreshAfterUpdates(program);
    if (!working_.empty())
      addRefreshPrograms(programs);
  }

private:
  static constexpr StringLiteral kOptimizerStep = "optimizer_step";

  Type narrow_;
  llvm::StringMap<plan::TensorOp> params_;
  /// Per parameter name, its working copy's tensor, in the order they were made.
  llvm::MapVector<StringRef, plan::TensorOp> working_;

  /// The decode programs' KV caches hold activations (keys and values): 16-bit, as the
  /// activations they are made from, which halves the memory a token's context takes.
  void narrowCaches(ModuleOp module) {
    llvm::StringSet<> caches;
    for (auto t : module.getOps<plan::TensorOp>())
      if (t.getRole() == "kv_cache" && t.getType().getElementType().isF32()) {
        t.setTypeAttr(TypeAttr::get(MemRefType::get(t.getType().getShape(), narrow_)));
        caches.insert(t.getSymName());
      }
    if (caches.empty())
      return;
    module.walk([&](plan::StateOp state) {
      if (caches.contains(state.getName())) {
        auto type = cast<MemRefType>(state.getType());
        state.getResult().setType(MemRefType::get(type.getShape(), narrow_));
      }
    });
  }

  bool isParam(Operation *owner) const {
    auto state = dyn_cast_or_null<plan::StateOp>(owner);
    return state && params_.contains(state.getName());
  }

  /// Every f32 arena buffer that nothing needs at full width becomes 16-bit. A collective's
  /// operands follow their data, so the buffers it ties (its Moved or Reduced operands, and
  /// the two ends of a transfer: the sends and receives of one tag, in whichever programs)
  /// narrow together or not at all: a gradient on its way to an f32 accumulator keeps its
  /// reduction in f32, while an activation's is 16-bit. A parameter read there counts as
  /// narrow, since its working copy can take its place.
  void narrowActivations(ArrayRef<plan::ProgramOp> programs) {
    DenseSet<Operation *> wide;
    llvm::EquivalenceClasses<Operation *> tied;
    DenseMap<int64_t, Operation *> transferEnds;
    // A value one program outputs and another inputs by name (a pipeline stage's boundary,
    // or a stashed activation on its way to the backward pass) ties the output's buffer to
    // every input of that name: the runtime moves the port's bytes as they are, so a value
    // that is 16-bit in the one-rank plan stays 16-bit across the boundary and in the stash.
    // An output no program inputs is the host's (the loss, the logits) and stays f32.
    llvm::StringMap<SmallVector<Operation *>> portOutputs, portInputs;
    for (plan::ProgramOp program : programs)
      program.walk([&](Operation *op) {
        if (auto out = dyn_cast<plan::OutputOp>(op))
          portOutputs[out.getName()].push_back(ownerOf(out.getValue()));
        else if (auto in = dyn_cast<plan::InputOp>(op))
          portInputs[in.getName()].push_back(in);
      });
    for (auto &[name, owners] : portOutputs) {
      auto inputs = portInputs.find(name);
      for (Operation *owner : owners) {
        // Only an arena buffer or a port's own input can follow its value's type.
        if (inputs == portInputs.end() || !isa<plan::AllocOp, plan::InputOp>(owner))
          wide.insert(owner);
        if (inputs == portInputs.end())
          continue;
        tied.insert(owner);
        for (Operation *in : inputs->second)
          tied.unionSets(owner, in);
      }
    }
    auto isPortInput = [&](Operation *m) {
      auto in = dyn_cast<plan::InputOp>(m);
      return in && portOutputs.contains(in.getName());
    };
    for (plan::ProgramOp program : programs)
      program.walk([&](Operation *op) {
        auto k = dyn_cast<plan::KernelOp>(op);
        if (!k)
          return;
        const cat::KernelInfo *info = cat::findKernel(k.getName().str());
        // A wait's operands only keep its collective's buffers alive in the memory plan.
        if (info && info->id == cat::KernelId::Wait)
          return;
        Operation *first = nullptr;
        for (OpOperand &operand : k->getOpOperands()) {
          const unsigned index = operand.getOperandNumber();
          Operation *owner = ownerOf(operand.get());
          if (!info || !followsData(declaration(*info, k, index).types)) {
            if (!narrowable(k, index))
              wide.insert(owner);
            continue;
          }
          // A collective never writes a master.
          if (index >= k.getIns().size() && isParam(owner))
            wide.insert(owner);
          tied.insert(owner);
          if (first)
            tied.unionSets(first, owner);
          else
            first = owner;
        }
        auto tag = dyn_cast_or_null<IntegerAttr>(k.getParams().get("tag"));
        if (first && tag && (info->id == cat::KernelId::Send || info->id == cat::KernelId::Recv)) {
          auto [end, fresh] = transferEnds.try_emplace(tag.getInt(), first);
          if (!fresh)
            tied.unionSets(end->second, first);
        }
      });
    // A tied class stays wide if any member must: one the rules above keep wide, or one that
    // is neither an arena buffer, a parameter nor a port's input (a host input, a gradient,
    // optimizer state).
    for (const auto *leader : tied) {
      if (!leader->isLeader())
        continue;
      auto members = tied.members(*leader);
      if (llvm::any_of(members, [&](Operation *m) {
            return wide.contains(m) || !(isa<plan::AllocOp>(m) || isParam(m) || isPortInput(m));
          }))
        wide.insert(members.begin(), members.end());
    }
    for (plan::ProgramOp program : programs)
      program.walk([&](Operation *op) {
        if (!isa<plan::AllocOp>(op) && !isPortInput(op))
          return;
        Value v = op->getResult(0);
        if (!wide.contains(op) && cast<MemRefType>(v.getType()).getElementType().isF32())
          retype(v, narrow_);
      });
  }

  /// A fused body computes in f32 where its unfused kernels would each have stored a value:
  /// marks the steps whose value they would store 16-bit, to be rounded as they compute. A
  /// value no output takes is an arena buffer that only elementwise kernels read, which
  /// narrows; an output's value is rounded as its buffer is typed.
  void roundFusedSteps(plan::KernelOp k) {
    auto body = dyn_cast_or_null<StringAttr>(k.getParams().get("body"));
    auto outputs = dyn_cast_or_null<DenseI64ArrayAttr>(k.getParams().get("outputs"));
    cat::ElementwiseBody parsed;
    std::string error;
    // A malformed call is the plan verifier's to report.
    if (!body || !outputs || !cat::parseElementwiseBody(body.getValue().str(), parsed, error) ||
        outputs.size() != static_cast<int64_t>(k.getOuts().size()))
      return;
    SmallVector<int64_t> rounded;
    for (int64_t step = 0; step < static_cast<int64_t>(parsed.steps.size()); ++step) {
      bool narrow = true;
      for (auto [o, taken] : llvm::enumerate(outputs.asArrayRef()))
        if (taken == step)
          narrow = isHalf(k.getOuts()[o].getType());
      if (narrow)
        rounded.push_back(step);
    }
    if (rounded.empty())
      return;
    Builder b(&getContext());
    NamedAttrList params(k.getParams());
    params.set("rounded", b.getDenseI64ArrayAttr(rounded));
    params.set("narrow", b.getStringAttr(narrow_.isBF16() ? "bf16" : "f16"));
    k.setParamsAttr(params.getDictionary(&getContext()));
  }

  /// The persistent 16-bit copy of `param`, declared beside the other state on first use.
  plan::TensorOp workingTensorOf(plan::TensorOp param) {
    plan::TensorOp &w = working_[param.getSymName()];
    if (w)
      return w;
    ModuleOp module = getOperation();
    OpBuilder b(&getContext());
    b.setInsertionPoint(*module.getOps<plan::ProgramOp>().begin());
    w = plan::TensorOp::create(
        b, param.getLoc(), b.getStringAttr("working." + param.getSymName().str()),
        b.getStringAttr("working"), param.getSymNameAttr(), b.getStringAttr("zeros"),
        b.getF64FloatAttr(0), b.getF64FloatAttr(0), param.getDims(),
        TypeAttr::get(withElement(param.getType(), narrow_)), param.getSplitAttr(),
        param.getStagesAttr(), /*init_source=*/StringAttr(), /*init_slice=*/DenseI64ArrayAttr());
    return w;
  }

  /// The reads of a parameter that may be 16-bit take its working copy instead (through
  /// views of it cloned from the master's).
  void readWorkingCopies(plan::ProgramOp program) {
    SmallVector<plan::StateOp> states;
    program.walk([&](plan::StateOp s) {
      if (params_.contains(s.getName()))
        states.push_back(s);
    });
    for (plan::StateOp state : states) {
      SmallVector<OpOperand *> reads;
      narrowableReads(state.getResult(), reads);
      if (reads.empty())
        continue;
      plan::TensorOp working = workingTensorOf(params_.lookup(state.getName()));
      Operation *first = reads.front()->getOwner();
      for (OpOperand *r : reads)
        if (r->getOwner()->isBeforeInBlock(first))
          first = r->getOwner();
      OpBuilder b(first);
      auto copy = plan::StateOp::create(b, state.getLoc(), working.getType(), working.getSymName());
      // Views of the copy, made once each, right after it (so they come before every read).
      DenseMap<Value, Value> narrowed{{state.getResult(), copy.getResult()}};
      std::function<Value(Value)> narrowedOf = [&](Value v) -> Value {
        if (Value n = narrowed.lookup(v))
          return n;
        auto view = v.getDefiningOp<plan::ViewOp>();
        Value source = narrowedOf(view.getSource());
        auto clone = plan::ViewOp::create(b, view.getLoc(), withElement(v.getType(), narrow_),
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
      if (state.getResult().use_empty())
        state.erase();
    }
  }

  /// `copy` of `param`'s master into its working copy, at `b`'s insertion point.
  void copyToWorking(OpBuilder &b, Location loc, plan::TensorOp param, plan::TensorOp working) {
    MemRefType type = param.getType();
    Value from = plan::StateOp::create(b, loc, type, param.getSymName());
    Value to = plan::StateOp::create(b, loc, working.getType(), working.getSymName());
    // State has the identity layout: its strides are row-major.
    SmallVector<NamedAttribute> p = {
        b.getNamedAttr("shape", b.getDenseI64ArrayAttr(type.getShape())),
        b.getNamedAttr("x_strides", b.getDenseI64ArrayAttr(type.getStridesAndOffset().first))};
    plan::KernelOp::create(b, loc, b.getStringAttr("copy"), ValueRange{from}, ValueRange{to},
                           b.getDictionaryAttr(p));
  }

  /// Right after the optimizer's last write of a master, its working copy follows it: once
  /// per step, and not at all when a non-finite gradient skips the update (`guard_finite`).
  void refreshAfterUpdates(plan::ProgramOp program) {
    DenseMap<StringRef, Operation *> lastWrite;
    program.walk([&](plan::KernelOp k) {
      for (Value out : k.getOuts())
        if (auto state = dyn_cast_or_null<plan::StateOp>(ownerOf(out)))
          if (working_.count(state.getName()))
            lastWrite[state.getName()] = k;
    });
    for (auto &[name, working] : working_) {
      Operation *writer = lastWrite.lookup(name);
      if (!writer)
        continue;
      OpBuilder b(writer->getContext());
      // AdamW writes the copy in the same pass over the master, where it updates the whole
      // master (not a view of it).
      auto k = cast<plan::KernelOp>(writer);
      if (k.getName() == "adamw" && k.getOuts().size() == 3 &&
          k.getOuts()[0].getDefiningOp<plan::StateOp>()) {
        b.setInsertionPoint(k);
        Value to = plan::StateOp::create(b, k.getLoc(), working.getType(), working.getSymName());
        k.getOutsMutable().append(to);
        continue;
      }
      b.setInsertionPointAfter(writer);
      copyToWorking(b, writer->getLoc(), params_.lookup(name), working);
    }
  }

  /// The program the runtime runs whenever the masters change outside a step (initialisation,
  /// a restored checkpoint), once per pipeline stage as the other programs are: every working
  /// copy the stage holds, made afresh.
  void addRefreshPrograms(ArrayRef<plan::ProgramOp> programs) {
    SmallVector<IntegerAttr> stages;
    for (plan::ProgramOp p : programs)
      if (!llvm::is_contained(stages, p.getStageAttr()))
        stages.push_back(p.getStageAttr());
    OpBuilder b(&getContext());
    for (IntegerAttr stageAttr : stages) {
      b.setInsertionPointToEnd(getOperation().getBody());
      Location loc = getOperation().getLoc();
      auto program = plan::ProgramOp::create(
          b, loc, b.getStringAttr(planfile::kWorkingCopiesProgram), IntegerAttr(), stageAttr);
      b.createBlock(&program.getBody());
      const int64_t stage = stageAttr ? stageAttr.getInt() : 0;
      for (auto &[name, working] : working_) {
        DenseI64ArrayAttr held = working.getStagesAttr();
        if (!held || llvm::is_contained(held.asArrayRef(), stage))
          copyToWorking(b, loc, params_.lookup(name), working);
      }
    }
  }
};

} // namespace
