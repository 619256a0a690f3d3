//===- AttentionPatterns.cpp - Attention and RoPE to plan kernels ---------===//
//
// Attention's kernels take q, k, v as [..., seq, heads, head] with any leading dims folded
// into a batch; the key's seq and heads may differ from the query's (keys gathered over cp,
// grouped-query heads). Under context parallelism with `context = ring`, attention whose keys
// and values hold the rank's own head-tail block, like its queries, becomes the ring: blocks of
// keys and values travel around the cp ring by send/recv while each step's block is computed.
//
//===----------------------------------------------------------------------===//

#include "PlanLowering.h"

#include "common/layout/HeadTail.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::plan_lowering;

namespace {

/// The sizes and options every attention kernel takes (attention, attention_grad and the
/// ring's blocks): q, k, v as [..., seq, heads, head], leading dims folded into a batch.
template <typename OpTy>
SmallVector<NamedAttribute> commonAttentionParams(OpTy op, PlanEmitter &emit) {
  NamedShape qs = shapeOf(op.getQuery()), ks = shapeOf(op.getKey());
  size_t r = qs.size();
  SmallVector<NamedAttribute> params{
      emit.i64("batch", numElements(qs) / (qs[r - 3].size * qs[r - 2].size * qs[r - 1].size)),
      emit.i64("seq", qs[r - 3].size),
      emit.i64("heads", qs[r - 2].size),
      emit.i64("kv_heads", ks[r - 2].size),
      emit.i64("head", qs[r - 1].size),
      emit.i64("causal", op.getCausal()),
      emit.f64("scale", op.getScale().convertToDouble())};
  if (std::optional<StringRef> headsOver = op.getHeadsOver())
    params.push_back(emit.str("head_group", *headsOver));
  return params;
}

/// The parameters of the attention and attention_grad kernels.
template <typename OpTy> SmallVector<NamedAttribute> attentionParams(OpTy op, PlanEmitter &emit) {
  SmallVector<NamedAttribute> params = commonAttentionParams(op, emit);
  NamedShape ks = shapeOf(op.getKey());
  params.push_back(emit.i64("kv_seq", ks[ks.size() - 3].size));
  if (std::optional<uint64_t> window = op.getWindow())
    params.push_back(emit.i64("window", static_cast<int64_t>(*window)));
  if (std::optional<StringRef> seqOver = op.getSeqOver())
    params.push_back(emit.str("seq_group", *seqOver));
  return params;
}

//===----------------------------------------------------------------------===//
// Ring attention
//===----------------------------------------------------------------------===//

/// The tags of ring attention's messages (keys, values, then their gradients). The cp ring's
/// messages are the only ones between cp neighbours; the tags stay under the 16383 that every
/// MPI carries (half of the guaranteed tag bound).
constexpr int64_t kRingTag = 0x2500;

/// Ring attention (context = ring): attention whose keys and values hold this rank's head-tail
/// block, like its queries.
template <typename OpTy> bool isRingAttention(OpTy op) {
  if (!op.getSeqOver())
    return false;
  NamedShape q = shapeOf(op.getQuery()), k = shapeOf(op.getKey());
  return q[q.size() - 3].size == k[k.size() - 3].size;
}

/// The parameters of a ring step's attention_block(_grad).
template <typename OpTy>
SmallVector<NamedAttribute> ringParams(OpTy op, PlanEmitter &emit, int64_t step) {
  SmallVector<NamedAttribute> params = commonAttentionParams(op, emit);
  params.push_back(emit.str("group", *op.getSeqOver()));
  params.push_back(emit.i64("step", step));
  return params;
}

/// Sends `values` to the next rank of the cp ring and receives as many from the previous one
/// into fresh buffers, asynchronously: returns the buffers and the events to wait for.
std::pair<SmallVector<Value>, SmallVector<int64_t>>
ringShift(PlanEmitter &emit, PlanLowering &lowering, ValueRange values, int64_t tag) {
  StringRef group = headtail::kAxis.data();
  SmallVector<Value> received;
  SmallVector<int64_t> events;
  for (auto [i, v] : llvm::enumerate(values)) {
    auto type = cast<MemRefType>(v.getType());
    int64_t n = type.getNumElements();
    int64_t sent = lowering.nextEvent();
    emit.kernel("send", {v}, {},
                {emit.str("group", group), emit.i64("peer", 1), emit.i64("relative", 1),
                 emit.i64("tag", tag + static_cast<int64_t>(i)), emit.i64("n", n),
                 emit.i64("event", sent)});
    events.push_back(sent);
    Value next = emit.alloc(type.getShape(), type.getElementType());
    int64_t got = lowering.nextEvent();
    emit.kernel("recv", {}, {next},
                {emit.str("group", group), emit.i64("peer", -1), emit.i64("relative", 1),
                 emit.i64("tag", tag + static_cast<int64_t>(i)), emit.i64("n", n),
                 emit.i64("event", got)});
    events.push_back(got);
    received.push_back(next);
  }
  return {received, events};
}

/// The forward ring: the running output and log-sum-exp of `q` against every block of keys.
template <typename OpTy>
void ringForward(OpTy op, PlanEmitter &emit, PlanLowering &lowering, Value q, Value k, Value v,
                 Value out, Value lse) {
  int64_t ways = lowering.mesh().size(headtail::kAxis);
  Value kc = k, vc = v;
  for (int64_t step = 0; step < ways; ++step) {
    // The next block travels while this one is computed.
    SmallVector<Value> next;
    SmallVector<int64_t> events;
    if (step + 1 < ways)
      std::tie(next, events) = ringShift(emit, lowering, {kc, vc}, kRingTag);
    emit.kernel("attention_block", {q, kc, vc}, {out, lse}, ringParams(op, emit, step));
    for (int64_t e : events)
      emit.kernel("wait", {kc, vc, next[0], next[1]}, {}, {emit.i64("event", e)});
    if (!next.empty())
      kc = next[0], vc = next[1];
  }
}

/// One log-sum-exp per query row.
Value lseBuffer(PlanEmitter &emit, Value query) {
  NamedShape qs = shapeOf(query);
  return emit.alloc({numElements(qs) / qs.back().size},
                    cast<RankedTensorType>(query.getType()).getElementType());
}

LogicalResult lowerRingAttention(graph::AttentionOp op, graph::AttentionOp::Adaptor adaptor,
                                 PlanEmitter &emit, PlanLowering &lowering) {
  if (op.getWindow())
    return op.emitOpError("with a sliding window cannot run as ring attention; use "
                          "context = allgather");
  Value lse = op.getLse() ? emit.define(op.getLse()) : lseBuffer(emit, op.getQuery());
  ringForward(op, emit, lowering, adaptor.getQuery(), adaptor.getKey(), adaptor.getValue(),
              emit.define(op.getResult()), lse);
  return success();
}

LogicalResult lowerRingAttentionGrad(graph::AttentionGradOp op,
                                     graph::AttentionGradOp::Adaptor adaptor, PlanEmitter &emit,
                                     PlanLowering &lowering) {
  // Each query's output and log-sum-exp over every key: the forward ring's, where the forward
  // attention kept them, or the forward ring again. Then the backward ring: the key and value
  // blocks travel with the gradients every rank adds into them, and after the last step one
  // more hop takes each block's gradients home.
  if (op.getWindow())
    return op.emitOpError("with a sliding window cannot run as ring attention; use "
                          "context = allgather");
  Value q = adaptor.getQuery(), dout = adaptor.getGrad();
  Value out = adaptor.getOut(), lse = adaptor.getLse();
  if (!out) {
    out = emit.alloc(op.getQuery().getType());
    lse = lseBuffer(emit, op.getQuery());
    ringForward(op, emit, lowering, q, adaptor.getKey(), adaptor.getValue(), out, lse);
  }
  int64_t ways = lowering.mesh().size(headtail::kAxis);
  Value dq = emit.define(op.getQueryGrad());
  Value kc = adaptor.getKey(), vc = adaptor.getValue();
  Value dk = emit.alloc(op.getKeyGrad().getType()), dv = emit.alloc(op.getValueGrad().getType());
  for (int64_t step = 0; step < ways; ++step) {
    SmallVector<Value> next;
    SmallVector<int64_t> events;
    if (step + 1 < ways)
      std::tie(next, events) = ringShift(emit, lowering, {kc, vc}, kRingTag);
    emit.kernel("attention_block_grad", {q, kc, vc, dout, out, lse}, {dq, dk, dv},
                ringParams(op, emit, step));
    auto [grads, gradEvents] = ringShift(emit, lowering, {dk, dv}, kRingTag + 2);
    events.append(gradEvents);
    SmallVector<Value> live = {kc, vc, dk, dv};
    live.append(next);
    live.append(grads);
    for (int64_t e : events)
      emit.kernel("wait", live, {}, {emit.i64("event", e)});
    if (!next.empty())
      kc = next[0], vc = next[1];
    dk = grads[0], dv = grads[1];
  }
  // After the last hop these are this rank's own blocks' gradients.
  emit.bind(op.getKeyGrad(), dk);
  emit.bind(op.getValueGrad(), dv);
  return success();
}

struct AttentionPattern : PlanPattern<graph::AttentionOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::AttentionOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    if (isRingAttention(op))
      return lowerRingAttention(op, adaptor, emit, lowering);
    SmallVector<Value, 2> outs = {emit.define(op.getResult())};
    // Under full recomputation the gradient reads the recomputed call's lse, not this one's.
    if (op.getLse() && !op.getLse().use_empty())
      outs.push_back(emit.define(op.getLse()));
    emit.kernel("attention", {adaptor.getQuery(), adaptor.getKey(), adaptor.getValue()}, outs,
                attentionParams(op, emit));
    return success();
  }
};

