//===- GraphGen.cpp - From the analysed program to graph IR ---------------===//
//
// A one-to-one translation: the front end has already typed every op, so this file only maps
// names to ODS builders and spec positions to MLIR locations.
//
//===----------------------------------------------------------------------===//

#include "tessel/IRGen/GraphGen.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;
using namespace tessel;

namespace {

class GraphEmitter {
public:
  GraphEmitter(MLIRContext &ctx, const Program &program, const SourceManager &sources)
      : ctx_(ctx), program_(program), sources_(sources), b_(&ctx) {}

  OwningOpRef<ModuleOp> emit() {
    OwningOpRef<ModuleOp> module = ModuleOp::create(location(program_.modelLoc));
    module->setName(program_.modelName);
    setModuleAttributes(*module);

    const Graph &g = program_.forward;
    SmallVector<Type> inputTypes;
    SmallVector<Location> inputLocs;
    for (const GraphInput &in : g.inputs) {
      inputTypes.push_back(tensorType(in.type));
      inputLocs.push_back(location(in.loc));
    }
    Type resultType = tensorType(g.typeOf(g.result));
    b_.setInsertionPointToEnd(module->getBody());
    auto func = func::FuncOp::create(b_, location(program_.modelLoc), "forward",
                                     b_.getFunctionType(inputTypes, {resultType}));
    Block *entry = func.addEntryBlock();
    for (auto [i, in] : llvm::enumerate(g.inputs)) {
      entry->getArgument(i).setLoc(inputLocs[i]);
      func.setArgAttr(i, "graph.name", b_.getStringAttr(in.name));
    }
    b_.setInsertionPointToStart(entry);
    for (size_t i = 0; i < g.inputs.size(); ++i)
      values_.push_back(entry->getArgument(i));
    for (const tessel::Op &op : g.ops)
      values_.push_back(emitOp(op));
    func::ReturnOp::create(b_, func.getLoc(), ValueRange{values_[g.result]});
    return module;
  }

private:
  Location fileLoc(SourceLoc loc) {
    if (!loc.isValid())
      return UnknownLoc::get(&ctx_);
    return FileLineColLoc::get(&ctx_, sources_.file(loc.file).path(), loc.line, loc.col);
  }

  Location location(SourceLoc loc, const std::vector<SourceLoc> &callers = {}) {
    Location result = fileLoc(loc);
    if (callers.empty())
      return result;
    Location caller = fileLoc(callers.back());
    for (size_t i = callers.size() - 1; i-- > 0;)
      caller = CallSiteLoc::get(fileLoc(callers[i]), caller);
    return CallSiteLoc::get(result, caller);
  }

  Type elementType(DType type) {
    switch (type) {
    case DType::F32:
      return b_.getF32Type();
    case DType::BF16:
      return b_.getBF16Type();
    case DType::F16:
      return b_.getF16Type();
    case DType::I32:
      return b_.getI32Type();
    }
    return b_.getF32Type();
  }

  RankedTensorType tensorType(const tessel::TensorType &t) {
    return graph::getNamedTensorType(&ctx_, t.dims, elementType(t.dtype));
  }

  template <typename T> const T &attr(const tessel::Op &op, StringRef name) {
    for (const auto &[key, value] : op.attrs)
      if (key == name)
        return std::get<T>(value);
    llvm::report_fatal_error("graph op '" + Twine(op.name) + "' lacks attribute '" + name + "'");
  }

  ArrayAttr strings(const std::vector<std::string> &names) {
    SmallVector<Attribute> out;
    for (const std::string &n : names)
      out.push_back(b_.getStringAttr(n));
    return b_.getArrayAttr(out);
  }

  Value emitOp(const tessel::Op &op) {
    Location loc = location(op.loc, op.callers);
    Type type = tensorType(op.type);
    SmallVector<Value> in;
    for (int v : op.operands)
      in.push_back(values_[v]);
    Operation *created = build(op, loc, type, in);
    if (op.layer >= 0)
      created->setAttr("graph.layer", b_.getI64IntegerAttr(op.layer));
    return created->getResult(0);
  }

