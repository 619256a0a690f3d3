//===- PlanLowering.h - What the graph-to-plan patterns share ---*- C++ -*-===//
//
// The graph-to-plan conversion is a dialect conversion whose patterns are grouped by op family
// (one `populate...` per file). Named dims end here: every pattern turns one graph op into
// kernel calls whose parameters are plain sizes and strides computed from the named shapes,
// so the runtime never sees a dim name. Tensors become memrefs (the type converter); what a
// pattern needs beyond its op and converted operands lives in two places:
//
//   PlanLowering  state of the whole conversion: the parameters, gradients and moments the
//                 programs declare (plan.tensor), asynchronous collectives still in flight
//                 (their events), whether any op failed to lower.
//   PlanEmitter   the building blocks of one op's lowering: buffers for its results, kernel
//                 calls with typed parameters, relayout copies.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_CONVERSION_GRAPHTOPLAN_PLANLOWERING_H
#define TESSEL_CONVERSION_GRAPHTOPLAN_PLANLOWERING_H

#include "tessel/Dialect/Graph/IR/GraphOps.h"
#include "tessel/Dialect/Graph/IR/GraphSharding.h"
#include "tessel/Dialect/Plan/IR/PlanDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Transforms/DialectConversion.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessel::plan_lowering {

using Strides = llvm::SmallVector<int64_t>;

//===----------------------------------------------------------------------===//
// Shapes as the kernels read them
//===----------------------------------------------------------------------===//

NamedShape shapeOf(mlir::Value v);
int64_t numElements(const NamedShape &s);
llvm::SmallVector<int64_t> sizesOf(const NamedShape &s);
/// Row-major element strides of a dense tensor of shape `s`.
Strides denseStrides(const NamedShape &s);
/// For each dim of `view`, the stride of the same-named dim of a dense `operand`, or 0 when
/// the operand lacks it (broadcast).
Strides stridesIn(const NamedShape &operand, const NamedShape &view);
/// The dims of `shape` without those named `names`, in order.
NamedShape without(const NamedShape &shape, llvm::ArrayRef<std::string> names);

//===----------------------------------------------------------------------===//
// PlanLowering
//===----------------------------------------------------------------------===//

class PlanEmitter;

/// A parameter, gradient accumulator or optimizer moment the programs use.
struct StateDecl {
  std::string name, role, of, init = "zeros";
  double a = 0, b = 0;
  mlir::Type tensor;
  mlir::ArrayAttr split;
  /// A loaded parameter's stored tensor and slice (see graph::InitAttr).
  std::string source = {};
  std::vector<int64_t> slice = {};
};

class PlanLowering {
public:
  explicit PlanLowering(mlir::ModuleOp module)
      : module_(module), mesh_(graph::MeshLayout::fromModule(module)) {}

  mlir::ModuleOp module() const { return module_; }
  const graph::MeshLayout &mesh() const { return mesh_; }

  // State, declared in order of first use and written as plan.tensor ops by declareState().
  /// The buffer of parameter `op`, declaring it on first use.
  mlir::Value paramState(PlanEmitter &emit, graph::ParamOp op);
  /// The buffer of `param`'s gradient accumulator ("grad") or moment ("adam_m", ...).
  mlir::Value derivedState(PlanEmitter &emit, llvm::StringRef role, llvm::StringRef param,
                           mlir::Type tensor);
  /// The buffer of a decode program's key or value cache, declaring it on first use.
  mlir::Value cacheState(PlanEmitter &emit, graph::KvCacheOp op);
  /// A decode program's running totals (role decode_state): state no checkpoint holds.
  mlir::Value totalsState(PlanEmitter &emit, graph::RunningTotalsOp op);
  /// The declaration named `name`, or null.
  const StateDecl *findState(llvm::StringRef name) const;
  void declareState();
  /// Writes the mesh (plan.mesh) and one plan.group per non-empty set of its axes, plus
  /// `world`, at the top of the module.
  void declareMesh();

  // Asynchronous collectives.
  int64_t nextEvent() { return ++events_; }
  /// `result` is written by the collective of `event`, which reads and writes `buffers`.
  void recordAsync(mlir::Value result, int64_t event, llvm::ArrayRef<mlir::Value> buffers);
  /// `alias` (a view of `result`) waits for what `result` waits for.
  void shareWait(mlir::Value alias, mlir::Value result);
  /// Before `op` reads a value an asynchronous collective produces, waits for it.
  void waitFor(mlir::Operation *op, PlanEmitter &emit);

