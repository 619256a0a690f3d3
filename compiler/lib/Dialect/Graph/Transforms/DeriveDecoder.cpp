//===- DeriveDecoder.cpp - Decode programs over a paged KV cache ----------===//
//
// Generation with a cache runs the forward graph on new tokens only. Nearly everything in a
// transformer works on one token at a time, so running it on T new tokens is running it with
// `seq` = T; the exceptions are what places a token in its sequence (attention, which reads
// the earlier tokens, RoPE and learned positions, which read its index) and they are rewritten
// to read the cache and the tokens' positions. Sums along the sequence that decode exactly
// (DecoderSums.h: a mixture of experts' capacity counting) are rewritten to carry their totals
// or proven to need only the new tokens. Anything else that reads along the sequence is
// refused, not approximated: a decode program computes exactly the logits the whole window
// gives.
//
//===----------------------------------------------------------------------===//

#include "DecoderSums.h"

#include "tessel/Dialect/Graph/Transforms/DeadCode.h"
#include "tessel/Dialect/Graph/Transforms/Logits.h"
#include "tessel/Dialect/Graph/Transforms/Passes.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <optional>

namespace tessel {
#define GEN_PASS_DEF_DERIVEDECODER
#include "tessel/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

namespace {

/// Why a model or layout gets no decode programs: where, and what.
struct Refusal {
  Location loc;
  std::string why;
};

/// The first file location inside `loc` (through call sites, names and fusions), or null.
FileLineColLoc fileLocation(Location loc) {
  if (auto flc = dyn_cast<FileLineColLoc>(loc))
    return flc;
  if (auto call = dyn_cast<CallSiteLoc>(loc))
    return fileLocation(call.getCallee());
  if (auto named = dyn_cast<NameLoc>(loc))
    return fileLocation(named.getChildLoc());
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (FileLineColLoc flc = fileLocation(l))
        return flc;
  return {};
}

/// "file:line:col: " of `loc` when it names one, else "".
std::string where(Location loc) {
  FileLineColLoc flc = fileLocation(loc);
  if (!flc)
    return "";
  return flc.getFilename().str() + ":" + std::to_string(flc.getLine()) + ":" +
         std::to_string(flc.getColumn()) + ": ";
}

/// The cache geometry every decode program shares.
struct Geometry {
  int64_t block = 16;       ///< Positions per cache block.
  int64_t tableBlocks = 0;  ///< Blocks a sequence of the model's whole seq holds.
  int64_t cacheBlocks = 0;  ///< Blocks in each cache.
};

/// One decode program: `batch` sequences, `seq` new tokens each.
struct Variant {
  std::string name;
  int64_t batch, seq;
};

using decoder::hasDim;

class Deriver {
public:
  Deriver(func::FuncOp forward, const Geometry &g, std::string batchDim, std::string seqDim)
      : forward_(forward), g_(g), batch_(std::move(batchDim)), seq_(std::move(seqDim)),
        b_(forward.getContext()) {}

  /// Derives `v` after @forward, or says why not.
  std::optional<Refusal> derive(const Variant &v);

private:
  std::optional<Refusal> checkOps(func::FuncOp f);
  std::optional<Refusal> checkFlow(func::FuncOp f);
  void keepLastToken(Block &body, int64_t tokens);

