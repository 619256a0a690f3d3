// RUN: tessel-opt %s -tessel-lower-to-plan | FileCheck %s
// The kernels of positions, comparisons, where, rename, pow, square and gelu_erf: each
// comparison is the binary kernel with its op, where reads its three operands through
// strides (0 along the dims an operand lacks), rename is a view of the same bytes, and pow
// passes its exponent to the unary kernel.

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

// CHECK-LABEL: plan.program "eval"
// CHECK: %[[W:.*]] = plan.state "w" : memref<2x4xf32>
// CHECK: %[[B:.*]] = plan.state "b" : memref<2xf32>
// CHECK: %[[Q:.*]] = plan.alloc : memref<2xf32>
// CHECK-NEXT: plan.kernel "positions" outs(%[[Q]] : memref<2xf32>) {n = 2 : i64}
// CHECK: %[[K:.*]] = plan.alloc : memref<4xf32>
// CHECK-NEXT: plan.kernel "positions" outs(%[[K]] : memref<4xf32>) {n = 4 : i64}
// CHECK: %[[M:.*]] = plan.alloc : memref<4x2xf32>
// CHECK-NEXT: plan.kernel "binary" ins(%[[K]], %[[Q]] : memref<4xf32>, memref<2xf32>) outs(%[[M]] : memref<4x2xf32>) {a_strides = array<i64: 1, 0>, b_strides = array<i64: 0, 1>, op = "le", shape = array<i64: 4, 2>}
// The mask [seq_k, seq] is read transposed into the result's order [seq, seq_k].
// CHECK: %[[S:.*]] = plan.alloc : memref<2x4xf32>
// CHECK-NEXT: plan.kernel "where" ins(%[[M]], %[[W]], %[[B]] : memref<4x2xf32>, memref<2x4xf32>, memref<2xf32>) outs(%[[S]] : memref<2x4xf32>) {a_strides = array<i64: 4, 1>, b_strides = array<i64: 1, 0>, cond_strides = array<i64: 1, 2>, shape = array<i64: 2, 4>}
// CHECK-NEXT: %[[R:.*]] = plan.view %[[S]] : memref<2x4xf32> to memref<2x4xf32>
// CHECK: plan.kernel "unary" ins(%[[R]] : memref<2x4xf32>) outs(%[[P:.*]] : memref<2x4xf32>) {exponent = 3.000000e+00 : f64, n = 8 : i64, op = "pow"}
// CHECK: plan.kernel "unary" ins(%[[P]] : memref<2x4xf32>) outs(%[[SQ:.*]] : memref<2x4xf32>) {n = 8 : i64, op = "square"}
// CHECK: plan.kernel "unary" ins(%[[SQ]] : memref<2x4xf32>) outs(%{{.*}} : memref<2x4xf32>) {n = 8 : i64, op = "gelu_erf"}
