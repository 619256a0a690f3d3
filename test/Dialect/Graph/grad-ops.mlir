// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// The graph dialect's gradient and training ops (and the mask and inverse forms of dropout
// and rope that autodiff emits), printed and parsed back.

!x = tensor<8x128xf32, #graph.dims<tokens, embed>>
!e = tensor<128xf32, #graph.dims<embed>>
!l = tensor<8x256xf32, #graph.dims<tokens, vocab>>
!ids = tensor<8xi32, #graph.dims<tokens>>
!t = tensor<256x128xf32, #graph.dims<vocab, embed>>
!h = tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>
!kv = tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>
!s = tensor<f32, #graph.dims<>>

// CHECK-LABEL: func.func @gradients
// CHECK-SAME: (%[[X:[^:]+]]: tensor<8x128xf32, #graph.dims<tokens, embed>>, %[[G:[^:]+]]: tensor<128xf32, #graph.dims<embed>>, %[[L:[^:]+]]: tensor<8x256xf32, #graph.dims<tokens, vocab>>, %[[IDS:[^:]+]]: tensor<8xi32, #graph.dims<tokens>>, %[[DL:[^:]+]]: tensor<f32, #graph.dims<>>)
func.func @gradients(%x: !x, %g: !e, %l: !l, %ids: !ids, %dl: !s) -> !x {
  // The input's dims may be in any order relative to the result's.
  // CHECK: %[[B:.*]] = graph.broadcast %[[G]] : tensor<128xf32, #graph.dims<embed>> -> tensor<8x128xf32, #graph.dims<tokens, embed>>
  %b = graph.broadcast %g : !e -> !x
  // CHECK: graph.broadcast %[[X]] : tensor<8x128xf32, #graph.dims<tokens, embed>> -> tensor<128x3x8xf32, #graph.dims<embed, k, tokens>>
  %b2 = graph.broadcast %x : !x -> tensor<128x3x8xf32, #graph.dims<embed, k, tokens>>
  // CHECK: graph.broadcast %[[DL]] : tensor<f32, #graph.dims<>> -> tensor<8x128xf32, #graph.dims<tokens, embed>>
  %b3 = graph.broadcast %dl : !s -> !x
  // CHECK: %[[UG:.*]] = graph.unary_grad gelu %[[X]], %[[B]], %[[X]] : tensor<8x128xf32, #graph.dims<tokens, embed>>
  %ug = graph.unary_grad gelu %x, %b, %x : !x
  // CHECK: graph.unary_grad exp
  %u0 = graph.unary_grad exp %x, %x, %x : !x
  // CHECK: graph.unary_grad log
  %u1 = graph.unary_grad log %x, %x, %x : !x
  // CHECK: graph.unary_grad sqrt
  %u2 = graph.unary_grad sqrt %x, %x, %x : !x
  // CHECK: graph.unary_grad rsqrt
  %u3 = graph.unary_grad rsqrt %x, %x, %x : !x
  // CHECK: graph.unary_grad tanh
  %u4 = graph.unary_grad tanh %x, %x, %x : !x
  // CHECK: graph.unary_grad silu
  %u5 = graph.unary_grad silu %x, %x, %x : !x
  // CHECK: graph.unary_grad relu
  %u6 = graph.unary_grad relu %x, %x, %x : !x
  // CHECK: graph.unary_grad sigmoid
  %u7 = graph.unary_grad sigmoid %x, %x, %x : !x
  // CHECK: %[[SG:.*]] = graph.softmax_grad %[[X]], %[[UG]] dim "embed" : tensor<8x128xf32, #graph.dims<tokens, embed>>
  %sg = graph.softmax_grad %x, %ug dim "embed" : !x
  // CHECK: %[[LDX:[^ ,]+]], %[[LDG:[^ ,]+]], %[[LDB:[^ ,]+]] = graph.layernorm_grad %[[X]], %[[G]], %[[SG]] eps 1.000000e-05 : (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<128xf32, #graph.dims<embed>>, tensor<8x128xf32, #graph.dims<tokens, embed>>) -> (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<128xf32, #graph.dims<embed>>, tensor<128xf32, #graph.dims<embed>>)
  %dx, %dg, %db = graph.layernorm_grad %x, %g, %sg eps 1.0e-05 : (!x, !e, !x) -> (!x, !e, !e)
  // CHECK: %[[RDX:[^ ,]+]], %[[RDG:[^ ,]+]] = graph.rmsnorm_grad %[[LDX]], %[[LDG]], %[[X]] eps 9.9999999999999995E-7 : (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<128xf32, #graph.dims<embed>>, tensor<8x128xf32, #graph.dims<tokens, embed>>) -> (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<128xf32, #graph.dims<embed>>)
  %rx, %rg = graph.rmsnorm_grad %dx, %dg, %x eps 1.0e-06 : (!x, !e, !x) -> (!x, !e)
  // CHECK: graph.embedding_grad %[[RDX]], %[[IDS]] : (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<8xi32, #graph.dims<tokens>>) -> tensor<256x128xf32, #graph.dims<vocab, embed>>
  %dt = graph.embedding_grad %rx, %ids : (!x, !ids) -> !t
  // CHECK: graph.cross_entropy_grad %[[L]], %[[IDS]], %[[DL]] dim "vocab" : (tensor<8x256xf32, #graph.dims<tokens, vocab>>, tensor<8xi32, #graph.dims<tokens>>, tensor<f32, #graph.dims<>>) -> tensor<8x256xf32, #graph.dims<tokens, vocab>>
  %dlog = graph.cross_entropy_grad %l, %ids, %dl dim "vocab" : (!l, !ids, !s) -> !l
  // CHECK: graph.dropout %[[RDX]] rate 1.000000e-01 mask 7 : tensor<8x128xf32, #graph.dims<tokens, embed>>
  %d = graph.dropout %rx rate 0.1 mask 7 : !x
  // CHECK: return %[[RDX]]
  return %rx : !x
}