struct AttentionGradPattern : PlanPattern<graph::AttentionGradOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::AttentionGradOp op, Adaptor adaptor,
                      PlanEmitter &emit) const override {
    if (isRingAttention(op))
      return lowerRingAttentionGrad(op, adaptor, emit, lowering);
    Value dq = emit.define(op.getQueryGrad()), dk = emit.define(op.getKeyGrad()),
          dv = emit.define(op.getValueGrad());
    SmallVector<Value, 6> ins = {adaptor.getQuery(), adaptor.getKey(), adaptor.getValue(),
                                 adaptor.getGrad()};
    if (op.getOut())
      ins.append({adaptor.getOut(), adaptor.getLse()});
    emit.kernel("attention_grad", ins, {dq, dk, dv}, attentionParams(op, emit));
    return success();
  }
};

/// The parameters of the rope kernel for rope and rope_at, whose input is [..., seq, heads,
/// head] with leading dims folded into a batch.
template <typename OpTy> SmallVector<NamedAttribute> ropeParams(OpTy op, PlanEmitter &emit) {
  NamedShape s = shapeOf(op.getInput());
  size_t r = s.size();
  SmallVector<NamedAttribute> params = {
      emit.i64("batch", numElements(s) / (s[r - 3].size * s[r - 2].size * s[r - 1].size)),
      emit.i64("seq", s[r - 3].size),
      emit.i64("heads", s[r - 2].size),
      emit.i64("head", s[r - 1].size),
      emit.f64("theta", op.getTheta().convertToDouble())};
  if (std::optional<ArrayRef<double>> s = op.getScaling()) {
    params.push_back(emit.f64("scaling_factor", (*s)[0]));
    params.push_back(emit.f64("low_freq_factor", (*s)[1]));
    params.push_back(emit.f64("high_freq_factor", (*s)[2]));
    params.push_back(emit.f64("original_context", (*s)[3]));
  }
  return params;
}

