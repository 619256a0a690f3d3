// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// Every op of the graph dialect, printed and parsed back, with the #graph.dims encoding and
// every #graph.init kind.

!x = tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>
!h = tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>
!kv = tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>
!s = tensor<f32, #graph.dims<>>

// CHECK-LABEL: func.func @sources
func.func @sources() -> (tensor<128x512xf32, #graph.dims<embed, ffn>>, !s) {
  // CHECK: %[[W:.*]] = graph.param "layers.0.mlp.w" init <normal(0.000000e+00, 2.000000e-02)> : tensor<128x512xf32, #graph.dims<embed, ffn>>
  %w = graph.param "layers.0.mlp.w" init <normal(0.0, 0.02)> : tensor<128x512xf32, #graph.dims<embed, ffn>>
  // CHECK: graph.param "u" init <uniform(-5.000000e-01, 5.000000e-01)> : tensor<128xf32, #graph.dims<embed>>
  %u = graph.param "u" init <uniform(-0.5, 0.5)> : tensor<128xf32, #graph.dims<embed>>
  // CHECK: graph.param "z" init <zeros> : tensor<128xbf16, #graph.dims<embed>>
  %z = graph.param "z" init <zeros> : tensor<128xbf16, #graph.dims<embed>>
  // CHECK: graph.param "o" init <ones> : tensor<128xf16, #graph.dims<embed>>
  %o = graph.param "o" init <ones> : tensor<128xf16, #graph.dims<embed>>
  // CHECK: graph.param "k" init <constant(3.000000e+00)> : tensor<128xf32, #graph.dims<embed>>
  %k = graph.param "k" init <constant(3.0)> : tensor<128xf32, #graph.dims<embed>>
  // The fully qualified attribute parses too, here through an alias.
  // CHECK: graph.param "q" init <normal(1.000000e+00, 5.000000e-01)> {tag} : tensor<128xf32, #graph.dims<embed>>
  %q = graph.param "q" init #graph.init<normal(1.0, 0.5)> {tag} : tensor<128xf32, #graph.dims<embed>>
  // CHECK: %[[C:.*]] = graph.constant 5.000000e-01 : tensor<f32, #graph.dims<>>
  %c = graph.constant 5.000000e-01 : !s
  // CHECK: return %[[W]], %[[C]]
  return %w, %c : tensor<128x512xf32, #graph.dims<embed, ffn>>, !s
}

