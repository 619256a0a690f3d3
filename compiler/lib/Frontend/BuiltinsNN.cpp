//===- BuiltinsNN.cpp - The transformer layers among the built-in ops -----===//
//
// The built-in ops that are whole layers of a transformer: layer and RMS norms, the embedding
// lookup, cross-entropy, attention, rotary position encoding and dropout. Each takes its
// hyper-parameters as keyword arguments (eps, causal, scale, window, theta, rate), each range
// checked where the spec writes it, so that an error points at the bad value.
//
//===----------------------------------------------------------------------===//

#include "Builtins.h"

#include <cmath>

using namespace tessel;
using namespace tessel::detail;

Value tessel::detail::builtinNorm(BuiltinCall &c) {
  Sema &s = c.sema;
  bool isLayer = c.fn == "layernorm";
  if (!c.signature(isLayer ? 3 : 2, isLayer ? 3 : 2, {"eps"}))
    return Value::error();
  bool ok = true;
  double eps = c.number(c.keyword("eps"), isLayer ? 1e-5 : 1e-6, 0.0, 1.0, ok);
  int x = c.tensor(0), g = c.tensor(1), b = isLayer ? c.tensor(2) : 0;
  if (x < 0 || g < 0 || b < 0 || !ok)
    return Value::error();
  if (isLayer && !(s.typeOf(b).dims == s.typeOf(g).dims)) {
    s.error(c.args.positional[2]->loc, "the bias " + formatShape(s.typeOf(b).dims) +
                                           " must have the scale's shape " +
                                           formatShape(s.typeOf(g).dims));
    return Value::error();
  }
  Op op;
  op.attrs.push_back({"eps", eps});
  std::vector<int> operands = {x, g};
  if (isLayer)
    operands.push_back(b);
  return c.finish(normShape(s.typeOf(x).dims, s.typeOf(g).dims), std::move(op), operands);
}

Value tessel::detail::builtinEmbedding(BuiltinCall &c) {
  if (!c.signature(2, 2, {}))
    return Value::error();
  int table = c.tensor(0), ids = c.tensor(1, false);
  if (table < 0 || ids < 0)
    return Value::error();
  return c.finish(embeddingShape(c.sema.typeOf(table).dims, c.sema.typeOf(ids).dims), Op{},
                  {table, ids});
}

Value tessel::detail::builtinCrossEntropy(BuiltinCall &c) {
  if (!c.signature(2, 2, {}))
    return Value::error();
  int logits = c.tensor(0), targets = c.tensor(1, false);
  if (logits < 0 || targets < 0)
    return Value::error();
  std::string cls;
  ShapeResult r =
      crossEntropyShape(c.sema.typeOf(logits).dims, c.sema.typeOf(targets).dims, &cls);
  Op op;
  op.attrs.push_back({"dim", cls});
  return c.finish(r, std::move(op), {logits, targets});
}

Value tessel::detail::builtinAttention(BuiltinCall &c) {
  Sema &s = c.sema;
  if (!c.signature(3, 3, {"causal", "scale", "window"}))
    return Value::error();
  int q = c.tensor(0), k = c.tensor(1), v = c.tensor(2);
  if (q < 0 || k < 0 || v < 0)
    return Value::error();
  bool causal = true;
  if (const ast::Expr *e = c.keyword("causal")) {
    Value flag = s.evalConstant(*e);
    if (flag.isError())
      return flag;
    if (flag.kind != Value::Bool) {
      s.error(e->loc, "causal is true or false");
      return Value::error();
    }
    causal = flag.b;
  }
  ShapeResult r = attentionShape(s.typeOf(q).dims, s.typeOf(k).dims, s.typeOf(v).dims);
  bool ok = true;
  double headSize = r.ok() ? static_cast<double>(s.typeOf(q).dims.back().size) : 1.0;
  double scale = c.number(c.keyword("scale"), 1.0 / std::sqrt(headSize), 0.0, 1e6, ok,
                          /*aboveLo=*/true);
  if (!ok)
    return Value::error();
  // A sliding window: query i sees keys i - window + 1 .. i.
  int64_t window = 0;
  if (const ast::Expr *e = c.keyword("window")) {
    Value w = s.evalConstant(*e);
    if (w.isError())
      return w;
    if (w.kind != Value::Int || w.i <= 0) {
      s.error(e->loc, "window is a positive whole number of positions");
      return Value::error();
    }
    if (!causal) {
      s.error(e->loc, "a sliding window needs causal = true: it keeps the last `window` "
                      "positions up to the query");
      return Value::error();
    }
    window = w.i;
  }
  Op op;
  op.attrs.push_back({"causal", causal});
  op.attrs.push_back({"scale", scale});
  op.attrs.push_back({"window", window});
  return c.finish(r, std::move(op), {q, k, v});
}