  func::FuncOp forward_;
  Geometry g_;
  std::string batch_, seq_;
  OpBuilder b_;
};

/// Ops the rewrite does not cover: they read a token's index, or the tokens after it.
std::optional<Refusal> Deriver::checkOps(func::FuncOp f) {
  std::optional<Refusal> refusal;
  f.walk([&](Operation *op) {
    if (refusal)
      return WalkResult::interrupt();
    if (auto a = dyn_cast<AttentionOp>(op)) {
      auto q = *getNamedShape(a.getQuery().getType()), k = *getNamedShape(a.getKey().getType());
      if (!a.getCausal())
        refusal = Refusal{op->getLoc(), "attention without the causal mask reads later tokens"};
      else if (q.size() != 4 || q[0].name != batch_ || q[1].name != seq_ || k[1].name != seq_)
        refusal = Refusal{op->getLoc(), "attention's queries and keys must be [" + batch_ +
                                            ", " + seq_ + ", heads, head] to be cached"};
    } else if (auto r = dyn_cast<RopeOp>(op)) {
      auto x = *getNamedShape(r.getType());
      if (r.getInverse() || x.size() != 4 || x[0].name != batch_ || x[1].name != seq_)
        refusal = Refusal{op->getLoc(), "rope must turn [" + batch_ + ", " + seq_ +
                                            ", heads, head] forward to be decoded"};
    } else if (auto p = dyn_cast<PositionsOp>(op)) {
      if (hasDim(p.getType(), seq_))
        refusal = Refusal{op->getLoc(), "positions(" + seq_ +
                                            ") compares tokens of one window, which a KV cache "
                                            "does not keep"};
    } else if (auto p = dyn_cast<ParamOp>(op)) {
      auto s = *getNamedShape(p.getType());
      int at = findDim(s, seq_);
      if (at > 0 || (at == 0 && s.size() != 2))
        refusal = Refusal{op->getLoc(), "a parameter along '" + seq_ + "' must be [" + seq_ +
                                            ", features] to be looked up at the positions"};
    } else if (isa<DropoutOp>(op)) {
      refusal = Refusal{op->getLoc(), "dropout in the forward graph"};
    }
    return WalkResult::advance();
  });
  return refusal;
}

/// Every op must keep the sequence dim it reads, and make none (a rename of the sequence dim
/// is how a hand-written attention compares tokens of one window).
std::optional<Refusal> Deriver::checkFlow(func::FuncOp f) {
  std::optional<Refusal> refusal;
  f.walk([&](Operation *op) {
    if (refusal || isa<func::ReturnOp, func::FuncOp>(op))
      return;
    bool reads = llvm::any_of(op->getOperandTypes(), [&](Type t) { return hasDim(t, seq_); });
    bool keeps = llvm::any_of(op->getResultTypes(), [&](Type t) { return hasDim(t, seq_); });
    auto routing = dyn_cast<ContractOp>(op);
    if (reads && !keeps && routing && decoder::routesTokensToOwnSlots(routing, batch_, seq_))
      return;
    if (reads && !keeps)
      refusal = Refusal{op->getLoc(), "'" + op->getName().getStringRef().drop_front(6).str() +
                                          "' mixes tokens along '" + seq_ +
                                          "', which a KV cache does not keep"};
    else if (!reads && keeps && op->getNumOperands() > 0)
      refusal = Refusal{op->getLoc(), "'" + op->getName().getStringRef().drop_front(6).str() +
                                          "' makes a '" + seq_ + "' dim of its own"};
  });
  return refusal;
}

/// The prefill reads the logits of its last token only (the runtime puts a prompt's last token
/// in the chunk's last row): what follows the last op that writes a cache runs on that token.
/// Every token goes through the ops that write caches and totals and what they read; the rest
/// (the last layer's MLP, the final norm, the output head) reads the last row of the values it
/// takes from them, and its values shrink to one token.
void Deriver::keepLastToken(Block &body, int64_t tokens) {
  llvm::DenseSet<Operation *> everyToken;
  SmallVector<Operation *> work;
  body.walk([&](Operation *op) {
    if (isa<PagedAttentionOp, RunningSumOp>(op))
      work.push_back(op);
  });
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!everyToken.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        work.push_back(def);
  }
  SmallVector<Operation *> tail;
  for (Operation &op : body.without_terminator())
    if (!everyToken.contains(&op))
      tail.push_back(&op);
  // The values that come into the tail with the tokens, from the ops that see every token or
  // as arguments. Only float values are sliced (a model that writes no cache, whose tail reads
  // the token ids, keeps its whole prefill).
  auto crossesIn = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return hasDim(v.getType(), seq_) && (!def || everyToken.contains(def));
  };
  for (Operation *op : tail)
    for (Value v : op->getOperands())
      if (crossesIn(v) && !isa<FloatType>(getElementTypeOrSelf(v.getType())))
        return;
  llvm::DenseMap<Value, Value> last;
  for (Operation *op : tail) {
    for (OpOperand &use : op->getOpOperands()) {
      Value v = use.get();
      if (!crossesIn(v))
        continue;
      Operation *def = v.getDefiningOp();
      Value &sliced = last[v];
      if (!sliced) {
        if (def)
          b_.setInsertionPointAfter(def);
        else
          b_.setInsertionPointToStart(&body);
        sliced = SliceOp::create(b_, op->getLoc(), resizedDim(v.getType(), seq_, 1), v,
                                 b_.getStringAttr(seq_), b_.getI64IntegerAttr(tokens - 1));
      }
      use.set(sliced);
    }
    if (!isa<ParamOp>(op))
      for (Value r : op->getResults())
        r.setType(resizedDim(r.getType(), seq_, 1));
  }
}

