//===- LowerToPlan.cpp - Graph functions to plan programs -----------------===//
//
// Named dims end here. Each graph op is lowered to kernel calls whose parameters are plain
// sizes and strides computed from the named shapes; the runtime never sees a dim name.
//
//===----------------------------------------------------------------------===//

#include "tessel/Transforms/Passes.h"
#include "tessel/Transforms/TrainSettings.h"

#include "Graph/GraphOps.h"
#include "Plan/PlanDialect.h"

#include "common/HeadTail.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>
#include <optional>

namespace tessel {
#define GEN_PASS_DEF_LOWERTOPLAN
#include "tessel/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

using Strides = SmallVector<int64_t>;

/// The tags of ring attention's messages (keys, values, then their gradients). The cp ring's
/// messages are the only ones between cp neighbours; the tags stay under the 16383 that every
/// MPI carries (half of the guaranteed tag bound).
constexpr int64_t kRingTag = 0x2500;

NamedShape shapeOf(Value v) { return *graph::getNamedShape(v.getType()); }

int64_t numElements(const NamedShape &s) {
  int64_t n = 1;
  for (const NamedDim &d : s)
    n *= d.size;
  return n;
}

SmallVector<int64_t> sizesOf(const NamedShape &s) {
  SmallVector<int64_t> out;
  for (const NamedDim &d : s)
    out.push_back(d.size);
  return out;
}

/// Row-major element strides of a dense tensor of shape `s`.
Strides denseStrides(const NamedShape &s) {
  Strides out(s.size());
  int64_t step = 1;
  for (int i = static_cast<int>(s.size()) - 1; i >= 0; --i) {
    out[i] = step;
    step *= s[i].size;
  }
  return out;
}

/// For each dim of `view`, the stride of the same-named dim of a dense `operand`, or 0 when
/// the operand lacks it (broadcast).
Strides stridesIn(const NamedShape &operand, const NamedShape &view) {
  Strides dense = denseStrides(operand), out;
  for (const NamedDim &d : view) {
    int at = findDim(operand, d.name);
    out.push_back(at < 0 ? 0 : dense[at]);
  }
  return out;
}

/// A group of dims (GEMM's M, N, K or batch) that one operand addresses as a single index:
/// total size and the stride of that index. Fails when the dims are not evenly strided in
/// the group's order.
std::optional<std::pair<int64_t, int64_t>> collapse(const NamedShape &operand,
                                                    ArrayRef<std::string> group) {
  Strides dense = denseStrides(operand);
  int64_t size = 1, stride = 1;
  for (size_t i = 0; i < group.size(); ++i) {
    int at = findDim(operand, group[i]);
    size *= operand[at].size;
    if (i + 1 < group.size()) {
      int next = findDim(operand, group[i + 1]);
      if (dense[at] != dense[next] * operand[next].size)
        return std::nullopt;
    } else {
      stride = dense[at];
    }
  }
  return std::make_pair(size, stride);
}

/// One GEMM operand viewed as a matrix: whether to transpose and its leading dimension.
struct MatrixLayout {
  bool trans = false;
  int64_t ld = 0;
};

/// A rows x cols matrix whose row index moves by `rowStride` and column index by
/// `colStride`, as BLAS reads it (row-major), if it can.
std::optional<MatrixLayout> matrixLayout(int64_t rows, int64_t cols, int64_t rowStride,
                                         int64_t colStride) {
  if ((colStride == 1 || cols == 1) && (rows == 1 || rowStride >= cols))
    return MatrixLayout{false, rows == 1 ? std::max<int64_t>(cols, 1) : rowStride};
  if ((rowStride == 1 || rows == 1) && (cols == 1 || colStride >= rows))
    return MatrixLayout{true, cols == 1 ? std::max<int64_t>(rows, 1) : colStride};
  return std::nullopt;
}

/// Per dim, the group splitting it ("" when whole).
SmallVector<Attribute> splitGroups(Builder &b, const graph::Sharding &s) {
  SmallVector<Attribute> out;
  for (const std::string &a : s.axes)
    out.push_back(b.getStringAttr(a));
  return out;
}

class Lowering {
public:
  Lowering(ModuleOp module)
      : module_(module), b_(module.getContext()), mesh_(graph::MeshLayout::fromModule(module)) {}

  LogicalResult lowerFunction(func::FuncOp func, StringRef programName);
  void declareState();

private:
  // Buffers.
  MemRefType memrefType(Type tensor) {
    auto t = cast<RankedTensorType>(tensor);
    return MemRefType::get(t.getShape(), t.getElementType());
  }
  Value alloc(Type tensor, Location loc) {
    return plan::AllocOp::create(b_, loc, memrefType(tensor), IntegerAttr());
  }
  Value state(StringRef name, Type tensor, Location loc) {
    return plan::StateOp::create(b_, loc, memrefType(tensor), b_.getStringAttr(name));
  }
  Value buffer(Value v) { return buffers_.lookup(v); }
  /// A fresh buffer for result `r`.
  Value define(Value r) {
    Value m = alloc(r.getType(), r.getLoc());
    buffers_[r] = m;
    return m;
  }
  void kernel(Location loc, StringRef name, ValueRange ins, ValueRange outs,
              ArrayRef<NamedAttribute> params) {
    plan::KernelOp::create(b_, loc, b_.getStringAttr(name), ins, outs,
                           b_.getDictionaryAttr(params));
  }
  NamedAttribute i64(StringRef k, int64_t v) { return b_.getNamedAttr(k, b_.getI64IntegerAttr(v)); }
  NamedAttribute f64(StringRef k, double v) { return b_.getNamedAttr(k, b_.getF64FloatAttr(v)); }
  NamedAttribute str(StringRef k, StringRef v) { return b_.getNamedAttr(k, b_.getStringAttr(v)); }
  NamedAttribute list(StringRef k, ArrayRef<int64_t> v) {
    return b_.getNamedAttr(k, b_.getDenseI64ArrayAttr(v));
  }

  // State declarations, in order of first use.
  struct StateDecl {
    std::string name, role, of, init = "zeros";
    double a = 0, b = 0;
    Type tensor;
    ArrayAttr split;
  };
  /// The split of parameter `param`'s state in `layout` (param, grad or optimizer), from
  /// the partition pass's `tessel.state`; null on one rank.
  ArrayAttr stateSplit(StringRef param, StringRef layout) {
    auto state = module_->getAttrOfType<DictionaryAttr>("tessel.state");
    auto entry = state ? state.getAs<DictionaryAttr>(param) : DictionaryAttr();
    auto s = entry ? entry.getAs<graph::ShardingAttr>(layout) : graph::ShardingAttr();
    if (!s)
      return {};
    return b_.getArrayAttr(splitGroups(b_, graph::getSharding(s)));
  }
  /// The pipeline stages holding parameter `param` and its state, from the pipeline split's
  /// `tessel.stages`; null without a pipeline.
  DenseI64ArrayAttr stagesOf(StringRef param) {
    auto stages = module_->getAttrOfType<DictionaryAttr>("tessel.stages");
    return stages ? stages.getAs<DenseI64ArrayAttr>(param) : DenseI64ArrayAttr();
  }
  void declare(StateDecl decl) {
    if (!stateIndex_.count(decl.name)) {
      stateIndex_[decl.name] = states_.size();
      states_.push_back(std::move(decl));
    }
  }
  Value paramState(graph::ParamOp op);
  Value derivedState(StringRef role, StringRef param, Type tensor, Location loc);

