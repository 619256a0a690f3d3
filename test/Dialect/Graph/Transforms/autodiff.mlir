// RUN: tessel-opt %s -split-input-file -tessel-autodiff | FileCheck %s
// The gradient rule of every differentiable op, as -tessel-autodiff emits it into
// @forward_backward. Each case is its own module; the seed is 1 unless the module sets
// tessel.train's accumulation.

// A bias added by broadcast takes the sum of the gradient over the dims it lacks; a mean
// spreads its gradient by broadcast and scales it by 1/n (n = 4 * 8 = 32).

!x = tensor<4x8xf32, #graph.dims<batch, embed>>
!b = tensor<8xf32, #graph.dims<embed>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward(%x: !x {graph.name = "x"}) -> !s {
    %b = graph.param "bias" init <zeros> : !b
    %y = graph.add %x, %b : (!x, !b) -> !x
    %m = graph.mean %y dims ["batch", "embed"] : !x -> !s
    return %m : !s
  }
}

// CHECK-LABEL: func.func @forward(
// CHECK: graph.mean
// CHECK-NEXT: return
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x8xf32, #graph.dims<batch, embed>> {graph.name = "x"}) -> tensor<f32, #graph.dims<>>
// CHECK: %[[B:.*]] = graph.param "bias" init <zeros>
// CHECK: %[[Y:.*]] = graph.add %[[X]], %[[B]]
// CHECK: %[[LOSS:.*]] = graph.mean %[[Y]] dims ["batch", "embed"]
// CHECK-NEXT: %[[SEED:.*]] = graph.constant 1.000000e+00 : tensor<f32, #graph.dims<>>
// CHECK-NEXT: %[[SPREAD:.*]] = graph.broadcast %[[SEED]] : tensor<f32, #graph.dims<>> -> tensor<4x8xf32, #graph.dims<batch, embed>>
// CHECK-NEXT: %[[INV:.*]] = graph.constant 3.125000e-02 : tensor<f32, #graph.dims<>>
// CHECK-NEXT: %[[DY:.*]] = graph.mul %[[SPREAD]], %[[INV]] : (tensor<4x8xf32, #graph.dims<batch, embed>>, tensor<f32, #graph.dims<>>) -> tensor<4x8xf32, #graph.dims<batch, embed>>
// The input's gradient is dy itself (same type): no op. The bias sums over batch.
// CHECK-NEXT: %[[DB:.*]] = graph.sum %[[DY]] dims ["batch"] : tensor<4x8xf32, #graph.dims<batch, embed>> -> tensor<8xf32, #graph.dims<embed>>
// CHECK-NEXT: graph.accumulate_grad %[[DB]] to "bias" : tensor<8xf32, #graph.dims<embed>>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32, #graph.dims<>>

// -----

// sub, mul, div and neg; the parameter `a` is read twice (by sub and by div), so its two
// gradients are summed before its one accumulate_grad.

!x = tensor<4x8xf32, #graph.dims<batch, embed>>
!b = tensor<8xf32, #graph.dims<embed>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward(%x: !x {graph.name = "x"}) -> !s {
    %a = graph.param "a" init <ones> : !b
    %w = graph.param "w" init <ones> : !x
    %0 = graph.sub %x, %a : (!x, !b) -> !x
    %1 = graph.mul %0, %w : (!x, !x) -> !x
    %2 = graph.div %1, %a : (!x, !b) -> !x
    %3 = graph.unary neg %2 : !x
    %4 = graph.sum %3 dims ["batch", "embed"] : !x -> !s
    return %4 : !s
  }
}

// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:[^:]+]]:
// CHECK: %[[A:.*]] = graph.param "a"
// CHECK: %[[W:.*]] = graph.param "w"
// CHECK: %[[SUB:.*]] = graph.sub %[[X]], %[[A]]
// CHECK: %[[MUL:.*]] = graph.mul %[[SUB]], %[[W]]
// CHECK: %[[DIV:.*]] = graph.div %[[MUL]], %[[A]]
// CHECK: %[[NEG:.*]] = graph.unary neg %[[DIV]]
// CHECK: %[[LOSS:.*]] = graph.sum %[[NEG]] dims ["batch", "embed"]
// CHECK-NEXT: %[[SEED:.*]] = graph.constant 1.000000e+00
// sum: broadcast back to the input.
// CHECK-NEXT: %[[D3:.*]] = graph.broadcast %[[SEED]] : tensor<f32, #graph.dims<>> -> tensor<4x8xf32, #graph.dims<batch, embed>>
// neg: negate.
// CHECK-NEXT: %[[D2:.*]] = graph.unary neg %[[D3]] : tensor<4x8xf32, #graph.dims<batch, embed>>
// div: da = dy / b; db = -(dy / b * (a / b)), summed over batch.
// CHECK-NEXT: %[[DYB:.*]] = graph.div %[[D2]], %[[A]] : (tensor<4x8xf32, #graph.dims<batch, embed>>, tensor<8xf32, #graph.dims<embed>>) -> tensor<4x8xf32, #graph.dims<batch, embed>>
// CHECK-NEXT: %[[T:.*]] = graph.mul %[[DYB]], %[[DIV]]
// CHECK-NEXT: %[[NT:.*]] = graph.unary neg %[[T]]
// CHECK-NEXT: %[[DA1:.*]] = graph.sum %[[NT]] dims ["batch"] : tensor<4x8xf32, #graph.dims<batch, embed>> -> tensor<8xf32, #graph.dims<embed>>
// mul: d(lhs) = dy * rhs, d(rhs) = dy * lhs.
// CHECK-NEXT: %[[D0:.*]] = graph.mul %[[DYB]], %[[W]]
// CHECK-NEXT: %[[DW:.*]] = graph.mul %[[DYB]], %[[SUB]]
// sub: d(lhs) = dy (no op), d(rhs) = -dy summed over batch.
// CHECK-NEXT: %[[ND0:.*]] = graph.unary neg %[[D0]]
// CHECK-NEXT: %[[DA2:.*]] = graph.sum %[[ND0]] dims ["batch"]
// CHECK-NEXT: %[[DA:.*]] = graph.add %[[DA1]], %[[DA2]] : (tensor<8xf32, #graph.dims<embed>>, tensor<8xf32, #graph.dims<embed>>) -> tensor<8xf32, #graph.dims<embed>>
// Accumulated once each, in declaration order.
// CHECK-NEXT: graph.accumulate_grad %[[DA]] to "a" : tensor<8xf32, #graph.dims<embed>>
// CHECK-NEXT: graph.accumulate_grad %[[DW]] to "w" : tensor<4x8xf32, #graph.dims<batch, embed>>
// CHECK-NEXT: return %[[LOSS]]

// -----

// Every elementwise function: unary_grad fn reads the forward input and output.

!x = tensor<4x8xf32, #graph.dims<batch, embed>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward(%x: !x {graph.name = "x"}) -> !s {
    %w = graph.param "w" init <ones> : !x
    %0 = graph.mul %x, %w : (!x, !x) -> !x
    %1 = graph.unary exp %0 : !x
    %2 = graph.unary log %1 : !x
    %3 = graph.unary sqrt %2 : !x
    %4 = graph.unary rsqrt %3 : !x
    %5 = graph.unary tanh %4 : !x
    %6 = graph.unary gelu %5 : !x
    %7 = graph.unary silu %6 : !x
    %8 = graph.unary relu %7 : !x
    %9 = graph.unary sigmoid %8 : !x
    %10 = graph.sum %9 dims ["batch", "embed"] : !x -> !s
    return %10 : !s
  }
}

// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:[^:]+]]:
// CHECK: %[[W:.*]] = graph.param "w"
// CHECK-NEXT: %[[Y0:.*]] = graph.mul %[[X]], %[[W]]
// CHECK-NEXT: %[[Y1:.*]] = graph.unary exp %[[Y0]]
// CHECK-NEXT: %[[Y2:.*]] = graph.unary log %[[Y1]]
// CHECK-NEXT: %[[Y3:.*]] = graph.unary sqrt %[[Y2]]
// CHECK-NEXT: %[[Y4:.*]] = graph.unary rsqrt %[[Y3]]
// CHECK-NEXT: %[[Y5:.*]] = graph.unary tanh %[[Y4]]
// CHECK-NEXT: %[[Y6:.*]] = graph.unary gelu %[[Y5]]
// CHECK-NEXT: %[[Y7:.*]] = graph.unary silu %[[Y6]]
// CHECK-NEXT: %[[Y8:.*]] = graph.unary relu %[[Y7]]
// CHECK-NEXT: %[[Y9:.*]] = graph.unary sigmoid %[[Y8]]
// CHECK-NEXT: graph.sum %[[Y9]]
// CHECK-NEXT: graph.constant 1.000000e+00
// CHECK-NEXT: %[[G9:.*]] = graph.broadcast
// CHECK-NEXT: %[[G8:.*]] = graph.unary_grad sigmoid %[[Y8]], %[[Y9]], %[[G9]] : tensor<4x8xf32, #graph.dims<batch, embed>>
// CHECK-NEXT: %[[G7:.*]] = graph.unary_grad relu %[[Y7]], %[[Y8]], %[[G8]]
// CHECK-NEXT: %[[G6:.*]] = graph.unary_grad silu %[[Y6]], %[[Y7]], %[[G7]]
// CHECK-NEXT: %[[G5:.*]] = graph.unary_grad gelu %[[Y5]], %[[Y6]], %[[G6]]
// CHECK-NEXT: %[[G4:.*]] = graph.unary_grad tanh %[[Y4]], %[[Y5]], %[[G5]]
// CHECK-NEXT: %[[G3:.*]] = graph.unary_grad rsqrt %[[Y3]], %[[Y4]], %[[G4]]
// CHECK-NEXT: %[[G2:.*]] = graph.unary_grad sqrt %[[Y2]], %[[Y3]], %[[G3]]
// CHECK-NEXT: %[[G1:.*]] = graph.unary_grad log %[[Y1]], %[[Y2]], %[[G2]]
// CHECK-NEXT: %[[G0:.*]] = graph.unary_grad exp %[[Y0]], %[[Y1]], %[[G1]]
// CHECK-NEXT: %[[DW:.*]] = graph.mul %[[G0]], %[[X]]
// CHECK-NEXT: graph.accumulate_grad %[[DW]] to "w"
// CHECK-NEXT: return

// -----

// contract: x @ w (both gradients are contractions in the operands' own dim order), x @ u
// with u stored [ffn, embed] (its gradient contracts dy with x, in that order, to come out
// [ffn, embed] without a permute), and a contraction whose rhs has no dim of its own: the
// lhs gradient has nothing to sum and is a broadcasting mul. `x` is an input: its gradient
// feeds nothing and is removed.

!x = tensor<4x8xf32, #graph.dims<batch, embed>>
!w = tensor<8x16xf32, #graph.dims<embed, ffn>>
!wt = tensor<16x8xf32, #graph.dims<ffn, embed>>
!y = tensor<4x16xf32, #graph.dims<batch, ffn>>
!v = tensor<16xf32, #graph.dims<ffn>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward(%x: !x {graph.name = "x"}) -> !s {
    %w = graph.param "w" init <ones> : !w
    %u = graph.param "u" init <ones> : !wt
    %v = graph.param "v" init <ones> : !v
    %0 = graph.contract %x, %w sum ["embed"] : (!x, !w) -> !y
    %1 = graph.contract %x, %u sum ["embed"] : (!x, !wt) -> !y
    %2 = graph.add %0, %1 : (!y, !y) -> !y
    %3 = graph.contract %2, %v sum ["ffn"] : (!y, !v) -> tensor<4xf32, #graph.dims<batch>>
    %4 = graph.mean %3 dims ["batch"] : tensor<4xf32, #graph.dims<batch>> -> !s
    return %4 : !s
  }
}

// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:[^:]+]]:
// CHECK: %[[W:.*]] = graph.param "w"
// CHECK: %[[U:.*]] = graph.param "u"
// CHECK: %[[V:.*]] = graph.param "v"
// CHECK: %[[H:.*]] = graph.add
// CHECK: graph.mean
// CHECK-NEXT: graph.constant 1.000000e+00
// CHECK-NEXT: graph.broadcast
// CHECK-NEXT: graph.constant 2.500000e-01
// CHECK-NEXT: %[[G3:.*]] = graph.mul
// Nothing to sum for h's gradient: g3[batch] * v[ffn].
// CHECK-NEXT: %[[G2:.*]] = graph.mul %[[G3]], %[[V]] : (tensor<4xf32, #graph.dims<batch>>, tensor<16xf32, #graph.dims<ffn>>) -> tensor<4x16xf32, #graph.dims<batch, ffn>>
// CHECK-NEXT: %[[DV:.*]] = graph.contract %[[H]], %[[G3]] sum ["batch"] : (tensor<4x16xf32, #graph.dims<batch, ffn>>, tensor<4xf32, #graph.dims<batch>>) -> tensor<16xf32, #graph.dims<ffn>>
// x @ u: du sums over batch, dy first so that it is [ffn, embed].
// CHECK-NEXT: %[[DU:.*]] = graph.contract %[[G2]], %[[X]] sum ["batch"] : (tensor<4x16xf32, #graph.dims<batch, ffn>>, tensor<4x8xf32, #graph.dims<batch, embed>>) -> tensor<16x8xf32, #graph.dims<ffn, embed>>
// x @ w: x first, for [embed, ffn].
// CHECK-NEXT: %[[DW:.*]] = graph.contract %[[X]], %[[G2]] sum ["batch"] : (tensor<4x8xf32, #graph.dims<batch, embed>>, tensor<4x16xf32, #graph.dims<batch, ffn>>) -> tensor<8x16xf32, #graph.dims<embed, ffn>>
// CHECK-NEXT: graph.accumulate_grad %[[DW]] to "w" : tensor<8x16xf32, #graph.dims<embed, ffn>>
// CHECK-NEXT: graph.accumulate_grad %[[DU]] to "u" : tensor<16x8xf32, #graph.dims<ffn, embed>>
// CHECK-NEXT: graph.accumulate_grad %[[DV]] to "v" : tensor<16xf32, #graph.dims<ffn>>
// CHECK-NEXT: return

// -----

// A weight [e1, f, e2] whose gradient neither operand order yields ([e1, e2, f] or
// [f, e1, e2]): it is permuted. The input's gradient is dead and removed.

!x = tensor<2x3x4xf32, #graph.dims<batch, e1, e2>>
!w = tensor<3x5x4xf32, #graph.dims<e1, f, e2>>
!y = tensor<2x5xf32, #graph.dims<batch, f>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward(%x: !x {graph.name = "x"}) -> !s {
    %w = graph.param "w" init <ones> : !w
    %0 = graph.contract %x, %w sum ["e1", "e2"] : (!x, !w) -> !y
    %1 = graph.sum %0 dims ["batch", "f"] : !y -> !s
    return %1 : !s
  }
}

// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:[^:]+]]:
// CHECK: %[[W:.*]] = graph.param "w"
// CHECK: %[[G:.*]] = graph.broadcast
// CHECK-NEXT: %[[DWT:.*]] = graph.contract %[[X]], %[[G]] sum ["batch"] : (tensor<2x3x4xf32, #graph.dims<batch, e1, e2>>, tensor<2x5xf32, #graph.dims<batch, f>>) -> tensor<3x4x5xf32, #graph.dims<e1, e2, f>>
// CHECK-NEXT: %[[DW:.*]] = graph.permute %[[DWT]] : tensor<3x4x5xf32, #graph.dims<e1, e2, f>> -> tensor<3x5x4xf32, #graph.dims<e1, f, e2>>
// CHECK-NEXT: graph.accumulate_grad %[[DW]] to "w" : tensor<3x5x4xf32, #graph.dims<e1, f, e2>>
// CHECK-NEXT: return

// -----

// A mean over some dims: its gradient broadcasts back and scales by 1/8 (embed only). A sum
// is a broadcast alone.

