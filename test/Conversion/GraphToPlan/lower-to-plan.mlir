// RUN: tessel-opt %s -split-input-file -tessel-lower-to-plan | FileCheck %s
// -tessel-lower-to-plan: persistent state declarations, one plan.program per function with
// every value in a buffer, and each graph op's kernel with its resolved sizes and strides.

// A training step: a broadcast bias add, x @ w, a mean, the weight gradient (x^T @ dy) and
// an optimizer step.

!x = tensor<4x8xf32, #graph.dims<batch, embed>>
!b = tensor<8xf32, #graph.dims<embed>>
!w = tensor<8x16xf32, #graph.dims<embed, ffn>>
!y = tensor<4x16xf32, #graph.dims<batch, ffn>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward_backward(%x: !x {graph.name = "x"}) -> !s {
    %b = graph.param "bias" init <uniform(-0.5, 0.5)> : !b
    %w = graph.param "w" init <normal(0.0, 0.02)> : !w
    %0 = graph.add %x, %b : (!x, !b) -> !x
    %1 = graph.contract %0, %w sum ["embed"] : (!x, !w) -> !y
    %2 = graph.mean %1 dims ["batch", "ffn"] : !y -> !s
    %3 = graph.constant 1.0 : !s
    %4 = graph.broadcast %3 : !s -> !y
    %5 = graph.contract %0, %4 sum ["batch"] : (!x, !y) -> !w
    graph.accumulate_grad %5 to "w" : !w
    return %2 : !s
  }
  func.func @optimizer_step() -> (!s, !s) {
    %0 = graph.grad "w" : !w
    %1 = graph.global_norm %0 : !w -> !s
    %2 = graph.clip_coefficient %1 max 1.0 : !s
    %3 = graph.learning_rate cosine lr 1.0e-3 min_lr 1.0e-4 warmup 2 steps 10 : !s
    graph.adamw "w", %0, %3, %2 beta1 0.5 beta2 0.75 eps 1.0e-8 weight_decay 0.25 : !w, !s, !s
    graph.zero_grad "w"
    return %1, %3 : !s, !s
  }
}

