//===- DecoderSums.cpp - Sums along the sequence in decode programs -------===//
//
// Why the two forms decode exactly. A running sum: over a whole window the token at position
// p sums the tokens before it, which a decode program gets from the totals of the sequence's
// earlier calls plus the call's own earlier tokens (the kernel restarts at position 0, as
// the window does). A routing contraction: over a whole window, slot c of expert e holds the
// one token whose count of earlier tokens routed to e is c, and a token reads back only its
// own slots; a decode program holds only its new tokens in the slots, but those are the ones
// its tokens read, and the ops in between work on each slot alone.
//
//===----------------------------------------------------------------------===//

#include "DecoderSums.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

namespace tessel::decoder {

namespace {

NamedShape shapeOf(Value v) { return *getNamedShape(v.getType()); }

bool hasDim(Value v, StringRef name) { return decoder::hasDim(v.getType(), name); }

/// The dim `v` counts positions along, where it is `positions(dim)`.
std::optional<std::string> positionsDim(Value v) {
  auto p = v.getDefiningOp<PositionsOp>();
  if (!p)
    return std::nullopt;
  NamedShape s = shapeOf(p.getResult());
  return s.size() == 1 ? std::optional<std::string>(s[0].name) : std::nullopt;
}

/// Whether `mask` is the mask of the positions along `keys` before (or, setting `inclusive`,
/// up to) each position along `seq`.
bool isEarlierMask(Value mask, StringRef keys, StringRef seq, bool &inclusive) {
  Operation *op = mask.getDefiningOp();
  if (!op || op->getNumOperands() != 2)
    return false;
  std::optional<std::string> a = positionsDim(op->getOperand(0)),
                             b = positionsDim(op->getOperand(1));
  if (!a || !b)
    return false;
  // keys < seq, keys <= seq, and the same turned round.
  if (*a == keys && *b == seq && isa<LtOp, LeOp>(op)) {
    inclusive = isa<LeOp>(op);
    return true;
  }
  if (*a == seq && *b == keys && isa<GtOp, GeOp>(op)) {
    inclusive = isa<GeOp>(op);
    return true;
  }
  return false;
}

/// Whether every element of `v` is 0 or 1.
bool isZeroOne(Value v) {
  Operation *op = v.getDefiningOp();
  return op && isa<TopKOp, LtOp, LeOp, GtOp, GeOp, EqOp, NeOp>(op);
}

/// The running sum (through a reordering of its dims) that `v` is, or null.
RunningSumOp runningSumOf(Value v) {
  if (auto p = v.getDefiningOp<PermuteOp>())
    v = p.getInput();
  return v.getDefiningOp<RunningSumOp>();
}

/// Whether `d` is m * (slot == positions(capacity)), m a 0/1 mask and slot its running count.
bool isSlotMask(Value d) {
  auto mul = d.getDefiningOp<MulOp>();
  if (!mul)
    return false;
  for (auto [m, q] : {std::pair(mul.getLhs(), mul.getRhs()), std::pair(mul.getRhs(), mul.getLhs())}) {
    auto eq = q.getDefiningOp<EqOp>();
    if (!isZeroOne(m) || !eq)
      continue;
    for (auto [slot, place] :
         {std::pair(eq.getLhs(), eq.getRhs()), std::pair(eq.getRhs(), eq.getLhs())}) {
      RunningSumOp count = runningSumOf(slot);
      if (count && count.getInput() == m && positionsDim(place))
        return true;
    }
  }
  return false;
}

/// Whether `op` works on each slot of each sequence alone: it keeps every dim of `slots` and
/// `batch` and sums over none, and reads nothing along the sequence.
bool worksPerSlot(Operation *op, llvm::SmallVector<std::string> slots, StringRef batch,
                  StringRef seq) {
  slots.push_back(batch.str());
  if (!isa<AddOp, SubOp, MulOp, DivOp, UnaryOp, ContractOp>(op))
    return false;
  for (Value v : op->getOperands())
    if (hasDim(v, seq))
      return false;
  for (Value r : op->getResults())
    for (const std::string &dim : slots)
      if (!hasDim(r, dim))
        return false;
  if (auto c = dyn_cast<ContractOp>(op))
    for (Attribute a : c.getSum())
      if (llvm::is_contained(slots, cast<StringAttr>(a).getValue().str()))
        return false;
  return true;
}

/// Whether `c` brings a slot value back to the tokens: a contraction over exactly `slots` of
/// it with the mask `d` or a product of `d`, keeping the sequence.
bool returnsToTokens(ContractOp c, Value d, const llvm::SmallVector<std::string> &slots,
                     StringRef seq) {
  llvm::SmallVector<std::string> summed;
  for (Attribute a : c.getSum())
    summed.push_back(cast<StringAttr>(a).getValue().str());
  if (summed.size() != slots.size() ||
      !llvm::all_of(slots, [&](const std::string &s) { return llvm::is_contained(summed, s); }))
    return false;
  if (!hasDim(c.getResult(), seq))
    return false;
  auto isMaskOrProduct = [&](Value g) {
    if (g == d)
      return true;
    auto mul = g.getDefiningOp<MulOp>();
    return mul && (mul.getLhs() == d || mul.getRhs() == d);
  };
  return isMaskOrProduct(c.getLhs()) || isMaskOrProduct(c.getRhs());
}

} // namespace

bool hasDim(Type t, StringRef name) {
  std::optional<NamedShape> s = getNamedShape(t);
  return s && findDim(*s, name.str()) >= 0;
}

int rewriteRunningSums(func::FuncOp f, const SumSite &site, OpBuilder &b, Operation *&lastState) {
  llvm::SmallVector<ContractOp> contractions;
  f.walk([&](ContractOp c) { contractions.push_back(c); });
  MLIRContext *ctx = f.getContext();
  int rewritten = 0;
  for (ContractOp c : contractions) {
    if (c.getSum().size() != 1)
      continue;
    StringRef keys = cast<StringAttr>(c.getSum()[0]).getValue();
    if (keys == site.seq)
      continue;
    for (auto [renamed, mask] :
         {std::pair(c.getLhs(), c.getRhs()), std::pair(c.getRhs(), c.getLhs())}) {
      auto rename = renamed.getDefiningOp<RenameOp>();
      bool inclusive = false;
      if (!rename || !isEarlierMask(mask, keys, site.seq, inclusive) || shapeOf(mask).size() != 2)
        continue;
      Value x = rename.getInput();
      NamedShape in = shapeOf(x), out = shapeOf(rename.getResult());
      if (in.size() < 2 || in[0].name != site.batch || in[1].name != site.seq ||
          out[1].name != keys)
        continue;
      bool sameRest = true;
      for (size_t i = 0; i < in.size(); ++i)
        sameRest &= i == 1 || in[i].name == out[i].name;
      if (!sameRest)
        continue;

      // The totals open the function with the caches, in the order of their sums.
      if (lastState)
        b.setInsertionPointAfter(lastState);
      else
        b.setInsertionPointToStart(&f.getBody().front());
      NamedShape totals{{"cache_blocks", site.cacheBlocks}};
      totals.insert(totals.end(), in.begin() + 2, in.end());
      auto state = RunningTotalsOp::create(
          b, c.getLoc(), getNamedTensorType(ctx, totals, Float32Type::get(ctx)),
          b.getStringAttr("sum." + std::to_string(rewritten)));
      lastState = state;
      b.setInsertionPoint(c);
      Value sum = RunningSumOp::create(b, c.getLoc(), x.getType(), x, site.positions,
                                       site.blockTable, state, inclusive);
      if (sum.getType() != c.getType())
        sum = PermuteOp::create(b, c.getLoc(), c.getType(), sum);
      c.replaceAllUsesWith(sum);
      c.erase();
      ++rewritten;
      break;
    }
  }
  return rewritten;
}

bool routesTokensToOwnSlots(ContractOp c, StringRef batch, StringRef seq) {
  if (c.getSum().size() != 1 || cast<StringAttr>(c.getSum()[0]).getValue() != seq)
    return false;
  for (Value d : {c.getLhs(), c.getRhs()}) {
    if (!isSlotMask(d))
      continue;
    // The slots: the mask's dims but the tokens'.
    llvm::SmallVector<std::string> slots;
    for (const NamedDim &dim : shapeOf(d))
      if (dim.name != seq && dim.name != batch)
        slots.push_back(dim.name);
    bool returned = false, proven = true;
    llvm::SmallVector<Value> work{c.getResult()};
    llvm::DenseSet<Operation *> seen;
    while (!work.empty() && proven) {
      Value v = work.pop_back_val();
      for (Operation *user : v.getUsers()) {
        if (!seen.insert(user).second)
          continue;
        auto back = dyn_cast<ContractOp>(user);
        if (back && returnsToTokens(back, d, slots, seq)) {
          returned = true;
          continue;
        }
        if (!worksPerSlot(user, slots, batch, seq)) {
          proven = false;
          break;
        }
        for (Value r : user->getResults())
          work.push_back(r);
      }
    }
    if (proven && returned)
      return true;
  }
  return false;
}

} // namespace tessel::decoder
