// RUN: tessel-opt %s -split-input-file -verify-diagnostics
// One case per verifier error of the gradient and training ops.

!x = tensor<8x128xf32, #graph.dims<tokens, embed>>
!e = tensor<128xf32, #graph.dims<embed>>
func.func @broadcast_missing_dim(%v: tensor<256xf32, #graph.dims<vocab>>) {
  // expected-error @+1 {{'graph.broadcast' op input dim 'vocab' is not a dim of the result [tokens=8, embed=128]}}
  %0 = graph.broadcast %v : tensor<256xf32, #graph.dims<vocab>> -> !x
  return
}
// -----
func.func @broadcast_size(%v: tensor<64xf32, #graph.dims<embed>>) {
  // expected-error @+1 {{'graph.broadcast' op input dim 'embed' is not a dim of the result [tokens=8, embed=128]}}
  %0 = graph.broadcast %v : tensor<64xf32, #graph.dims<embed>> -> tensor<8x128xf32, #graph.dims<tokens, embed>>
  return
}
// -----
func.func @broadcast_element_type(%v: tensor<128xbf16, #graph.dims<embed>>) {
  // expected-error @+1 {{'graph.broadcast' op operand element type 'bf16' differs from the result's 'f32'}}
  %0 = graph.broadcast %v : tensor<128xbf16, #graph.dims<embed>> -> tensor<8x128xf32, #graph.dims<tokens, embed>>
  return
}
// -----
func.func @unary_grad_unknown(%x: tensor<8x128xf32, #graph.dims<tokens, embed>>) {
  // expected-error @+1 {{unknown elementwise function 'softplus'; the functions are neg, exp, log, sqrt, rsqrt, tanh, gelu, silu, relu, sigmoid, square, pow, gelu_erf}}
  %0 = graph.unary_grad softplus %x, %x, %x : tensor<8x128xf32, #graph.dims<tokens, embed>>
  return
}
// -----
func.func @unary_grad_types(%x: tensor<8x128xf32, #graph.dims<tokens, embed>>, %y: tensor<8x128xf32, #graph.dims<tokens, ffn>>) {
  // expected-error @+1 {{'graph.unary_grad' op failed to verify that all of {input, output, grad, result} have same type}}
  %0 = "graph.unary_grad"(%x, %x, %y) {fn = #graph<unary_fn exp>} : (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<8x128xf32, #graph.dims<tokens, ffn>>) -> tensor<8x128xf32, #graph.dims<tokens, embed>>
  return
}
// -----
func.func @softmax_grad_dim(%x: tensor<8x128xf32, #graph.dims<tokens, embed>>) {
  // expected-error @+1 {{'graph.softmax_grad' op 'vocab' is not a dim of the operands}}
  %0 = graph.softmax_grad %x, %x dim "vocab" : tensor<8x128xf32, #graph.dims<tokens, embed>>
  return
}
// -----
func.func @layernorm_grad_grad_type(%x: tensor<8x128xf32, #graph.dims<tokens, embed>>, %g: tensor<128xf32, #graph.dims<embed>>, %dy: tensor<4x128xf32, #graph.dims<tokens, embed>>) {
  // expected-error @+1 {{'graph.layernorm_grad' op input type 'tensor<4x128xf32, #graph.dims<tokens, embed>>' must be 'tensor<8x128xf32, #graph.dims<tokens, embed>>'}}
  %dx, %dg, %db = graph.layernorm_grad %x, %g, %dy eps 1.0e-05 : (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<128xf32, #graph.dims<embed>>, tensor<4x128xf32, #graph.dims<tokens, embed>>) -> (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<128xf32, #graph.dims<embed>>, tensor<128xf32, #graph.dims<embed>>)
  return
}
// -----
func.func @layernorm_grad_bias_type(%x: tensor<8x128xf32, #graph.dims<tokens, embed>>, %g: tensor<128xf32, #graph.dims<embed>>) {
  // expected-error @+1 {{'graph.layernorm_grad' op scale type 'tensor<128xbf16, #graph.dims<embed>>' must be 'tensor<128xf32, #graph.dims<embed>>'}}
  %dx, %dg, %db = graph.layernorm_grad %x, %g, %x eps 1.0e-05 : (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<128xf32, #graph.dims<embed>>, tensor<8x128xf32, #graph.dims<tokens, embed>>) -> (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<128xf32, #graph.dims<embed>>, tensor<128xbf16, #graph.dims<embed>>)
  return
}
// -----
func.func @rmsnorm_grad_scale_type(%x: tensor<8x128xf32, #graph.dims<tokens, embed>>, %g: tensor<128xf32, #graph.dims<embed>>) {
  // expected-error @+1 {{'graph.rmsnorm_grad' op scale type 'tensor<8x128xf32, #graph.dims<tokens, embed>>' must be 'tensor<128xf32, #graph.dims<embed>>'}}
  %dx, %dg = graph.rmsnorm_grad %x, %g, %x eps 1.0e-05 : (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<128xf32, #graph.dims<embed>>, tensor<8x128xf32, #graph.dims<tokens, embed>>) -> (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<8x128xf32, #graph.dims<tokens, embed>>)
  return
}
// -----
func.func @rmsnorm_grad_input_type(%x: tensor<8x128xf32, #graph.dims<tokens, embed>>, %g: tensor<128xf32, #graph.dims<embed>>) {
  // expected-error @+1 {{'graph.rmsnorm_grad' op input type 'tensor<128x8xf32, #graph.dims<embed, tokens>>' must be 'tensor<8x128xf32, #graph.dims<tokens, embed>>'}}
  %dx, %dg = graph.rmsnorm_grad %x, %g, %x eps 1.0e-05 : (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<128xf32, #graph.dims<embed>>, tensor<8x128xf32, #graph.dims<tokens, embed>>) -> (tensor<128x8xf32, #graph.dims<embed, tokens>>, tensor<128xf32, #graph.dims<embed>>)
  return
}
// -----
func.func @embedding_grad_shape(%dy: tensor<8x64xf32, #graph.dims<tokens, embed>>, %ids: tensor<8xi32, #graph.dims<tokens>>) {
  // expected-error @+1 {{'graph.embedding_grad' op gradient should be [tokens=8, embed=128] but is [tokens=8, embed=64]}}
  %0 = graph.embedding_grad %dy, %ids : (tensor<8x64xf32, #graph.dims<tokens, embed>>, tensor<8xi32, #graph.dims<tokens>>) -> tensor<256x128xf32, #graph.dims<vocab, embed>>
  return
}
// -----
func.func @embedding_grad_table(%dy: tensor<8x128xf32, #graph.dims<tokens, embed>>, %ids: tensor<8xi32, #graph.dims<tokens>>) {
  // expected-error @+1 {{'graph.embedding_grad' op the table must have two dims [rows, features], not [embed=128]}}
  %0 = graph.embedding_grad %dy, %ids : (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<8xi32, #graph.dims<tokens>>) -> tensor<128xf32, #graph.dims<embed>>
  return
}
// -----
func.func @embedding_grad_encoding(%dy: tensor<8x128xf32>, %ids: tensor<8xi32, #graph.dims<tokens>>) {
  // expected-error @+1 {{'graph.embedding_grad' op operands and result need #graph.dims encodings}}
  %0 = graph.embedding_grad %dy, %ids : (tensor<8x128xf32>, tensor<8xi32, #graph.dims<tokens>>) -> tensor<256x128xf32, #graph.dims<vocab, embed>>
  return
}
// -----
func.func @cross_entropy_grad_loss(%l: tensor<8x256xf32, #graph.dims<tokens, vocab>>, %t: tensor<8xi32, #graph.dims<tokens>>, %dl: tensor<8xf32, #graph.dims<tokens>>) {
  // expected-error @+1 {{'graph.cross_entropy_grad' op the loss gradient must be a scalar tensor, not 'tensor<8xf32, #graph.dims<tokens>>'}}
  %0 = graph.cross_entropy_grad %l, %t, %dl dim "vocab" : (tensor<8x256xf32, #graph.dims<tokens, vocab>>, tensor<8xi32, #graph.dims<tokens>>, tensor<8xf32, #graph.dims<tokens>>) -> tensor<8x256xf32, #graph.dims<tokens, vocab>>
  return
}
// -----
func.func @cross_entropy_grad_type(%l: tensor<8x256xf32, #graph.dims<tokens, vocab>>, %t: tensor<8xi32, #graph.dims<tokens>>, %dl: tensor<f32, #graph.dims<>>) {
  // expected-error @+1 {{'graph.cross_entropy_grad' op logits type 'tensor<8x256xf32, #graph.dims<tokens, vocab>>' must be 'tensor<256x8xf32, #graph.dims<vocab, tokens>>'}}
  %0 = graph.cross_entropy_grad %l, %t, %dl dim "vocab" : (tensor<8x256xf32, #graph.dims<tokens, vocab>>, tensor<8xi32, #graph.dims<tokens>>, tensor<f32, #graph.dims<>>) -> tensor<256x8xf32, #graph.dims<vocab, tokens>>
  return
}
// -----
func.func @cross_entropy_grad_dim(%l: tensor<8x256xf32, #graph.dims<tokens, vocab>>, %t: tensor<8xi32, #graph.dims<tokens>>, %dl: tensor<f32, #graph.dims<>>) {
  // expected-error @+1 {{'graph.cross_entropy_grad' op class dim is 'vocab', not 'tokens'}}
  %0 = graph.cross_entropy_grad %l, %t, %dl dim "tokens" : (tensor<8x256xf32, #graph.dims<tokens, vocab>>, tensor<8xi32, #graph.dims<tokens>>, tensor<f32, #graph.dims<>>) -> tensor<8x256xf32, #graph.dims<tokens, vocab>>
  return
}
// -----
func.func @cross_entropy_grad_targets(%l: tensor<8x256xf32, #graph.dims<tokens, vocab>>, %t: tensor<8xi32, #graph.dims<batch>>, %dl: tensor<f32, #graph.dims<>>) {
  // expected-error @+1 {{'graph.cross_entropy_grad' op logits dims 'tokens' and 'vocab' are both missing from the targets [batch=8]}}
  %0 = graph.cross_entropy_grad %l, %t, %dl dim "vocab" : (tensor<8x256xf32, #graph.dims<tokens, vocab>>, tensor<8xi32, #graph.dims<batch>>, tensor<f32, #graph.dims<>>) -> tensor<8x256xf32, #graph.dims<tokens, vocab>>
  return
}
// -----
!h = tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>
!kv = tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>
func.func @attention_grad_query(%q: !h, %k: !kv) {
  // expected-error @+1 {{'graph.attention_grad' op query type 'tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>' must be 'tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>'}}
  %dq, %dk, %dv = graph.attention_grad %q, %k, %k, %k scale 0.125 : (!h, !kv, !kv, !kv) -> (!h, !kv, !kv)
  return
}
// -----
!h = tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>
!kv = tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>
func.func @attention_grad_key(%q: !h, %k: !kv) {
  // expected-error @+1 {{'graph.attention_grad' op key type 'tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>' must be 'tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>'}}
  %dq, %dk, %dv = graph.attention_grad %q, %k, %k, %q scale 0.125 : (!h, !kv, !kv, !h) -> (!h, !h, !kv)
  return
}
// -----
!h = tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>
!kv = tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>
func.func @attention_grad_value(%q: !h, %k: !kv) {
  // expected-error @+1 {{'graph.attention_grad' op value type 'tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>' must be 'tensor<8x64x2x32xf32, #graph.dims<batch, seq, kv_heads, head>>'}}
  %dq, %dk, %dv = graph.attention_grad %q, %k, %k, %q scale 0.125 : (!h, !kv, !kv, !h) -> (!h, !kv, !h)
  return
}
// -----
!h = tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>
!kv = tensor<8x64x3x32xf32, #graph.dims<batch, seq, kv_heads, head>>
func.func @attention_grad_heads(%q: !h, %k: !kv) {
  // expected-error @+1 {{'graph.attention_grad' op kv heads 'kv_heads' (3) must divide query heads 'heads' (4)}}
  %dq, %dk, %dv = graph.attention_grad %q, %k, %k, %q scale 0.125 : (!h, !kv, !kv, !h) -> (!h, !kv, !kv)
  return
}
// -----
func.func @learning_rate_schedule() {
  // expected-error @+2 {{expected ::tessel::settings::LrSchedule to be one of: constant, cosine, linear}}
  // expected-error @+1 {{failed to parse Settings_LrScheduleAttr}}
  %0 = graph.learning_rate step lr 1.0e-3 min_lr 0.0 warmup 0 steps 10 : tensor<f32, #graph.dims<>>
  return
}
// -----
func.func @learning_rate_steps() {
  // expected-error @+1 {{'graph.learning_rate' op needs warmup >= 0 and steps >= 1}}
  %0 = graph.learning_rate cosine lr 1.0e-3 min_lr 0.0 warmup 10 steps 0 : tensor<f32, #graph.dims<>>
  return
}
// -----
func.func @learning_rate_warmup() {
  // expected-error @+1 {{'graph.learning_rate' op needs warmup >= 0 and steps >= 1}}
  %0 = graph.learning_rate cosine lr 1.0e-3 min_lr 0.0 warmup -1 steps 10 : tensor<f32, #graph.dims<>>
  return
}
// -----
func.func @learning_rate_scalar() {
  // expected-error @+1 {{'graph.learning_rate' op the result must be a scalar tensor, not 'tensor<4xf32, #graph.dims<embed>>'}}
  %0 = graph.learning_rate constant lr 1.0e-3 min_lr 0.0 warmup 0 steps 1 : tensor<4xf32, #graph.dims<embed>>
  return
}

// -----
func.func @clip_max(%n: tensor<f32, #graph.dims<>>) {
  // expected-error @+1 {{'graph.clip_coefficient' op max must be positive, not -1}}
  %0 = graph.clip_coefficient %n max -1.0 : tensor<f32, #graph.dims<>>
  return
}
// -----
func.func @adamw_betas(%g: tensor<4xf32, #graph.dims<embed>>, %s: tensor<f32, #graph.dims<>>) {
  // expected-error @+1 {{'graph.adamw' op betas must lie in [0, 1), not (1.000000e+00, 9.990000e-01)}}
  graph.adamw "w", %g, %s, %s beta1 1.0 beta2 0.999 eps 1.0e-8 weight_decay 0.0 : tensor<4xf32, #graph.dims<embed>>, tensor<f32, #graph.dims<>>, tensor<f32, #graph.dims<>>
  return
}
// -----
func.func @global_norm_scalar(%g: tensor<4xf32, #graph.dims<embed>>) {
  // expected-error @+1 {{'graph.global_norm' op the result must be a scalar tensor}}
  %0 = graph.global_norm %g : tensor<4xf32, #graph.dims<embed>> -> tensor<4xf32, #graph.dims<embed>>
  return
}
// -----
func.func @unary_grad_unnamed(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'graph.unary_grad' op operand type 'tensor<4x8xf32>' needs a #graph.dims encoding}}
  %0 = graph.unary_grad exp %x, %x, %x : tensor<4x8xf32>
  return
}
// -----
func.func @layernorm_grad_scale(%x: tensor<4x8xf32, #graph.dims<batch, embed>>, %g: tensor<6xf32, #graph.dims<vocab>>) {
  // expected-error @+1 {{'graph.layernorm_grad' op}}
  %dx, %dg, %db = graph.layernorm_grad %x, %g, %x eps 1.0e-5 : (tensor<4x8xf32, #graph.dims<batch, embed>>, tensor<6xf32, #graph.dims<vocab>>, tensor<4x8xf32, #graph.dims<batch, embed>>) -> (tensor<4x8xf32, #graph.dims<batch, embed>>, tensor<6xf32, #graph.dims<vocab>>, tensor<6xf32, #graph.dims<vocab>>)
  return
}