// The mesh first (one rank: no axes, and the world group), then state in order of first use:
// parameters (with their initialisers), then the gradient accumulator and the two AdamW
// moments.
// CHECK: module {
// CHECK-NEXT: plan.mesh [] sizes []
// CHECK-NEXT: plan.group "world" axes []
// CHECK-NEXT: plan.tensor "bias" role "param" init "uniform"(-5.000000e-01, 5.000000e-01) dims ["embed"] : memref<8xf32>
// CHECK-NEXT: plan.tensor "w" role "param" init "normal"(0.000000e+00, 2.000000e-02) dims ["embed", "ffn"] : memref<8x16xf32>
// CHECK-NEXT: plan.tensor "grad.w" role "grad" of "w" init "zeros"(0.000000e+00, 0.000000e+00) dims ["embed", "ffn"] : memref<8x16xf32>
// CHECK-NEXT: plan.tensor "adam_m.w" role "adam_m" of "w" init "zeros"(0.000000e+00, 0.000000e+00) dims ["embed", "ffn"] : memref<8x16xf32>
// CHECK-NEXT: plan.tensor "adam_v.w" role "adam_v" of "w" init "zeros"(0.000000e+00, 0.000000e+00) dims ["embed", "ffn"] : memref<8x16xf32>
// CHECK-NEXT: plan.program "forward_backward" {
// CHECK-NEXT: %[[X:.*]] = plan.input "x" : memref<4x8xf32>
// CHECK-NEXT: %[[B:.*]] = plan.state "bias" : memref<8xf32>
// CHECK-NEXT: %[[W:.*]] = plan.state "w" : memref<8x16xf32>
// The bias is broadcast over batch: stride 0.
// CHECK-NEXT: %[[H:.*]] = plan.alloc : memref<4x8xf32>
// CHECK-NEXT: plan.kernel "binary" ins(%[[X]], %[[B]] : memref<4x8xf32>, memref<8xf32>) outs(%[[H]] : memref<4x8xf32>) {a_strides = array<i64: 8, 1>, b_strides = array<i64: 0, 1>, op = "add", shape = array<i64: 4, 8>}
// x @ w: [4, 8] x [8, 16], both row-major.
// CHECK-NEXT: %[[Y:.*]] = plan.alloc : memref<4x16xf32>
// CHECK-NEXT: plan.kernel "gemm" ins(%[[H]], %[[W]] : memref<4x8xf32>, memref<8x16xf32>) outs(%[[Y]] : memref<4x16xf32>) {a_batch_strides = array<i64>, b_batch_strides = array<i64>, batch_shape = array<i64>, c_batch_strides = array<i64>, k = 8 : i64, lda = 8 : i64, ldb = 16 : i64, ldc = 16 : i64, m = 4 : i64, n = 16 : i64, trans_a = 0 : i64, trans_b = 0 : i64}
// The mean of 64 elements.
// CHECK-NEXT: %[[L:.*]] = plan.alloc : memref<f32>
// CHECK-NEXT: plan.kernel "reduce" ins(%[[Y]] : memref<4x16xf32>) outs(%[[L]] : memref<f32>) {scale = 1.562500e-02 : f64, shape = array<i64: 4, 16>, y_elements = 1 : i64, y_strides = array<i64: 0, 0>}
// CHECK-NEXT: %[[ONE:.*]] = plan.alloc : memref<f32>
// CHECK-NEXT: plan.kernel "fill" outs(%[[ONE]] : memref<f32>) {n = 1 : i64, value = 1.000000e+00 : f64}
// CHECK-NEXT: %[[DY:.*]] = plan.alloc : memref<4x16xf32>
// CHECK-NEXT: plan.kernel "copy" ins(%[[ONE]] : memref<f32>) outs(%[[DY]] : memref<4x16xf32>) {shape = array<i64: 4, 16>, x_strides = array<i64: 0, 0>}
// dw = h^T @ dy: h is read transposed.
// CHECK-NEXT: %[[DW:.*]] = plan.alloc : memref<8x16xf32>
// CHECK-NEXT: plan.kernel "gemm" ins(%[[H]], %[[DY]] : memref<4x8xf32>, memref<4x16xf32>) outs(%[[DW]] : memref<8x16xf32>) {a_batch_strides = array<i64>, b_batch_strides = array<i64>, batch_shape = array<i64>, c_batch_strides = array<i64>, k = 4 : i64, lda = 8 : i64, ldb = 16 : i64, ldc = 16 : i64, m = 8 : i64, n = 16 : i64, trans_a = 1 : i64, trans_b = 0 : i64}
// CHECK-NEXT: %[[ACC:.*]] = plan.state "grad.w" : memref<8x16xf32>
// CHECK-NEXT: plan.kernel "accumulate" ins(%[[DW]] : memref<8x16xf32>) outs(%[[ACC]] : memref<8x16xf32>) {n = 128 : i64}
// CHECK-NEXT: plan.output "loss", %[[L]] : memref<f32>
// CHECK-NEXT: }
// CHECK-NEXT: plan.program "optimizer_step" {
// CHECK-NEXT: %[[G:.*]] = plan.state "grad.w" : memref<8x16xf32>
// CHECK-NEXT: %[[N:.*]] = plan.alloc : memref<f32>
// CHECK-NEXT: plan.kernel "global_norm" ins(%[[G]] : memref<8x16xf32>) outs(%[[N]] : memref<f32>) {}
// CHECK-NEXT: %[[C:.*]] = plan.alloc : memref<f32>
// CHECK-NEXT: plan.kernel "clip_coefficient" ins(%[[N]] : memref<f32>) outs(%[[C]] : memref<f32>) {max = 1.000000e+00 : f64}
// CHECK-NEXT: %[[LR:.*]] = plan.alloc : memref<f32>
// CHECK-NEXT: plan.kernel "learning_rate" outs(%[[LR]] : memref<f32>) {lr = 1.000000e-03 : f64, min_lr = 1.000000e-04 : f64, schedule = "cosine", steps = 10 : i64, warmup = 2 : i64}
// CHECK-NEXT: %[[P:.*]] = plan.state "w" : memref<8x16xf32>
// CHECK-NEXT: %[[M:.*]] = plan.state "adam_m.w" : memref<8x16xf32>
// CHECK-NEXT: %[[V:.*]] = plan.state "adam_v.w" : memref<8x16xf32>
// CHECK-NEXT: plan.kernel "adamw" ins(%[[G]], %[[LR]], %[[C]] : memref<8x16xf32>, memref<f32>, memref<f32>) outs(%[[P]], %[[M]], %[[V]] : memref<8x16xf32>, memref<8x16xf32>, memref<8x16xf32>) {beta1 = 5.000000e-01 : f64, beta2 = 7.500000e-01 : f64, eps = 1.000000e-08 : f64, n = array<i64: 128>, weight_decay = 2.500000e-01 : f64}
// CHECK-NEXT: %[[Z:.*]] = plan.state "grad.w" : memref<8x16xf32>
// CHECK-NEXT: plan.kernel "fill" outs(%[[Z]] : memref<8x16xf32>) {n = 128 : i64, value = 0.000000e+00 : f64}
// CHECK-NEXT: plan.output "grad_norm", %[[N]] : memref<f32>
// CHECK-NEXT: plan.output "lr", %[[LR]] : memref<f32>
// CHECK-NEXT: }
// The graph functions are gone.
// CHECK-NEXT: }
// CHECK-NOT: func.func
// CHECK: // -----