std::optional<Refusal> Deriver::derive(const Variant &v) {
  func::FuncOp f = cloneLogitsFunction(b_, forward_, v.name);
  if (!f)
    return Refusal{forward_.getLoc(), "@forward returns no cross_entropy"};
  auto refuse = [&](std::optional<Refusal> r) {
    f.erase();
    return r;
  };
  MLIRContext *ctx = f.getContext();
  Block &body = f.getBody().front();
  // What only the loss read (a mixture of experts' balancing terms) goes first.
  eraseDeadPureOps(body);
  if (body.getNumArguments() != 1)
    return refuse(Refusal{f.getLoc(), "@forward's logits read inputs other than the tokens"});

  Type i32 = IntegerType::get(ctx, 32);
  NamedShape rows{{batch_, v.batch}, {seq_, v.seq}};
  NamedShape table{{batch_, v.batch}, {"table_blocks", g_.tableBlocks}};
  unsigned n = body.getNumArguments();
  if (failed(f.insertArgument(n, getNamedTensorType(ctx, rows, i32),
                              b_.getDictionaryAttr(b_.getNamedAttr(
                                  "graph.name", b_.getStringAttr("positions"))),
                              f.getLoc())) ||
      failed(f.insertArgument(n + 1, getNamedTensorType(ctx, table, i32),
                              b_.getDictionaryAttr(b_.getNamedAttr(
                                  "graph.name", b_.getStringAttr("block_table"))),
                              f.getLoc())))
    return refuse(Refusal{f.getLoc(), "cannot add the positions and block table arguments"});
  Value positions = body.getArgument(n), blockTable = body.getArgument(n + 1);

  // Sums over each token's earlier tokens carry their totals from call to call; what computed
  // their masks is then dead. What is left must keep to the tokens it reads.
  Operation *lastCache = nullptr;
  decoder::rewriteRunningSums(f, {batch_, seq_, positions, blockTable, g_.cacheBlocks}, b_,
                              lastCache);
  eraseDeadPureOps(body);
  if (std::optional<Refusal> r = checkOps(f))
    return refuse(r);
  if (std::optional<Refusal> r = checkFlow(f))
    return refuse(r);

  // Every value but the persistent ones (parameters along the sequence keep their rows) runs
  // on `batch` sequences of `seq` new tokens.
  auto resize = [&](Type t) { return resizedDim(resizedDim(t, batch_, v.batch), seq_, v.seq); };
  for (BlockArgument arg : body.getArguments())
    arg.setType(resize(arg.getType()));
  body.walk([&](Operation *op) {
    if (isa<ParamOp>(op))
      return;
    for (Value r : op->getResults())
      r.setType(resize(r.getType()));
  });

  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  int cacheIndex = 0;
  for (Operation *op : ops) {
    b_.setInsertionPoint(op);
    if (auto p = dyn_cast<ParamOp>(op)) {
      NamedShape s = *getNamedShape(p.getType());
      if (findDim(s, seq_) != 0 || p->use_empty())
        continue;
      // Learned positions: row p of the table for the token at position p.
      b_.setInsertionPointAfter(op);
      NamedShape renamed = s;
      renamed[0].name = seq_ + "_rows";
      Type elem = p.getType().getElementType();
      auto rename = RenameOp::create(b_, p.getLoc(), getNamedTensorType(ctx, renamed, elem), p);
      NamedShape looked = rows;
      looked.push_back(s[1]);
      auto gathered = EmbeddingOp::create(b_, p.getLoc(), getNamedTensorType(ctx, looked, elem),
                                          rename, positions, StringAttr());
      p.getResult().replaceAllUsesExcept(gathered, rename);
    } else if (auto a = dyn_cast<AttentionOp>(op)) {
      NamedShape k = *getNamedShape(a.getKey().getType());
      NamedShape cache{{"cache_blocks", g_.cacheBlocks},
                       {"block_slot", g_.block},
                       k[2],
                       k[3]};
      Type elem = cast<RankedTensorType>(a.getKey().getType()).getElementType();
      Type cacheType = getNamedTensorType(ctx, cache, elem);
      // The caches open the function, in the order of their attentions.
      if (lastCache)
        b_.setInsertionPointAfter(lastCache);
      else
        b_.setInsertionPointToStart(&body);
      std::string name = "kv." + std::to_string(cacheIndex++);
      auto kc = KvCacheOp::create(b_, a.getLoc(), cacheType, b_.getStringAttr(name + ".key"));
      auto vc = KvCacheOp::create(b_, a.getLoc(), cacheType, b_.getStringAttr(name + ".value"));
      lastCache = vc;
      b_.setInsertionPoint(op);
      auto paged = PagedAttentionOp::create(b_, a.getLoc(), a.getResult().getType(),
                                            a.getQuery(), a.getKey(), a.getValue(), positions,
                                            blockTable, kc, vc, a.getScaleAttr(),
                                            a.getWindowAttr());
      a.getResult().replaceAllUsesWith(paged.getResult());
      a.erase();
    } else if (auto r = dyn_cast<RopeOp>(op)) {
      auto at = RopeAtOp::create(b_, r.getLoc(), r.getType(), r.getInput(), positions,
                                 r.getThetaAttr(), r.getScalingAttr());
      r.replaceAllUsesWith(at.getResult());
      r.erase();
    }
  }
  eraseDeadPureOps(body);
  if (v.seq > 1)
    keepLastToken(body, v.seq);
  f.setType(b_.getFunctionType(body.getArgumentTypes(), body.getTerminator()->getOperandTypes()));
  f.setResultAttr(0, "graph.name", b_.getStringAttr("logits"));
  // The programs follow one another in the order they are derived.
  Block *module = f->getBlock();
  f->moveBefore(module, module->end());

  // What the rewrite left inconsistent (an op whose result no longer matches its new operands,
  // as a parameter along the sequence used without the batch dim) is refused with the
  // verifier's words.
  std::string diagnostics;
  {
    ScopedDiagnosticHandler capture(ctx, [&](Diagnostic &d) {
      if (diagnostics.empty())
        diagnostics = where(d.getLocation()) + d.str();
      return success();
    });
    if (failed(mlir::verify(f)))
      return refuse(Refusal{f.getLoc(), "the graph on new tokens does not verify: " + diagnostics});
  }
  return std::nullopt;
}

