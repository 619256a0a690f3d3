// RUN: tessel-opt %s -split-input-file -verify-diagnostics
// One case per verifier error of the fused output head and loss ops.

!x = tensor<2x8x16xf32, #graph.dims<batch, seq, embed>>
!w = tensor<48x16xf32, #graph.dims<vocab, embed>>
!t = tensor<2x8xi32, #graph.dims<batch, seq>>
!s = tensor<f32, #graph.dims<>>

func.func @weight_without_classes(%x: !x, %w: tensor<48x16xf32, #graph.dims<ffn, embed>>, %t: !t) {
  // expected-error @+1 {{'graph.linear_cross_entropy' op needs a weight with the dims 'embed' and 'vocab', not [ffn=48, embed=16]}}
  %0 = graph.linear_cross_entropy %x, %w, %t dim "vocab" scale 1.0 chunk 8 : (!x, tensor<48x16xf32, #graph.dims<ffn, embed>>, !t) -> !s
  return
}

// -----

!x = tensor<2x8x16xf32, #graph.dims<batch, seq, embed>>
!t = tensor<2x8xi32, #graph.dims<batch, seq>>
!s = tensor<f32, #graph.dims<>>
func.func @contracted_size(%x: !x, %w: tensor<48x32xf32, #graph.dims<vocab, embed>>, %t: !t) {
  // expected-error @+1 {{'graph.linear_cross_entropy' op contracts 'embed' of size 16 with a weight [vocab=48, embed=32]}}
  %0 = graph.linear_cross_entropy %x, %w, %t dim "vocab" scale 1.0 chunk 8 : (!x, tensor<48x32xf32, #graph.dims<vocab, embed>>, !t) -> !s
  return
}

// -----

!x = tensor<2x8x16xf32, #graph.dims<batch, seq, embed>>
!w = tensor<48x16xf32, #graph.dims<vocab, embed>>
!s = tensor<f32, #graph.dims<>>
func.func @targets(%x: !x, %w: !w, %t: tensor<8x2xi32, #graph.dims<seq, batch>>) {
  // expected-error @+1 {{'graph.linear_cross_entropy' op targets must be [batch=2, seq=8], the input's rows, not [seq=8, batch=2]}}
  %0 = graph.linear_cross_entropy %x, %w, %t dim "vocab" scale 1.0 chunk 8 : (!x, !w, tensor<8x2xi32, #graph.dims<seq, batch>>) -> !s
  return
}

// -----

!x = tensor<2x8x16xf32, #graph.dims<batch, seq, embed>>
!w = tensor<48x16xf32, #graph.dims<vocab, embed>>
!t = tensor<2x8xi32, #graph.dims<batch, seq>>
!s = tensor<f32, #graph.dims<>>
func.func @chunk(%x: !x, %w: !w, %t: !t) {
  // expected-error @+1 {{'graph.linear_cross_entropy' op needs a positive chunk}}
  %0 = graph.linear_cross_entropy %x, %w, %t dim "vocab" scale 1.0 chunk 0 : (!x, !w, !t) -> !s
  return
}

// -----

!x = tensor<2x8x16xf32, #graph.dims<batch, seq, embed>>
!w = tensor<48x16xf32, #graph.dims<vocab, embed>>
!t = tensor<2x8xi32, #graph.dims<batch, seq>>
!s = tensor<f32, #graph.dims<>>
func.func @scale(%x: !x, %w: !w, %t: !t) {
  // expected-error @+1 {{'graph.linear_cross_entropy' op needs a finite positive scale}}
  %0 = graph.linear_cross_entropy %x, %w, %t dim "vocab" scale -1.0 chunk 8 : (!x, !w, !t) -> !s
  return
}

// -----

!x = tensor<2x8x16xbf16, #graph.dims<batch, seq, embed>>
!w = tensor<48x16xbf16, #graph.dims<vocab, embed>>
!t = tensor<2x8xi32, #graph.dims<batch, seq>>
!s = tensor<f32, #graph.dims<>>
func.func @bf16(%x: !x, %w: !w, %t: !t) {
  // expected-error @+1 {{'graph.linear_cross_entropy' op needs f32 input and weight (the weight gradient accumulates in f32)}}
  %0 = graph.linear_cross_entropy %x, %w, %t dim "vocab" scale 1.0 chunk 8 : (!x, !w, !t) -> !s
  return
}

// -----

!x = tensor<2x8x16xf32, #graph.dims<batch, seq, embed>>
!w = tensor<48x16xf32, #graph.dims<vocab, embed>>
!t = tensor<2x8xi32, #graph.dims<batch, seq>>
!s = tensor<f32, #graph.dims<>>
func.func @loss_scalar(%x: !x, %w: !w, %t: !t) {
  // expected-error @+1 {{'graph.linear_cross_entropy' op the result must be a scalar tensor, not 'tensor<2x8xf32, #graph.dims<batch, seq>>'}}
  %0 = graph.linear_cross_entropy %x, %w, %t dim "vocab" scale 1.0 chunk 8 : (!x, !w, !t) -> tensor<2x8xf32, #graph.dims<batch, seq>>
  return
}

// -----

!x = tensor<2x8x16xf32, #graph.dims<batch, seq, embed>>
!w = tensor<48x16xf32, #graph.dims<vocab, embed>>
!t = tensor<2x8xi32, #graph.dims<batch, seq>>
!s = tensor<f32, #graph.dims<>>
func.func @weight_grad_type(%x: !x, %w: !w, %t: !t, %g: !s) {
  // expected-error @+1 {{'graph.linear_cross_entropy_grad' op weight gradient type 'tensor<16x48xf32, #graph.dims<embed, vocab>>' must be 'tensor<48x16xf32, #graph.dims<vocab, embed>>'}}
  %l, %dx, %dw = graph.linear_cross_entropy_grad %x, %w, %t, %g dim "vocab" scale 1.0 chunk 8 : (!x, !w, !t, !s) -> (!s, !x, tensor<16x48xf32, #graph.dims<embed, vocab>>)
  return
}

// -----

!x = tensor<2x8x16xf32, #graph.dims<batch, seq, embed>>
!w = tensor<48x16xf32, #graph.dims<vocab, embed>>
!t = tensor<2x8xi32, #graph.dims<batch, seq>>
!s = tensor<f32, #graph.dims<>>
func.func @loss_grad_scalar(%x: !x, %w: !w, %t: !t, %g: !t) {
  // expected-error @+1 {{'graph.linear_cross_entropy_grad' op operand #3 must be}}
  %l, %dx, %dw = graph.linear_cross_entropy_grad %x, %w, %t, %g dim "vocab" scale 1.0 chunk 8 : (!x, !w, !t, !t) -> (!s, !x, !w)
  return
}