// Layouts no GEMM reads directly. x [batch, embed, seq] @ w: M = (batch, seq) is not one
// evenly strided index of x, so x is first copied to [batch, seq, embed]. w @ x: w is read
// transposed, and N = (batch, seq) of x is copied to [embed, batch, seq]. @forward becomes
// the "eval" program.

!x = tensor<2x8x4xf32, #graph.dims<batch, embed, seq>>
!w = tensor<8x16xf32, #graph.dims<embed, ffn>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward(%x: !x {graph.name = "x"}) -> !s {
    %w = graph.param "w" init <normal(0.0, 0.02)> : !w
    %0 = graph.contract %x, %w sum ["embed"] : (!x, !w) -> tensor<2x4x16xf32, #graph.dims<batch, seq, ffn>>
    %1 = graph.contract %w, %x sum ["embed"] : (!w, !x) -> tensor<16x2x4xf32, #graph.dims<ffn, batch, seq>>
    %2 = graph.sum %1 dims ["ffn", "batch", "seq"] : tensor<16x2x4xf32, #graph.dims<ffn, batch, seq>> -> !s
    return %2 : !s
  }
}

// CHECK: plan.program "eval" {
// CHECK-NEXT: %[[X:.*]] = plan.input "x" : memref<2x8x4xf32>
// CHECK-NEXT: %[[W:.*]] = plan.state "w" : memref<8x16xf32>
// CHECK-NEXT: %[[XP:.*]] = plan.alloc : memref<2x4x8xf32>
// CHECK-NEXT: plan.kernel "copy" ins(%[[X]] : memref<2x8x4xf32>) outs(%[[XP]] : memref<2x4x8xf32>) {shape = array<i64: 2, 4, 8>, x_strides = array<i64: 32, 1, 4>}
// CHECK-NEXT: %[[Y:.*]] = plan.alloc : memref<2x4x16xf32>
// CHECK-NEXT: plan.kernel "gemm" ins(%[[XP]], %[[W]] : memref<2x4x8xf32>, memref<8x16xf32>) outs(%[[Y]] : memref<2x4x16xf32>) {a_batch_strides = array<i64>, b_batch_strides = array<i64>, batch_shape = array<i64>, c_batch_strides = array<i64>, k = 8 : i64, lda = 8 : i64, ldb = 16 : i64, ldc = 16 : i64, m = 8 : i64, n = 16 : i64, trans_a = 0 : i64, trans_b = 0 : i64}
// CHECK-NEXT: %[[XQ:.*]] = plan.alloc : memref<8x2x4xf32>
// CHECK-NEXT: plan.kernel "copy" ins(%[[X]] : memref<2x8x4xf32>) outs(%[[XQ]] : memref<8x2x4xf32>) {shape = array<i64: 8, 2, 4>, x_strides = array<i64: 4, 32, 1>}
// CHECK-NEXT: %[[Z:.*]] = plan.alloc : memref<16x2x4xf32>
// CHECK-NEXT: plan.kernel "gemm" ins(%[[W]], %[[XQ]] : memref<8x16xf32>, memref<8x2x4xf32>) outs(%[[Z]] : memref<16x2x4xf32>) {a_batch_strides = array<i64>, b_batch_strides = array<i64>, batch_shape = array<i64>, c_batch_strides = array<i64>, k = 8 : i64, lda = 16 : i64, ldb = 8 : i64, ldc = 8 : i64, m = 16 : i64, n = 8 : i64, trans_a = 1 : i64, trans_b = 0 : i64}
// CHECK-NEXT: %[[L:.*]] = plan.alloc : memref<f32>
// CHECK-NEXT: plan.kernel "reduce" ins(%[[Z]] : memref<16x2x4xf32>) outs(%[[L]] : memref<f32>) {scale = 1.000000e+00 : f64, shape = array<i64: 16, 2, 4>, y_elements = 1 : i64, y_strides = array<i64: 0, 0, 0>}
// CHECK-NEXT: plan.output "loss", %[[L]] : memref<f32>
// CHECK: // -----