// CHECK-LABEL: func.func @elementwise
// CHECK-SAME: (%[[X:.*]]: tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>, %[[B:.*]]: tensor<128xf32, #graph.dims<embed>>, %[[P:.*]]: tensor<64x128xf32, #graph.dims<seq, embed>>)
func.func @elementwise(%x: !x, %b: tensor<128xf32, #graph.dims<embed>>, %p: tensor<64x128xf32, #graph.dims<seq, embed>>) -> !x {
  // CHECK: %[[ADD:.*]] = graph.add %[[X]], %[[B]] : (tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>, tensor<128xf32, #graph.dims<embed>>) -> tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>
  %0 = graph.add %x, %b : (!x, tensor<128xf32, #graph.dims<embed>>) -> !x
  // Broadcasting by name: the result has lhs's dims, then those of rhs that lhs lacks.
  // CHECK: %[[SUB:.*]] = graph.sub %[[P]], %[[X]] : (tensor<64x128xf32, #graph.dims<seq, embed>>, tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>) -> tensor<64x128x8xf32, #graph.dims<seq, embed, batch>>
  %1 = graph.sub %p, %x : (tensor<64x128xf32, #graph.dims<seq, embed>>, !x) -> tensor<64x128x8xf32, #graph.dims<seq, embed, batch>>
  // CHECK: %[[MUL:.*]] = graph.mul %[[ADD]], %[[X]]
  %2 = graph.mul %0, %x : (!x, !x) -> !x
  // CHECK: %[[DIV:.*]] = graph.div %[[MUL]], %[[B]]
  %3 = graph.div %2, %b : (!x, tensor<128xf32, #graph.dims<embed>>) -> !x
  // CHECK: %[[NEG:.*]] = graph.unary neg %[[DIV]] : tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>
  %4 = graph.unary neg %3 : !x
  // CHECK: %[[EXP:.*]] = graph.unary exp %[[NEG]] : tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>
  %5 = graph.unary exp %4 : !x
  // CHECK: %[[LOG:.*]] = graph.unary log %[[EXP]]
  %6 = graph.unary log %5 : !x
  // CHECK: %[[SQRT:.*]] = graph.unary sqrt %[[LOG]]
  %7 = graph.unary sqrt %6 : !x
  // CHECK: %[[RSQRT:.*]] = graph.unary rsqrt %[[SQRT]]
  %8 = graph.unary rsqrt %7 : !x
  // CHECK: %[[TANH:.*]] = graph.unary tanh %[[RSQRT]]
  %9 = graph.unary tanh %8 : !x
  // CHECK: %[[GELU:.*]] = graph.unary gelu %[[TANH]]
  %10 = graph.unary gelu %9 : !x
  // CHECK: %[[SILU:.*]] = graph.unary silu %[[GELU]]
  %11 = graph.unary silu %10 : !x
  // CHECK: %[[RELU:.*]] = graph.unary relu %[[SILU]]
  %12 = graph.unary relu %11 : !x
  // CHECK: %[[SIG:.*]] = graph.unary sigmoid %[[RELU]]
  %13 = graph.unary sigmoid %12 : !x
  // CHECK: %[[DROP:.*]] = graph.dropout %[[SIG]] rate 1.000000e-01 : tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>
  %14 = graph.dropout %13 rate 1.000000e-01 : !x
  // CHECK: graph.dropout %[[DROP]] rate 0.000000e+00
  %15 = graph.dropout %14 rate 0.0 : !x
  // CHECK: return
  return %15 : !x
}

// CHECK-LABEL: func.func @contractions
func.func @contractions(%x: !x, %w: tensor<128x512xf32, #graph.dims<embed, ffn>>, %q: !h) -> !s {
  // CHECK: %[[Y:.*]] = graph.contract %{{.*}}, %{{.*}} sum ["embed"] : (tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>, tensor<128x512xf32, #graph.dims<embed, ffn>>) -> tensor<8x64x512xf32, #graph.dims<batch, seq, ffn>>
  %y = graph.contract %x, %w sum ["embed"] : (!x, tensor<128x512xf32, #graph.dims<embed, ffn>>) -> tensor<8x64x512xf32, #graph.dims<batch, seq, ffn>>
  // Attention scores: seq is kept once as a batch dim, head is summed.
  // CHECK: graph.contract %{{.*}}, %{{.*}} sum ["head"] : {{.*}} -> tensor<8x64x4xf32, #graph.dims<batch, seq, heads>>
  %scores = graph.contract %q, %q sum ["head"] : (!h, !h) -> tensor<8x64x4xf32, #graph.dims<batch, seq, heads>>
  // CHECK: %[[SM:.*]] = graph.softmax %[[Y]] dim "ffn" : tensor<8x64x512xf32, #graph.dims<batch, seq, ffn>>
  %p = graph.softmax %y dim "ffn" : tensor<8x64x512xf32, #graph.dims<batch, seq, ffn>>
  // CHECK: %[[SUM:.*]] = graph.sum %[[SM]] dims ["ffn"] : tensor<8x64x512xf32, #graph.dims<batch, seq, ffn>> -> tensor<8x64xf32, #graph.dims<batch, seq>>
  %s = graph.sum %p dims ["ffn"] : tensor<8x64x512xf32, #graph.dims<batch, seq, ffn>> -> tensor<8x64xf32, #graph.dims<batch, seq>>
  // CHECK: %[[MEAN:.*]] = graph.mean %[[SUM]] dims ["batch", "seq"] : tensor<8x64xf32, #graph.dims<batch, seq>> -> tensor<f32, #graph.dims<>>
  %m = graph.mean %s dims ["batch", "seq"] : tensor<8x64xf32, #graph.dims<batch, seq>> -> !s
  // CHECK: return %[[MEAN]]
  return %m : !s
}

// CHECK-LABEL: func.func @composites
func.func @composites(%x: !x, %g: tensor<128xf32, #graph.dims<embed>>, %b: tensor<128xf32, #graph.dims<embed>>,
                      %wte: tensor<256x128xf32, #graph.dims<vocab, embed>>,
                      %ids: tensor<8x64xi32, #graph.dims<batch, seq>>) -> !s {
  // CHECK: %[[LN:.*]] = graph.layernorm %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-05 : (tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>, tensor<128xf32, #graph.dims<embed>>, tensor<128xf32, #graph.dims<embed>>) -> tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>
  %0 = graph.layernorm %x, %g, %b eps 1.000000e-05 : (!x, tensor<128xf32, #graph.dims<embed>>, tensor<128xf32, #graph.dims<embed>>) -> !x
  // CHECK: %[[RMS:.*]] = graph.rmsnorm %[[LN]], %{{.*}} eps 9.9999999999999995E-7 : (tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>, tensor<128xf32, #graph.dims<embed>>) -> tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>
  %1 = graph.rmsnorm %0, %g eps 1.0e-06 : (!x, tensor<128xf32, #graph.dims<embed>>) -> !x
  // CHECK: %[[EMB:.*]] = graph.embedding %{{.*}}, %{{.*}} : (tensor<256x128xf32, #graph.dims<vocab, embed>>, tensor<8x64xi32, #graph.dims<batch, seq>>) -> tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>
  %e = graph.embedding %wte, %ids : (tensor<256x128xf32, #graph.dims<vocab, embed>>, tensor<8x64xi32, #graph.dims<batch, seq>>) -> !x
  %sum = graph.add %e, %1 : (!x, !x) -> !x
  %logits = graph.contract %sum, %wte sum ["embed"] : (!x, tensor<256x128xf32, #graph.dims<vocab, embed>>) -> tensor<8x64x256xf32, #graph.dims<batch, seq, vocab>>
  // CHECK: %[[LOSS:.*]] = graph.cross_entropy %{{.*}}, %{{.*}} dim "vocab" : (tensor<8x64x256xf32, #graph.dims<batch, seq, vocab>>, tensor<8x64xi32, #graph.dims<batch, seq>>) -> tensor<f32, #graph.dims<>>
  %loss = graph.cross_entropy %logits, %ids dim "vocab" : (tensor<8x64x256xf32, #graph.dims<batch, seq, vocab>>, tensor<8x64xi32, #graph.dims<batch, seq>>) -> !s
  // CHECK: return %[[LOSS]]
  return %loss : !s
}

// CHECK-LABEL: func.func @attention
// CHECK-SAME: (%[[Q:.*]]: tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>, %[[K:.*]]: tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>)
func.func @attention(%q: !h, %k: !kv) -> !h {
  // CHECK: %[[RQ:.*]] = graph.rope %[[Q]] theta 1.000000e+04 : tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>
  %rq = graph.rope %q theta 1.000000e+04 : !h
  // CHECK: %[[RK:.*]] = graph.rope %[[K]] theta 5.000000e+05 : tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>
  %rk = graph.rope %k theta 5.0e5 : !kv
  // Multi-head, causal.
  // CHECK: %[[MHA:.*]] = graph.attention %[[RQ]], %[[RQ]], %[[Q]] causal scale 1.250000e-01 : (tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>, tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>, tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>) -> tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>
  %0 = graph.attention %rq, %rq, %q causal scale 1.250000e-01 : (!h, !h, !h) -> !h
  // Grouped-query, not causal: two query heads share each key/value head.
  // CHECK: graph.attention %[[MHA]], %[[RK]], %[[K]] scale 1.250000e-01 : (tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>, tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>, tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>) -> tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>
  // CHECK-NOT: causal
  %1 = graph.attention %0, %rk, %k scale 1.250000e-01 : (!h, !kv, !kv) -> !h
  // CHECK: return
  return %1 : !h
}

// One tp rank's block of the query heads (one of four) with both key/value heads: the heads
// are not compared, and the gradient op carries the axis too.
// CHECK-LABEL: func.func @attention_heads_over
func.func @attention_heads_over(%q: tensor<2x4x1x8xf32, #graph.dims<batch, seq, heads, head>>, %k: tensor<2x4x2x8xf32, #graph.dims<batch, seq, kv_heads, head>>) {
  // CHECK: graph.attention %{{.*}}, %{{.*}}, %{{.*}} causal heads_over "tp" scale 1.250000e-01 :
  %0 = graph.attention %q, %k, %k causal heads_over "tp" scale 0.125 : (tensor<2x4x1x8xf32, #graph.dims<batch, seq, heads, head>>, tensor<2x4x2x8xf32, #graph.dims<batch, seq, kv_heads, head>>, tensor<2x4x2x8xf32, #graph.dims<batch, seq, kv_heads, head>>) -> tensor<2x4x1x8xf32, #graph.dims<batch, seq, heads, head>>
  // CHECK: graph.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal heads_over "tp" scale 1.250000e-01 :
  %dq, %dk, %dv = graph.attention_grad %q, %k, %k, %0 causal heads_over "tp" scale 0.125 : (tensor<2x4x1x8xf32, #graph.dims<batch, seq, heads, head>>, tensor<2x4x2x8xf32, #graph.dims<batch, seq, kv_heads, head>>, tensor<2x4x2x8xf32, #graph.dims<batch, seq, kv_heads, head>>, tensor<2x4x1x8xf32, #graph.dims<batch, seq, heads, head>>) -> (tensor<2x4x1x8xf32, #graph.dims<batch, seq, heads, head>>, tensor<2x4x2x8xf32, #graph.dims<batch, seq, kv_heads, head>>, tensor<2x4x2x8xf32, #graph.dims<batch, seq, kv_heads, head>>)
  return
}

// CHECK-LABEL: func.func @layout
func.func @layout(%x: tensor<8x128xf32, #graph.dims<batch, embed>>, %t: tensor<8x64xi32, #graph.dims<batch, seq>>)
    -> (tensor<8x128xf32, #graph.dims<batch, embed>>, tensor<64x8xi32, #graph.dims<seq, batch>>) {
  // CHECK: %[[SPLIT:.*]] = graph.split %{{.*}} dim "embed" : tensor<8x128xf32, #graph.dims<batch, embed>> -> tensor<8x4x32xf32, #graph.dims<batch, heads, head>>
  %0 = graph.split %x dim "embed" : tensor<8x128xf32, #graph.dims<batch, embed>> -> tensor<8x4x32xf32, #graph.dims<batch, heads, head>>
  // CHECK: %[[MERGE:.*]] = graph.merge %[[SPLIT]] dims ["heads", "head"] : tensor<8x4x32xf32, #graph.dims<batch, heads, head>> -> tensor<8x128xf32, #graph.dims<batch, embed>>
  %1 = graph.merge %0 dims ["heads", "head"] : tensor<8x4x32xf32, #graph.dims<batch, heads, head>> -> tensor<8x128xf32, #graph.dims<batch, embed>>
  // permute also takes integer tensors.
  // CHECK: %[[PERM:.*]] = graph.permute %{{.*}} : tensor<8x64xi32, #graph.dims<batch, seq>> -> tensor<64x8xi32, #graph.dims<seq, batch>>
  %2 = graph.permute %t : tensor<8x64xi32, #graph.dims<batch, seq>> -> tensor<64x8xi32, #graph.dims<seq, batch>>
  // CHECK: return %[[MERGE]], %[[PERM]]
  return %1, %2 : tensor<8x128xf32, #graph.dims<batch, embed>>, tensor<64x8xi32, #graph.dims<seq, batch>>
}

// Dim names that are not bare identifiers are quoted.
// CHECK-LABEL: func.func @quoted_names
// CHECK-SAME: tensor<2x3xf32, #graph.dims<"kv heads", "1st">>
func.func @quoted_names(%x: tensor<2x3xf32, #graph.dims<"kv heads", "1st">>) -> tensor<2x3xf32, #graph.dims<"kv heads", "1st">> {
  // CHECK: graph.unary gelu %{{.*}} : tensor<2x3xf32, #graph.dims<"kv heads", "1st">>
  %0 = graph.unary gelu %x : tensor<2x3xf32, #graph.dims<"kv heads", "1st">>
  return %0 : tensor<2x3xf32, #graph.dims<"kv heads", "1st">>
}

// CHECK-LABEL: func.func @fused
// CHECK: graph.fused_elementwise %arg0, %arg1 body "add x0 x1; gelu t0" outputs [0, 1] : (tensor<8x16xf32, #graph.dims<batch, ffn>>, tensor<16xf32, #graph.dims<ffn>>) -> (tensor<8x16xf32, #graph.dims<batch, ffn>>, tensor<8x16xf32, #graph.dims<batch, ffn>>)
func.func @fused(%x: tensor<8x16xf32, #graph.dims<batch, ffn>>, %b: tensor<16xf32, #graph.dims<ffn>>) {
  %0:2 = graph.fused_elementwise %x, %b body "add x0 x1; gelu t0" outputs [0, 1] : (tensor<8x16xf32, #graph.dims<batch, ffn>>, tensor<16xf32, #graph.dims<ffn>>) -> (tensor<8x16xf32, #graph.dims<batch, ffn>>, tensor<8x16xf32, #graph.dims<batch, ffn>>)
  return
}
