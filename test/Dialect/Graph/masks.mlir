// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// The ops attention variants are written with, printed and parsed back: positions along a
// dim, comparisons, where, rename, and the powers and exact GELU.

!q = tensor<8xf32, #graph.dims<seq>>
!k = tensor<8xf32, #graph.dims<seq_k>>
!m = tensor<8x8xf32, #graph.dims<seq_k, seq>>
!h = tensor<2x8x4x8xf32, #graph.dims<batch, seq, heads, seq_k>>
!v = tensor<2x8x4x16xf32, #graph.dims<batch, seq, heads, head>>
!vk = tensor<2x8x4x16xf32, #graph.dims<batch, seq_k, heads, head>>
!s = tensor<f32, #graph.dims<>>

// CHECK-LABEL: func.func @masks
// CHECK-SAME: (%[[S:[^:]+]]: tensor<2x8x4x8xf32, #graph.dims<batch, seq, heads, seq_k>>, %[[V:[^:]+]]:
func.func @masks(%scores: !h, %v: !v) -> (!h, !vk) {
  // CHECK: %[[Q:.*]] = graph.positions : tensor<8xf32, #graph.dims<seq>>
  %q = graph.positions : !q
  // CHECK: %[[K:.*]] = graph.positions : tensor<8xf32, #graph.dims<seq_k>>
  %k = graph.positions : !k
  // CHECK: graph.lt %[[K]], %[[Q]] : (tensor<8xf32, #graph.dims<seq_k>>, tensor<8xf32, #graph.dims<seq>>) -> tensor<8x8xf32, #graph.dims<seq_k, seq>>
  %lt = graph.lt %k, %q : (!k, !q) -> !m
  // CHECK: %[[LE:.*]] = graph.le %[[K]], %[[Q]]
  %le = graph.le %k, %q : (!k, !q) -> !m
  // CHECK: graph.gt %[[K]], %[[Q]]
  %gt = graph.gt %k, %q : (!k, !q) -> !m
  // CHECK: graph.ge %[[K]], %[[Q]]
  %ge = graph.ge %k, %q : (!k, !q) -> !m
  // CHECK: graph.eq %[[K]], %[[Q]]
  %eq = graph.eq %k, %q : (!k, !q) -> !m
  // CHECK: graph.ne %[[K]], %[[Q]]
  %ne = graph.ne %k, %q : (!k, !q) -> !m
  // CHECK: %[[INF:.*]] = graph.constant -1.000000e+30
  %inf = graph.constant -1.0e30 : !s
  // CHECK: %[[W:.*]] = graph.where %[[LE]], %[[S]], %[[INF]] : (tensor<8x8xf32, #graph.dims<seq_k, seq>>, tensor<2x8x4x8xf32, #graph.dims<batch, seq, heads, seq_k>>, tensor<f32, #graph.dims<>>) -> tensor<2x8x4x8xf32, #graph.dims<batch, seq, heads, seq_k>>
  %w = graph.where %le, %scores, %inf : (!m, !h, !s) -> !h
  // CHECK: %[[R:.*]] = graph.rename %[[V]] : tensor<2x8x4x16xf32, #graph.dims<batch, seq, heads, head>> -> tensor<2x8x4x16xf32, #graph.dims<batch, seq_k, heads, head>>
  %r = graph.rename %v : !v -> !vk
  // CHECK: return %[[W]], %[[R]]
  return %w, %r : !h, !vk
}

// CHECK-LABEL: func.func @powers
func.func @powers(%x: !v) -> (!v, !v, !v) {
  // CHECK: %[[SQ:.*]] = graph.unary square %{{.*}} : tensor<2x8x4x16xf32
  %0 = graph.unary square %x : !v
  // CHECK: %[[P:.*]] = graph.unary pow %[[SQ]] exponent -5.000000e-01 : tensor<2x8x4x16xf32
  %1 = graph.unary pow %0 exponent -5.0e-01 : !v
  // CHECK: graph.unary gelu_erf %[[P]] : tensor<2x8x4x16xf32
  %2 = graph.unary gelu_erf %1 : !v
  // CHECK: graph.unary_grad pow %[[SQ]], %[[P]], %{{.*}} exponent -5.000000e-01 :
  %3 = graph.unary_grad pow %0, %1, %x exponent -5.0e-01 : !v
  // CHECK: graph.unary_grad gelu_erf
  %4 = graph.unary_grad gelu_erf %1, %2, %x : !v
  return %2, %3, %4 : !v, !v, !v
}