// The composite ops of a model: embedding, norms over the trailing dims (rows x cols),
// split and merge as views of the same bytes, rope, attention, unary functions, dropout,
// softmax, the tied output head (w read transposed) and the loss.

!x = tensor<2x4x8xf32, #graph.dims<batch, seq, embed>>
!h = tensor<2x4x2x4xf32, #graph.dims<batch, seq, heads, head>>
!e = tensor<8xf32, #graph.dims<embed>>
!t = tensor<16x8xf32, #graph.dims<vocab, embed>>
!l = tensor<2x4x16xf32, #graph.dims<batch, seq, vocab>>
!ids = tensor<2x4xi32, #graph.dims<batch, seq>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward(%tok: !ids {graph.name = "tokens"}, %tgt: !ids {graph.name = "targets"}) -> !s {
    %wte = graph.param "wte" init <normal(0.0, 0.02)> : !t
    %g = graph.param "ln_g" init <ones> : !e
    %b = graph.param "ln_b" init <constant(0.5)> : !e
    %0 = graph.embedding %wte, %tok : (!t, !ids) -> !x
    %1 = graph.layernorm %0, %g, %b eps 1.0e-05 : (!x, !e, !e) -> !x
    %2 = graph.rmsnorm %1, %g eps 1.0e-06 : (!x, !e) -> !x
    %3 = graph.split %2 dim "embed" : !x -> !h
    %4 = graph.rope %3 theta 1.0e4 : !h
    %5 = graph.attention %4, %4, %3 causal scale 0.5 : (!h, !h, !h) -> !h
    %6 = graph.merge %5 dims ["heads", "head"] : !h -> !x
    %7 = graph.unary gelu %6 : !x
    %8 = graph.dropout %7 rate 0.25 mask 3 : !x
    %9 = graph.softmax %8 dim "embed" : !x
    %10 = graph.contract %9, %wte sum ["embed"] : (!x, !t) -> !l
    %11 = graph.cross_entropy %10, %tgt dim "vocab" : (!l, !ids) -> !s
    return %11 : !s
  }
}

