// RUN: tessel-opt %s -tessel-autodiff | FileCheck %s
// Gradient rules of the ops masks and powers are written with: where sends the gradient to
// the value it selected (each side reduced to its operand's dims), the mask it selects by and
// the positions and comparison that build the mask take none, rename renames the gradient
// back, and pow, square and gelu_erf are unary_grad ops (pow's with its exponent).

!x = tensor<2x4xf32, #graph.dims<seq, seq_k>>
!q = tensor<2xf32, #graph.dims<seq>>
!k = tensor<4xf32, #graph.dims<seq_k>>
!kq = tensor<4x2xf32, #graph.dims<seq_k, seq>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward(%x: !x {graph.name = "x"}) -> !s {
    %w = graph.param "w" init <ones> : !x
    %b = graph.param "b" init <zeros> : !q
    %q = graph.positions : !q
    %k = graph.positions : !k
    %m = graph.le %k, %q : (!k, !q) -> !kq
    %f = graph.constant -1.0e30 : !s
    %s = graph.where %m, %w, %b : (!kq, !x, !q) -> !x
    %r = graph.rename %s : !x -> tensor<2x4xf32, #graph.dims<seq2, seq_k>>
    %p = graph.unary pow %r exponent 3.0 : tensor<2x4xf32, #graph.dims<seq2, seq_k>>
    %sq = graph.unary square %p : tensor<2x4xf32, #graph.dims<seq2, seq_k>>
    %g = graph.unary gelu_erf %sq : tensor<2x4xf32, #graph.dims<seq2, seq_k>>
    %l = graph.sum %g dims ["seq2", "seq_k"] : tensor<2x4xf32, #graph.dims<seq2, seq_k>> -> !s
    return %l : !s
  }
}

// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[M:.*]] = graph.le
// CHECK: %[[R:.*]] = graph.rename
// CHECK-NEXT: %[[P:.*]] = graph.unary pow %[[R]] exponent 3.000000e+00
// CHECK-NEXT: %[[SQ:.*]] = graph.unary square %[[P]]
// CHECK-NEXT: %[[G:.*]] = graph.unary gelu_erf %[[SQ]]
// CHECK: %[[DY:.*]] = graph.broadcast
// CHECK-NEXT: %[[DSQ:.*]] = graph.unary_grad gelu_erf %[[SQ]], %[[G]], %[[DY]] :
// CHECK-NEXT: %[[DP:.*]] = graph.unary_grad square %[[P]], %[[SQ]], %[[DSQ]] :
// CHECK-NEXT: %[[DR:.*]] = graph.unary_grad pow %[[R]], %[[P]], %[[DP]] exponent 3.000000e+00 :
// CHECK-NEXT: %[[DS:.*]] = graph.rename %[[DR]] : tensor<2x4xf32, #graph.dims<seq2, seq_k>> -> tensor<2x4xf32, #graph.dims<seq, seq_k>>
// CHECK-NEXT: %[[ZERO:.*]] = graph.constant 0.000000e+00
// CHECK-NEXT: %[[DW:.*]] = graph.where %[[M]], %[[DS]], %[[ZERO]] :
// CHECK-NEXT: %[[DBFULL:.*]] = graph.where %[[M]], %[[ZERO]], %[[DS]] :
// CHECK-NEXT: %[[DB:.*]] = graph.sum %[[DBFULL]] dims ["seq_k"] : tensor<2x4xf32, #graph.dims<seq, seq_k>> -> tensor<2xf32, #graph.dims<seq>>
// CHECK-NEXT: graph.accumulate_grad %[[DW]] to "w"
// CHECK-NEXT: graph.accumulate_grad %[[DB]] to "b"
// CHECK-NEXT: return