  // Op lowerings.
  LogicalResult lower(Operation *op);
  LogicalResult lowerContract(graph::ContractOp op);
  /// Copies `v` (dense, `from`) into a fresh dense buffer laid out as `to`.
  Value relayout(Value v, const NamedShape &from, const NamedShape &to, Type element, Location loc);
  /// rows x cols of an op that works along trailing dims `inner` of `x`, or an error.
  /// Lowers an op whose kernel works along the dims `inner` of the [rows, cols] operands
  /// and results flagged in `rowIns` / `rowOuts` (all of shape `x`). When `inner` are not
  /// the innermost dims of `x`, those operands are first copied into a layout where they are,
  /// and those results are computed in it and copied back.
  LogicalResult lowerAlongDims(Operation *op, StringRef kernelName, const NamedShape &x,
                               ArrayRef<std::string> inner, ValueRange ins, ArrayRef<bool> rowIns,
                               ValueRange results, ArrayRef<bool> rowOuts,
                               SmallVector<NamedAttribute> params);

  /// Lowers the collectives of the upstream shard dialect.
  LogicalResult lowerCollective(Operation *op);
  /// Ring attention (context = ring): attention whose keys and values hold this rank's
  /// head-tail block, like its queries.
  static bool isRingAttention(Operation *op);
  LogicalResult lowerRingAttention(graph::AttentionOp op);
  LogicalResult lowerRingAttentionGrad(graph::AttentionGradOp op);
  /// The forward ring: the running output and log-sum-exp of `q` against every block of keys.
  void ringForward(Operation *op, Value q, Value k, Value v, Value out, Value lse);
  /// Sends `values` to the next rank of the cp ring and receives as many from the previous
  /// one into fresh buffers, asynchronously: returns the buffers and the events to wait for.
  std::pair<SmallVector<Value>, SmallVector<int64_t>> ringShift(Location loc, ValueRange values,
                                                                int64_t tag);
  SmallVector<NamedAttribute> ringParams(Operation *op, int64_t step);
  /// Before an op reads a value an asynchronous collective produces, waits for it.
  void waitFor(Operation *op);

  ModuleOp module_;
  OpBuilder b_;
  graph::MeshLayout mesh_;
  DenseMap<Value, Value> buffers_;
  /// Values an asynchronous collective still writes: the event to wait for, and the buffers
  /// it reads and writes (kept alive until the wait).
  struct Pending {
    int64_t event;
    SmallVector<Value> buffers;
  };
  DenseMap<Value, std::shared_ptr<Pending>> pending_;
  int64_t events_ = 0;
  std::vector<StateDecl> states_;
  std::map<std::string, size_t> stateIndex_;
};

Value Lowering::paramState(graph::ParamOp op) {
  auto init = op.getInit();
  StateDecl d{op.getName().str(),
              "param",
              "",
              init.getKind().str(),
              init.getA().convertToDouble(),
              init.getB().convertToDouble(),
              op.getType(),
              stateSplit(op.getName(), "param")};
  declare(d);
  return state(op.getName(), op.getType(), op.getLoc());
}

Value Lowering::derivedState(StringRef role, StringRef param, Type tensor, Location loc) {
  std::string name = (role + "." + param).str();
  declare(StateDecl{name, role.str(), param.str(), "zeros", 0, 0, tensor,
                    stateSplit(param, role == "grad" ? "grad" : "optimizer")});
  return state(name, tensor, loc);
}

void Lowering::declareState() {
  b_.setInsertionPointToStart(module_.getBody());
  for (const StateDecl &d : states_) {
    SmallVector<Attribute> dims;
    auto shape = graph::getNamedShape(d.tensor);
    for (const NamedDim &nd : *shape)
      dims.push_back(b_.getStringAttr(nd.name));
    plan::TensorOp::create(b_, module_.getLoc(), b_.getStringAttr(d.name), b_.getStringAttr(d.role),
                           b_.getStringAttr(d.of), b_.getStringAttr(d.init),
                           b_.getF64FloatAttr(d.a), b_.getF64FloatAttr(d.b), b_.getArrayAttr(dims),
                           TypeAttr::get(memrefType(d.tensor)), d.split,
                           stagesOf(d.of.empty() ? d.name : d.of));
  }
}

LogicalResult Lowering::lowerFunction(func::FuncOp func, StringRef programName) {
  b_.setInsertionPoint(func);
  auto program =
      plan::ProgramOp::create(b_, func.getLoc(), b_.getStringAttr(programName), IntegerAttr(),
                              func->getAttrOfType<IntegerAttr>("tessel.stage"));
  b_.setInsertionPointToStart(&program.getBody().emplaceBlock());
  buffers_.clear();

  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "graph.name");
    if (!name)
      return func.emitError("argument #") << arg.getArgNumber() << " has no graph.name";
    ArrayAttr split;
    if (auto s = func.getArgAttrOfType<graph::ShardingAttr>(arg.getArgNumber(), "graph.sharding"))
      split = b_.getArrayAttr(splitGroups(b_, graph::getSharding(s)));
    buffers_[arg] = plan::InputOp::create(b_, arg.getLoc(), memrefType(arg.getType()), name,
                                          IntegerAttr(), split);
  }
  for (Operation &op : body.without_terminator()) {
    Block *block = b_.getInsertionBlock();
    Operation *before = block->empty() ? nullptr : &block->back();
    if (failed(lower(&op)))
      return failure();
    // The kernels of an op -tessel-recompute cloned carry its mark, for profiles.
    if (op.hasAttr("graph.recomputed"))
      for (Operation *n = before ? before->getNextNode() : &block->front(); n; n = n->getNextNode())
        if (isa<plan::KernelOp>(n))
          n->setAttr("plan.recomputed", b_.getUnitAttr());
  }

  // Results are named by what each function computes.
  static const std::map<std::string, std::vector<std::string>> kResultNames = {
      {"eval", {"loss"}},
      {"forward_backward", {"loss"}},
      {"optimizer_step", {"grad_norm", "lr"}},
      {"sample", {"logits"}}};
  auto names = kResultNames.find(programName.str());
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    auto named = func.getResultAttrOfType<StringAttr>(i, "graph.name");
    std::string name = named ? named.str()
                       : names != kResultNames.end() && i < names->second.size()
                           ? names->second[i]
                           : "result" + std::to_string(i);
    plan::OutputOp::create(b_, ret.getLoc(), b_.getStringAttr(name), buffer(v));
  }
  return success();
}

