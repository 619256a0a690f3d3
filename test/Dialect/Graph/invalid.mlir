// RUN: tessel-opt %s -split-input-file -verify-diagnostics
// One case per verifier error of the graph dialect's ops and attributes.

//===----------------------------------------------------------------------===//
// #graph.dims and #graph.init
//===----------------------------------------------------------------------===//

// expected-error @+1 {{dim 'seq' appears twice}}
func.func @duplicate_dim(%x: tensor<2x2xf32, #graph.dims<seq, seq>>) {
  return
}

// -----

// expected-error @+1 {{dim names cannot be empty}}
func.func @empty_dim_name(%x: tensor<2x2xf32, #graph.dims<"", seq>>) {
  return
}

// -----

func.func @unknown_init() {
  // expected-error @+1 {{unknown initialiser 'xavier'; expected normal, uniform, zeros, ones, constant or load}}
  %w = graph.param "w" init <xavier> : tensor<4xf32, #graph.dims<embed>>
  return
}

// -----

func.func @negative_std() {
  // expected-error @+1 {{normal initialiser with negative standard deviation -2.000000e-02}}
  %w = graph.param "w" init <normal(0.0, -0.02)> : tensor<4xf32, #graph.dims<embed>>
  return
}

// -----

func.func @uniform_order() {
  // expected-error @+1 {{uniform initialiser with low 1.000000e+00 above high -1.000000e+00}}
  %w = graph.param "w" init <uniform(1.0, -1.0)> : tensor<4xf32, #graph.dims<embed>>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Types every op checks
//===----------------------------------------------------------------------===//

func.func @missing_dims(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'graph.unary' op operand #0 type 'tensor<4x8xf32>' must be a ranked tensor with one #graph.dims name per dim}}
  %0 = graph.unary gelu %x : tensor<4x8xf32>
  return
}

// -----

func.func @too_few_names(%x: tensor<4x8xf32, #graph.dims<batch>>) {
  // expected-error @+1 {{'graph.unary' op operand #0 type 'tensor<4x8xf32, #graph.dims<batch>>' must be a ranked tensor with one #graph.dims name per dim}}
  %0 = graph.unary relu %x : tensor<4x8xf32, #graph.dims<batch>>
  return
}

// -----

func.func @result_without_dims(%x: tensor<4xf32, #graph.dims<embed>>) {
  // expected-error @+1 {{'graph.softmax' op result type 'tensor<4xf32>' must be a ranked tensor with one #graph.dims name per dim}}
  %0 = "graph.softmax"(%x) {dim = "embed"} : (tensor<4xf32, #graph.dims<embed>>) -> tensor<4xf32>
  return
}

// -----

func.func @dynamic_dim(%x: tensor<?x8xf32, #graph.dims<batch, embed>>) {
  // expected-error @+1 {{'graph.unary' op operand #0 type 'tensor<?x8xf32, #graph.dims<batch, embed>>' has a dynamic dim; graph tensors have static sizes}}
  %0 = graph.unary exp %x : tensor<?x8xf32, #graph.dims<batch, embed>>
  return
}

// -----

func.func @zero_size(%x: tensor<0x8xf32, #graph.dims<batch, embed>>) {
  // expected-error @+1 {{'graph.unary' op operand #0: dim 'batch' has size 0; sizes are positive}}
  %0 = graph.unary neg %x : tensor<0x8xf32, #graph.dims<batch, embed>>
  return
}

// -----

func.func @element_types(%a: tensor<4xf32, #graph.dims<embed>>, %b: tensor<4xbf16, #graph.dims<embed>>) {
  // expected-error @+1 {{'graph.mul' op operand element type 'bf16' differs from the result's 'f32'}}
  %0 = graph.mul %a, %b : (tensor<4xf32, #graph.dims<embed>>, tensor<4xbf16, #graph.dims<embed>>) -> tensor<4xf32, #graph.dims<embed>>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------===//

func.func @empty_param_name() {
  // expected-error @+1 {{'graph.param' op needs a non-empty parameter path}}
  %w = graph.param "" init <zeros> : tensor<4xf32, #graph.dims<embed>>
  return
}

// -----

func.func @constant_with_dims() {
  // expected-error @+1 {{'graph.constant' op produces a scalar; its type has no dims}}
  %c = graph.constant 1.0 : tensor<4xf32, #graph.dims<embed>>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise and reductions
//===----------------------------------------------------------------------===//

func.func @add_result(%a: tensor<4x8xf32, #graph.dims<seq, embed>>, %b: tensor<8xf32, #graph.dims<embed>>) {
  // expected-error @+1 {{'graph.add' op result should be [seq=4, embed=8] but is [embed=8, seq=4]}}
  %0 = graph.add %a, %b : (tensor<4x8xf32, #graph.dims<seq, embed>>, tensor<8xf32, #graph.dims<embed>>) -> tensor<8x4xf32, #graph.dims<embed, seq>>
  return
}

// -----

func.func @add_size_clash(%a: tensor<4x8xf32, #graph.dims<seq, embed>>, %b: tensor<16xf32, #graph.dims<embed>>) {
  // expected-error @+1 {{'graph.sub' op dim 'embed' has size 8 in one operand and 16 in the other}}
  %0 = graph.sub %a, %b : (tensor<4x8xf32, #graph.dims<seq, embed>>, tensor<16xf32, #graph.dims<embed>>) -> tensor<4x8xf32, #graph.dims<seq, embed>>
  return
}

// -----

func.func @dropout_rate(%x: tensor<4xf32, #graph.dims<embed>>) {
  // expected-error @+1 {{'graph.dropout' op rate must lie in [0, 1), not 1.000000e+00}}
  %0 = graph.dropout %x rate 1.0 : tensor<4xf32, #graph.dims<embed>>
  return
}

// -----

func.func @dropout_negative_rate(%x: tensor<4xf32, #graph.dims<embed>>) {
  // expected-error @+1 {{'graph.dropout' op rate must lie in [0, 1), not -5.000000e-01}}
  %0 = graph.dropout %x rate -0.5 : tensor<4xf32, #graph.dims<embed>>
  return
}

// -----

func.func @reduce_not_a_dim(%x: tensor<4x8xf32, #graph.dims<seq, embed>>) {
  // expected-error @+1 {{'graph.sum' op 'vocab' is not a dim of [seq=4, embed=8]}}
  %0 = graph.sum %x dims ["vocab"] : tensor<4x8xf32, #graph.dims<seq, embed>> -> tensor<4x8xf32, #graph.dims<seq, embed>>
  return
}

// -----

func.func @reduce_nothing(%x: tensor<4x8xf32, #graph.dims<seq, embed>>) {
  // expected-error @+1 {{'graph.mean' op no dim to reduce over}}
  %0 = graph.mean %x dims [] : tensor<4x8xf32, #graph.dims<seq, embed>> -> tensor<4x8xf32, #graph.dims<seq, embed>>
  return
}

// -----

func.func @reduce_result(%x: tensor<4x8xf32, #graph.dims<seq, embed>>) {
  // expected-error @+1 {{'graph.mean' op result should be [seq=4] but is []}}
  %0 = graph.mean %x dims ["embed"] : tensor<4x8xf32, #graph.dims<seq, embed>> -> tensor<f32, #graph.dims<>>
  return
}

// -----

func.func @softmax_dim(%x: tensor<4x8xf32, #graph.dims<seq, embed>>) {
  // expected-error @+1 {{'graph.softmax' op 'vocab' is not a dim of [seq=4, embed=8]}}
  %0 = graph.softmax %x dim "vocab" : tensor<4x8xf32, #graph.dims<seq, embed>>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

func.func @contract_nothing(%a: tensor<4x8xf32, #graph.dims<seq, embed>>, %b: tensor<8x2xf32, #graph.dims<embed, ffn>>) {
  // expected-error @+1 {{'graph.contract' op sums over no dim; list the contracted dims}}
  %0 = graph.contract %a, %b sum [] : (tensor<4x8xf32, #graph.dims<seq, embed>>, tensor<8x2xf32, #graph.dims<embed, ffn>>) -> tensor<4x2xf32, #graph.dims<seq, ffn>>
  return
}

// -----

func.func @contract_result(%a: tensor<4x8xf32, #graph.dims<seq, embed>>, %b: tensor<8x2xf32, #graph.dims<embed, ffn>>) {
  // expected-error @+1 {{'graph.contract' op result should be [seq=4, ffn=2] but is [seq=4, embed=8, ffn=2]}}
  %0 = graph.contract %a, %b sum ["embed"] : (tensor<4x8xf32, #graph.dims<seq, embed>>, tensor<8x2xf32, #graph.dims<embed, ffn>>) -> tensor<4x8x2xf32, #graph.dims<seq, embed, ffn>>
  return
}

// -----

func.func @contract_not_shared(%a: tensor<4x8xf32, #graph.dims<seq, embed>>, %b: tensor<8x2xf32, #graph.dims<embed, ffn>>) {
  // expected-error @+1 {{'graph.contract' op cannot sum over 'seq': it is not a dim of both [seq=4, embed=8] and [embed=8, ffn=2]}}
  %0 = graph.contract %a, %b sum ["seq"] : (tensor<4x8xf32, #graph.dims<seq, embed>>, tensor<8x2xf32, #graph.dims<embed, ffn>>) -> tensor<8x2xf32, #graph.dims<embed, ffn>>
  return
}

// -----

func.func @contract_twice(%a: tensor<4x8xf32, #graph.dims<seq, embed>>, %b: tensor<8x2xf32, #graph.dims<embed, ffn>>) {
  // expected-error @+1 {{'graph.contract' op dim 'embed' is listed twice}}
  %0 = graph.contract %a, %b sum ["embed", "embed"] : (tensor<4x8xf32, #graph.dims<seq, embed>>, tensor<8x2xf32, #graph.dims<embed, ffn>>) -> tensor<4x2xf32, #graph.dims<seq, ffn>>
  return
}

// -----

func.func @contract_size_clash(%a: tensor<4x8xf32, #graph.dims<seq, embed>>, %b: tensor<16x2xf32, #graph.dims<embed, ffn>>) {
  // expected-error @+1 {{'graph.contract' op dim 'embed' has size 8 in one operand and 16 in the other}}
  %0 = graph.contract %a, %b sum ["embed"] : (tensor<4x8xf32, #graph.dims<seq, embed>>, tensor<16x2xf32, #graph.dims<embed, ffn>>) -> tensor<4x2xf32, #graph.dims<seq, ffn>>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Composite ops
//===----------------------------------------------------------------------===//

func.func @layernorm_bias(%x: tensor<4x8xf32, #graph.dims<seq, embed>>, %g: tensor<8xf32, #graph.dims<embed>>, %b: tensor<4x8xf32, #graph.dims<seq, embed>>) {
  // expected-error @+1 {{'graph.layernorm' op bias [seq=4, embed=8] must have the scale's shape [embed=8]}}
  %0 = graph.layernorm %x, %g, %b eps 1.0e-5 : (tensor<4x8xf32, #graph.dims<seq, embed>>, tensor<8xf32, #graph.dims<embed>>, tensor<4x8xf32, #graph.dims<seq, embed>>) -> tensor<4x8xf32, #graph.dims<seq, embed>>
  return
}

// -----

func.func @layernorm_result(%x: tensor<4x8xf32, #graph.dims<seq, embed>>, %g: tensor<8xf32, #graph.dims<embed>>) {
  // expected-error @+1 {{'graph.layernorm' op result should be [seq=4, embed=8] but is [embed=8]}}
  %0 = graph.layernorm %x, %g, %g eps 1.0e-5 : (tensor<4x8xf32, #graph.dims<seq, embed>>, tensor<8xf32, #graph.dims<embed>>, tensor<8xf32, #graph.dims<embed>>) -> tensor<8xf32, #graph.dims<embed>>
  return
}

// -----

func.func @rmsnorm_scale_dim(%x: tensor<4x8xf32, #graph.dims<seq, embed>>, %g: tensor<8xf32, #graph.dims<ffn>>) {
  // expected-error @+1 {{'graph.rmsnorm' op the scale's dim 'ffn' is not a dim of the input [seq=4, embed=8]}}
  %0 = graph.rmsnorm %x, %g eps 1.0e-6 : (tensor<4x8xf32, #graph.dims<seq, embed>>, tensor<8xf32, #graph.dims<ffn>>) -> tensor<4x8xf32, #graph.dims<seq, embed>>
  return
}

// -----

func.func @rmsnorm_scalar_scale(%x: tensor<4x8xf32, #graph.dims<seq, embed>>, %g: tensor<f32, #graph.dims<>>) {
  // expected-error @+1 {{'graph.rmsnorm' op the scale parameter must have at least one dim}}
  %0 = graph.rmsnorm %x, %g eps 1.0e-6 : (tensor<4x8xf32, #graph.dims<seq, embed>>, tensor<f32, #graph.dims<>>) -> tensor<4x8xf32, #graph.dims<seq, embed>>
  return
}

// -----

func.func @embedding_result(%t: tensor<256x8xf32, #graph.dims<vocab, embed>>, %ids: tensor<2x4xi32, #graph.dims<batch, seq>>) {
  // expected-error @+1 {{'graph.embedding' op result should be [batch=2, seq=4, embed=8] but is [batch=2, seq=4, vocab=256]}}
  %0 = graph.embedding %t, %ids : (tensor<256x8xf32, #graph.dims<vocab, embed>>, tensor<2x4xi32, #graph.dims<batch, seq>>) -> tensor<2x4x256xf32, #graph.dims<batch, seq, vocab>>
  return
}

// -----

func.func @embedding_table_rank(%t: tensor<256xf32, #graph.dims<vocab>>, %ids: tensor<2x4xi32, #graph.dims<batch, seq>>) {
  // expected-error @+1 {{'graph.embedding' op the table must have two dims [rows, features], not [vocab=256]}}
  %0 = graph.embedding %t, %ids : (tensor<256xf32, #graph.dims<vocab>>, tensor<2x4xi32, #graph.dims<batch, seq>>) -> tensor<2x4xf32, #graph.dims<batch, seq>>
  return
}

// -----

func.func @embedding_float_ids(%t: tensor<256x8xf32, #graph.dims<vocab, embed>>, %ids: tensor<2x4xf32, #graph.dims<batch, seq>>) {
  // expected-error @+1 {{'graph.embedding' op operand #1 must be ranked tensor of 32-bit signless integer values}}
  %0 = graph.embedding %t, %ids : (tensor<256x8xf32, #graph.dims<vocab, embed>>, tensor<2x4xf32, #graph.dims<batch, seq>>) -> tensor<2x4x8xf32, #graph.dims<batch, seq, embed>>
  return
}

// -----

func.func @cross_entropy_result(%l: tensor<2x4x256xf32, #graph.dims<batch, seq, vocab>>, %t: tensor<2x4xi32, #graph.dims<batch, seq>>) {
  // expected-error @+1 {{'graph.cross_entropy' op result should be [] but is [batch=2]}}
  %0 = graph.cross_entropy %l, %t dim "vocab" : (tensor<2x4x256xf32, #graph.dims<batch, seq, vocab>>, tensor<2x4xi32, #graph.dims<batch, seq>>) -> tensor<2xf32, #graph.dims<batch>>
  return
}

// -----

func.func @cross_entropy_targets(%l: tensor<2x4x256xf32, #graph.dims<batch, seq, vocab>>, %t: tensor<2xi32, #graph.dims<batch>>) {
  // expected-error @+1 {{'graph.cross_entropy' op targets [batch=2] must have every dim of the logits [batch=2, seq=4, vocab=256] but the class dim}}
  %0 = graph.cross_entropy %l, %t dim "vocab" : (tensor<2x4x256xf32, #graph.dims<batch, seq, vocab>>, tensor<2xi32, #graph.dims<batch>>) -> tensor<f32, #graph.dims<>>
  return
}

// -----

func.func @cross_entropy_class_dim(%l: tensor<2x4x256xf32, #graph.dims<batch, seq, vocab>>, %t: tensor<2x4xi32, #graph.dims<batch, seq>>) {
  // expected-error @+1 {{'graph.cross_entropy' op class dim is 'vocab', not 'seq'}}
  %0 = graph.cross_entropy %l, %t dim "seq" : (tensor<2x4x256xf32, #graph.dims<batch, seq, vocab>>, tensor<2x4xi32, #graph.dims<batch, seq>>) -> tensor<f32, #graph.dims<>>
  return
}

// -----

func.func @attention_result(%q: tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>) {
  // expected-error @+1 {{'graph.attention' op result should be [batch=2, seq=4, heads=4, head=8] but is [batch=2, seq=4, heads=4]}}
  %0 = graph.attention %q, %q, %q causal scale 0.125 : (tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>, tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>, tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>) -> tensor<2x4x4xf32, #graph.dims<batch, seq, heads>>
  return
}

// -----

func.func @attention_gqa_heads(%q: tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>, %k: tensor<2x4x3x8xf32, #graph.dims<batch, seq, kv_heads, head>>) {
  // expected-error @+1 {{'graph.attention' op kv heads 'kv_heads' (3) must divide query heads 'heads' (4)}}
  %0 = graph.attention %q, %k, %k causal scale 0.125 : (tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>, tensor<2x4x3x8xf32, #graph.dims<batch, seq, kv_heads, head>>, tensor<2x4x3x8xf32, #graph.dims<batch, seq, kv_heads, head>>) -> tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>
  return
}

// -----

func.func @attention_block_of_heads(%q: tensor<2x4x1x8xf32, #graph.dims<batch, seq, heads, head>>, %k: tensor<2x4x2x8xf32, #graph.dims<batch, seq, kv_heads, head>>) {
  // Fewer query heads than kv heads only as a rank's block of them (heads_over).
  // expected-error @+1 {{'graph.attention' op kv heads 'kv_heads' (2) must divide query heads 'heads' (1)}}
  %0 = graph.attention %q, %k, %k causal scale 0.125 : (tensor<2x4x1x8xf32, #graph.dims<batch, seq, heads, head>>, tensor<2x4x2x8xf32, #graph.dims<batch, seq, kv_heads, head>>, tensor<2x4x2x8xf32, #graph.dims<batch, seq, kv_heads, head>>) -> tensor<2x4x1x8xf32, #graph.dims<batch, seq, heads, head>>
  return
}

// -----

func.func @attention_key_value(%q: tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>, %k: tensor<2x4x2x8xf32, #graph.dims<batch, seq, kv_heads, head>>) {
  // expected-error @+1 {{'graph.attention' op keys [batch=2, seq=4, kv_heads=2, head=8] and values [batch=2, seq=4, heads=4, head=8] must have the same shape}}
  %0 = graph.attention %q, %k, %q scale 0.125 : (tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>, tensor<2x4x2x8xf32, #graph.dims<batch, seq, kv_heads, head>>, tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>) -> tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>
  return
}

// -----

func.func @attention_head_size(%q: tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>, %k: tensor<2x4x4x16xf32, #graph.dims<batch, seq, heads, wide>>) {
  // expected-error @+1 {{'graph.attention' op the last dim of queries and keys (the head size) must match: 'head' vs 'wide'}}
  %0 = graph.attention %q, %k, %k scale 0.125 : (tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>, tensor<2x4x4x16xf32, #graph.dims<batch, seq, heads, wide>>, tensor<2x4x4x16xf32, #graph.dims<batch, seq, heads, wide>>) -> tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>
  return
}

// -----

func.func @attention_query_rank(%q: tensor<4x8xf32, #graph.dims<seq, embed>>) {
  // expected-error @+1 {{'graph.attention' op the query must be [..., seq, heads, head], not [seq=4, embed=8]}}
  %0 = graph.attention %q, %q, %q scale 0.125 : (tensor<4x8xf32, #graph.dims<seq, embed>>, tensor<4x8xf32, #graph.dims<seq, embed>>, tensor<4x8xf32, #graph.dims<seq, embed>>) -> tensor<4x8xf32, #graph.dims<seq, embed>>
  return
}

// -----

func.func @attention_scale(%q: tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>) {
  // expected-error @+1 {{'graph.attention' op scale must be positive}}
  %0 = graph.attention %q, %q, %q scale 0.0 : (tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>, tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>, tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>) -> tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>
  return
}

// -----

func.func @rope_odd_head(%x: tensor<2x4x4x7xf32, #graph.dims<batch, seq, heads, head>>) {
  // expected-error @+1 {{'graph.rope' op rope rotates pairs: the head size 7 must be even}}
  %0 = graph.rope %x theta 1.0e4 : tensor<2x4x4x7xf32, #graph.dims<batch, seq, heads, head>>
  return
}

// -----

func.func @rope_rank(%x: tensor<4x8xf32, #graph.dims<seq, head>>) {
  // expected-error @+1 {{'graph.rope' op rope needs [..., seq, heads, head], not [seq=4, head=8]}}
  %0 = graph.rope %x theta 1.0e4 : tensor<4x8xf32, #graph.dims<seq, head>>
  return
}

// -----

func.func @rope_theta(%x: tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>) {
  // expected-error @+1 {{'graph.rope' op theta must be positive}}
  %0 = graph.rope %x theta -1.0 : tensor<2x4x4x8xf32, #graph.dims<batch, seq, heads, head>>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

func.func @split_not_a_dim(%x: tensor<2x8xf32, #graph.dims<batch, embed>>) {
  // expected-error @+1 {{'graph.split' op 'vocab' is not a dim of [batch=2, embed=8]}}
  %0 = graph.split %x dim "vocab" : tensor<2x8xf32, #graph.dims<batch, embed>> -> tensor<2x2x4xf32, #graph.dims<batch, heads, head>>
  return
}

// -----

func.func @split_fewer_dims(%x: tensor<2x8xf32, #graph.dims<batch, embed>>) {
  // expected-error @+1 {{'graph.split' op the result must have more dims than the input}}
  %0 = graph.split %x dim "embed" : tensor<2x8xf32, #graph.dims<batch, embed>> -> tensor<16xf32, #graph.dims<all>>
  return
}

// -----

func.func @split_sizes(%x: tensor<2x8xf32, #graph.dims<batch, embed>>) {
  // expected-error @+1 {{'graph.split' op parts multiply to 12 but 'embed' has size 8}}
  %0 = graph.split %x dim "embed" : tensor<2x8xf32, #graph.dims<batch, embed>> -> tensor<2x3x4xf32, #graph.dims<batch, heads, head>>
  return
}

// -----

func.func @split_part_exists(%x: tensor<2x8xf32, #graph.dims<batch, embed>>) {
  // expected-error @+1 {{'graph.split' op 'batch' is already a dim of [batch=2, embed=8]}}
  %0 = graph.split %x dim "embed" : tensor<2x8xf32, #graph.dims<batch, embed>> -> tensor<2x2x4xf32, #graph.dims<embed, batch, head>>
  return
}

// -----

func.func @merge_start(%x: tensor<2x2x4xf32, #graph.dims<batch, heads, head>>) {
  // expected-error @+1 {{'graph.merge' op the merged dims must start with a dim of [batch=2, heads=2, head=4]}}
  %0 = graph.merge %x dims ["embed", "head"] : tensor<2x2x4xf32, #graph.dims<batch, heads, head>> -> tensor<2x8xf32, #graph.dims<batch, embed>>
  return
}

// -----

func.func @merge_not_adjacent(%x: tensor<2x2x4xf32, #graph.dims<batch, heads, head>>) {
  // expected-error @+1 {{'graph.merge' op merged dims must be adjacent and in order in [batch=2, heads=2, head=4]}}
  %0 = graph.merge %x dims ["batch", "head"] : tensor<2x2x4xf32, #graph.dims<batch, heads, head>> -> tensor<8x2xf32, #graph.dims<all, heads>>
  return
}

// -----

func.func @merge_sizes(%x: tensor<2x2x4xf32, #graph.dims<batch, heads, head>>) {
  // expected-error @+1 {{'graph.merge' op dims multiply to 8 but 'embed' has size 16}}
  %0 = graph.merge %x dims ["heads", "head"] : tensor<2x2x4xf32, #graph.dims<batch, heads, head>> -> tensor<2x16xf32, #graph.dims<batch, embed>>
  return
}

// -----

func.func @merge_one_dim(%x: tensor<2x2x4xf32, #graph.dims<batch, heads, head>>) {
  // expected-error @+1 {{'graph.merge' op merge needs at least two dims}}
  %0 = graph.merge %x dims ["heads"] : tensor<2x2x4xf32, #graph.dims<batch, heads, head>> -> tensor<2x2x4xf32, #graph.dims<batch, heads, head>>
  return
}

// -----

func.func @permute_missing(%x: tensor<2x4xf32, #graph.dims<batch, seq>>) {
  // expected-error @+1 {{'graph.permute' op a permutation of [batch=2, seq=4] must name all 2 dims}}
  %0 = graph.permute %x : tensor<2x4xf32, #graph.dims<batch, seq>> -> tensor<4xf32, #graph.dims<seq>>
  return
}

// -----

func.func @permute_not_a_dim(%x: tensor<2x4xf32, #graph.dims<batch, seq>>) {
  // expected-error @+1 {{'graph.permute' op 'embed' is not a dim of [batch=2, seq=4]}}
  %0 = graph.permute %x : tensor<2x4xf32, #graph.dims<batch, seq>> -> tensor<4x2xf32, #graph.dims<seq, embed>>
  return
}

// -----

func.func @permute_sizes(%x: tensor<2x4xf32, #graph.dims<batch, seq>>) {
  // expected-error @+1 {{'graph.permute' op result should be [seq=4, batch=2] but is [seq=2, batch=4]}}
  %0 = graph.permute %x : tensor<2x4xf32, #graph.dims<batch, seq>> -> tensor<2x4xf32, #graph.dims<seq, batch>>
  return
}

// -----

func.func @permute_element_type(%x: tensor<2x4xi32, #graph.dims<batch, seq>>) {
  // expected-error @+1 {{'graph.permute' op operand element type 'i32' differs from the result's 'f32'}}
  %0 = graph.permute %x : tensor<2x4xi32, #graph.dims<batch, seq>> -> tensor<4x2xf32, #graph.dims<seq, batch>>
  return
}

// -----

func.func @fused_body(%x: tensor<2x4xf32, #graph.dims<batch, seq>>) {
  // expected-error @+1 {{'graph.fused_elementwise' op body: step 1 has an unknown operation 'gulp'}}
  %0 = graph.fused_elementwise %x body "exp x0; gulp t0" outputs [1] : (tensor<2x4xf32, #graph.dims<batch, seq>>) -> tensor<2x4xf32, #graph.dims<batch, seq>>
  return
}

// -----

func.func @fused_inputs(%x: tensor<2x4xf32, #graph.dims<batch, seq>>) {
  // expected-error @+1 {{'graph.fused_elementwise' op body reads x1 of 1 inputs}}
  %0 = graph.fused_elementwise %x body "add x0 x1" outputs [0] : (tensor<2x4xf32, #graph.dims<batch, seq>>) -> tensor<2x4xf32, #graph.dims<batch, seq>>
  return
}

// -----

func.func @fused_outputs(%x: tensor<2x4xf32, #graph.dims<batch, seq>>) {
  // expected-error @+1 {{'graph.fused_elementwise' op output step 2 is not a step of the body (2 steps)}}
  %0 = graph.fused_elementwise %x body "exp x0; neg t0" outputs [2] : (tensor<2x4xf32, #graph.dims<batch, seq>>) -> tensor<2x4xf32, #graph.dims<batch, seq>>
  return
}

// -----

func.func @fused_not_broadcast(%x: tensor<2x4xf32, #graph.dims<batch, seq>>) {
  // expected-error @+1 {{'graph.fused_elementwise' op input #0 has dim seq of size 4, which the results do not have}}
  %0 = graph.fused_elementwise %x body "exp x0" outputs [0] : (tensor<2x4xf32, #graph.dims<batch, seq>>) -> tensor<2xf32, #graph.dims<batch>>
  return
}