// CHECK: plan.tensor "wte" role "param" init "normal"(0.000000e+00, 2.000000e-02) dims ["vocab", "embed"] : memref<16x8xf32>
// CHECK-NEXT: plan.tensor "ln_g" role "param" init "ones"(0.000000e+00, 0.000000e+00) dims ["embed"] : memref<8xf32>
// CHECK-NEXT: plan.tensor "ln_b" role "param" init "constant"(5.000000e-01, 0.000000e+00) dims ["embed"] : memref<8xf32>
// CHECK-NEXT: plan.program "eval" {
// CHECK-NEXT: %[[TOK:.*]] = plan.input "tokens" : memref<2x4xi32>
// CHECK-NEXT: %[[TGT:.*]] = plan.input "targets" : memref<2x4xi32>
// CHECK-NEXT: %[[WTE:.*]] = plan.state "wte"
// CHECK-NEXT: %[[G:.*]] = plan.state "ln_g"
// CHECK-NEXT: %[[B:.*]] = plan.state "ln_b"
// CHECK-NEXT: %[[E:.*]] = plan.alloc : memref<2x4x8xf32>
// CHECK-NEXT: plan.kernel "embedding" ins(%[[WTE]], %[[TOK]] : memref<16x8xf32>, memref<2x4xi32>) outs(%[[E]] : memref<2x4x8xf32>) {cols = 8 : i64, n = 8 : i64, rows = 16 : i64}
// CHECK-NEXT: %[[LN:.*]] = plan.alloc : memref<2x4x8xf32>
// CHECK-NEXT: plan.kernel "layernorm" ins(%[[E]], %[[G]], %[[B]] : memref<2x4x8xf32>, memref<8xf32>, memref<8xf32>) outs(%[[LN]] : memref<2x4x8xf32>) {cols = 8 : i64, eps = 1.000000e-05 : f64, rows = 8 : i64}
// CHECK-NEXT: %[[RMS:.*]] = plan.alloc : memref<2x4x8xf32>
// CHECK-NEXT: plan.kernel "rmsnorm" ins(%[[LN]], %[[G]] : memref<2x4x8xf32>, memref<8xf32>) outs(%[[RMS]] : memref<2x4x8xf32>) {cols = 8 : i64, eps = 9.9999999999999995E-7 : f64, rows = 8 : i64}
// CHECK-NEXT: %[[SPLIT:.*]] = plan.view %[[RMS]] : memref<2x4x8xf32> to memref<2x4x2x4xf32>
// CHECK-NEXT: %[[ROPE:.*]] = plan.alloc : memref<2x4x2x4xf32>
// CHECK-NEXT: plan.kernel "rope" ins(%[[SPLIT]] : memref<2x4x2x4xf32>) outs(%[[ROPE]] : memref<2x4x2x4xf32>) {batch = 2 : i64, head = 4 : i64, heads = 2 : i64, inverse = 0 : i64, seq = 4 : i64, theta = 1.000000e+04 : f64}
// CHECK-NEXT: %[[ATT:.*]] = plan.alloc : memref<2x4x2x4xf32>
// CHECK-NEXT: plan.kernel "attention" ins(%[[ROPE]], %[[ROPE]], %[[SPLIT]] : memref<2x4x2x4xf32>, memref<2x4x2x4xf32>, memref<2x4x2x4xf32>) outs(%[[ATT]] : memref<2x4x2x4xf32>) {batch = 2 : i64, causal = 1 : i64, head = 4 : i64, heads = 2 : i64, kv_heads = 2 : i64, kv_seq = 4 : i64, scale = 5.000000e-01 : f64, seq = 4 : i64}
// CHECK-NEXT: %[[MERGE:.*]] = plan.view %[[ATT]] : memref<2x4x2x4xf32> to memref<2x4x8xf32>
// CHECK-NEXT: %[[GELU:.*]] = plan.alloc : memref<2x4x8xf32>
// CHECK-NEXT: plan.kernel "unary" ins(%[[MERGE]] : memref<2x4x8xf32>) outs(%[[GELU]] : memref<2x4x8xf32>) {n = 64 : i64, op = "gelu"}
// CHECK-NEXT: %[[DROP:.*]] = plan.alloc : memref<2x4x8xf32>
// CHECK-NEXT: plan.kernel "dropout" ins(%[[GELU]] : memref<2x4x8xf32>) outs(%[[DROP]] : memref<2x4x8xf32>) {batch_dim = 0 : i64, groups = ",,", mask = 3 : i64, micro_batches = 1 : i64, rate = 2.500000e-01 : f64, shape = array<i64: 2, 4, 8>}
// CHECK-NEXT: %[[SM:.*]] = plan.alloc : memref<2x4x8xf32>
// CHECK-NEXT: plan.kernel "softmax" ins(%[[DROP]] : memref<2x4x8xf32>) outs(%[[SM]] : memref<2x4x8xf32>) {cols = 8 : i64, rows = 8 : i64}
// CHECK-NEXT: %[[LOGITS:.*]] = plan.alloc : memref<2x4x16xf32>
// CHECK-NEXT: plan.kernel "gemm" ins(%[[SM]], %[[WTE]] : memref<2x4x8xf32>, memref<16x8xf32>) outs(%[[LOGITS]] : memref<2x4x16xf32>) {{{.*}} k = 8 : i64, lda = 8 : i64, ldb = 8 : i64, ldc = 16 : i64, m = 8 : i64, n = 16 : i64, trans_a = 0 : i64, trans_b = 1 : i64}
// CHECK-NEXT: %[[LOSS:.*]] = plan.alloc : memref<f32>
// CHECK-NEXT: plan.kernel "cross_entropy" ins(%[[LOGITS]], %[[TGT]] : memref<2x4x16xf32>, memref<2x4xi32>) outs(%[[LOSS]] : memref<f32>) {cols = 16 : i64, rows = 8 : i64}
// CHECK-NEXT: plan.output "loss", %[[LOSS]] : memref<f32>
// CHECK: // -----

// Gradient ops, a batched GEMM (attention scores: batch and heads are batch dims of both
// operands, k is read transposed), a permute and a broadcast (strided copies) and a partial
// reduction.

