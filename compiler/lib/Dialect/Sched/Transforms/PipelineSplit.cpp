//===- PipelineSplit.cpp - The programs of the pipeline stages ------------===//
//
// With a pipeline axis, every rank runs only its stages' layers, one micro-batch at a time in
// the order its schedule says. This pass cuts the per-rank functions the partition pass made
// into those pieces: one function per (virtual stage, phase), whose arguments and results are
// the values that cross between pieces — the activations and gradients neighbouring stages
// send each other, and what a stage keeps from its forward for its backward. The runtime
// moves them by name ("v<N>"), so a piece is an ordinary program.
//
// Ops are placed by their layer: `graph.layer` through the `sched.pipeline` layer runs. What
// has no layer follows the data: an op after the layers goes with its latest operand (the
// final norm and the loss on the last stage, the loss gradient there too), an op before them
// with its first user (the embedding on the first stage), and an all-gather feeding one
// chunk's layers with them (so the smaller shard crosses the boundary). Parameters live on
// the stages whose pieces use them, and each stage gets the optimizer step of those
// (PipelineOptimizerSteps.cpp).
//
//===----------------------------------------------------------------------===//

#include "tessel/Dialect/Graph/Transforms/ForwardPass.h"
#include "tessel/Dialect/Sched/Transforms/Passes.h"

#include "PipelinePieces.h"

#include "common/schedule/Schedule.h"
#include "tessel/Dialect/Graph/IR/GraphOps.h"
#include "tessel/Dialect/Graph/IR/GraphSharding.h"
#include "tessel/Dialect/Sched/IR/SchedDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/IRMapping.h"

#include <map>
#include <set>