LogicalResult Lowering::lowerAlongDims(Operation *op, StringRef kernelName, const NamedShape &x,
                                       ArrayRef<std::string> inner, ValueRange ins,
                                       ArrayRef<bool> rowIns, ValueRange results,
                                       ArrayRef<bool> rowOuts, SmallVector<NamedAttribute> params) {
  NamedShape moved;
  for (const NamedDim &d : x)
    if (!llvm::is_contained(inner, d.name))
      moved.push_back(d);
  int64_t cols = 1;
  for (const std::string &name : inner) {
    int at = findDim(x, name);
    if (at < 0)
      return op->emitOpError() << "works along '" << name << "', which is not a dim of "
                               << formatShape(x);
    moved.push_back(x[at]);
    cols *= x[at].size;
  }
  bool relaid = !(moved == x);
  Location loc = op->getLoc();
  Type element = cast<RankedTensorType>(results[0].getType()).getElementType();
  SmallVector<Value> inBuffers, outBuffers;
  for (auto [v, rows] : llvm::zip(ins, rowIns))
    inBuffers.push_back(rows && relaid ? relayout(buffer(v), x, moved, element, loc) : buffer(v));
  for (auto [v, rows] : llvm::zip(results, rowOuts))
    outBuffers.push_back(rows && relaid
                             ? plan::AllocOp::create(
                                   b_, loc, MemRefType::get(sizesOf(moved), element), IntegerAttr())
                             : define(v));
  params.push_back(i64("rows", numElements(x) / cols));
  params.push_back(i64("cols", cols));
  kernel(loc, kernelName, inBuffers, outBuffers, params);
  for (auto [v, rows, out] : llvm::zip(results, rowOuts, outBuffers))
    if (rows && relaid)
      kernel(loc, "copy", {out}, {define(v)},
             {list("shape", sizesOf(x)), list("x_strides", stridesIn(moved, x))});
  return success();
}

LogicalResult Lowering::lowerCollective(Operation *op) {
  Value in = op->getOperand(0), out = op->getResult(0);
  NamedShape is = shapeOf(in), os = shapeOf(out);
  // [outer, ways, chunk] around dim `d` of the whole side `whole` and the block side `block`.
  auto outerOf = [](const NamedShape &s, uint64_t d) {
    int64_t n = 1;
    for (uint64_t i = 0; i < d; ++i)
      n *= s[i].size;
    return n;
  };
  auto chunkOf = [](const NamedShape &block, uint64_t d) {
    int64_t n = 1;
    for (uint64_t i = d; i < block.size(); ++i)
      n *= block[i].size;
    return n;
  };
  StringRef name;
  SmallVector<NamedAttribute> params;
  if (auto ar = dyn_cast<shard::AllReduceOp>(op)) {
    name = "all_reduce";
    params = {str("group", mesh_.groupName(ar.getGridAxes())),
              str("op", ar.getReduction() == shard::ReductionKind::Max ? "max" : "sum"),
              i64("n", numElements(is))};
  } else if (auto rs = dyn_cast<shard::ReduceScatterOp>(op)) {
    uint64_t d = rs.getScatterAxis().getZExtValue();
    name = "reduce_scatter";
    params = {str("group", mesh_.groupName(rs.getGridAxes())), i64("outer", outerOf(is, d)),
              i64("chunk", chunkOf(os, d))};
  } else if (auto ag = dyn_cast<shard::AllGatherOp>(op)) {
    uint64_t d = ag.getGatherAxis().getZExtValue();
    name = "all_gather";
    params = {str("group", mesh_.groupName(ag.getGridAxes())), i64("outer", outerOf(os, d)),
              i64("chunk", chunkOf(is, d))};
  } else {
    auto sl = cast<shard::AllSliceOp>(op);
    uint64_t d = sl.getSliceAxis().getZExtValue();
    name = "shard_slice";
    params = {str("group", mesh_.groupName(sl.getGridAxes())), i64("outer", outerOf(is, d)),
              i64("chunk", chunkOf(os, d))};
  }
  Value r = define(out);
  if (op->hasAttr("tessel.async")) {
    params.push_back(i64("event", ++events_));
    pending_[out] = std::make_shared<Pending>(Pending{events_, {buffer(in), r}});
  }
  kernel(op->getLoc(), name, {buffer(in)}, {r}, params);
  return success();
}

//===----------------------------------------------------------------------===//
// Ring attention
//===----------------------------------------------------------------------===//

bool Lowering::isRingAttention(Operation *op) {
  if (!op->hasAttr("seq_over"))
    return false;
  NamedShape q = shapeOf(op->getOperand(0)), k = shapeOf(op->getOperand(1));
  return q[q.size() - 3].size == k[k.size() - 3].size;
}

SmallVector<NamedAttribute> Lowering::ringParams(Operation *op, int64_t step) {
  NamedShape qs = shapeOf(op->getOperand(0)), ks = shapeOf(op->getOperand(1));
  size_t r = qs.size();
  SmallVector<NamedAttribute> params{
      i64("batch", numElements(qs) / (qs[r - 3].size * qs[r - 2].size * qs[r - 1].size)),
      i64("seq", qs[r - 3].size),
      i64("heads", qs[r - 2].size),
      i64("kv_heads", ks[r - 2].size),
      i64("head", qs[r - 1].size),
      i64("causal", op->hasAttr("causal")),
      f64("scale", op->getAttrOfType<FloatAttr>("scale").getValueAsDouble()),
      str("group", op->getAttrOfType<StringAttr>("seq_over").getValue()),
      i64("step", step)};
  if (auto heads = op->getAttrOfType<StringAttr>("heads_over"))
    params.push_back(str("head_group", heads.getValue()));
  return params;
}

std::pair<SmallVector<Value>, SmallVector<int64_t>>
Lowering::ringShift(Location loc, ValueRange values, int64_t tag) {
  StringRef group = headtail::kAxis.data();
  SmallVector<Value> received;
  SmallVector<int64_t> events;
  for (auto [i, v] : llvm::enumerate(values)) {
    auto type = cast<MemRefType>(v.getType());
    int64_t n = type.getNumElements();
    kernel(loc, "send", {v}, {},
           {str("group", group), i64("peer", 1), i64("relative", 1), i64("tag", tag + i),
            i64("n", n), i64("event", ++events_)});
    events.push_back(events_);
    Value next = plan::AllocOp::create(b_, loc, type, IntegerAttr());
    kernel(loc, "recv", {}, {next},
           {str("group", group), i64("peer", -1), i64("relative", 1), i64("tag", tag + i),
            i64("n", n), i64("event", ++events_)});
    events.push_back(events_);
    received.push_back(next);
  }
  return {received, events};
}

