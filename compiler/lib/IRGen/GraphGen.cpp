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
    if (failed(setModuleAttributes(*module)))
      return nullptr;

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
    // The elementwise functions, by the catalogue's words (`-x` is neg); pow carries its
    // exponent.
    if (std::optional<UnaryFn> fn = catalogue::enumOf<UnaryFn>(n)) {
      FloatAttr exponent = *fn == UnaryFn::Pow ? f64("exponent") : FloatAttr();
      return UnaryOp::create(b_, loc, type, UnaryFnAttr::get(&ctx_, *fn), in[0], exponent);
    }
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

  /// The module's settings. The front end has checked the spec's sections; the settings'
  /// own checks (SettingsAttrs.td) run again here, so that a value one accepts and the other
  /// refuses is reported rather than carried on.
  LogicalResult setModuleAttributes(ModuleOp module) {
    SmallVector<NamedAttribute> dims;
    for (const NamedDim &d : program_.dims)
      dims.push_back(b_.getNamedAttr(d.name, b_.getI64IntegerAttr(d.size)));
    module->setAttr(settings::kDimsName, b_.getDictionaryAttr(dims));
    module->setAttr(settings::kLayersName, b_.getI64IntegerAttr(program_.layers));

    auto emitError = [&] { return mlir::emitError(module.getLoc()) << "the spec's settings: "; };
    settings::ParallelAttr parallel = parallelSettings(emitError);
    settings::TrainAttr train = parallel ? trainSettings(emitError) : settings::TrainAttr();
    if (!train)
      return failure();
    module->setAttr(settings::kParallelName, parallel);
    module->setAttr(settings::kTrainName, train);
    return success();
  }

  /// The spec's `parallel` section; the front end has checked every word of it.
  settings::ParallelAttr parallelSettings(function_ref<InFlightDiagnostic()> emitError) {
    const ParallelConfig &p = program_.parallel;
    SmallVector<NamedAttribute> mesh, shard;
    for (const MeshAxis &a : p.mesh)
      mesh.push_back(b_.getNamedAttr(a.name, b_.getI64IntegerAttr(a.size)));
    for (const DimSharding &s : p.shard)
      shard.push_back(b_.getNamedAttr(s.dim, strings(s.axes)));
    SmallVector<Attribute> stages;
    for (const auto &stage : p.stageMap.value)
      stages.push_back(b_.getI64ArrayAttr(stage));
    pipeline::ScheduleKind schedule = pipeline::ScheduleKind::OneFOneB;
    pipeline::parseScheduleKind(p.schedule.value, schedule);
    return settings::ParallelAttr::getChecked(
        emitError, &ctx_, b_.getDictionaryAttr(mesh), b_.getDictionaryAttr(shard),
        p.sequenceParallel.value, p.zero.value, schedule,
        p.microbatches.value ? p.microbatches.value : program_.train.accumulation,
        p.virtualStages.value, b_.getArrayAttr(stages),
        *settings::symbolizeRecomputeMode(p.recompute.value),
        *settings::symbolizeContextMode(p.context.value), p.bucketBytes.value, p.overlap.value);
  }

  /// The spec's `train` section.
  settings::TrainAttr trainSettings(function_ref<InFlightDiagnostic()> emitError) {
    const TrainConfig &t = program_.train;
    const OptimizerConfig &o = t.optimizer;
    std::string decay = llvm::join(o.decay, ",");
    auto opt = settings::OptimizerAttr::getChecked(
        emitError, &ctx_, *settings::symbolizeOptimizerKind(o.kind), APFloat(o.lr),
        APFloat(o.beta1), APFloat(o.beta2), APFloat(o.eps), APFloat(o.weightDecay),
        StringRef(decay), APFloat(o.momentum));
    auto lr = settings::LearningRateAttr::getChecked(
        emitError, &ctx_, *settings::symbolizeLrSchedule(t.schedule.kind), t.schedule.warmup,
        APFloat(t.schedule.minLr));
    double evalFraction = t.evalData.value.empty() ? t.evalFraction.value : 0.0;
    if (!opt || !lr)
      return nullptr;
    return settings::TrainAttr::getChecked(
        emitError, &ctx_, t.batch.value, t.microBatch.value, t.accumulation, t.steps.value, opt, lr,
        APFloat(t.clip.value), StringRef(t.precision.value), StringRef(t.data.value),
        StringRef(t.tokenizer.value), t.seed.value, t.evalEvery.value, t.evalBatches.value,
        APFloat(evalFraction), StringRef(t.evalData.value), t.checkpointEvery.value,
        StringRef(t.checkpointDir.value), t.logEvery.value, StringRef(t.initFrom.value));
  }

  MLIRContext &ctx_;
  const Program &program_;
  const SourceManager &sources_;
  OpBuilder b_;
  std::vector<Value> values_;
};

} // namespace

void tessel::loadGraphDialects(MLIRContext &context) {
  context.loadDialect<graph::GraphDialect, settings::SettingsDialect, func::FuncDialect>();
}

OwningOpRef<ModuleOp> tessel::emitGraphModule(MLIRContext &context, const Program &program,
                                              const SourceManager &sources) {
  loadGraphDialects(context);
  return GraphEmitter(context, program, sources).emit();
}
