//===- SemaImpl.h - Internal state of semantic analysis ---------*- C++ -*-===//
//
// Semantic analysis is split by concern: Sema.cpp resolves declarations and evaluates dims and
// constants; SemaParallel.cpp and SemaTrain.cpp read the `parallel` and `train` sections,
// against the schema in SemaConfig.cpp, and SemaParallel.cpp checks the layout against the
// model; and Elaborate.cpp instantiates blocks into the typed graph, with Expansion.cpp
// bounding it beforehand, Parameters.cpp reading declared types and initialisers, and
// Builtins*.cpp typing the built-in ops. They share this class.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_FRONTEND_SEMAIMPL_H
#define TESSEL_FRONTEND_SEMAIMPL_H

#include "tessel/Frontend/Sema.h"

#include <map>
#include <set>
#include <tuple>

namespace tessel::detail {

/// A value during analysis: a number, a name-like literal, a tensor in the graph, or a
/// sequence of values. `Error` poisons everything computed from it without further reports.
struct Value {
  enum Kind { Error, Int, Float, Bool, String, Tensor, List, Tuple };
  Kind kind = Error;
  int64_t i = 0;
  double f = 0.0;
  bool b = false;
  std::string s;
  int tensor = -1;
  std::vector<Value> elems;

  static Value error() { return {}; }
  static Value ofInt(int64_t v) { Value x; x.kind = Int; x.i = v; return x; }
  static Value ofFloat(double v) { Value x; x.kind = Float; x.f = v; return x; }
  static Value ofBool(bool v) { Value x; x.kind = Bool; x.b = v; return x; }
  static Value ofString(std::string v) { Value x; x.kind = String; x.s = std::move(v); return x; }
  static Value ofTensor(int v) { Value x; x.kind = Tensor; x.tensor = v; return x; }
  bool isError() const { return kind == Error; }
  bool isNumber() const { return kind == Int || kind == Float; }
  double asDouble() const { return kind == Int ? static_cast<double>(i) : f; }
};

const char *kindName(Value::Kind kind);
/// Whether `op` is one of the comparison operators < <= > >= == !=.
inline bool isComparison(const std::string &op) {
  return op == "<" || op == "<=" || op == ">" || op == ">=" || op == "==" || op == "!=";
}
/// A number as a user would write it (`0`, `0.5`, `1e+12`), not std::to_string's `0.000000`.
std::string formatNumber(double v);

/// One block instantiation (or the forward function) being elaborated.
struct Frame {
  std::map<std::string, Value> vars;
  std::vector<std::string> prefix; ///< Parameter path segments.
  std::vector<SourceLoc> callers;
  int layer = -1;
  const ast::Block *block = nullptr;
  bool returned = false;
  Value result;
};

class Sema {
public:
  Sema(const ParsedModule &module, const SourceManager &sources, DiagnosticEngine &diags,
       const FrontendOptions &options)
      : module_(module), sources_(sources), diags_(diags), options_(options) {}

  std::optional<Program> run();

  // Diagnostics, deduplicated: a mistake inside a block instantiated 96 times is one error.
  // Returns whether the error was reported; a note that belongs to it is given only then,
  // or it would trail whatever error was reported last.
  bool error(SourceLoc loc, const std::string &message, const std::string &hint = "");
  void note(SourceLoc loc, const std::string &message);
  /// Whether a "did you mean" hint is worth computing. Each scans every name in scope, and
  /// past the errors the engine records it is never printed: on a file of a million bad lines
  /// computing it anyway made checking quadratic.
  bool wantHints() const {
    return diags_.errorCount() < DiagnosticEngine::kMaxRecordedErrors;
  }

  // Sema.cpp: declarations, dims and constants.
  bool collectDeclarations();
  Value evalConstant(const ast::Expr &expr);
  std::optional<int64_t> evalInt(const ast::Expr &expr, const char *what, int64_t min);
  Value lookupDefinition(const std::string &name, SourceLoc use);
  Value parseNumber(const ast::Expr &expr);
  Value arithmetic(const std::string &op, const Value &a, const Value &b, SourceLoc loc);
  Value scalarCall(const ast::Expr &call, const std::vector<Value> &args);
  std::vector<std::string> knownNames() const;