!x = tensor<2x4x8xf32, #graph.dims<batch, seq, embed>>
!h = tensor<2x4x2x4xf32, #graph.dims<batch, seq, heads, head>>
!k = tensor<2x3x2x4xf32, #graph.dims<batch, kv, heads, head>>
!e = tensor<8xf32, #graph.dims<embed>>
!t = tensor<16x8xf32, #graph.dims<vocab, embed>>
!l = tensor<2x4x16xf32, #graph.dims<batch, seq, vocab>>
!ids = tensor<2x4xi32, #graph.dims<batch, seq>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward_backward(%x: !x {graph.name = "x"}, %q: !h {graph.name = "q"}, %k: !k {graph.name = "k"},
                              %tgt: !ids {graph.name = "targets"}, %lg: !l {graph.name = "logits"}) -> !s {
    %g = graph.param "g" init <ones> : !e
    %sc = graph.contract %q, %k sum ["head"] : (!h, !k) -> tensor<2x4x2x3xf32, #graph.dims<batch, seq, heads, kv>>
    %p = graph.softmax %x dim "embed" : !x
    %dp = graph.softmax_grad %p, %x dim "embed" : !x
    %dx, %dg, %db = graph.layernorm_grad %x, %g, %dp eps 1.0e-05 : (!x, !e, !x) -> (!x, !e, !e)
    %rx, %rg = graph.rmsnorm_grad %x, %g, %dx eps 1.0e-05 : (!x, !e, !x) -> (!x, !e)
    %u = graph.unary_grad tanh %x, %rx, %dx : !x
    %dq, %dk, %dv = graph.attention_grad %q, %k, %k, %q scale 0.25 : (!h, !k, !k, !h) -> (!h, !k, !k)
    %two = graph.constant 2.0 : !s
    %dl = graph.cross_entropy_grad %lg, %tgt, %two dim "vocab" : (!l, !ids, !s) -> !l
    %dt = graph.embedding_grad %u, %tgt : (!x, !ids) -> !t
    %pm = graph.permute %u : !x -> tensor<8x2x4xf32, #graph.dims<embed, batch, seq>>
    %sm = graph.sum %u dims ["seq"] : !x -> tensor<2x8xf32, #graph.dims<batch, embed>>
    %bc = graph.broadcast %sm : tensor<2x8xf32, #graph.dims<batch, embed>> -> !x
    %ng = graph.unary neg %dg : !e
    %sub = graph.sub %ng, %db : (!e, !e) -> !e
    graph.accumulate_grad %sub to "g" : !e
    return %two : !s
  }
}