void Lowering::ringForward(Operation *op, Value q, Value k, Value v, Value out, Value lse) {
  Location loc = op->getLoc();
  int64_t ways = mesh_.size(headtail::kAxis);
  Value kc = k, vc = v;
  for (int64_t step = 0; step < ways; ++step) {
    // The next block travels while this one is computed.
    SmallVector<Value> next;
    SmallVector<int64_t> events;
    if (step + 1 < ways)
      std::tie(next, events) = ringShift(loc, {kc, vc}, kRingTag);
    kernel(loc, "attention_block", {q, kc, vc}, {out, lse}, ringParams(op, step));
    for (int64_t e : events)
      kernel(loc, "wait", {kc, vc, next[0], next[1]}, {}, {i64("event", e)});
    if (!next.empty())
      kc = next[0], vc = next[1];
  }
}

LogicalResult Lowering::lowerRingAttention(graph::AttentionOp op) {
  if (op.getWindow())
    return op.emitOpError("with a sliding window cannot run as ring attention; use "
                          "context = allgather");
  Location loc = op.getLoc();
  NamedShape qs = shapeOf(op.getQuery());
  Type element = cast<RankedTensorType>(op.getType()).getElementType();
  Value lse = plan::AllocOp::create(
      b_, loc, MemRefType::get({numElements(qs) / qs.back().size}, element), IntegerAttr());
  ringForward(op, buffer(op.getQuery()), buffer(op.getKey()), buffer(op.getValue()),
              define(op.getResult()), lse);
  return success();
}

LogicalResult Lowering::lowerRingAttentionGrad(graph::AttentionGradOp op) {
  // The forward ring again, for each query's output and log-sum-exp over every key (the
  // per-rank attention keeps neither), then the backward ring: the key and value blocks travel
  // with the gradients every rank adds into them, and after the last step one more hop takes
  // each block's gradients home.
  if (op.getWindow())
    return op.emitOpError("with a sliding window cannot run as ring attention; use "
                          "context = allgather");
  Location loc = op.getLoc();
  NamedShape qs = shapeOf(op.getQuery());
  Type element = cast<RankedTensorType>(op.getQuery().getType()).getElementType();
  Value q = buffer(op.getQuery()), dout = buffer(op.getGrad());
  Value out = alloc(op.getQuery().getType(), loc);
  Value lse = plan::AllocOp::create(
      b_, loc, MemRefType::get({numElements(qs) / qs.back().size}, element), IntegerAttr());
  ringForward(op, q, buffer(op.getKey()), buffer(op.getValue()), out, lse);
  int64_t ways = mesh_.size(headtail::kAxis);
  Value dq = define(op.getQueryGrad());
  Value kc = buffer(op.getKey()), vc = buffer(op.getValue());
  Value dk = alloc(op.getKeyGrad().getType(), loc), dv = alloc(op.getValueGrad().getType(), loc);
  for (int64_t step = 0; step < ways; ++step) {
    SmallVector<Value> next;
    SmallVector<int64_t> events;
    if (step + 1 < ways)
      std::tie(next, events) = ringShift(loc, {kc, vc}, kRingTag);
    kernel(loc, "attention_block_grad", {q, kc, vc, dout, out, lse}, {dq, dk, dv},
           ringParams(op, step));
    auto [grads, gradEvents] = ringShift(loc, {dk, dv}, kRingTag + 2);
    events.append(gradEvents);
    SmallVector<Value> live = {kc, vc, dk, dv};
    live.append(next);
    live.append(grads);
    for (int64_t e : events)
      kernel(loc, "wait", live, {}, {i64("event", e)});
    if (!next.empty())
      kc = next[0], vc = next[1];
    dk = grads[0], dv = grads[1];
  }
  // After the last hop these are this rank's own blocks' gradients.
  buffers_[op.getKeyGrad()] = dk;
  buffers_[op.getValueGrad()] = dv;
  return success();
}

void Lowering::waitFor(Operation *op) {
  if (isa<graph::UnpackOp>(op))
    return;
  for (Value v : op->getOperands()) {
    auto it = pending_.find(v);
    if (it == pending_.end())
      continue;
    std::shared_ptr<Pending> p = it->second;
    // The wait lists the collective's buffers so that the memory plan keeps them alive
    // while the collective may still read or write them.
    kernel(op->getLoc(), "wait", p->buffers, {}, {i64("event", p->event)});
    SmallVector<Value> done;
    for (auto &e : pending_)
      if (e.second == p)
        done.push_back(e.first);
    for (Value d : done)
      pending_.erase(d);
  }
}

Value Lowering::relayout(Value v, const NamedShape &from, const NamedShape &to, Type element,
                         Location loc) {
  Value out = plan::AllocOp::create(b_, loc, MemRefType::get(sizesOf(to), element), IntegerAttr());
  kernel(loc, "copy", {v}, {out},
         {list("shape", sizesOf(to)), list("x_strides", stridesIn(from, to))});
  return out;
}