!x = tensor<4x8xf32, #graph.dims<batch, embed>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward(%x: !x {graph.name = "x"}) -> !s {
    %w = graph.param "w" init <ones> : !x
    %0 = graph.mul %x, %w : (!x, !x) -> !x
    %1 = graph.mean %0 dims ["embed"] : !x -> tensor<4xf32, #graph.dims<batch>>
    %2 = graph.sum %1 dims ["batch"] : tensor<4xf32, #graph.dims<batch>> -> !s
    return %2 : !s
  }
}

// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[SEED:.*]] = graph.constant 1.000000e+00
// CHECK-NEXT: %[[G1:.*]] = graph.broadcast %[[SEED]] : tensor<f32, #graph.dims<>> -> tensor<4xf32, #graph.dims<batch>>
// CHECK-NEXT: %[[SP:.*]] = graph.broadcast %[[G1]] : tensor<4xf32, #graph.dims<batch>> -> tensor<4x8xf32, #graph.dims<batch, embed>>
// CHECK-NEXT: %[[N:.*]] = graph.constant 1.250000e-01 : tensor<f32, #graph.dims<>>
// CHECK-NEXT: graph.mul %[[SP]], %[[N]]

// -----

// Composite ops with tessel.train accumulation = 4: the seed is 1/4. cross_entropy and
// embedding take no gradient for their integer operands; layernorm and rmsnorm have
// multi-result gradient ops; wte, read by embedding and as the output head, has its two
// gradients summed. rmsnorm carries graph.layer, which its gradient op inherits.

!x = tensor<2x4x8xf32, #graph.dims<batch, seq, embed>>
!e = tensor<8xf32, #graph.dims<embed>>
!t = tensor<16x8xf32, #graph.dims<vocab, embed>>
!l = tensor<2x4x16xf32, #graph.dims<batch, seq, vocab>>
!ids = tensor<2x4xi32, #graph.dims<batch, seq>>
!s = tensor<f32, #graph.dims<>>
module attributes {tessel.train = #tessel.train<accumulation = 4>} {
  func.func @forward(%tok: !ids {graph.name = "tokens"}, %tgt: !ids {graph.name = "targets"}) -> !s {
    %wte = graph.param "wte" init <normal(0.0, 0.02)> : !t
    %g = graph.param "ln_g" init <ones> : !e
    %b = graph.param "ln_b" init <zeros> : !e
    %r = graph.param "rms_g" init <ones> {graph.layer = 3 : i64} : !e
    %0 = graph.embedding %wte, %tok : (!t, !ids) -> !x
    %1 = graph.layernorm %0, %g, %b eps 1.0e-05 : (!x, !e, !e) -> !x
    %2 = graph.rmsnorm %1, %r eps 1.0e-06 {graph.layer = 3 : i64} : (!x, !e) -> !x
    %3 = graph.softmax %2 dim "embed" : !x
    %4 = graph.contract %3, %wte sum ["embed"] : (!x, !t) -> !l
    %5 = graph.cross_entropy %4, %tgt dim "vocab" : (!l, !ids) -> !s
    return %5 : !s
  }
}

// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[TOK:[^:]+]]: tensor<2x4xi32, #graph.dims<batch, seq>> {graph.name = "tokens"}, %[[TGT:[^:]+]]: tensor<2x4xi32, #graph.dims<batch, seq>> {graph.name = "targets"})
// CHECK: %[[WTE:.*]] = graph.param "wte"
// CHECK: %[[G:.*]] = graph.param "ln_g"
// CHECK: %[[R:.*]] = graph.param "rms_g"
// CHECK: %[[E:.*]] = graph.embedding %[[WTE]], %[[TOK]]
// CHECK: %[[LN:.*]] = graph.layernorm %[[E]]
// CHECK: %[[RMS:.*]] = graph.rmsnorm %[[LN]]
// CHECK: %[[P:.*]] = graph.softmax %[[RMS]]
// CHECK: %[[LOGITS:.*]] = graph.contract %[[P]], %[[WTE]]
// CHECK: %[[LOSS:.*]] = graph.cross_entropy %[[LOGITS]], %[[TGT]]
// CHECK-NEXT: %[[SEED:.*]] = graph.constant 2.500000e-01 : tensor<f32, #graph.dims<>>
// CHECK-NEXT: %[[DL:.*]] = graph.cross_entropy_grad %[[LOGITS]], %[[TGT]], %[[SEED]] dim "vocab" : (tensor<2x4x16xf32, #graph.dims<batch, seq, vocab>>, tensor<2x4xi32, #graph.dims<batch, seq>>, tensor<f32, #graph.dims<>>) -> tensor<2x4x16xf32, #graph.dims<batch, seq, vocab>>
// CHECK-NEXT: %[[DP:.*]] = graph.contract %[[DL]], %[[WTE]] sum ["vocab"]
// CHECK-NEXT: %[[DW1:.*]] = graph.contract %[[DL]], %[[P]] sum ["batch", "seq"] : {{.*}} -> tensor<16x8xf32, #graph.dims<vocab, embed>>
// CHECK-NEXT: %[[DS:.*]] = graph.softmax_grad %[[P]], %[[DP]] dim "embed" : tensor<2x4x8xf32, #graph.dims<batch, seq, embed>>
// CHECK-NEXT: %[[DRX:[^ ,]+]], %[[DR:[^ ,]+]] = graph.rmsnorm_grad %[[LN]], %[[R]], %[[DS]] eps 9.9999999999999995E-7 {graph.layer = 3 : i64} : (tensor<2x4x8xf32, #graph.dims<batch, seq, embed>>, tensor<8xf32, #graph.dims<embed>>, tensor<2x4x8xf32, #graph.dims<batch, seq, embed>>) -> (tensor<2x4x8xf32, #graph.dims<batch, seq, embed>>, tensor<8xf32, #graph.dims<embed>>)
// CHECK-NEXT: %[[DLX:[^ ,]+]], %[[DG:[^ ,]+]], %[[DB:[^ ,]+]] = graph.layernorm_grad %[[E]], %[[G]], %[[DRX]] eps 1.000000e-05 : (tensor<2x4x8xf32, #graph.dims<batch, seq, embed>>, tensor<8xf32, #graph.dims<embed>>, tensor<2x4x8xf32, #graph.dims<batch, seq, embed>>) -> (tensor<2x4x8xf32, #graph.dims<batch, seq, embed>>, tensor<8xf32, #graph.dims<embed>>, tensor<8xf32, #graph.dims<embed>>)
// CHECK-NEXT: %[[DW2:.*]] = graph.embedding_grad %[[DLX]], %[[TOK]] : (tensor<2x4x8xf32, #graph.dims<batch, seq, embed>>, tensor<2x4xi32, #graph.dims<batch, seq>>) -> tensor<16x8xf32, #graph.dims<vocab, embed>>
// CHECK-NEXT: %[[DW:.*]] = graph.add %[[DW1]], %[[DW2]] : (tensor<16x8xf32, #graph.dims<vocab, embed>>, tensor<16x8xf32, #graph.dims<vocab, embed>>) -> tensor<16x8xf32, #graph.dims<vocab, embed>>
// CHECK-NEXT: graph.accumulate_grad %[[DW]] to "wte"
// CHECK-NEXT: graph.accumulate_grad %[[DG]] to "ln_g"
// CHECK-NEXT: graph.accumulate_grad %[[DB]] to "ln_b"
// CHECK-NEXT: graph.accumulate_grad %[[DR]] to "rms_g"
// CHECK-NEXT: return %[[LOSS]]
// Only the rmsnorm's backward op is in layer 3.
// CHECK-NOT: graph.layer

// -----

// Attention, rope (the gradient of a rotation is the inverse rotation, and of an inverse
// rotation the forward one), dropout, merge/split/permute. Dropouts are numbered in order;
// a backward dropout reuses its forward's mask, and @forward loses its dropouts.