Value tessel::detail::builtinRope(BuiltinCall &c) {
  const std::vector<std::string> scalingKeys = {"scaling_factor", "low_freq_factor",
                                                "high_freq_factor", "original_context"};
  if (!c.signature(1, 1, {"theta", "scaling_factor", "low_freq_factor", "high_freq_factor",
                          "original_context"}))
    return Value::error();
  bool ok = true;
  double theta = c.number(c.keyword("theta"), 10000.0, 1.0, 1e12, ok);
  // Llama 3.1's frequency scaling: all four numbers or none.
  int given = 0;
  for (const std::string &k : scalingKeys)
    given += c.keyword(k) != nullptr;
  if (given != 0 && given != 4) {
    c.sema.error(c.call.loc,
                 "rope's frequency scaling takes scaling_factor, low_freq_factor, "
                 "high_freq_factor and original_context together",
                 "rope(x, theta = 500000, scaling_factor = 8, low_freq_factor = 1, "
                 "high_freq_factor = 4, original_context = 8192): Llama 3.1's rope_scaling");
    return Value::error();
  }
  double factor = c.number(c.keyword("scaling_factor"), 0.0, 1e-6, 1e6, ok);
  double low = c.number(c.keyword("low_freq_factor"), 1.0, 1e-6, 1e6, ok);
  double high = c.number(c.keyword("high_freq_factor"), 4.0, 1e-6, 1e6, ok);
  double context = c.number(c.keyword("original_context"), 8192.0, 1.0, 1e12, ok);
  if (ok && given && !(high > low)) {
    c.sema.error(c.keyword("high_freq_factor")->loc,
                 "high_freq_factor must exceed low_freq_factor");
    ok = false;
  }
  int x = c.tensor(0);
  if (x < 0 || !ok)
    return Value::error();
  Op op;
  op.attrs.push_back({"theta", theta});
  op.attrs.push_back({"scaling_factor", given ? factor : 0.0});
  op.attrs.push_back({"low_freq_factor", low});
  op.attrs.push_back({"high_freq_factor", high});
  op.attrs.push_back({"original_context", context});
  return c.finish(ropeShape(c.sema.typeOf(x).dims), std::move(op), {x});
}

Value tessel::detail::builtinDropout(BuiltinCall &c) {
  if (!c.signature(1, 2, {"rate"}))
    return Value::error();
  const ast::Expr *rateExpr =
      c.args.positional.size() == 2 ? c.args.positional[1] : c.keyword("rate");
  if (!rateExpr) {
    c.sema.error(c.call.loc, "dropout needs a rate: dropout(x, 0.1)");
    return Value::error();
  }
  bool ok = true;
  double rate = c.number(rateExpr, 0.0, 0.0, 0.999999, ok);
  int x = c.tensor(0);
  if (x < 0 || !ok)
    return Value::error();
  Op op;
  op.attrs.push_back({"rate", rate});
  return c.finish({c.sema.typeOf(x).dims, ""}, std::move(op), {x});
}