  // The names of a program's outputs, from its function's results.
  void setOutputNames(mlir::Operation *program, llvm::SmallVector<std::string> names) {
    outputNames_[program] = std::move(names);
  }
  llvm::ArrayRef<std::string> outputNames(mlir::Operation *program) const {
    auto it = outputNames_.find(program);
    return it == outputNames_.end() ? llvm::ArrayRef<std::string>() : it->second;
  }

  // Failure: a pattern that cannot lower its op reports why, and the conversion carries on so
  // that every such op is reported in one run.
  void markFailed() { failed_ = true; }
  bool failed() const { return failed_; }

private:
  /// The split of `param`'s state in `layout` (param, grad, optimizer or cache), from the partition
  /// pass's `tessel.state`; null on one rank.
  mlir::ArrayAttr stateSplit(mlir::Builder &b, llvm::StringRef param, llvm::StringRef layout);
  void declare(StateDecl decl);

  mlir::ModuleOp module_;
  graph::MeshLayout mesh_;
  std::vector<StateDecl> states_;
  std::map<std::string, size_t> stateIndex_;
  struct Pending {
    int64_t event;
    llvm::SmallVector<mlir::Value> buffers;
  };
  /// Values an asynchronous collective still writes: the event to wait for, and the buffers
  /// it reads and writes (kept alive until the wait).
  llvm::DenseMap<mlir::Value, std::shared_ptr<Pending>> pending_;
  int64_t events_ = 0;
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<std::string>> outputNames_;
  bool failed_ = false;
};

//===----------------------------------------------------------------------===//
// PlanEmitter
//===----------------------------------------------------------------------===//

/// Builds the plan ops of one graph op at the rewriter's insertion point, and collects the
/// buffers that replace the op's results.
class PlanEmitter {
public:
  PlanEmitter(mlir::ConversionPatternRewriter &rewriter, mlir::Operation *op);

  mlir::OpBuilder &builder() { return rewriter_; }
  mlir::Location loc() const { return op_->getLoc(); }

  static mlir::MemRefType memrefType(mlir::Type tensor);
  /// A fresh buffer of `tensor`'s shape (a plan.alloc).
  mlir::Value alloc(mlir::Type tensor);
  /// A fresh buffer of shape `sizes`.
  mlir::Value alloc(llvm::ArrayRef<int64_t> sizes, mlir::Type element);
  /// A fresh buffer that replaces result `r` of the op.
  mlir::Value define(mlir::Value r);
  /// `buffer` replaces result `r` of the op (a view, a state tensor).
  void bind(mlir::Value r, mlir::Value buffer);
  mlir::Value state(llvm::StringRef name, mlir::Type tensor);

  void kernel(llvm::StringRef name, mlir::ValueRange ins, mlir::ValueRange outs,
              llvm::ArrayRef<mlir::NamedAttribute> params);
  mlir::NamedAttribute i64(llvm::StringRef k, int64_t v);
  mlir::NamedAttribute f64(llvm::StringRef k, double v);
  mlir::NamedAttribute str(llvm::StringRef k, llvm::StringRef v);
  mlir::NamedAttribute list(llvm::StringRef k, llvm::ArrayRef<int64_t> v);

  /// Copies `v` (dense, `from`) into a fresh dense buffer laid out as `to`.
  mlir::Value relayout(mlir::Value v, const NamedShape &from, const NamedShape &to,
                       mlir::Type element);
  /// Lowers an op whose kernel works along the dims `inner` of the [rows, cols] operands
  /// and results flagged in `rowIns` / `rowOuts` (all of shape `x`; `ins` are converted
  /// buffers, `results` the op's results). When `inner` are not the innermost dims of `x`,
  /// those operands are first copied into a layout where they are, and those results are
  /// computed in it and copied back.
  mlir::LogicalResult alongDims(llvm::StringRef kernelName, const NamedShape &x,
                                llvm::ArrayRef<std::string> inner, mlir::ValueRange ins,
                                llvm::ArrayRef<bool> rowIns, mlir::ValueRange results,
                                llvm::ArrayRef<bool> rowOuts,
                                llvm::SmallVector<mlir::NamedAttribute> params);