// CHECK-LABEL: func.func @attention_gradients
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>, %[[K:[^:]+]]: tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>)
func.func @attention_gradients(%q: !h, %k: !kv) -> !kv {
  // CHECK: %[[DQ:[^ ,]+]], %[[DK:[^ ,]+]], %[[DV:[^ ,]+]] = graph.attention_grad %[[Q]], %[[K]], %[[K]], %[[Q]] causal scale 1.250000e-01 : (tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>, tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>, tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>, tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>) -> (tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>, tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>, tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>)
  %dq, %dk, %dv = graph.attention_grad %q, %k, %k, %q causal scale 0.125 : (!h, !kv, !kv, !h) -> (!h, !kv, !kv)
  // Not causal.
  // CHECK: graph.attention_grad %[[Q]], %[[K]], %[[K]], %[[DQ]] scale 2.500000e-01 :
  %a, %b, %c = graph.attention_grad %q, %k, %k, %dq scale 0.25 : (!h, !kv, !kv, !h) -> (!h, !kv, !kv)
  // CHECK: %[[IR:.*]] = graph.rope %[[DK]] theta 1.000000e+04 inverse : tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>
  %r = graph.rope %dk theta 1.0e4 inverse : !kv
  // CHECK: return %[[IR]]
  return %r : !kv
}

// CHECK-LABEL: func.func @training_state
func.func @training_state(%dw: !t, %db: !e) -> (!s, !s) {
  // CHECK: graph.accumulate_grad %{{.*}} to "wte" : tensor<256x128xf32, #graph.dims<vocab, embed>>
  graph.accumulate_grad %dw to "wte" : !t
  // CHECK: %[[GW:.*]] = graph.grad "wte" : tensor<256x128xf32, #graph.dims<vocab, embed>>
  %gw = graph.grad "wte" : !t
  // CHECK: %[[GB:.*]] = graph.grad "layers.0.b" : tensor<128xf32, #graph.dims<embed>>
  %gb = graph.grad "layers.0.b" : !e
  // CHECK: %[[N:.*]] = graph.global_norm %[[GW]], %[[GB]] : tensor<256x128xf32, #graph.dims<vocab, embed>>, tensor<128xf32, #graph.dims<embed>> -> tensor<f32, #graph.dims<>>
  %n = graph.global_norm %gw, %gb : !t, !e -> !s
  // CHECK: %[[C:.*]] = graph.clip_coefficient %[[N]] max 1.000000e+00 : tensor<f32, #graph.dims<>>
  %c = graph.clip_coefficient %n max 1.0 : !s
  // CHECK: %[[LR:.*]] = graph.learning_rate cosine lr 3.000000e-03 min_lr 3.000000e-04 warmup 50 steps 600 : tensor<f32, #graph.dims<>>
  %lr = graph.learning_rate cosine lr 3.0e-3 min_lr 3.0e-4 warmup 50 steps 600 : !s
  // CHECK: graph.learning_rate constant lr 1.000000e-01 min_lr 0.000000e+00 warmup 0 steps 1 : tensor<f32, #graph.dims<>>
  %lr2 = graph.learning_rate constant lr 0.1 min_lr 0.0 warmup 0 steps 1 : !s
  // CHECK: graph.adamw "wte", %[[GW]], %[[LR]], %[[C]] beta1 9.000000e-01 beta2 0.94999999999999996 eps 1.000000e-08 weight_decay 1.000000e-02 : tensor<256x128xf32, #graph.dims<vocab, embed>>, tensor<f32, #graph.dims<>>, tensor<f32, #graph.dims<>>
  graph.adamw "wte", %gw, %lr, %c beta1 0.9 beta2 0.95 eps 1.0e-8 weight_decay 0.01 : !t, !s, !s
  // CHECK: graph.zero_grad "wte"
  graph.zero_grad "wte"
  // CHECK: graph.zero_grad "layers.0.b" {tag}
  graph.zero_grad "layers.0.b" {tag}
  // CHECK: return %[[N]], %[[LR]]
  return %n, %lr : !s, !s
}