struct DeriveDecoder : tessel::impl::DeriveDecoderBase<DeriveDecoder> {
  using DeriveDecoderBase::DeriveDecoderBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError("has no @forward function");
      return signalPassFailure();
    }
    if (prefill < 1 || block < 1 || cacheBlocks < 0 ||
        llvm::any_of(batches, [](int64_t b) { return b < 1; })) {
      module.emitError("the decode programs need positive batches, prefill and block sizes");
      return signalPassFailure();
    }
    std::optional<Refusal> refusal = derive(module, forward);
    // The decoder module holds the decode programs only.
    for (auto f : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
      if (f.getName() != "prefill" && !f.getName().starts_with("decode_b"))
        f.erase();
    if (refusal) {
      for (auto f : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
        f.erase();
      module->setAttr("tessel.decode_refused",
                      StringAttr::get(module.getContext(), where(refusal->loc) + refusal->why));
    }
  }

  std::optional<Refusal> derive(ModuleOp module, func::FuncOp forward) {
    // Layouts whose programs the decode programs would not follow.
    settings::ParallelAttr parallel = settings::parallelOf(module);
    for (auto [axis, what] : {std::pair{"pp", "pipeline"}, {"cp", "context"}})
      if (parallel.axisSize(axis) > 1)
        return Refusal{module.getLoc(), std::string(what) + " parallelism (" + axis +
                                            ") has no decode programs yet"};
    Block &body = forward.getBody().front();
    auto tokens = body.getNumArguments() ? getNamedShape(body.getArgument(0).getType())
                                         : std::optional<NamedShape>();
    if (!tokens || tokens->size() != 2)
      return Refusal{forward.getLoc(), "@forward's first argument is not the tokens [batch, seq]"};
    const std::string batchDim = (*tokens)[0].name, seqDim = (*tokens)[1].name;
    const int64_t seq = (*tokens)[1].size;
    SmallVector<int64_t> sizes(batches.begin(), batches.end());
    if (sizes.empty())
      sizes = {1, 2, 4, 8};
    llvm::sort(sizes);
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    Geometry g;
    g.block = block;
    g.tableBlocks = (seq + block - 1) / block;
    g.cacheBlocks = cacheBlocks ? int64_t(cacheBlocks) : sizes.back() * g.tableBlocks;
    Deriver deriver(forward, g, batchDim, seqDim);
    SmallVector<Variant> variants{{"prefill", 1, std::min<int64_t>(prefill, seq)}};
    for (int64_t b : sizes)
      variants.push_back({"decode_b" + std::to_string(b), b, 1});
    for (const Variant &v : variants)
      if (std::optional<Refusal> r = deriver.derive(v))
        return r;
    keepSequencesWhole(module, batchDim);
    return std::nullopt;
  }

  /// Every rank of a data axis decodes every sequence: the runtime moves a sequence from row
  /// to row as others come and go, and between programs of different batches, so a rank that
  /// decoded only some rows would hold caches that miss the keys, values and totals another
  /// rank wrote. The sequences' dim loses its rule; the heads keep theirs.
  static void keepSequencesWhole(ModuleOp module, StringRef batchDim) {
    settings::ParallelAttr parallel = settings::parallelOf(module);
    if (!parallel.axesOf(batchDim).empty())
      module->setAttr(settings::kParallelName, parallel.withRule(batchDim, {}));
  }
};

} // namespace
