//===- Builtins.h - The built-in ops of the spec language -------*- C++ -*-===//
//
// A call that names no block is a built-in op (`softmax(x, vocab)`, `attention(q, k, v)`).
// Sema::callBuiltin finds the op in one table keyed by name and hands it a BuiltinCall: the
// call's arguments, split into positional and keyword ones, with the checks every op makes of
// them (the argument count, a tensor's element type, a number's range) and the step that types
// and emits the op. Each op is then a short function of its own rules, grouped by family:
// BuiltinsTensor.cpp (elementwise, reductions, dim manipulation, contraction) and
// BuiltinsNN.cpp (norms, embedding, loss, attention, positional encoding, dropout).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_FRONTEND_BUILTINS_H
#define TESSEL_FRONTEND_BUILTINS_H

#include "SemaImpl.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessel::detail {

/// The arguments of a built-in call, split into positional and keyword ones.
struct CallArgs {
  std::vector<const ast::Expr *> positional;
  std::map<std::string, const ast::Expr *> keyword;
  std::map<std::string, SourceLoc> keywordLoc; ///< Where each keyword is written.
};

/// One call of a built-in op being elaborated in `frame`.
class BuiltinCall {
public:
  BuiltinCall(Sema &sema, const ast::Expr &call, Frame &frame)
      : sema(sema), call(call), frame(frame), fn(call.text) {}

  /// Splits the operands into `args`; reports a positional argument after a keyword one or a
  /// keyword given twice and returns false.
  bool readArgs();
  /// Checks the positional count against [minPos, maxPos] and every keyword against `keys`.
  bool signature(size_t minPos, size_t maxPos, std::vector<std::string> keys);
  /// Positional argument `i`, evaluated on first use only: evaluation emits ops.
  const Value &valueAt(size_t i);
  /// Positional argument `i` as a tensor of floating-point (or, unless `wantFloat`, integer)
  /// elements; -1 after reporting why it is not one.
  int tensor(size_t i, bool wantFloat = true);
  /// A number in [lo, hi], or in (lo, hi] when `aboveLo` (a scale of 0 is not a scale);
  /// `fallback` when `e` is null. Clears `ok` after reporting a bad one.
  double number(const ast::Expr *e, double fallback, double lo, double hi, bool &ok,
                bool aboveLo = false);
  /// The keyword argument `key`, or null when the call does not give it.
  const ast::Expr *keyword(const std::string &key) const;
  /// The dims `e` names, one or a list; false after reporting a name that is no dim.
  bool dimList(const ast::Expr &e, std::vector<std::string> &out);
  /// Emits the op `fn` over `operands` with the shape `r` gives; reports a shape error at the
  /// call instead.
  Value finish(const ShapeResult &r, Op op, const std::vector<int> &operands);

  Sema &sema;
  const ast::Expr &call;
  Frame &frame;
  const std::string &fn; ///< The op's name as written.
  CallArgs args;

private:
  std::vector<std::optional<Value>> evaluated_;
};

// BuiltinsTensor.cpp. Each returns the op's value, or Value::error() having reported why.
Value builtinUnary(BuiltinCall &c); ///< The catalogue's elementwise functions: exp, ..., gelu_erf.
Value builtinPow(BuiltinCall &c);
Value builtinWhere(BuiltinCall &c);
Value builtinPositions(BuiltinCall &c);
Value builtinRename(BuiltinCall &c);
Value builtinReduce(BuiltinCall &c); ///< softmax, sum, mean.
Value builtinTopK(BuiltinCall &c);
Value builtinAddLoss(BuiltinCall &c);
Value builtinSplit(BuiltinCall &c);
Value builtinMerge(BuiltinCall &c);
Value builtinPermute(BuiltinCall &c);
Value builtinContract(BuiltinCall &c);

// BuiltinsNN.cpp.
Value builtinNorm(BuiltinCall &c); ///< layernorm, rmsnorm.
Value builtinEmbedding(BuiltinCall &c);
Value builtinCrossEntropy(BuiltinCall &c);
Value builtinAttention(BuiltinCall &c);
Value builtinRope(BuiltinCall &c);
Value builtinDropout(BuiltinCall &c);

} // namespace tessel::detail

#endif // TESSEL_FRONTEND_BUILTINS_H