  // SemaConfig.cpp: finds the `parallel` and `train` sections and reads them in that order.
  void readSections();
  // SemaParallel.cpp: the `parallel` section, and after elaboration the layout's checks.
  void readParallel(const ast::Section &section);
  void checkParallelAgainstModel();
  /// With a pipeline: each layer reads the previous one's result and the loss the last's.
  void checkLayerChain(int64_t pp);
  /// The checks of an ep axis: the batch split over it, a parameter dim split over it.
  void checkExpertParallel();
  // SemaTrain.cpp: the `train` section.
  void readTrain(const ast::Section &section);

  // Elaborate.cpp: blocks into the typed graph.
  void elaborateForward();
  // Expansion.cpp.
  /// The statements `body` runs, with block bodies counted per call and repeat bodies per
  /// iteration, saturating past `options_.maxOps`. Reports the first repeat that takes the
  /// count past it, so that elaboration never starts on a model it could not finish.
  uint64_t expansion(const std::vector<ast::StmtPtr> &body);
  uint64_t expansion(const ast::Expr &expr);
  // Elaborate.cpp.
  Value evalTensorExpr(const ast::Expr &expr, Frame &frame);
  void execBody(const std::vector<ast::StmtPtr> &body, Frame &frame);
  /// A call written as a statement, for its effect; only `add_loss(term)` has one.
  void execCallStatement(const ast::Expr &expr, Frame &frame);
  Value callBlock(const ast::Block &block, const ast::Expr &call, std::vector<Value> args,
                  Frame &caller);
  /// Builtins.cpp: a call of a built-in op, found by name in the table of them.
  Value callBuiltin(const ast::Expr &call, Frame &frame);
  // Parameters.cpp.
  std::optional<TensorType> resolveType(const ast::TypeExpr &type);
  /// `layer` is the index of the repeated layer the parameter is in (-1 outside `repeat`),
  /// which `load("...{layer}...")` names.
  std::optional<InitSpec> evalInit(const ast::Expr *expr, int layer);
  std::optional<InitSpec> evalLoadInit(const ast::Expr &expr, int layer);
  // Elaborate.cpp.
  int emit(Op op, Frame &frame, SourceLoc loc);
  Value coerceTo(const Value &v, const TensorType &want, SourceLoc loc, Frame &frame,
                 const std::string &what);
  Value elementwise(const std::string &opName, const Value &a, const Value &b, SourceLoc loc,
                    Frame &frame);
  int scalarConstant(double v, DType dtype, SourceLoc loc, Frame &frame);
  const TensorType &typeOf(int value) const { return program_.forward.typeOf(value); }
  std::optional<NamedDim> dimNamed(const ast::Expr &expr);
  /// The sized dim closest to a misspelt `name`, for a "did you mean" hint; "" when none is
  /// close or hints are no longer wanted.
  std::string closestDim(const std::string &name);

  const ParsedModule &module_;
  const SourceManager &sources_;
  DiagnosticEngine &diags_;
  const FrontendOptions &options_;
  Program program_;

  const ast::Model *model_ = nullptr;
  std::map<std::string, const ast::Block *> blocks_;
  std::map<std::string, const ast::Definition *> definitions_; ///< Dims and constants.
  std::set<std::string> dimDefinitions_;
  std::map<std::string, Value> evaluated_;
  /// The scalar terms `add_loss` contributes to the training loss, in elaboration order.
  std::vector<std::pair<int, SourceLoc>> lossTerms_;
  std::vector<std::string> evaluating_;
  std::map<std::string, NamedDim> dims_; ///< Every sized dim, `batch` included.
  std::set<std::tuple<int, uint32_t, uint32_t, std::string>> reported_;
  std::vector<const ast::Block *> activeBlocks_;
  std::map<std::string, int> blockCallCounts_;
  bool elaborationAborted_ = false;
  /// While set, errors are not reported (the expansion count evaluates repeat counts that
  /// elaboration evaluates again and reports then, in source order).
  bool quiet_ = false;
  std::map<const ast::Block *, uint64_t> blockExpansion_;
  std::set<const ast::Block *> expanding_;
};

} // namespace tessel::detail

#endif // TESSEL_FRONTEND_SEMAIMPL_H
