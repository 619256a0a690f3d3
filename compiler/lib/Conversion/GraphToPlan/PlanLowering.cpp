//===- PlanLowering.cpp - What the graph-to-plan patterns share -----------===//

#include "PlanLowering.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::plan_lowering;

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

NamedShape plan_lowering::shapeOf(Value v) { return *graph::getNamedShape(v.getType()); }

int64_t plan_lowering::numElements(const NamedShape &s) {
  int64_t n = 1;
  for (const NamedDim &d : s)
    n *= d.size;
  return n;
}

SmallVector<int64_t> plan_lowering::sizesOf(const NamedShape &s) {
  SmallVector<int64_t> out;
  for (const NamedDim &d : s)
    out.push_back(d.size);
  return out;
}

Strides plan_lowering::denseStrides(const NamedShape &s) {
  Strides out(s.size());
  int64_t step = 1;
  for (int i = static_cast<int>(s.size()) - 1; i >= 0; --i) {
    out[i] = step;
    step *= s[i].size;
  }
  return out;
}

Strides plan_lowering::stridesIn(const NamedShape &operand, const NamedShape &view) {
  Strides dense = denseStrides(operand), out;
  for (const NamedDim &d : view) {
    int at = findDim(operand, d.name);
    out.push_back(at < 0 ? 0 : dense[at]);
  }
  return out;
}

NamedShape plan_lowering::without(const NamedShape &shape, ArrayRef<std::string> names) {
  NamedShape out;
  for (const NamedDim &d : shape)
    if (!llvm::is_contained(names, d.name))
      out.push_back(d);
  return out;
}

//===----------------------------------------------------------------------===//
// PlanLowering
//===----------------------------------------------------------------------===//

ArrayAttr PlanLowering::stateSplit(Builder &b, StringRef param, StringRef layout) {
  auto state = module_->getAttrOfType<DictionaryAttr>("tessel.state");
  auto entry = state ? state.getAs<DictionaryAttr>(param) : DictionaryAttr();
  auto s = entry ? entry.getAs<graph::ShardingAttr>(layout) : graph::ShardingAttr();
  if (!s)
    return {};
  SmallVector<Attribute> groups;
  for (const std::string &axis : graph::getSharding(s).axes)
    groups.push_back(b.getStringAttr(axis));
  return b.getArrayAttr(groups);
}

void PlanLowering::declare(StateDecl decl) {
  if (!stateIndex_.count(decl.name)) {
    stateIndex_[decl.name] = states_.size();
    states_.push_back(std::move(decl));
  }
}

const StateDecl *PlanLowering::findState(StringRef name) const {
  auto it = stateIndex_.find(name.str());
  return it == stateIndex_.end() ? nullptr : &states_[it->second];
}

Value PlanLowering::paramState(PlanEmitter &emit, graph::ParamOp op) {
  graph::InitAttr init = op.getInit();
  declare(StateDecl{op.getName().str(), "param", "", init.getKind().str(),
                    init.getA().convertToDouble(), init.getB().convertToDouble(), op.getType(),
                    stateSplit(emit.builder(), op.getName(), "param"), init.getSource().str(),
                    std::vector<int64_t>(init.getSlice().begin(), init.getSlice().end())});
  return emit.state(op.getName(), op.getType());
}

Value PlanLowering::cacheState(PlanEmitter &emit, graph::KvCacheOp op) {
  declare(StateDecl{op.getName().str(), "kv_cache", "", "zeros", 0, 0, op.getType(),
                    stateSplit(emit.builder(), op.getName(), "cache")});
  return emit.state(op.getName(), op.getType());
}

Value PlanLowering::totalsState(PlanEmitter &emit, graph::RunningTotalsOp op) {
  declare(StateDecl{op.getName().str(), "decode_state", "", "zeros", 0, 0, op.getType(),
                    stateSplit(emit.builder(), op.getName(), "cache")});
  return emit.state(op.getName(), op.getType());
}

Value PlanLowering::derivedState(PlanEmitter &emit, StringRef role, StringRef param, Type tensor) {
  std::string name = (role + "." + param).str();
  declare(StateDecl{name, role.str(), param.str(), "zeros", 0, 0, tensor,
                    stateSplit(emit.builder(), param, role == "grad" ? "grad" : "optimizer")});
  return emit.state(name, tensor);
}