namespace tessel {
#define GEN_PASS_DEF_PIPELINESPLIT
#include "tessel/Dialect/Sched/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;
using namespace tessel::pipeline_split;

namespace {

const char *phaseName(Phase p) {
  switch (p) {
  case Phase::Forward:
    return "forward";
  case Phase::Backward:
    return "backward";
  case Phase::Weight:
    return "weight gradient";
  }
  return "";
}

/// Ops without operands that every piece using them computes for itself: parameters,
/// constants.
bool isFree(Operation *op) { return op->getNumOperands() == 0 && op->getNumResults() == 1; }

/// The chunk of an all-gather the partition pass added (it has no layer) when every user is
/// an op of the layers on one chunk, else -1. A gather multiplies its bytes by the group's
/// size, so at a chunk boundary it runs after the message, where its users are: the backward
/// pass of a reduce-scatter that ends a stage (sequence parallelism) sends the gradient's
/// shard back, not the gathered gradient.
int64_t gatherUsersChunk(Operation *op, const Stages &st, int64_t layers) {
  if (!isa<shard::AllGatherOp>(op) || op->getResult(0).use_empty())
    return -1;
  int64_t chunk = -1;
  for (Operation *user : op->getUsers()) {
    auto layer = user->getAttrOfType<IntegerAttr>("graph.layer");
    if (!layer || layer.getInt() < 0 || layer.getInt() >= layers)
      return -1;
    int64_t c = st.chunkOfLayer[layer.getInt()];
    if (chunk >= 0 && c != chunk)
      return -1;
    chunk = c;
  }
  return chunk;
}

/// Places every op of `func` but the free ones. With `training`, the ops the returned loss
/// depends on are forward and the others backward; otherwise everything is forward.
FailureOr<Placement> place(func::FuncOp func, const Stages &st, bool training) {
  Block &body = func.getBody().front();
  Operation *ret = body.getTerminator();
  DenseSet<Operation *> forward;
  if (training)
    forward = forwardPass(body);
  Placement seg;
  SmallVector<Operation *> deferred;
  int64_t layers = static_cast<int64_t>(st.chunkOfLayer.size());
  for (Operation &op : body.without_terminator()) {
    if (isFree(&op))
      continue;
    Phase phase = !training || forward.contains(&op) ? Phase::Forward : Phase::Backward;
    int64_t chunk = -1;
    auto layer = op.getAttrOfType<IntegerAttr>("graph.layer");
    if (layer && layer.getInt() >= 0 && layer.getInt() < layers) {
      chunk = st.chunkOfLayer[layer.getInt()];
    } else if (int64_t c = gatherUsersChunk(&op, st, layers); c >= 0) {
      chunk = c;
    } else {
      for (Value x : op.getOperands())
        if (Operation *d = x.getDefiningOp(); d && seg.count(d))
          chunk = std::max(chunk, seg[d].chunk);
    }
    if (chunk < 0)
      deferred.push_back(&op);
    else
      seg[&op] = {chunk, phase};
  }
  // What reads only parameters and inputs goes with its first user; where users are on
  // several stages (a gathered tied parameter), each stage computes its own copy.
  for (Operation *op : llvm::reverse(deferred)) {
    std::map<int64_t, Operation *> firstOnChunk;
    bool returned = false;
    for (Operation *user : op->getUsers()) {
      returned |= user == ret;
      if (!seg.count(user))
        continue;
      Operation *&first = firstOnChunk[seg[user].chunk];
      if (!first || user->isBeforeInBlock(first))
        first = user;
    }
    Operation *first = nullptr;
    for (auto &[chunk, user] : firstOnChunk) {
      if (!first || user->isBeforeInBlock(first))
        first = user;
    }
    for (auto &[chunk, user] : firstOnChunk) {
      if (user == first)
        continue;
      OpBuilder b(op->getContext());
      b.setInsertionPointAfter(op);
      Operation *copy = b.clone(*op);
      // Read before inserting: inserting may grow the map and move its entries.
      Segment where = seg.lookup(user);
      seg[copy] = where;
      int64_t on = chunk;
      op->replaceUsesWithIf(copy->getResults(), [&](OpOperand &use) {
        return seg.count(use.getOwner()) && seg[use.getOwner()].chunk == on;
      });
    }
    if (first)
      seg[op] = seg.lookup(first);
    else if (returned)
      seg[op] = {st.chunks() - 1, Phase::Forward};
    else
      return op->emitOpError("cannot be placed in a pipeline stage: it depends on no layer "
                             "and nothing uses it");
  }
  return seg;
}

/// A parameter used on several stages (an embedding tied to the output projection) has its
/// gradient contributions added before one accumulation. Each stage accumulates its own
/// contribution instead; the optimizer step sums the copies (graph.tied_grad_sum).
void splitTiedAccumulations(func::FuncOp func, Placement &seg) {
  SmallVector<AccumulateGradOp> work(func.getBody().front().getOps<AccumulateGradOp>());
  while (!work.empty()) {
    AccumulateGradOp acc = work.pop_back_val();
    // Through the reductions between the sum and the accumulation (linear, so they apply to
    // each addend alike).
    SmallVector<Operation *> chain;
    Operation *def = acc.getGrad().getDefiningOp();
    while (def && !isa<AddOp>(def) && def->getNumOperands() == 1 && def->getNumResults() == 1 &&
           def->hasOneUse() && isa<shard::AllReduceOp, shard::ReduceScatterOp>(def)) {
      chain.push_back(def);
      def = def->getOperand(0).getDefiningOp();
    }
    auto add = dyn_cast_or_null<AddOp>(def);
    if (!add || !add->hasOneUse() || add.getLhs().getType() != add.getRhs().getType() ||
        add.getLhs().getType() != add.getType())
      continue;
    Operation *l = add.getLhs().getDefiningOp(), *r = add.getRhs().getDefiningOp();
    if (!l || !r || !seg.count(l) || !seg.count(r) || seg[l].chunk == seg[r].chunk)
      continue;
    OpBuilder b(acc);
    for (Value x : {add.getLhs(), add.getRhs()}) {
      Segment s = seg[x.getDefiningOp()];
      Value y = x;
      for (Operation *c : llvm::reverse(chain)) {
        IRMapping map;
        map.map(c->getOperand(0), y);
        Operation *clone = b.clone(*c, map);
        seg[clone] = s;
        y = clone->getResult(0);
      }
      IRMapping map;
      map.map(acc.getGrad(), y);
      auto part = cast<AccumulateGradOp>(b.clone(*acc, map));
      seg[part] = s;
      work.push_back(part);
    }
    seg.erase(acc);
    acc->erase();
    for (Operation *c : chain) {
      seg.erase(c);
      c->erase();
    }
    seg.erase(add);
    add->erase();
  }
}

/// ZB-H1's split of each stage's backward: what an earlier stage waits for (the gradient of
/// the stage's input, and everything it depends on) stays in B; the rest — the weight
/// gradients and their accumulation — becomes W.
void splitWeightGradients(func::FuncOp func, Placement &seg) {
  DenseSet<Operation *> needed;
  SmallVector<Operation *> work;
  for (auto &[op, s] : seg)
    if (s.phase == Phase::Backward)
      for (Operation *user : op->getUsers())
        if (seg.count(user) && seg[user].chunk != s.chunk)
          work.push_back(op);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!needed.insert(op).second)
      continue;
    for (Value x : op->getOperands())
      if (Operation *d = x.getDefiningOp();
          d && seg.count(d) && seg[d].chunk == seg[op].chunk && seg[d].phase == Phase::Backward)
        work.push_back(d);
  }
  for (auto &[op, s] : seg)
    if (s.phase == Phase::Backward && !needed.contains(op))
      s.phase = Phase::Weight;
}