LogicalResult Lowering::lowerContract(graph::ContractOp op) {
  NamedShape a = shapeOf(op.getLhs()), bs = shapeOf(op.getRhs()), c = shapeOf(op.getResult());
  std::vector<std::string> sum;
  for (Attribute s : op.getSum())
    sum.push_back(cast<StringAttr>(s).str());
  auto summed = [&](const std::string &n) { return llvm::is_contained(sum, n); };

  // Batch dims are in both operands and kept; M only in lhs; N only in rhs; K summed.
  std::vector<std::string> batch, m, n;
  for (const NamedDim &d : a)
    if (!summed(d.name))
      (findDim(bs, d.name) >= 0 ? batch : m).push_back(d.name);
  for (const NamedDim &d : bs)
    if (!summed(d.name) && findDim(a, d.name) < 0)
      n.push_back(d.name);
  std::vector<std::string> k;
  for (const NamedDim &d : a)
    if (summed(d.name))
      k.push_back(d.name);

  Location loc = op.getLoc();
  Type element = cast<RankedTensorType>(op.getType()).getElementType();
  auto pick = [](const NamedShape &s, ArrayRef<std::string> names) {
    NamedShape out;
    for (const std::string &nm : names)
      out.push_back(s[findDim(s, nm)]);
    return out;
  };
  auto concat = [](std::initializer_list<NamedShape> parts) {
    NamedShape out;
    for (const NamedShape &p : parts)
      out.insert(out.end(), p.begin(), p.end());
    return out;
  };

  Value lhs = buffer(op.getLhs()), rhs = buffer(op.getRhs());
  auto layoutOf = [&](const NamedShape &s, ArrayRef<std::string> rows,
                      ArrayRef<std::string> cols) -> std::optional<MatrixLayout> {
    auto r = collapse(s, rows), cl = collapse(s, cols);
    if (!r || !cl)
      return std::nullopt;
    return matrixLayout(r->first, cl->first, rows.empty() ? 1 : r->second,
                        cols.empty() ? 1 : cl->second);
  };
  std::optional<MatrixLayout> la = layoutOf(a, m, k);
  if (!la) { // Copy lhs into [batch, M, K].
    NamedShape packed = concat({pick(a, batch), pick(a, m), pick(a, k)});
    lhs = relayout(lhs, a, packed, element, loc);
    a = packed;
    la = layoutOf(a, m, k);
  }
  std::optional<MatrixLayout> lb = layoutOf(bs, k, n);
  if (!lb) { // Copy rhs into [batch, K, N].
    NamedShape packed = concat({pick(bs, batch), pick(bs, k), pick(bs, n)});
    rhs = relayout(rhs, bs, packed, element, loc);
    bs = packed;
    lb = layoutOf(bs, k, n);
  }
  // The result is dense in its own order; BLAS writes it directly when N is its trailing
  // group and M evenly strided, else through a [batch, M, N] temporary.
  NamedShape cc = c;
  std::optional<MatrixLayout> lc = layoutOf(c, m, n);
  bool viaTemp = !lc || lc->trans;
  if (viaTemp) {
    cc = concat({pick(c, batch), pick(c, m), pick(c, n)});
    lc = layoutOf(cc, m, n);
  }
  Value out = define(op.getResult());
  Value target =
      viaTemp ? plan::AllocOp::create(b_, loc, MemRefType::get(sizesOf(cc), element), IntegerAttr())
              : out;

  auto sizeOf = [](const NamedShape &s, ArrayRef<std::string> names) {
    int64_t total = 1;
    for (const std::string &nm : names)
      total *= s[findDim(s, nm)].size;
    return total;
  };
  SmallVector<int64_t> batchShape;
  Strides aBatch, bBatch, cBatch;
  Strides da = denseStrides(a), db = denseStrides(bs), dc = denseStrides(cc);
  for (const std::string &nm : batch) {
    batchShape.push_back(a[findDim(a, nm)].size);
    aBatch.push_back(da[findDim(a, nm)]);
    bBatch.push_back(db[findDim(bs, nm)]);
    cBatch.push_back(dc[findDim(cc, nm)]);
  }
  kernel(loc, "gemm", {lhs, rhs}, {target},
         {list("batch_shape", batchShape), list("a_batch_strides", aBatch),
          list("b_batch_strides", bBatch), list("c_batch_strides", cBatch), i64("m", sizeOf(a, m)),
          i64("n", sizeOf(bs, n)), i64("k", sizeOf(a, k)), i64("trans_a", la->trans),
          i64("trans_b", lb->trans), i64("lda", la->ld), i64("ldb", lb->ld), i64("ldc", lc->ld)});
  if (viaTemp)
    kernel(loc, "copy", {target}, {out},
           {list("shape", sizesOf(c)), list("x_strides", stridesIn(cc, c))});
  return success();
}