  Operation *build(const tessel::Op &op, Location loc, Type type, SmallVector<Value> &in) {
    using namespace graph;
    const std::string &n = op.name;
    auto f64 = [&](StringRef name) { return b_.getF64FloatAttr(attr<double>(op, name)); };
    if (n == "param") {
      const InitSpec &init = attr<InitSpec>(op, "init");
      auto initAttr = InitAttr::get(&ctx_, initKindName(init.kind), APFloat(init.a),
                                    APFloat(init.b), init.source, init.slice);
      return ParamOp::create(b_, loc, type, attr<std::string>(op, "name"), initAttr);
    }
    if (n == "constant")
      return ConstantOp::create(b_, loc, type, f64("value"));
    if (n == "add")
      return AddOp::create(b_, loc, type, in[0], in[1]);
    if (n == "sub")
      return SubOp::create(b_, loc, type, in[0], in[1]);
    if (n == "mul")
      return MulOp::create(b_, loc, type, in[0], in[1]);
    if (n == "div")
      return DivOp::create(b_, loc, type, in[0], in[1]);
    if (n == "lt")
      return LtOp::create(b_, loc, type, in[0], in[1]);
    if (n == "le")
      return LeOp::create(b_, loc, type, in[0], in[1]);
    if (n == "gt")
      return GtOp::create(b_, loc, type, in[0], in[1]);
    if (n == "ge")
      return GeOp::create(b_, loc, type, in[0], in[1]);
    if (n == "eq")
      return EqOp::create(b_, loc, type, in[0], in[1]);
    if (n == "ne")
      return NeOp::create(b_, loc, type, in[0], in[1]);
    if (n == "where")
      return WhereOp::create(b_, loc, type, in[0], in[1], in[2]);
    if (n == "positions")
      return PositionsOp::create(b_, loc, type);
    if (n == "rename")
      return RenameOp::create(b_, loc, type, in[0]);
    if (n == "square")
      return SquareOp::create(b_, loc, type, in[0]);
    if (n == "gelu_erf")
      return GeluErfOp::create(b_, loc, type, in[0]);
    if (n == "pow")
      return PowOp::create(b_, loc, type, in[0], f64("exponent"));
    if (n == "neg")
      return NegOp::create(b_, loc, type, in[0]);
    if (n == "exp")
      return ExpOp::create(b_, loc, type, in[0]);
    if (n == "log")
      return LogOp::create(b_, loc, type, in[0]);
    if (n == "sqrt")
      return SqrtOp::create(b_, loc, type, in[0]);
    if (n == "rsqrt")
      return RsqrtOp::create(b_, loc, type, in[0]);
    if (n == "tanh")
      return TanhOp::create(b_, loc, type, in[0]);
    if (n == "gelu")
      return GeluOp::create(b_, loc, type, in[0]);
    if (n == "silu")
      return SiluOp::create(b_, loc, type, in[0]);
    if (n == "relu")
      return ReluOp::create(b_, loc, type, in[0]);
    if (n == "sigmoid")
      return SigmoidOp::create(b_, loc, type, in[0]);
    if (n == "dropout")
      return DropoutOp::create(b_, loc, type, in[0], f64("rate"), IntegerAttr());
    if (n == "contract")
      return ContractOp::create(b_, loc, type, in[0], in[1],
                                strings(attr<std::vector<std::string>>(op, "sum")));
    if (n == "sum")
      return SumOp::create(b_, loc, type, in[0],
                           strings(attr<std::vector<std::string>>(op, "dims")));
    if (n == "mean")
      return MeanOp::create(b_, loc, type, in[0],
                            strings(attr<std::vector<std::string>>(op, "dims")));
    if (n == "softmax")
      return SoftmaxOp::create(b_, loc, type, in[0], attr<std::string>(op, "dim"));
    if (n == "top_k")
      return TopKOp::create(b_, loc, type, in[0], attr<std::string>(op, "dim"),
                            attr<int64_t>(op, "k"));
    if (n == "layernorm")
      return LayerNormOp::create(b_, loc, type, in[0], in[1], in[2], f64("eps"));
    if (n == "rmsnorm")
      return RMSNormOp::create(b_, loc, type, in[0], in[1], f64("eps"));
    if (n == "embedding")
      return EmbeddingOp::create(b_, loc, type, in[0], in[1], /*row_axis=*/StringAttr());
    if (n == "cross_entropy")
      return CrossEntropyOp::create(b_, loc, type, in[0], in[1],
                                    b_.getStringAttr(attr<std::string>(op, "dim")),
                                    /*scale=*/FloatAttr());
    if (n == "attention")
      return AttentionOp::create(
          b_, loc, type, /*lse=*/Type(), in[0], in[1], in[2],
          attr<bool>(op, "causal") ? b_.getUnitAttr() : UnitAttr(), f64("scale"),
          attr<int64_t>(op, "window") > 0 ? b_.getI64IntegerAttr(attr<int64_t>(op, "window"))
                                          : IntegerAttr(),
          /*heads_over=*/StringAttr(), /*seq_over=*/StringAttr());
    if (n == "rope") {
      DenseF64ArrayAttr scaling;
      if (attr<double>(op, "scaling_factor") > 0)
        scaling = b_.getDenseF64ArrayAttr(
            {attr<double>(op, "scaling_factor"), attr<double>(op, "low_freq_factor"),
             attr<double>(op, "high_freq_factor"), attr<double>(op, "original_context")});
      return RopeOp::create(b_, loc, type, in[0], f64("theta"), /*inverse=*/UnitAttr(),
                            /*seq_over=*/StringAttr(), scaling);
    }
    if (n == "split")
      return SplitOp::create(b_, loc, type, in[0], attr<std::string>(op, "dim"));
    if (n == "merge")
      return MergeOp::create(b_, loc, type, in[0],
                             strings(attr<std::vector<std::string>>(op, "dims")));
    if (n == "permute")
      return PermuteOp::create(b_, loc, type, in[0]);
    llvm::report_fatal_error("no graph op for '" + Twine(n) + "'");
  }