struct RopePattern : PlanPattern<graph::RopeOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::RopeOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    Value y = emit.define(op.getResult());
    SmallVector<NamedAttribute> params = ropeParams(op, emit);
    params.push_back(emit.i64("inverse", op.getInverse()));
    if (std::optional<StringRef> group = op.getSeqOver())
      params.push_back(emit.str("seq_group", *group));
    emit.kernel("rope", {adaptor.getInput()}, {y}, params);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Decoding
//===----------------------------------------------------------------------===//

struct RopeAtPattern : PlanPattern<graph::RopeAtOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::RopeAtOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    Value y = emit.define(op.getResult());
    SmallVector<NamedAttribute> params = ropeParams(op, emit);
    params.push_back(emit.i64("inverse", 0));
    emit.kernel("rope", {adaptor.getInput(), adaptor.getPositions()}, {y}, params);
    return success();
  }
};

/// paged_attention writes the new keys and values into the caches (state, updated in place)
/// and reads them back.
struct PagedAttentionPattern : PlanPattern<graph::PagedAttentionOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::PagedAttentionOp op, Adaptor adaptor,
                      PlanEmitter &emit) const override {
    NamedShape q = shapeOf(op.getQuery()), k = shapeOf(op.getKey());
    NamedShape cache = shapeOf(op.getKeyCache()), table = shapeOf(op.getBlockTable());
    Value o = emit.define(op.getResult());
    SmallVector<NamedAttribute> params = {
        emit.i64("batch", q[0].size),        emit.i64("seq", q[1].size),
        emit.i64("heads", q[2].size),        emit.i64("kv_heads", k[2].size),
        emit.i64("head", q[3].size),         emit.i64("blocks", cache[0].size),
        emit.i64("block_size", cache[1].size), emit.i64("max_blocks", table[1].size),
        emit.f64("scale", op.getScale().convertToDouble())};
    if (std::optional<uint64_t> window = op.getWindow())
      params.push_back(emit.i64("window", static_cast<int64_t>(*window)));
    emit.kernel("paged_attention",
                {adaptor.getQuery(), adaptor.getKey(), adaptor.getValue(), adaptor.getPositions(),
                 adaptor.getBlockTable()},
                {o, adaptor.getKeyCache(), adaptor.getValueCache()}, params);
    return success();
  }
};