LogicalResult Lowering::lower(Operation *op) {
  Location loc = op->getLoc();
  auto n = [&](Value v) { return i64("n", numElements(shapeOf(v))); };
  auto binary = [&](Operation *o, StringRef kind) {
    NamedShape out = shapeOf(o->getResult(0));
    Value r = define(o->getResult(0));
    kernel(loc, "binary", {buffer(o->getOperand(0)), buffer(o->getOperand(1))}, {r},
           {str("op", kind), list("shape", sizesOf(out)),
            list("a_strides", stridesIn(shapeOf(o->getOperand(0)), out)),
            list("b_strides", stridesIn(shapeOf(o->getOperand(1)), out))});
    return success();
  };
  auto unary = [&](Operation *o) {
    Value r = define(o->getResult(0));
    kernel(loc, "unary", {buffer(o->getOperand(0))}, {r},
           {str("op", o->getName().stripDialect()), n(o->getResult(0))});
    return success();
  };
  auto view = [&](Operation *o) {
    buffers_[o->getResult(0)] = plan::ViewOp::create(b_, loc, memrefType(o->getResult(0).getType()),
                                                     buffer(o->getOperand(0)));
    return success();
  };
  auto copy = [&](Operation *o) {
    NamedShape out = shapeOf(o->getResult(0));
    Value r = define(o->getResult(0));
    kernel(loc, "copy", {buffer(o->getOperand(0))}, {r},
           {list("shape", sizesOf(out)),
            list("x_strides", stridesIn(shapeOf(o->getOperand(0)), out))});
    return success();
  };
  auto reduce = [&](Operation *o, bool mean) {
    NamedShape in = shapeOf(o->getOperand(0)), out = shapeOf(o->getResult(0));
    double count = static_cast<double>(numElements(in) / std::max<int64_t>(numElements(out), 1));
    Value r = define(o->getResult(0));
    kernel(loc, "reduce", {buffer(o->getOperand(0))}, {r},
           {list("shape", sizesOf(in)), list("y_strides", stridesIn(out, in)),
            i64("y_elements", numElements(out)), f64("scale", mean ? 1.0 / count : 1.0)});
    return success();
  };
  // Norms work along the dims of their scale.
  auto dimNames = [](Value scale) {
    std::vector<std::string> names;
    for (const NamedDim &d : shapeOf(scale))
      names.push_back(d.name);
    return names;
  };
  auto attentionParams = [&](Value q, Value k, bool causal, double scale,
                             std::optional<uint64_t> window, std::optional<StringRef> headsOver,
                             std::optional<StringRef> seqOver) {
    NamedShape qs = shapeOf(q), ks = shapeOf(k);
    size_t r = qs.size();
    SmallVector<NamedAttribute> params{
        i64("batch", numElements(qs) / (qs[r - 3].size * qs[r - 2].size * qs[r - 1].size)),
        i64("seq", qs[r - 3].size),
        i64("heads", qs[r - 2].size),
        i64("kv_seq", ks[r - 3].size),
        i64("kv_heads", ks[r - 2].size),
        i64("head", qs[r - 1].size),
        i64("causal", causal),
        f64("scale", scale)};
    if (window)
      params.push_back(i64("window", static_cast<int64_t>(*window)));
    if (headsOver)
      params.push_back(str("head_group", *headsOver));
    if (seqOver)
      params.push_back(str("seq_group", *seqOver));
    return params;
  };

  waitFor(op);
  auto rowGroup = [&](std::optional<StringRef> axis, SmallVector<NamedAttribute> params) {
    if (axis)
      params.push_back(str("row_group", *axis));
    return params;
  };
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp, shard::AllSliceOp>(
          [&](Operation *o) { return lowerCollective(o); })
      .Case([&](graph::CEMaxOp o) {
        return lowerAlongDims(o, "ce_max", shapeOf(o.getLogits()), {o.getDim().str()},
                              {o.getLogits()}, {true}, o->getResults(), {false}, {});
      })
      .Case([&](graph::CESumsOp o) {
        return lowerAlongDims(o, "ce_sums", shapeOf(o.getLogits()), {o.getDim().str()},
                              o->getOperands(), {true, false, false}, o->getResults(),
                              {false, false}, {str("col_group", o.getAxis())});
      })
      .Case([&](graph::CELossOp o) {
        Value r = define(o.getResult());
        kernel(loc, "ce_loss", {buffer(o.getMax()), buffer(o.getSums()), buffer(o.getPicked())},
               {r},
               {i64("rows", numElements(shapeOf(o.getMax()))),
                f64("scale", o.getScale().convertToDouble())});
        return success();
      })
      .Case([&](graph::CEGradOp o) {
        return lowerAlongDims(
            o, "ce_grad", shapeOf(o.getLogits()), {o.getDim().str()}, o->getOperands(),
            {true, false, false, false, false}, o->getResults(), {true},
            {str("col_group", o.getAxis()), f64("scale", o.getScale().convertToDouble())});
      })
      .Case([&](graph::SumSquaresOp o) {
        SmallVector<Value> ins;
        for (Value v : o.getInputs())
          ins.push_back(buffer(v));
        Value r = define(o.getResult());
        kernel(loc, "sum_squares", ins, {r}, {});
        return success();
      })
      .Case([&](graph::TiedGradSumOp o) -> LogicalResult {
        int pp = mesh_.axisIndex("pp");
        if (pp < 0)
          return o.emitOpError("needs a 'pp' axis in the mesh");
        Value r = define(o.getResult());
        kernel(loc, "all_reduce", {buffer(o.getInput())}, {r},
               {str("group", mesh_.groupName({static_cast<int16_t>(pp)})), str("op", "sum"),
                i64("n", cast<RankedTensorType>(o.getType()).getNumElements()),
                list("members", o.getStages())});
        return success();
      })
      .Case([&](graph::AssignParamOp o) {
        NamedShape shape = shapeOf(o.getValue());
        Value p = state(o.getName(), o.getValue().getType(), loc);
        kernel(loc, "copy", {buffer(o.getValue())}, {p},
               {list("shape", sizesOf(shape)), list("x_strides", denseStrides(shape))});
        return success();
      })
      .Case([&](graph::PackOp o) {
        SmallVector<Value> ins;
        SmallVector<int64_t> outers, chunks;
        for (auto [v, dimAttr] : llvm::zip(o.getInputs(), o.getDims())) {
          ins.push_back(buffer(v));
          NamedShape shape = shapeOf(v);
          int at = findDim(shape, cast<StringAttr>(dimAttr).str());
          int64_t outer = 1, inner = 1;
          for (int i = 0; i < static_cast<int>(shape.size()); ++i)
            (i < at ? outer : inner) *= shape[i].size;
          outers.push_back(at < 0 ? 1 : outer);
          chunks.push_back(at < 0 ? inner : inner / o.getWays());
        }
        Value r = define(o.getResult());
        kernel(loc, "pack", ins, {r},
               {i64("ways", o.getWays()), list("outers", outers), list("chunks", chunks)});
        return success();
      })
      .Case([&](graph::UnpackOp o) {
        int64_t offset = 0;
        for (Value r : o.getResults()) {
          buffers_[r] = plan::ViewOp::create(b_, loc, memrefType(r.getType()), buffer(o.getInput()),
                                             b_.getI64IntegerAttr(offset));
          if (std::shared_ptr<Pending> p = pending_.lookup(o.getInput()))
            pending_[r] = p;
          offset += numElements(shapeOf(r));
        }
        return success();
      })
      .Case([&](graph::ParamOp p) {
        buffers_[p.getResult()] = paramState(p);
        return success();
      })
      .Case([&](graph::ConstantOp c) {
        Value r = define(c.getResult());
        kernel(loc, "fill", {}, {r}, {f64("value", c.getValue().convertToDouble()), n(c)});
        return success();
      })
      .Case([&](graph::AddOp o) { return binary(o, "add"); })
      .Case([&](graph::SubOp o) { return binary(o, "sub"); })
      .Case([&](graph::MulOp o) { return binary(o, "mul"); })
      .Case([&](graph::DivOp o) { return binary(o, "div"); })
      .Case<graph::LtOp, graph::LeOp, graph::GtOp, graph::GeOp, graph::EqOp, graph::NeOp>(
          [&](Operation *o) { return binary(o, o->getName().stripDialect()); })
      .Case([&](graph::WhereOp o) {
        NamedShape out = shapeOf(o.getResult());
        Value r = define(o.getResult());
        kernel(loc, "where", {buffer(o.getCond()), buffer(o.getLhs()), buffer(o.getRhs())}, {r},
               {list("shape", sizesOf(out)),
                list("cond_strides", stridesIn(shapeOf(o.getCond()), out)),
                list("a_strides", stridesIn(shapeOf(o.getLhs()), out)),
                list("b_strides", stridesIn(shapeOf(o.getRhs()), out))});
        return success();
      })
      .Case([&](graph::FusedElementwiseOp o) {
        // Inputs are read through strides over the results' dims, as `binary` reads its
        // operands; the results are dense.
        NamedShape out = shapeOf(o.getResult(0));
        SmallVector<Value> ins, outs;
        SmallVector<int64_t> strides;
        for (Value v : o.getInputs()) {
          ins.push_back(buffer(v));
          llvm::append_range(strides, stridesIn(shapeOf(v), out));
        }
        for (Value r : o.getResults())
          outs.push_back(define(r));
        kernel(loc, "fused_elementwise", ins, outs,
               {str("body", o.getBody()), list("outputs", o.getOutputs()),
                list("shape", sizesOf(out)), list("x_strides", strides)});
        return success();
      })
      .Case([&](graph::PositionsOp o) {
        Value r = define(o.getResult());
        kernel(loc, "positions", {}, {r}, {n(o.getResult())});
        return success();
      })
      .Case<graph::NegOp, graph::ExpOp, graph::LogOp, graph::SqrtOp, graph::RsqrtOp, graph::TanhOp,
            graph::GeluOp, graph::SiluOp, graph::ReluOp, graph::SigmoidOp, graph::SquareOp,
            graph::GeluErfOp>([&](Operation *o) { return unary(o); })
      .Case([&](graph::PowOp o) {
        Value r = define(o.getResult());
        kernel(loc, "unary", {buffer(o.getInput())}, {r},
               {str("op", "pow"), n(o.getResult()),
                f64("exponent", o.getExponent().convertToDouble())});
        return success();
      })
      .Case([&](graph::UnaryGradOp o) {
        Value r = define(o.getResult());
        SmallVector<NamedAttribute> params = {str("op", o.getFn()), n(o)};
        if (std::optional<APFloat> e = o.getExponent())
          params.push_back(f64("exponent", e->convertToDouble()));
        kernel(loc, "unary_grad",
               {buffer(o.getInput()), buffer(o.getOutput()), buffer(o.getGrad())}, {r}, params);
        return success();
      })
      .Case([&](graph::DropoutOp o) {
        // The kernel finds each element's place in the whole step batch (see plan-format.md).
        NamedShape shape = shapeOf(o.getResult());
        graph::Sharding s = graph::recordedSharding(o.getResult())
                                .value_or(graph::Sharding::replicated(shape.size()));
        Value r = define(o.getResult());
        kernel(loc, "dropout", {buffer(o.getInput())}, {r},
               {f64("rate", o.getRate().convertToDouble()), i64("mask", o.getMask().value_or(0)),
                list("shape", sizesOf(shape)), str("groups", llvm::join(s.axes, ",")),
                i64("batch_dim", findDim(shape, "batch")),
                i64("micro_batches", readTrainSettings(module_).accumulation)});
        return success();
      })
      .Case([&](graph::ContractOp o) { return lowerContract(o); })
      .Case([&](graph::SumOp o) { return reduce(o, false); })
      .Case([&](graph::MeanOp o) { return reduce(o, true); })
      .Case<graph::BroadcastOp, graph::PermuteOp>([&](Operation *o) { return copy(o); })
      .Case<graph::SplitOp, graph::MergeOp, graph::RenameOp>([&](Operation *o) { return view(o); })
      .Case([&](graph::SoftmaxOp o) {
        return lowerAlongDims(o, "softmax", shapeOf(o.getInput()), {o.getDim().str()},
                              o->getOperands(), {true}, o->getResults(), {true}, {});
      })
      .Case([&](graph::SoftmaxGradOp o) {
        return lowerAlongDims(o, "softmax_grad", shapeOf(o.getOutput()), {o.getDim().str()},
                              {o.getOutput(), o.getGrad()}, {true, true}, o->getResults(), {true},
                              {});
      })
      .Case([&](graph::LayerNormOp o) {
        return lowerAlongDims(o, "layernorm", shapeOf(o.getInput()), dimNames(o.getScale()),
                              o->getOperands(), {true, false, false}, o->getResults(), {true},
                              {f64("eps", o.getEps().convertToDouble())});
      })
      .Case([&](graph::LayerNormGradOp o) {
        return lowerAlongDims(o, "layernorm_grad", shapeOf(o.getInput()), dimNames(o.getScale()),
                              o->getOperands(), {true, false, true}, o->getResults(),
                              {true, false, false}, {f64("eps", o.getEps().convertToDouble())});
      })
      .Case([&](graph::RMSNormOp o) {
        return lowerAlongDims(o, "rmsnorm", shapeOf(o.getInput()), dimNames(o.getScale()),
                              o->getOperands(), {true, false}, o->getResults(), {true},
                              {f64("eps", o.getEps().convertToDouble())});
      })
      .Case([&](graph::RMSNormGradOp o) {
        return lowerAlongDims(o, "rmsnorm_grad", shapeOf(o.getInput()), dimNames(o.getScale()),
                              o->getOperands(), {true, false, true}, o->getResults(), {true, false},
                              {f64("eps", o.getEps().convertToDouble())});
      })
      .Case([&](graph::EmbeddingOp o) {
        NamedShape t = shapeOf(o.getTable());
        Value r = define(o.getResult());
        kernel(loc, "embedding", {buffer(o.getTable()), buffer(o.getIds())}, {r},
               rowGroup(o.getRowAxis(), {i64("n", numElements(shapeOf(o.getIds()))),
                                         i64("rows", t[0].size), i64("cols", t[1].size)}));
        return success();
      })
      .Case([&](graph::EmbeddingGradOp o) {
        NamedShape t = shapeOf(o.getResult());
        Value r = define(o.getResult());
        kernel(loc, "embedding_grad", {buffer(o.getGrad()), buffer(o.getIds())}, {r},
               rowGroup(o.getRowAxis(), {i64("n", numElements(shapeOf(o.getIds()))),
                                         i64("rows", t[0].size), i64("cols", t[1].size)}));
        return success();
      })
      .Case<graph::CrossEntropyOp, graph::CrossEntropyGradOp>([&](Operation *o) -> LogicalResult {
        // The kernel reads targets in the order of the logits' other dims.
        NamedShape ls = shapeOf(o->getOperand(0)), ts = shapeOf(o->getOperand(1));
        std::string dim = o->getAttrOfType<StringAttr>("dim").str();
        NamedShape others;
        for (const NamedDim &d : ls)
          if (d.name != dim)
            others.push_back(d);
        if (!(others == ts))
          return o->emitOpError() << "targets " << formatShape(ts)
                                  << " must list the logits' other dims in their order "
                                  << formatShape(others) << " for the CPU lowering";
        bool grad = isa<graph::CrossEntropyGradOp>(o);
        SmallVector<bool> rowIns = {true, false};
        if (grad)
          rowIns.push_back(false);
        SmallVector<NamedAttribute> params;
        if (auto scale = o->getAttrOfType<FloatAttr>("scale"))
          params.push_back(f64("scale", scale.getValueAsDouble()));
        return lowerAlongDims(o, grad ? "cross_entropy_grad" : "cross_entropy", ls, {dim},
                              o->getOperands(), rowIns, o->getResults(), {grad}, params);
      })
      .Case([&](graph::AttentionOp o) {
        if (isRingAttention(o))
          return lowerRingAttention(o);
        Value r = define(o.getResult());
        kernel(
            loc, "attention", {buffer(o.getQuery()), buffer(o.getKey()), buffer(o.getValue())}, {r},
            attentionParams(o.getQuery(), o.getKey(), o.getCausal(), o.getScale().convertToDouble(),
                            o.getWindow(), o.getHeadsOver(), o.getSeqOver()));
        return success();
      })
      .Case([&](graph::AttentionGradOp o) {
        if (isRingAttention(o))
          return lowerRingAttentionGrad(o);
        Value dq = define(o.getQueryGrad()), dk = define(o.getKeyGrad()),
              dv = define(o.getValueGrad());
        kernel(
            loc, "attention_grad",
            {buffer(o.getQuery()), buffer(o.getKey()), buffer(o.getValue()), buffer(o.getGrad())},
            {dq, dk, dv},
            attentionParams(o.getQuery(), o.getKey(), o.getCausal(), o.getScale().convertToDouble(),
                            o.getWindow(), o.getHeadsOver(), o.getSeqOver()));
        return success();
      })
      .Case([&](graph::RopeOp o) {
        NamedShape s = shapeOf(o.getInput());
        size_t r = s.size();
        Value y = define(o.getResult());
        SmallVector<NamedAttribute> params = {
            i64("batch", numElements(s) / (s[r - 3].size * s[r - 2].size * s[r - 1].size)),
            i64("seq", s[r - 3].size),
            i64("heads", s[r - 2].size),
            i64("head", s[r - 1].size),
            f64("theta", o.getTheta().convertToDouble()),
            i64("inverse", o.getInverse())};
        if (std::optional<StringRef> group = o.getSeqOver())
          params.push_back(str("seq_group", *group));
        kernel(loc, "rope", {buffer(o.getInput())}, {y}, params);
        return success();
      })
      .Case([&](graph::AccumulateGradOp o) {
        Value acc = derivedState("grad", o.getName(), o.getGrad().getType(), loc);
        kernel(loc, "accumulate", {buffer(o.getGrad())}, {acc}, {n(o.getGrad())});
        return success();
      })
      .Case([&](graph::GradOp o) {
        buffers_[o.getResult()] = derivedState("grad", o.getName(), o.getType(), loc);
        return success();
      })
      .Case([&](graph::ZeroGradOp o) -> LogicalResult {
        auto it = stateIndex_.find(("grad." + o.getName()).str());
        if (it == stateIndex_.end())
          return o.emitOpError("clears a gradient that nothing accumulates");
        Type t = states_[it->second].tensor;
        Value acc = derivedState("grad", o.getName(), t, loc);
        kernel(loc, "fill", {}, {acc},
               {f64("value", 0.0), i64("n", numElements(*graph::getNamedShape(t)))});
        return success();
      })
      .Case([&](graph::GlobalNormOp o) {
        SmallVector<Value> ins;
        for (Value v : o.getInputs())
          ins.push_back(buffer(v));
        Value r = define(o.getResult());
        kernel(loc, "global_norm", ins, {r}, {});
        return success();
      })
      .Case([&](graph::GuardFiniteOp o) {
        kernel(loc, "guard_finite", {buffer(o.getValue())}, {}, {});
        return success();
      })
      .Case([&](graph::ClipCoefficientOp o) {
        Value r = define(o.getResult());
        kernel(loc, "clip_coefficient", {buffer(o.getNorm())}, {r},
               {f64("max", o.getMax().convertToDouble())});
        return success();
      })
      .Case([&](graph::LearningRateOp o) {
        Value r = define(o.getResult());
        kernel(loc, "learning_rate", {}, {r},
               {str("schedule", o.getSchedule()), f64("lr", o.getLr().convertToDouble()),
                f64("min_lr", o.getMinLr().convertToDouble()),
                i64("warmup", static_cast<int64_t>(o.getWarmup())),
                i64("steps", static_cast<int64_t>(o.getSteps()))});
        return success();
      })
      .Case([&](graph::SGDOp o) -> LogicalResult {
        Type t = o.getGrad().getType();
        if (!stateIndex_.count(o.getName().str()))
          return o.emitOpError() << "updates '" << o.getName()
                                 << "', which no lowered function declares as a parameter";
        Value p = o.getParam() ? buffer(o.getParam()) : state(o.getName(), t, loc);
        if (o.getUpdated())
          buffers_[o.getUpdated()] = p;
        Value momentum = derivedState("momentum", o.getName(), t, loc);
        kernel(loc, "sgd", {buffer(o.getGrad()), buffer(o.getLr()), buffer(o.getCoefficient())},
               {p, momentum},
               {n(o.getGrad()), f64("momentum", o.getMomentum().convertToDouble()),
                f64("weight_decay", o.getWeightDecay().convertToDouble())});
        return success();
      })
      .Case([&](graph::AdamWOp o) -> LogicalResult {
        Type t = o.getGrad().getType();
        auto it = stateIndex_.find(o.getName().str());
        if (it == stateIndex_.end())
          return o.emitOpError() << "updates '" << o.getName()
                                 << "', which no lowered function declares as a parameter";
        Value p = o.getParam() ? buffer(o.getParam()) : state(o.getName(), t, loc);
        if (o.getUpdated())
          buffers_[o.getUpdated()] = p;
        Value m = derivedState("adam_m", o.getName(), t, loc);
        Value v = derivedState("adam_v", o.getName(), t, loc);
        kernel(loc, "adamw", {buffer(o.getGrad()), buffer(o.getLr()), buffer(o.getCoefficient())},
               {p, m, v},
               {n(o.getGrad()), f64("beta1", o.getBeta1().convertToDouble()),
                f64("beta2", o.getBeta2().convertToDouble()),
                f64("eps", o.getEps().convertToDouble()),
                f64("weight_decay", o.getWeightDecay().convertToDouble())});
        return success();
      })
      .Default([&](Operation *o) { return o->emitOpError("has no lowering to the plan dialect"); });
}