/// Where `op` runs, in the spec's terms: "layer 2 on pipeline stage 1", "the backward pass
/// of layer 0 on model chunk 2 (pipeline stage 0)".
std::string placeOf(Operation *op, Segment s, const Stages &st) {
  std::string out =
      s.phase == Phase::Forward ? "" : std::string("the ") + phaseName(s.phase) + " pass of ";
  if (auto layer = op->getAttrOfType<IntegerAttr>("graph.layer"))
    out += "layer " + std::to_string(layer.getInt()) + " on ";
  else if (s.phase != Phase::Forward)
    out += "what runs on ";
  if (st.v > 1)
    return out + "model chunk " + std::to_string(s.chunk) + " (pipeline stage " +
           std::to_string(st.stageOf(s.chunk)) + ")";
  return out + "pipeline stage " + std::to_string(s.chunk);
}

/// Checks that values cross only where the runtime moves them: within a stage from an
/// earlier phase to a later one; a forward value to the next stage; a backward value to the
/// previous stage's backward.
LogicalResult checkCrossings(func::FuncOp func, const Placement &seg, const Stages &st) {
  for (Operation &op : func.getBody().front().without_terminator()) {
    auto t = seg.find(&op);
    if (t == seg.end())
      continue;
    for (Value x : op.getOperands()) {
      Operation *d = x.getDefiningOp();
      auto s = d ? seg.find(d) : seg.end();
      if (s == seg.end())
        continue;
      Segment from = s->second, to = t->second;
      bool ok = (from.chunk == to.chunk && from.phase <= to.phase) ||
                (from.phase == Phase::Forward && to.chunk == from.chunk + 1) ||
                (from.phase == Phase::Backward && to.phase != Phase::Forward &&
                 to.chunk == from.chunk - 1);
      if (!ok) {
        InFlightDiagnostic diag = op.emitError()
                                  << spelling(&op) << " in " << placeOf(&op, to, st)
                                  << " reads the result of " << spelling(d) << " in "
                                  << placeOf(d, from, st)
                                  << "; pipeline stages pass activations only to the next "
                                     "stage and gradients only to the previous one";
        diag.attachNote(d->getLoc()) << "computed here";
        return diag;
      }
    }
  }
  Operation *ret = func.getBody().front().getTerminator();
  for (Value v : ret->getOperands())
    if (Operation *d = v.getDefiningOp();
        d && seg.count(d) && seg.lookup(d).chunk != st.chunks() - 1)
      return func.emitOpError() << "returns a value computed on virtual stage "
                                << seg.lookup(d).chunk << ", not on the last";
  return success();
}

/// Cuts `func` into one function per segment of `order`, named and attributed by
/// `programOf`. Values crossing between pieces are named "v<N>" (numbered by `names`, shared
/// by every cut of the module so names never repeat); function arguments keep their
/// `graph.name`, and the function's result is named `resultName`.
struct Cutter {
  Cutter(ModuleOp module, const Stages &st) : module(module), st(st) {}

  ModuleOp module;
  const Stages &st;
  DenseMap<Value, int64_t> ids;
  int64_t next = 0;

  std::string nameOf(Value v) {
    auto [it, fresh] = ids.try_emplace(v, next);
    if (fresh)
      ++next;
    return "v" + std::to_string(it->second);
  }

