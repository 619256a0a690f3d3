// RUN: tessel-opt %s -split-input-file -verify-diagnostics
// One case per verifier error of positions, the comparisons, where, rename, the elementwise
// functions (pow and its exponent) and top_k.

func.func @positions_rank() {
  // expected-error @+1 {{'graph.positions' op produces positions along one dim, not [seq=8, embed=4]}}
  %0 = graph.positions : tensor<8x4xf32, #graph.dims<seq, embed>>
  return
}

// -----

func.func @compare_shape(%a: tensor<8xf32, #graph.dims<seq>>, %b: tensor<4xf32, #graph.dims<seq_k>>) {
  // expected-error @+1 {{'graph.lt' op result should be [seq=8, seq_k=4] but is [seq_k=4, seq=8]}}
  %0 = graph.lt %a, %b : (tensor<8xf32, #graph.dims<seq>>, tensor<4xf32, #graph.dims<seq_k>>) -> tensor<4x8xf32, #graph.dims<seq_k, seq>>
  return
}

// -----

func.func @compare_size_clash(%a: tensor<8xf32, #graph.dims<seq>>, %b: tensor<4xf32, #graph.dims<seq>>) {
  // expected-error @+1 {{'graph.eq' op dim 'seq' has size 8 in one operand and 4 in the other}}
  %0 = graph.eq %a, %b : (tensor<8xf32, #graph.dims<seq>>, tensor<4xf32, #graph.dims<seq>>) -> tensor<8xf32, #graph.dims<seq>>
  return
}

// -----

func.func @where_order(%c: tensor<8xf32, #graph.dims<seq_k>>, %a: tensor<4xf32, #graph.dims<seq>>, %s: tensor<f32, #graph.dims<>>) {
  // The condition's dims come after the values'.
  // expected-error @+1 {{'graph.where' op result should be [seq=4, seq_k=8] but is [seq_k=8, seq=4]}}
  %0 = graph.where %c, %a, %s : (tensor<8xf32, #graph.dims<seq_k>>, tensor<4xf32, #graph.dims<seq>>, tensor<f32, #graph.dims<>>) -> tensor<8x4xf32, #graph.dims<seq_k, seq>>
  return
}

// -----

func.func @where_element_type(%c: tensor<4xf32, #graph.dims<seq>>, %a: tensor<4xf16, #graph.dims<seq>>) {
  // expected-error @+1 {{'graph.where' op operand element type 'f16' differs from the result's 'f32'}}
  %0 = graph.where %c, %a, %c : (tensor<4xf32, #graph.dims<seq>>, tensor<4xf16, #graph.dims<seq>>, tensor<4xf32, #graph.dims<seq>>) -> tensor<4xf32, #graph.dims<seq>>
  return
}

// -----

func.func @rename_size(%x: tensor<8x4xf32, #graph.dims<seq, embed>>) {
  // expected-error @+1 {{'graph.rename' op renames 'seq' (size 8) to 'seq_k' of size 4; sizes must agree}}
  %0 = graph.rename %x : tensor<8x4xf32, #graph.dims<seq, embed>> -> tensor<4x4xf32, #graph.dims<seq_k, embed>>
  return
}

// -----

func.func @rename_rank(%x: tensor<8x4xf32, #graph.dims<seq, embed>>) {
  // expected-error @+1 {{'graph.rename' op renames dims but changes the rank: [seq=8, embed=4] -> [seq_k=8]}}
  %0 = graph.rename %x : tensor<8x4xf32, #graph.dims<seq, embed>> -> tensor<8xf32, #graph.dims<seq_k>>
  return
}

// -----

func.func @pow_exponent(%x: tensor<4xf32, #graph.dims<seq>>) {
  // expected-error @+1 {{'graph.unary' op exponent must be finite}}
  %0 = graph.unary pow %x exponent 0x7FF0000000000000 : tensor<4xf32, #graph.dims<seq>>
  return
}

// -----

func.func @pow_grad_exponent(%x: tensor<4xf32, #graph.dims<seq>>) {
  // expected-error @+1 {{'graph.unary_grad' op of pow needs the exponent}}
  %0 = graph.unary_grad pow %x, %x, %x : tensor<4xf32, #graph.dims<seq>>
  return
}

// -----

func.func @exponent_without_pow(%x: tensor<4xf32, #graph.dims<seq>>) {
  // expected-error @+1 {{'graph.unary_grad' op carries an exponent only for pow}}
  %0 = graph.unary_grad square %x, %x, %x exponent 2.0 : tensor<4xf32, #graph.dims<seq>>
  return
}

// -----

func.func @pow_without_exponent(%x: tensor<4xf32, #graph.dims<seq>>) {
  // expected-error @+1 {{'graph.unary' op of pow needs the exponent}}
  %0 = graph.unary pow %x : tensor<4xf32, #graph.dims<seq>>
  return
}

// -----

func.func @unary_exponent_without_pow(%x: tensor<4xf32, #graph.dims<seq>>) {
  // expected-error @+1 {{'graph.unary' op carries an exponent only for pow}}
  %0 = graph.unary gelu %x exponent 2.0 : tensor<4xf32, #graph.dims<seq>>
  return
}

// -----

func.func @unary_unknown(%x: tensor<4xf32, #graph.dims<seq>>) {
  // expected-error @+1 {{unknown elementwise function 'erf'; the functions are neg, exp, log, sqrt, rsqrt, tanh, gelu, silu, relu, sigmoid, square, pow, gelu_erf}}
  %0 = graph.unary erf %x : tensor<4xf32, #graph.dims<seq>>
  return
}

// -----

func.func @top_k_dim(%p: tensor<8x4xf32, #graph.dims<seq, experts>>) {
  // expected-error @+1 {{'graph.top_k' op 'heads' is not a dim of [seq=8, experts=4]}}
  %0 = graph.top_k %p dim "heads" k 1 : tensor<8x4xf32, #graph.dims<seq, experts>>
  return
}

// -----

func.func @top_k_too_many(%p: tensor<8x4xf32, #graph.dims<seq, experts>>) {
  // expected-error @+1 {{'graph.top_k' op k = 5 is not in [1, 4], the size of 'experts'}}
  %0 = graph.top_k %p dim "experts" k 5 : tensor<8x4xf32, #graph.dims<seq, experts>>
  return
}