struct LowerToPlan : tessel::impl::LowerToPlanBase<LowerToPlan> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    Lowering lowering(module);
    // Parameters are declared by the functions that read them, so forward_backward (which
    // reads all of them) goes first; optimizer_step needs their declarations.
    static const std::pair<const char *, const char *> kFunctions[] = {
        {"forward_backward", "forward_backward"},
        {"optimizer_step", "optimizer_step"},
        {"forward", "eval"},
        {"sample", "sample"}};
    SmallVector<func::FuncOp> lowered;
    for (auto [funcName, programName] : kFunctions)
      if (auto func = module.lookupSymbol<func::FuncOp>(funcName)) {
        if (failed(lowering.lowerFunction(func, programName)))
          return signalPassFailure();
        lowered.push_back(func);
      }
    // The pipeline stages' programs (named by `tessel.program`), the optimizer steps last.
    for (bool optimizer : {false, true})
      for (auto func : module.getOps<func::FuncOp>()) {
        auto program = func->getAttrOfType<StringAttr>("tessel.program");
        if (!program || (program.getValue() == "optimizer_step") != optimizer)
          continue;
        if (failed(lowering.lowerFunction(func, program.getValue())))
          return signalPassFailure();
        lowered.push_back(func);
      }
    if (lowered.empty()) {
      module.emitError("has no function to lower; expected @forward_backward, "
                       "@optimizer_step, @forward or @sample");
      return signalPassFailure();
    }
    lowering.declareState();
    for (func::FuncOp f : lowered)
      f.erase();
    // The grid's shape lives on in tessel.parallel, from which the plan's groups are made.
    for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      grid.erase();
  }
};

} // namespace