/// running_sum reads its sequences' totals (state, updated in place) and adds the new tokens.
struct RunningSumPattern : PlanPattern<graph::RunningSumOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::RunningSumOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    NamedShape x = shapeOf(op.getInput()), table = shapeOf(op.getBlockTable());
    NamedShape totals = shapeOf(op.getTotals());
    int64_t width = 1;
    for (size_t i = 2; i < x.size(); ++i)
      width *= x[i].size;
    Value y = emit.define(op.getResult());
    SmallVector<NamedAttribute> params = {
        emit.i64("batch", x[0].size),         emit.i64("seq", x[1].size),
        emit.i64("width", width),             emit.i64("blocks", totals[0].size),
        emit.i64("max_blocks", table[1].size)};
    if (op.getInclusive())
      params.push_back(emit.i64("inclusive", 1));
    emit.kernel("running_sum", {adaptor.getInput(), adaptor.getPositions(), adaptor.getBlockTable()},
                {y, adaptor.getTotals()}, params);
    return success();
  }
};

} // namespace

void plan_lowering::populateAttentionPatterns(RewritePatternSet &patterns,
                                              const TypeConverter &converter,
                                              PlanLowering &lowering) {
  patterns.add<AttentionPattern, AttentionGradPattern, RopePattern, RopeAtPattern,
               PagedAttentionPattern, RunningSumPattern>(
      converter, patterns.getContext(), lowering);
}