  LogicalResult cut(func::FuncOp func, const Placement &seg, ArrayRef<Segment> order,
                    llvm::function_ref<std::string(Segment)> programOf, StringRef resultName) {
    Block &body = func.getBody().front();
    Operation *ret = body.getTerminator();
    OpBuilder b(module.getContext());
    b.setInsertionPointToEnd(module.getBody());
    for (Segment s : order) {
      SmallVector<Operation *> ops;
      for (Operation &op : body.without_terminator())
        if (auto it = seg.find(&op); it != seg.end() && it->second == s)
          ops.push_back(&op);
      // Arguments: the function's inputs this piece reads, and the values of other pieces.
      SmallVector<Value> inputs;
      SmallVector<std::string> inputNames;
      SmallVector<Operation *> free;
      DenseSet<Value> seen;
      DenseSet<Operation *> freeSeen;
      for (Operation *op : ops)
        for (Value x : op->getOperands()) {
          Operation *d = x.getDefiningOp();
          if (d && isFree(d)) {
            if (freeSeen.insert(d).second)
              free.push_back(d);
            continue;
          }
          if ((d && seg.lookup(d) == s) || !seen.insert(x).second)
            continue;
          inputs.push_back(x);
          if (auto arg = dyn_cast<BlockArgument>(x)) {
            auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "graph.name");
            inputNames.push_back(name ? name.str() : "arg" + std::to_string(arg.getArgNumber()));
          } else {
            inputNames.push_back(nameOf(x));
          }
        }
      // Results: what other pieces read, and what the function returns.
      SmallVector<Value> outputs;
      SmallVector<std::string> outputNames;
      for (Operation *op : ops)
        for (Value r : op->getResults()) {
          bool returned = false, elsewhere = false;
          for (Operation *user : r.getUsers()) {
            returned |= user == ret;
            elsewhere |= user != ret && seg.lookup(user) != s;
          }
          if (returned) {
            outputs.push_back(r);
            outputNames.push_back(resultName.str());
          }
          if (elsewhere) {
            outputs.push_back(r);
            outputNames.push_back(nameOf(r));
          }
        }

      std::string program = programOf(s);
      if (module.lookupSymbol(program))
        return func.emitOpError() << "cannot be cut into '" << program
                                  << "': the module has that symbol already";
      SmallVector<Type> argTypes, resultTypes;
      for (Value x : inputs)
        argTypes.push_back(x.getType());
      for (Value r : outputs)
        resultTypes.push_back(r.getType());
      auto piece =
          func::FuncOp::create(b, func.getLoc(), program, b.getFunctionType(argTypes, resultTypes));
      piece->setAttr("tessel.program", b.getStringAttr(program));
      piece->setAttr("tessel.stage", b.getI64IntegerAttr(st.stageOf(s.chunk)));
      Block *entry = piece.addEntryBlock();
      IRMapping map;
      for (auto [i, x] : llvm::enumerate(inputs)) {
        map.map(x, entry->getArgument(i));
        if (auto arg = dyn_cast<BlockArgument>(x)) {
          if (DictionaryAttr attrs = func.getArgAttrDict(arg.getArgNumber()))
            for (NamedAttribute a : attrs)
              piece.setArgAttr(i, a.getName(), a.getValue());
        } else if (auto sharding = recordedSharding(x)) {
          piece.setArgAttr(i, kShardingAttr, getShardingAttr(b.getContext(), *sharding));
        }
        piece.setArgAttr(i, "graph.name", b.getStringAttr(inputNames[i]));
      }
      for (auto [i, name] : llvm::enumerate(outputNames)) {
        piece.setResultAttr(i, "graph.name", b.getStringAttr(name));
        if (name != resultName)
          if (auto sharding = recordedSharding(outputs[i]))
            piece.setResultAttr(i, kShardingAttr, getShardingAttr(b.getContext(), *sharding));
      }
      OpBuilder pb = OpBuilder::atBlockEnd(entry);
      for (Operation *op : free)
        pb.clone(*op, map);
      for (Operation *op : ops)
        pb.clone(*op, map);
      SmallVector<Value> results;
      for (Value r : outputs)
        results.push_back(map.lookup(r));
      func::ReturnOp::create(pb, func.getLoc(), results);
    }
    func.erase();
    return success();
  }
};