!x = tensor<2x4x8xf32, #graph.dims<batch, seq, embed>>
!h = tensor<2x4x2x4xf32, #graph.dims<batch, seq, heads, head>>
!kv = tensor<2x4x1x4xf32, #graph.dims<batch, seq, kv_heads, head>>
!wq = tensor<8x2x4xf32, #graph.dims<embed, heads, head>>
!wk = tensor<8x1x4xf32, #graph.dims<embed, kv_heads, head>>
!gf = tensor<2x4x2x4xf32, #graph.dims<batch, seq, g, f>>
!p = tensor<4x2x4x2xf32, #graph.dims<seq, batch, f, g>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward(%x: !x {graph.name = "x"}) -> !s {
    %wq = graph.param "wq" init <ones> : !wq
    %wk = graph.param "wk" init <ones> : !wk
    %q = graph.contract %x, %wq sum ["embed"] : (!x, !wq) -> !h
    %k = graph.contract %x, %wk sum ["embed"] : (!x, !wk) -> !kv
    %rq = graph.rope %q theta 1.0e4 : !h
    %rk = graph.rope %k theta 1.0e4 inverse : !kv
    %a = graph.attention %rq, %rk, %k causal scale 0.5 {graph.layer = 1 : i64} : (!h, !kv, !kv) -> !h
    %d = graph.dropout %a rate 0.1 : !h
    %m = graph.merge %d dims ["heads", "head"] : !h -> !x
    %d2 = graph.dropout %m rate 0.2 : !x
    %sp = graph.split %d2 dim "embed" : !x -> !gf
    %pm = graph.permute %sp : !gf -> !p
    %l = graph.sum %pm dims ["seq", "batch", "f", "g"] : !p -> !s
    return %l : !s
  }
}

// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[FX:[^:]+]]:
// CHECK: %[[FA:.*]] = graph.attention
// CHECK-NEXT: %[[FM:.*]] = graph.merge %[[FA]] dims ["heads", "head"]
// CHECK-NEXT: graph.split %[[FM]] dim "embed"
// CHECK-NOT: graph.dropout
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:[^:]+]]:
// CHECK: %[[WQ:.*]] = graph.param "wq"
// CHECK-NEXT: %[[WK:.*]] = graph.param "wk"
// CHECK-NEXT: %[[Q:.*]] = graph.contract %[[X]], %[[WQ]]
// CHECK-NEXT: %[[K:.*]] = graph.contract %[[X]], %[[WK]]
// CHECK-NEXT: %[[RQ:.*]] = graph.rope %[[Q]] theta 1.000000e+04 : tensor<2x4x2x4xf32
// CHECK-NEXT: %[[RK:.*]] = graph.rope %[[K]] theta 1.000000e+04 inverse :
// CHECK-NEXT: %[[A:.*]] = graph.attention %[[RQ]], %[[RK]], %[[K]] causal scale 5.000000e-01 {graph.layer = 1 : i64}
// CHECK-NEXT: %[[D:.*]] = graph.dropout %[[A]] rate 1.000000e-01 mask 0 :
// CHECK-NEXT: %[[M:.*]] = graph.merge %[[D]]
// CHECK-NEXT: %[[D2:.*]] = graph.dropout %[[M]] rate 2.000000e-01 mask 1 :
// CHECK-NEXT: %[[SP:.*]] = graph.split %[[D2]]
// CHECK-NEXT: %[[PM:.*]] = graph.permute %[[SP]]
// CHECK-NEXT: %[[LOSS:.*]] = graph.sum %[[PM]]
// CHECK-NEXT: graph.constant 1.000000e+00
// CHECK-NEXT: %[[GP:.*]] = graph.broadcast {{.*}} -> tensor<4x2x4x2xf32, #graph.dims<seq, batch, f, g>>
// permute back, merge what split, dropout with the same mask, split what merge merged.
// CHECK-NEXT: %[[GS:.*]] = graph.permute %[[GP]] : tensor<4x2x4x2xf32, #graph.dims<seq, batch, f, g>> -> tensor<2x4x2x4xf32, #graph.dims<batch, seq, g, f>>
// CHECK-NEXT: %[[GD2:.*]] = graph.merge %[[GS]] dims ["g", "f"] : tensor<2x4x2x4xf32, #graph.dims<batch, seq, g, f>> -> tensor<2x4x8xf32, #graph.dims<batch, seq, embed>>
// CHECK-NEXT: %[[GM:.*]] = graph.dropout %[[GD2]] rate 2.000000e-01 mask 1 : tensor<2x4x8xf32, #graph.dims<batch, seq, embed>>
// CHECK-NEXT: %[[GD:.*]] = graph.split %[[GM]] dim "embed" : tensor<2x4x8xf32, #graph.dims<batch, seq, embed>> -> tensor<2x4x2x4xf32, #graph.dims<batch, seq, heads, head>>
// CHECK-NEXT: %[[GA:.*]] = graph.dropout %[[GD]] rate 1.000000e-01 mask 0 : tensor<2x4x2x4xf32, #graph.dims<batch, seq, heads, head>>
// CHECK-NEXT: %[[DQ:[^ ,]+]], %[[DK:[^ ,]+]], %[[DV:[^ ,]+]] = graph.attention_grad %[[RQ]], %[[RK]], %[[K]], %[[GA]] causal scale 5.000000e-01 {graph.layer = 1 : i64} : (tensor<2x4x2x4xf32, #graph.dims<batch, seq, heads, head>>, tensor<2x4x1x4xf32, #graph.dims<batch, seq, kv_heads, head>>, tensor<2x4x1x4xf32, #graph.dims<batch, seq, kv_heads, head>>, tensor<2x4x2x4xf32, #graph.dims<batch, seq, heads, head>>) -> (tensor<2x4x2x4xf32, #graph.dims<batch, seq, heads, head>>, tensor<2x4x1x4xf32, #graph.dims<batch, seq, kv_heads, head>>, tensor<2x4x1x4xf32, #graph.dims<batch, seq, kv_heads, head>>)
// The inverse rope's gradient is a forward rope; k's two gradients are summed.
// CHECK-NEXT: %[[DK0:.*]] = graph.rope %[[DK]] theta 1.000000e+04 : tensor<2x4x1x4xf32, #graph.dims<batch, seq, kv_heads, head>>
// CHECK-NEXT: %[[DKS:.*]] = graph.add %[[DV]], %[[DK0]]
// CHECK-NEXT: %[[DQ0:.*]] = graph.rope %[[DQ]] theta 1.000000e+04 inverse : tensor<2x4x2x4xf32, #graph.dims<batch, seq, heads, head>>
// CHECK-NEXT: %[[DWK:.*]] = graph.contract %[[X]], %[[DKS]] sum ["batch", "seq"] : {{.*}} -> tensor<8x1x4xf32, #graph.dims<embed, kv_heads, head>>
// CHECK-NEXT: %[[DWQ:.*]] = graph.contract %[[X]], %[[DQ0]] sum ["batch", "seq"] : {{.*}} -> tensor<8x2x4xf32, #graph.dims<embed, heads, head>>
// CHECK-NEXT: graph.accumulate_grad %[[DWQ]] to "wq"
// CHECK-NEXT: graph.accumulate_grad %[[DWK]] to "wk"
// CHECK-NEXT: return %[[LOSS]]

