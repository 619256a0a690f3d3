// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// The fused output head and loss ops, printed and parsed back.

!x = tensor<2x8x16xf32, #graph.dims<batch, seq, embed>>
!w = tensor<48x16xf32, #graph.dims<vocab, embed>>
!u = tensor<16x48xf32, #graph.dims<embed, vocab>>
!t = tensor<2x8xi32, #graph.dims<batch, seq>>
!s = tensor<f32, #graph.dims<>>

// CHECK-LABEL: func.func @ops
func.func @ops(%x: !x, %w: !w, %u: !u, %t: !t, %g: !s) -> (!s, !s, !x, !w, !s, !x, !u) {
  // CHECK: graph.linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} dim "vocab" scale 6.250000e-02 chunk 8 :
  %a = graph.linear_cross_entropy %x, %w, %t dim "vocab" scale 6.250000e-02 chunk 8 : (!x, !w, !t) -> !s
  // CHECK: graph.linear_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} dim "vocab" axis "tp" scale 6.250000e-02 chunk 5 :
  %l, %dx, %dw = graph.linear_cross_entropy_grad %x, %w, %t, %g dim "vocab" axis "tp" scale 6.250000e-02 chunk 5 : (!x, !w, !t, !s) -> (!s, !x, !w)
  // An untied head [embed, vocab].
  // CHECK: graph.linear_cross_entropy_grad {{.*}} -> (tensor<f32, #graph.dims<>>, tensor<2x8x16xf32, #graph.dims<batch, seq, embed>>, tensor<16x48xf32, #graph.dims<embed, vocab>>)
  %l2, %dx2, %du = graph.linear_cross_entropy_grad %x, %u, %t, %g dim "vocab" scale 1.0 chunk 16 : (!x, !u, !t, !s) -> (!s, !x, !u)
  return %a, %l, %dx, %dw, %l2, %dx2, %du : !s, !s, !x, !w, !s, !x, !u
}