void PlanLowering::declareState() {
  OpBuilder b(module_.getContext());
  b.setInsertionPointToStart(module_.getBody());
  // The pipeline stages holding a parameter and its state, from the pipeline split's
  // `tessel.stages`; null without a pipeline.
  auto stages = module_->getAttrOfType<DictionaryAttr>("tessel.stages");
  for (const StateDecl &d : states_) {
    SmallVector<Attribute> dims;
    NamedShape shape = *graph::getNamedShape(d.tensor);
    for (const NamedDim &nd : shape)
      dims.push_back(b.getStringAttr(nd.name));
    StringRef owner = d.of.empty() ? StringRef(d.name) : StringRef(d.of);
    plan::TensorOp::create(b, module_.getLoc(), b.getStringAttr(d.name), b.getStringAttr(d.role),
                           b.getStringAttr(d.of), b.getStringAttr(d.init), b.getF64FloatAttr(d.a),
                           b.getF64FloatAttr(d.b), b.getArrayAttr(dims),
                           TypeAttr::get(PlanEmitter::memrefType(d.tensor)), d.split,
                           stages ? stages.getAs<DenseI64ArrayAttr>(owner) : DenseI64ArrayAttr(),
                           d.source.empty() ? StringAttr() : b.getStringAttr(d.source),
                           d.slice.empty() ? DenseI64ArrayAttr()
                                           : b.getDenseI64ArrayAttr(d.slice));
  }
}

void PlanLowering::declareMesh() {
  OpBuilder b(module_.getContext());
  b.setInsertionPointToStart(module_.getBody());
  const Location loc = module_.getLoc();
  auto axes = mesh_.axes();
  SmallVector<StringRef> names;
  SmallVector<int64_t> sizes, all;
  for (size_t i = 0; i < axes.size(); ++i) {
    names.push_back(axes[i].first);
    sizes.push_back(axes[i].second);
    all.push_back(static_cast<int64_t>(i));
  }
  plan::MeshOp::create(b, loc, b.getStrArrayAttr(names), b.getDenseI64ArrayAttr(sizes));
  plan::GroupOp::create(b, loc, b.getStringAttr("world"), b.getDenseI64ArrayAttr(all));
  // Every set of axes, in the order of the bits of its mask.
  for (unsigned mask = 1; mask < (1u << axes.size()); ++mask) {
    SmallVector<int16_t> members;
    SmallVector<int64_t> indices;
    for (size_t i = 0; i < axes.size(); ++i)
      if (mask & (1u << i)) {
        members.push_back(static_cast<int16_t>(i));
        indices.push_back(static_cast<int64_t>(i));
      }
    plan::GroupOp::create(b, loc, b.getStringAttr(mesh_.groupName(members)),
                          b.getDenseI64ArrayAttr(indices));
  }
}

void PlanLowering::recordAsync(Value result, int64_t event, ArrayRef<Value> buffers) {
  pending_[result] = std::make_shared<Pending>(Pending{event, SmallVector<Value>(buffers)});
}

void PlanLowering::shareWait(Value alias, Value result) {
  if (std::shared_ptr<Pending> p = pending_.lookup(result))
    pending_[alias] = p;
}

void PlanLowering::waitFor(Operation *op, PlanEmitter &emit) {
  // Unpacking only names parts of the buffer; the parts' readers wait.
  if (isa<graph::UnpackOp>(op))
    return;
  for (Value v : op->getOperands()) {
    auto it = pending_.find(v);
    if (it == pending_.end())
      continue;
    std::shared_ptr<Pending> p = it->second;
    // The wait lists the collective's buffers so that the memory plan keeps them alive
    // while the collective may still read or write them.
    emit.kernel("wait", p->buffers, {}, {emit.i64("event", p->event)});
    SmallVector<Value> done;
    for (auto &e : pending_)
      if (e.second == p)
        done.push_back(e.first);
    for (Value d : done)
      pending_.erase(d);
  }
}

//===----------------------------------------------------------------------===//
// PlanEmitter
//===----------------------------------------------------------------------===//

PlanEmitter::PlanEmitter(ConversionPatternRewriter &rewriter, Operation *op)
    : rewriter_(rewriter), op_(op), results_(op->getNumResults()),
      recomputed_(op->hasAttr("graph.recomputed")) {}