  /// The buffers replacing the op's results; results nothing defined get a fresh buffer (so a
  /// failed op leaves well-formed IR behind).
  llvm::SmallVector<mlir::Value> takeResults();

private:
  mlir::ConversionPatternRewriter &rewriter_;
  mlir::Operation *op_;
  llvm::SmallVector<mlir::Value> results_;
  /// The kernels of an op -tessel-recompute cloned carry its mark, for profiles.
  bool recomputed_;
};

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

/// A pattern that lowers graph op `SourceOp`: waits for the collectives its operands come
/// from, runs lower(), and replaces the op by the buffers it defined. A lower() that fails
/// has reported why; the conversion records it and goes on.
template <typename SourceOp> class PlanPattern : public mlir::OpConversionPattern<SourceOp> {
public:
  using Adaptor = typename mlir::OpConversionPattern<SourceOp>::OpAdaptor;

  PlanPattern(const mlir::TypeConverter &converter, mlir::MLIRContext *context,
              PlanLowering &lowering)
      : mlir::OpConversionPattern<SourceOp>(converter, context), lowering(lowering) {}

  mlir::LogicalResult matchAndRewrite(SourceOp op, Adaptor adaptor,
                                      mlir::ConversionPatternRewriter &rewriter) const final {
    PlanEmitter emit(rewriter, op);
    lowering.waitFor(op, emit);
    if (mlir::failed(lower(op, adaptor, emit)))
      lowering.markFailed();
    rewriter.replaceOp(op, emit.takeResults());
    return mlir::success();
  }

protected:
  virtual mlir::LogicalResult lower(SourceOp op, Adaptor adaptor, PlanEmitter &emit) const = 0;

  PlanLowering &lowering;
};

/// The buffers of a variadic operand, converted.
inline llvm::SmallVector<mlir::Value> buffers(mlir::ValueRange converted) {
  return llvm::SmallVector<mlir::Value>(converted.begin(), converted.end());
}

// One populate function per op family, each in its own file.
/// Elementwise arithmetic, comparisons, select, fused groups, constants, positions, dropout.
void populateElementwisePatterns(mlir::RewritePatternSet &patterns,
                                 const mlir::TypeConverter &converter, PlanLowering &lowering);
/// Contractions, as strided batched GEMMs.
void populateContractionPatterns(mlir::RewritePatternSet &patterns,
                                 const mlir::TypeConverter &converter, PlanLowering &lowering);
/// Softmax, layer and RMS norms, forward and backward: ops along trailing dims.
void populateNormalizationPatterns(mlir::RewritePatternSet &patterns,
                                   const mlir::TypeConverter &converter, PlanLowering &lowering);
/// Cross-entropy, whole and vocabulary-parallel.
void populateLossPatterns(mlir::RewritePatternSet &patterns, const mlir::TypeConverter &converter,
                          PlanLowering &lowering);
/// The output head fused with its cross-entropy, chunked over rows.
void populateLinearCrossEntropyPatterns(mlir::RewritePatternSet &patterns,
                                        const mlir::TypeConverter &converter,
                                        PlanLowering &lowering);
/// Attention and rotary embeddings.
void populateAttentionPatterns(mlir::RewritePatternSet &patterns,
                               const mlir::TypeConverter &converter, PlanLowering &lowering);
/// Views, copies, reductions, packing, embedding lookups.
void populateDataMovementPatterns(mlir::RewritePatternSet &patterns,
                                  const mlir::TypeConverter &converter, PlanLowering &lowering);
/// The shard dialect's collectives and the pipeline's tied-gradient sum.
void populateCollectivePatterns(mlir::RewritePatternSet &patterns,
                                const mlir::TypeConverter &converter, PlanLowering &lowering);
/// Parameters, gradients and the optimizer step.
void populateTrainingStatePatterns(mlir::RewritePatternSet &patterns,
                                   const mlir::TypeConverter &converter, PlanLowering &lowering);

} // namespace tessel::plan_lowering

#endif // TESSEL_CONVERSION_GRAPHTOPLAN_PLANLOWERING_H