// CHECK: plan.tensor "g" role "param" init "ones"
// CHECK-NEXT: plan.tensor "grad.g" role "grad" of "g" init "zeros"(0.000000e+00, 0.000000e+00) dims ["embed"] : memref<8xf32>
// CHECK-NEXT: plan.program "forward_backward" {
// CHECK-NEXT: %[[X:.*]] = plan.input "x" : memref<2x4x8xf32>
// CHECK-NEXT: %[[Q:.*]] = plan.input "q" : memref<2x4x2x4xf32>
// CHECK-NEXT: %[[K:.*]] = plan.input "k" : memref<2x3x2x4xf32>
// CHECK-NEXT: %[[TGT:.*]] = plan.input "targets" : memref<2x4xi32>
// CHECK-NEXT: %[[LG:.*]] = plan.input "logits" : memref<2x4x16xf32>
// CHECK-NEXT: %[[G:.*]] = plan.state "g" : memref<8xf32>
// CHECK-NEXT: %[[SC:.*]] = plan.alloc : memref<2x4x2x3xf32>
// CHECK-NEXT: plan.kernel "gemm" ins(%[[Q]], %[[K]] : memref<2x4x2x4xf32>, memref<2x3x2x4xf32>) outs(%[[SC]] : memref<2x4x2x3xf32>) {a_batch_strides = array<i64: 32, 4>, b_batch_strides = array<i64: 24, 4>, batch_shape = array<i64: 2, 2>, c_batch_strides = array<i64: 24, 3>, k = 4 : i64, lda = 8 : i64, ldb = 8 : i64, ldc = 6 : i64, m = 4 : i64, n = 3 : i64, trans_a = 0 : i64, trans_b = 1 : i64}
// CHECK-NEXT: %[[P:.*]] = plan.alloc
// CHECK-NEXT: plan.kernel "softmax" ins(%[[X]] : memref<2x4x8xf32>) outs(%[[P]] : memref<2x4x8xf32>) {cols = 8 : i64, rows = 8 : i64}
// CHECK-NEXT: %[[DP:.*]] = plan.alloc
// CHECK-NEXT: plan.kernel "softmax_grad" ins(%[[P]], %[[X]] : memref<2x4x8xf32>, memref<2x4x8xf32>) outs(%[[DP]] : memref<2x4x8xf32>) {cols = 8 : i64, rows = 8 : i64}
// CHECK-NEXT: %[[DX:.*]] = plan.alloc : memref<2x4x8xf32>
// CHECK-NEXT: %[[DG:.*]] = plan.alloc : memref<8xf32>
// CHECK-NEXT: %[[DB:.*]] = plan.alloc : memref<8xf32>
// CHECK-NEXT: plan.kernel "layernorm_grad" ins(%[[X]], %[[G]], %[[DP]] : memref<2x4x8xf32>, memref<8xf32>, memref<2x4x8xf32>) outs(%[[DX]], %[[DG]], %[[DB]] : memref<2x4x8xf32>, memref<8xf32>, memref<8xf32>) {cols = 8 : i64, eps = 1.000000e-05 : f64, rows = 8 : i64}
// CHECK-NEXT: %[[RX:.*]] = plan.alloc : memref<2x4x8xf32>
// CHECK-NEXT: %[[RG:.*]] = plan.alloc : memref<8xf32>
// CHECK-NEXT: plan.kernel "rmsnorm_grad" ins(%[[X]], %[[G]], %[[DX]] : memref<2x4x8xf32>, memref<8xf32>, memref<2x4x8xf32>) outs(%[[RX]], %[[RG]] : memref<2x4x8xf32>, memref<8xf32>) {cols = 8 : i64, eps = 1.000000e-05 : f64, rows = 8 : i64}
// CHECK-NEXT: %[[U:.*]] = plan.alloc
// CHECK-NEXT: plan.kernel "unary_grad" ins(%[[X]], %[[RX]], %[[DX]] : memref<2x4x8xf32>, memref<2x4x8xf32>, memref<2x4x8xf32>) outs(%[[U]] : memref<2x4x8xf32>) {n = 64 : i64, op = "tanh"}
// CHECK-NEXT: %[[DQ:.*]] = plan.alloc : memref<2x4x2x4xf32>
// CHECK-NEXT: %[[DK:.*]] = plan.alloc : memref<2x3x2x4xf32>
// CHECK-NEXT: %[[DV:.*]] = plan.alloc : memref<2x3x2x4xf32>
// CHECK-NEXT: plan.kernel "attention_grad" ins(%[[Q]], %[[K]], %[[K]], %[[Q]] : {{.*}}) outs(%[[DQ]], %[[DK]], %[[DV]] : {{.*}}) {batch = 2 : i64, causal = 0 : i64, head = 4 : i64, heads = 2 : i64, kv_heads = 2 : i64, kv_seq = 3 : i64, scale = 2.500000e-01 : f64, seq = 4 : i64}
// CHECK-NEXT: %[[TWO:.*]] = plan.alloc : memref<f32>
// CHECK-NEXT: plan.kernel "fill" outs(%[[TWO]] : memref<f32>) {n = 1 : i64, value = 2.000000e+00 : f64}
// CHECK-NEXT: %[[DL:.*]] = plan.alloc
// CHECK-NEXT: plan.kernel "cross_entropy_grad" ins(%[[LG]], %[[TGT]], %[[TWO]] : memref<2x4x16xf32>, memref<2x4xi32>, memref<f32>) outs(%[[DL]] : memref<2x4x16xf32>) {cols = 16 : i64, rows = 8 : i64}
// CHECK-NEXT: %[[DT:.*]] = plan.alloc : memref<16x8xf32>
// CHECK-NEXT: plan.kernel "embedding_grad" ins(%[[U]], %[[TGT]] : memref<2x4x8xf32>, memref<2x4xi32>) outs(%[[DT]] : memref<16x8xf32>) {cols = 8 : i64, n = 8 : i64, rows = 16 : i64}
// CHECK-NEXT: %[[PM:.*]] = plan.alloc : memref<8x2x4xf32>
// CHECK-NEXT: plan.kernel "copy" ins(%[[U]] : memref<2x4x8xf32>) outs(%[[PM]] : memref<8x2x4xf32>) {shape = array<i64: 8, 2, 4>, x_strides = array<i64: 1, 32, 8>}
// CHECK-NEXT: %[[SM:.*]] = plan.alloc : memref<2x8xf32>
// CHECK-NEXT: plan.kernel "reduce" ins(%[[U]] : memref<2x4x8xf32>) outs(%[[SM]] : memref<2x8xf32>) {scale = 1.000000e+00 : f64, shape = array<i64: 2, 4, 8>, y_elements = 16 : i64, y_strides = array<i64: 8, 0, 1>}
// CHECK-NEXT: %[[BC:.*]] = plan.alloc : memref<2x4x8xf32>
// CHECK-NEXT: plan.kernel "copy" ins(%[[SM]] : memref<2x8xf32>) outs(%[[BC]] : memref<2x4x8xf32>) {shape = array<i64: 2, 4, 8>, x_strides = array<i64: 8, 0, 1>}
// CHECK-NEXT: %[[NG:.*]] = plan.alloc : memref<8xf32>
// CHECK-NEXT: plan.kernel "unary" ins(%[[DG]] : memref<8xf32>) outs(%[[NG]] : memref<8xf32>) {n = 8 : i64, op = "neg"}
// CHECK-NEXT: %[[SUB:.*]] = plan.alloc : memref<8xf32>
// CHECK-NEXT: plan.kernel "binary" ins(%[[NG]], %[[DB]] : memref<8xf32>, memref<8xf32>) outs(%[[SUB]] : memref<8xf32>) {a_strides = array<i64: 1>, b_strides = array<i64: 1>, op = "sub", shape = array<i64: 8>}
// CHECK-NEXT: %[[ACC:.*]] = plan.state "grad.g" : memref<8xf32>
// CHECK-NEXT: plan.kernel "accumulate" ins(%[[SUB]] : memref<8xf32>) outs(%[[ACC]] : memref<8xf32>) {n = 8 : i64}
// CHECK-NEXT: plan.output "loss", %[[TWO]] : memref<f32>
// CHECK: // -----