MemRefType PlanEmitter::memrefType(Type tensor) {
  auto t = cast<RankedTensorType>(tensor);
  return MemRefType::get(t.getShape(), t.getElementType());
}

Value PlanEmitter::alloc(Type tensor) {
  return plan::AllocOp::create(rewriter_, loc(), memrefType(tensor), IntegerAttr());
}

Value PlanEmitter::alloc(ArrayRef<int64_t> sizes, Type element) {
  return plan::AllocOp::create(rewriter_, loc(), MemRefType::get(sizes, element), IntegerAttr());
}

Value PlanEmitter::define(Value r) {
  Value m = alloc(r.getType());
  bind(r, m);
  return m;
}

void PlanEmitter::bind(Value r, Value buffer) {
  results_[cast<OpResult>(r).getResultNumber()] = buffer;
}

Value PlanEmitter::state(StringRef name, Type tensor) {
  return plan::StateOp::create(rewriter_, loc(), memrefType(tensor), rewriter_.getStringAttr(name));
}

void PlanEmitter::kernel(StringRef name, ValueRange ins, ValueRange outs,
                         ArrayRef<NamedAttribute> params) {
  auto k = plan::KernelOp::create(rewriter_, loc(), rewriter_.getStringAttr(name), ins, outs,
                                  rewriter_.getDictionaryAttr(params));
  if (recomputed_)
    k->setAttr("plan.recomputed", rewriter_.getUnitAttr());
}

NamedAttribute PlanEmitter::i64(StringRef k, int64_t v) {
  return rewriter_.getNamedAttr(k, rewriter_.getI64IntegerAttr(v));
}
NamedAttribute PlanEmitter::f64(StringRef k, double v) {
  return rewriter_.getNamedAttr(k, rewriter_.getF64FloatAttr(v));
}
NamedAttribute PlanEmitter::str(StringRef k, StringRef v) {
  return rewriter_.getNamedAttr(k, rewriter_.getStringAttr(v));
}
NamedAttribute PlanEmitter::list(StringRef k, ArrayRef<int64_t> v) {
  return rewriter_.getNamedAttr(k, rewriter_.getDenseI64ArrayAttr(v));
}

Value PlanEmitter::relayout(Value v, const NamedShape &from, const NamedShape &to, Type element) {
  Value out = alloc(sizesOf(to), element);
  kernel("copy", {v}, {out}, {list("shape", sizesOf(to)), list("x_strides", stridesIn(from, to))});
  return out;
}

LogicalResult PlanEmitter::alongDims(StringRef kernelName, const NamedShape &x,
                                     ArrayRef<std::string> inner, ValueRange ins,
                                     ArrayRef<bool> rowIns, ValueRange results,
                                     ArrayRef<bool> rowOuts, SmallVector<NamedAttribute> params) {
  NamedShape moved = without(x, inner);
  int64_t cols = 1;
  for (const std::string &name : inner) {
    int at = findDim(x, name);
    if (at < 0)
      return op_->emitOpError() << "works along '" << name << "', which is not a dim of "
                                << formatShape(x);
    moved.push_back(x[at]);
    cols *= x[at].size;
  }
  bool relaid = !(moved == x);
  Type element = cast<RankedTensorType>(results[0].getType()).getElementType();
  SmallVector<Value> inBuffers, outBuffers;
  for (auto [v, rows] : llvm::zip(ins, rowIns))
    inBuffers.push_back(rows && relaid ? relayout(v, x, moved, element) : v);
  for (auto [v, rows] : llvm::zip(results, rowOuts))
    outBuffers.push_back(rows && relaid ? alloc(sizesOf(moved), element) : define(v));
  params.push_back(i64("rows", numElements(x) / cols));
  params.push_back(i64("cols", cols));
  kernel(kernelName, inBuffers, outBuffers, params);
  for (auto [v, rows, out] : llvm::zip(results, rowOuts, outBuffers))
    if (rows && relaid)
      kernel("copy", {out}, {define(v)},
             {list("shape", sizesOf(x)), list("x_strides", stridesIn(moved, x))});
  return success();
}

SmallVector<Value> PlanEmitter::takeResults() {
  for (auto [r, buffer] : llvm::zip(op_->getResults(), results_))
    if (!buffer)
      buffer = alloc(r.getType());
  return std::move(results_);
}