// -----

// graph.layer passes to every op a rule emits: here the mul and the sum of the broadcast
// operand's gradient. Ops of unlayered forward ops stay unlayered.

!x = tensor<4x8xf32, #graph.dims<batch, embed>>
!b = tensor<8xf32, #graph.dims<embed>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward(%x: !x {graph.name = "x"}) -> !s {
    %w = graph.param "w" init <ones> {graph.layer = 2 : i64} : !b
    %0 = graph.mul %x, %w {graph.layer = 2 : i64} : (!x, !b) -> !x
    %1 = graph.sum %0 dims ["batch", "embed"] : !x -> !s
    return %1 : !s
  }
}

// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:[^:]+]]:
// CHECK: %[[W:.*]] = graph.param "w" init <ones> {graph.layer = 2 : i64}
// CHECK: graph.sum
// CHECK-NEXT: %[[SEED:.*]] = graph.constant 1.000000e+00 : tensor<f32, #graph.dims<>>
// CHECK-NEXT: %[[G:.*]] = graph.broadcast %[[SEED]] : tensor
// CHECK-NEXT: %[[T:.*]] = graph.mul %[[G]], %[[X]] {graph.layer = 2 : i64}
// CHECK-NEXT: %[[DW:.*]] = graph.sum %[[T]] dims ["batch"] {graph.layer = 2 : i64}
// CHECK-NEXT: graph.accumulate_grad %[[DW]] to "w" :
// CHECK-NEXT: return