// A bias whose dims the lhs lacks: the result is [embed, batch] (lhs's dims, then rhs's),
// so each operand's strides follow the result's order.

!x = tensor<4x8xf32, #graph.dims<batch, embed>>
!b = tensor<8xf32, #graph.dims<embed>>
module {
  func.func @sample(%x: !x {graph.name = "x"}) -> tensor<8x4xf32, #graph.dims<embed, batch>> {
    %b = graph.param "b" init <zeros> : !b
    %0 = graph.mul %b, %x : (!b, !x) -> tensor<8x4xf32, #graph.dims<embed, batch>>
    return %0 : tensor<8x4xf32, #graph.dims<embed, batch>>
  }
}

// CHECK: plan.program "sample" {
// CHECK: plan.kernel "binary" ins(%{{.*}}, %{{.*}} : memref<8xf32>, memref<4x8xf32>) outs(%[[R:.*]] : memref<8x4xf32>) {a_strides = array<i64: 1, 0>, b_strides = array<i64: 1, 8>, op = "mul", shape = array<i64: 8, 4>}
// CHECK-NEXT: plan.output "logits", %[[R]] : memref<8x4xf32>

// -----

// Softmax over a dim that is not innermost, and a layernorm over a middle dim: the operand is
// copied into a layout with those dims last, the kernel runs on [rows, cols], and the result
// is copied back into the value's own layout.

!x = tensor<2x4x8xf32, #graph.dims<batch, seq, embed>>
!e = tensor<4xf32, #graph.dims<seq>>
module {
  func.func @forward(%x: !x {graph.name = "x"}) -> !x {
    %g = graph.param "seq_gain" init <ones> : !e
    %0 = graph.softmax %x dim "seq" : !x
    %1 = graph.layernorm %0, %g, %g eps 1.0e-05 : (!x, !e, !e) -> !x
    return %1 : !x
  }
}

// CHECK-LABEL: plan.tensor "seq_gain" role "param" init "ones"
// CHECK: %[[X:.*]] = plan.input "x"
// CHECK: %[[XT:.*]] = plan.alloc {{.*}}: memref<2x8x4xf32>
// CHECK-NEXT: plan.kernel "copy" ins(%[[X]] : memref<2x4x8xf32>) outs(%[[XT]] : memref<2x8x4xf32>) {shape = array<i64: 2, 8, 4>, x_strides = array<i64: 32, 1, 8>}
// CHECK-NEXT: %[[YT:.*]] = plan.alloc {{.*}}: memref<2x8x4xf32>
// CHECK-NEXT: plan.kernel "softmax" ins(%[[XT]] : memref<2x8x4xf32>) outs(%[[YT]] : memref<2x8x4xf32>) {cols = 4 : i64, rows = 16 : i64}
// CHECK-NEXT: %[[Y:.*]] = plan.alloc {{.*}}: memref<2x4x8xf32>
// CHECK-NEXT: plan.kernel "copy" ins(%[[YT]] : memref<2x8x4xf32>) outs(%[[Y]] : memref<2x4x8xf32>) {shape = array<i64: 2, 4, 8>, x_strides = array<i64: 32, 1, 4>}
// CHECK: plan.kernel "layernorm" {{.*}} {cols = 4 : i64, eps = 1.000000e-05 : f64, rows = 16 : i64}
// CHECK-NEXT: plan.alloc {{.*}}: memref<2x4x8xf32>
// CHECK-NEXT: plan.kernel "copy"