  void setModuleAttributes(ModuleOp module) {
    SmallVector<NamedAttribute> dims;
    for (const NamedDim &d : program_.dims)
      dims.push_back(b_.getNamedAttr(d.name, b_.getI64IntegerAttr(d.size)));
    module->setAttr("tessel.dims", b_.getDictionaryAttr(dims));
    module->setAttr("tessel.layers", b_.getI64IntegerAttr(program_.layers));

    const ParallelConfig &p = program_.parallel;
    SmallVector<NamedAttribute> mesh, shard;
    for (const MeshAxis &a : p.mesh)
      mesh.push_back(b_.getNamedAttr(a.name, b_.getI64IntegerAttr(a.size)));
    for (const DimSharding &s : p.shard)
      shard.push_back(b_.getNamedAttr(s.dim, strings(s.axes)));
    SmallVector<NamedAttribute> par = {
        b_.getNamedAttr("mesh", b_.getDictionaryAttr(mesh)),
        b_.getNamedAttr("shard", b_.getDictionaryAttr(shard)),
        b_.getNamedAttr("sequence_parallel", b_.getBoolAttr(p.sequenceParallel.value)),
        b_.getNamedAttr("zero", b_.getI64IntegerAttr(p.zero.value)),
        b_.getNamedAttr("schedule", b_.getStringAttr(p.schedule.value)),
        b_.getNamedAttr("microbatches",
                        b_.getI64IntegerAttr(p.microbatches.value ? p.microbatches.value
                                                                  : program_.train.accumulation)),
        b_.getNamedAttr("virtual_stages", b_.getI64IntegerAttr(p.virtualStages.value)),
        b_.getNamedAttr("recompute", b_.getStringAttr(p.recompute.value)),
        b_.getNamedAttr("context", b_.getStringAttr(p.context.value)),
        b_.getNamedAttr("bucket_bytes", b_.getI64IntegerAttr(p.bucketBytes.value)),
        b_.getNamedAttr("overlap", b_.getBoolAttr(p.overlap.value))};
    if (!p.stageMap.value.empty()) {
      SmallVector<Attribute> stages;
      for (const auto &stage : p.stageMap.value)
        stages.push_back(b_.getI64ArrayAttr(stage));
      par.push_back(b_.getNamedAttr("stage_map", b_.getArrayAttr(stages)));
    }
    module->setAttr("tessel.parallel", b_.getDictionaryAttr(par));

    const TrainConfig &t = program_.train;
    const OptimizerConfig &o = t.optimizer;
    SmallVector<NamedAttribute> opt = {
        b_.getNamedAttr("kind", b_.getStringAttr(o.kind)),
        b_.getNamedAttr("lr", b_.getF64FloatAttr(o.lr)),
        b_.getNamedAttr("beta1", b_.getF64FloatAttr(o.beta1)),
        b_.getNamedAttr("beta2", b_.getF64FloatAttr(o.beta2)),
        b_.getNamedAttr("eps", b_.getF64FloatAttr(o.eps)),
        b_.getNamedAttr("weight_decay", b_.getF64FloatAttr(o.weightDecay)),
        b_.getNamedAttr("decay", b_.getStringAttr(llvm::join(o.decay, ","))),
        b_.getNamedAttr("momentum", b_.getF64FloatAttr(o.momentum))};
    SmallVector<NamedAttribute> sched = {
        b_.getNamedAttr("kind", b_.getStringAttr(t.schedule.kind)),
        b_.getNamedAttr("warmup", b_.getI64IntegerAttr(t.schedule.warmup)),
        b_.getNamedAttr("min_lr", b_.getF64FloatAttr(t.schedule.minLr))};
    SmallVector<NamedAttribute> train = {
        b_.getNamedAttr("batch", b_.getI64IntegerAttr(t.batch.value)),
        b_.getNamedAttr("micro_batch", b_.getI64IntegerAttr(t.microBatch.value)),
        b_.getNamedAttr("accumulation", b_.getI64IntegerAttr(t.accumulation)),
        b_.getNamedAttr("steps", b_.getI64IntegerAttr(t.steps.value)),
        b_.getNamedAttr("optimizer", b_.getDictionaryAttr(opt)),
        b_.getNamedAttr("lr_schedule", b_.getDictionaryAttr(sched)),
        b_.getNamedAttr("clip", b_.getF64FloatAttr(t.clip.value)),
        b_.getNamedAttr("precision", b_.getStringAttr(t.precision.value)),
        b_.getNamedAttr("data", b_.getStringAttr(t.data.value)),
        b_.getNamedAttr("tokenizer", b_.getStringAttr(t.tokenizer.value)),
        b_.getNamedAttr("seed", b_.getI64IntegerAttr(t.seed.value)),
        b_.getNamedAttr("eval_every", b_.getI64IntegerAttr(t.evalEvery.value)),
        b_.getNamedAttr("eval_batches", b_.getI64IntegerAttr(t.evalBatches.value)),
        b_.getNamedAttr("eval_fraction", b_.getF64FloatAttr(t.evalData.value.empty()
                                                                   ? t.evalFraction.value
                                                                   : 0.0)),
        b_.getNamedAttr("eval_data", b_.getStringAttr(t.evalData.value)),
        b_.getNamedAttr("checkpoint_every", b_.getI64IntegerAttr(t.checkpointEvery.value)),
        b_.getNamedAttr("checkpoint_dir", b_.getStringAttr(t.checkpointDir.value)),
        b_.getNamedAttr("log_every", b_.getI64IntegerAttr(t.logEvery.value)),
        b_.getNamedAttr("init_from", b_.getStringAttr(t.initFrom.value))};
    module->setAttr("tessel.train", b_.getDictionaryAttr(train));
  }

  MLIRContext &ctx_;
  const Program &program_;
  const SourceManager &sources_;
  OpBuilder b_;
  std::vector<Value> values_;
};

} // namespace

void tessel::loadGraphDialects(MLIRContext &context) {
  context.loadDialect<graph::GraphDialect, func::FuncDialect>();
}

OwningOpRef<ModuleOp> tessel::emitGraphModule(MLIRContext &context, const Program &program,
                                              const SourceManager &sources) {
  loadGraphDialects(context);
  return GraphEmitter(context, program, sources).emit();
}