struct PipelineSplit : tessel::impl::PipelineSplitBase<PipelineSplit> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    sched::PipelineOp pipeline;
    for (auto op : module.getOps<sched::PipelineOp>())
      pipeline = op;
    if (!pipeline)
      return;
    Stages st;
    st.p = pipeline.getStages();
    st.v = pipeline.getVirtualStages();
    tessel::pipeline::ScheduleKind kind = tessel::pipeline::ScheduleKind::OneFOneB;
    tessel::pipeline::parseScheduleKind(pipeline.getSchedule().str(), kind); // The op verified it.
    st.zeroBubble = kind == tessel::pipeline::ScheduleKind::ZBH1;
    if (auto runs = pipeline.getLayers())
      for (size_t c = 0; 2 * c + 1 < runs->size(); ++c)
        for (int64_t i = 0; i < (*runs)[2 * c + 1]; ++i)
          st.chunkOfLayer.push_back(static_cast<int64_t>(c));
    MeshLayout mesh = MeshLayout::fromModule(module);
    int ppAxis = mesh.axisIndex("pp");
    if (ppAxis < 0) {
      module.emitError("has a pipeline schedule but no 'pp' axis in its mesh");
      return signalPassFailure();
    }

    Cutter cutter(module, st);
    Owners owners;
    if (auto train = module.lookupSymbol<func::FuncOp>("forward_backward")) {
      auto seg = place(train, st, /*training=*/true);
      if (failed(seg))
        return signalPassFailure();
      splitTiedAccumulations(train, *seg);
      if (st.zeroBubble)
        splitWeightGradients(train, *seg);
      if (failed(checkCrossings(train, *seg, st)))
        return signalPassFailure();
      recordOwners(train, *seg, st, owners);
      SmallVector<Segment> order;
      for (int64_t c = 0; c < st.chunks(); ++c)
        order.push_back({c, Phase::Forward});
      for (int64_t c = st.chunks() - 1; c >= 0; --c) {
        order.push_back({c, Phase::Backward});
        if (st.zeroBubble)
          order.push_back({c, Phase::Weight});
      }
      auto programOf = [&](Segment s) {
        const char *kind = s.phase == Phase::Forward  ? "forward"
                           : s.phase == Phase::Weight ? "backward_weight"
                           : st.zeroBubble            ? "backward_input"
                                                      : "backward";
        return std::string(kind) + "." + std::to_string(s.chunk);
      };
      if (failed(cutter.cut(train, *seg, order, programOf, "loss")))
        return signalPassFailure();
    }

    // Evaluation and sampling: forward-only chains over the same stages.
    for (auto [funcName, program, result] :
         {std::tuple{"forward", "eval", "loss"}, std::tuple{"sample", "sample", "logits"}}) {
      auto func = module.lookupSymbol<func::FuncOp>(funcName);
      if (!func)
        continue;
      auto seg = place(func, st, /*training=*/false);
      if (failed(seg) || failed(checkCrossings(func, *seg, st)) ||
          (!owners.empty() && failed(checkOwners(func, *seg, st, owners))))
        return signalPassFailure();
      if (owners.empty())
        recordOwners(func, *seg, st, owners);
      SmallVector<Segment> order;
      for (int64_t c = 0; c < st.chunks(); ++c)
        order.push_back({c, Phase::Forward});
      std::string prefix = program;
      if (failed(cutter.cut(
              func, *seg, order, [&](Segment s) { return prefix + "." + std::to_string(s.chunk); },
              result)))
        return signalPassFailure();
    }

    if (auto opt = module.lookupSymbol<func::FuncOp>("optimizer_step"))
      if (failed(splitOptimizer(module, opt, owners, st, static_cast<int16_t>(ppAxis))))
        return signalPassFailure();

    OpBuilder b(module.getContext());
    SmallVector<NamedAttribute> stages;
    for (const auto &[name, set] : owners)
      stages.push_back(b.getNamedAttr(
          name, b.getDenseI64ArrayAttr(SmallVector<int64_t>(set.begin(), set.end()))));
    module->setAttr("tessel.stages", b.getDictionaryAttr(stages));
  }
};

} // namespace
