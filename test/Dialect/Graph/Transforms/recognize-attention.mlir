// RUN: tessel-opt %s -tessel-recognize-attention -split-input-file | FileCheck %s

// Causal attention written by hand: scores over `head`, scaled by a division, the causal mask
// from positions (key <= query), softmax over the key dim, contraction with the values. It
// becomes one graph.attention with scale 1 / sqrt(8); nothing of the pattern stays.

!q = tensor<2x4x2x8xf32, #graph.dims<batch, seq, heads, head>>
!k = tensor<2x4x2x8xf32, #graph.dims<batch, seq_k, heads, head>>
!s = tensor<2x4x2x4xf32, #graph.dims<batch, seq, heads, seq_k>>
!c = tensor<f32, #graph.dims<>>
func.func @causal(%q: !q, %k: !k, %v: !k) -> !q {
  %s0 = graph.contract %q, %k sum ["head"] : (!q, !k) -> !s
  %c = graph.constant 2.8284271247461903 : !c
  %s = graph.div %s0, %c : (!s, !c) -> !s
  %pk = graph.positions : tensor<4xf32, #graph.dims<seq_k>>
  %pq = graph.positions : tensor<4xf32, #graph.dims<seq>>
  %m = graph.le %pk, %pq : (tensor<4xf32, #graph.dims<seq_k>>, tensor<4xf32, #graph.dims<seq>>) -> tensor<4x4xf32, #graph.dims<seq_k, seq>>
  %big = graph.constant -1.000000e+30 : !c
  %w = graph.where %m, %s, %big : (tensor<4x4xf32, #graph.dims<seq_k, seq>>, !s, !c) -> !s
  %p = graph.softmax %w dim "seq_k" : !s
  %a = graph.contract %p, %v sum ["seq_k"] : (!s, !k) -> !q
  return %a : !q
}
// CHECK-LABEL: func.func @causal(
// CHECK-SAME:  %[[Q:.*]]: tensor<2x4x2x8xf32, #graph.dims<batch, seq, heads, head>>, %[[K:.*]]: tensor<2x4x2x8xf32, #graph.dims<batch, seq_k, heads, head>>, %[[V:.*]]: tensor
// CHECK-NEXT:  %[[A:.*]] = graph.attention %[[Q]], %[[K]], %[[V]] causal scale 0.35355339059327373
// CHECK-NEXT:  return %[[A]]

// -----

// No mask, the scale as a product with the constant first: attention without `causal`.

!q = tensor<2x4x2x8xf32, #graph.dims<batch, seq, heads, head>>
!k = tensor<2x4x2x8xf32, #graph.dims<batch, seq_k, heads, head>>
!s = tensor<2x4x2x4xf32, #graph.dims<batch, seq, heads, seq_k>>
!c = tensor<f32, #graph.dims<>>
func.func @unmasked(%q: !q, %k: !k, %v: !k) -> !q {
  %s0 = graph.contract %q, %k sum ["head"] : (!q, !k) -> !s
  %c = graph.constant 0.25 : !c
  %s = graph.mul %c, %s0 : (!c, !s) -> !s
  %p = graph.softmax %s dim "seq_k" : !s
  %a = graph.contract %p, %v sum ["seq_k"] : (!s, !k) -> !q
  return %a : !q
}
// CHECK-LABEL: func.func @unmasked(
// CHECK-NEXT:  %[[A:.*]] = graph.attention %{{.*}}, %{{.*}}, %{{.*}} scale 2.500000e-01 :
// CHECK-NEXT:  return %[[A]]

// -----

// A sliding window, causal * (query - key < 3): attention with window 3.

!q = tensor<2x4x2x8xf32, #graph.dims<batch, seq, heads, head>>
!k = tensor<2x4x2x8xf32, #graph.dims<batch, seq_k, heads, head>>
!s = tensor<2x4x2x4xf32, #graph.dims<batch, seq, heads, seq_k>>
!c = tensor<f32, #graph.dims<>>
!m = tensor<4x4xf32, #graph.dims<seq_k, seq>>
func.func @window(%q: !q, %k: !k, %v: !k) -> !q {
  %s = graph.contract %q, %k sum ["head"] : (!q, !k) -> !s
  %pk = graph.positions : tensor<4xf32, #graph.dims<seq_k>>
  %pq = graph.positions : tensor<4xf32, #graph.dims<seq>>
  %causal = graph.le %pk, %pq : (tensor<4xf32, #graph.dims<seq_k>>, tensor<4xf32, #graph.dims<seq>>) -> !m
  %d = graph.sub %pq, %pk : (tensor<4xf32, #graph.dims<seq>>, tensor<4xf32, #graph.dims<seq_k>>) -> tensor<4x4xf32, #graph.dims<seq, seq_k>>
  %three = graph.constant 3.0 : !c
  %near = graph.lt %d, %three : (tensor<4x4xf32, #graph.dims<seq, seq_k>>, !c) -> tensor<4x4xf32, #graph.dims<seq, seq_k>>
  %m = graph.mul %causal, %near : (!m, tensor<4x4xf32, #graph.dims<seq, seq_k>>) -> !m
  %big = graph.constant -1.000000e+30 : !c
  %w = graph.where %m, %s, %big : (!m, !s, !c) -> !s
  %p = graph.softmax %w dim "seq_k" : !s
  %a = graph.contract %p, %v sum ["seq_k"] : (!s, !k) -> !q
  return %a : !q
}
// CHECK-LABEL: func.func @window(
// CHECK-NEXT:  %[[A:.*]] = graph.attention %{{.*}}, %{{.*}}, %{{.*}} causal window 3 scale 1.000000e+00 :
// CHECK-NEXT:  return %[[A]]

// -----

// Another mask (key < query: a row with no key at all) is not the attention op's: left as
// written.

!q = tensor<2x4x2x8xf32, #graph.dims<batch, seq, heads, head>>
!k = tensor<2x4x2x8xf32, #graph.dims<batch, seq_k, heads, head>>
!s = tensor<2x4x2x4xf32, #graph.dims<batch, seq, heads, seq_k>>
!c = tensor<f32, #graph.dims<>>
func.func @strict_mask(%q: !q, %k: !k, %v: !k) -> !q {
  %s = graph.contract %q, %k sum ["head"] : (!q, !k) -> !s
  %pk = graph.positions : tensor<4xf32, #graph.dims<seq_k>>
  %pq = graph.positions : tensor<4xf32, #graph.dims<seq>>
  %m = graph.lt %pk, %pq : (tensor<4xf32, #graph.dims<seq_k>>, tensor<4xf32, #graph.dims<seq>>) -> tensor<4x4xf32, #graph.dims<seq_k, seq>>
  %big = graph.constant -1.000000e+30 : !c
  %w = graph.where %m, %s, %big : (tensor<4x4xf32, #graph.dims<seq_k, seq>>, !s, !c) -> !s
  %p = graph.softmax %w dim "seq_k" : !s
  %a = graph.contract %p, %v sum ["seq_k"] : (!s, !k) -> !q
  return %a : !q
}
// CHECK-LABEL: func.func @strict_mask(
// CHECK-NOT:   graph.attention
// CHECK:       graph.softmax
// CHECK:       return

// -----

// The scores are also returned: the attention op replaces the output, the scores stay.

!q = tensor<2x4x2x8xf32, #graph.dims<batch, seq, heads, head>>
!k = tensor<2x4x2x8xf32, #graph.dims<batch, seq_k, heads, head>>
!s = tensor<2x4x2x4xf32, #graph.dims<batch, seq, heads, seq_k>>
func.func @scores_read_elsewhere(%q: !q, %k: !k, %v: !k) -> (!q, !s) {
  %s = graph.contract %q, %k sum ["head"] : (!q, !k) -> !s
  %p = graph.softmax %s dim "seq_k" : !s
  %a = graph.contract %p, %v sum ["seq_k"] : (!s, !k) -> !q
  return %a, %s : !q, !s
}
// CHECK-LABEL: func.func @scores_read_elsewhere(
// CHECK-NEXT:  %[[S:.*]] = graph.contract
// CHECK-NEXT:  %[[A:.*]] = graph.attention %{{.*}}, %{{.*}}, %{{.*}} scale 1.000000e+00 :
// CHECK-NEXT:  return %[[A]], %[[S]]

// -----

// Dropout on the probabilities: not the attention op's computation.

!q = tensor<2x4x2x8xf32, #graph.dims<batch, seq, heads, head>>
!k = tensor<2x4x2x8xf32, #graph.dims<batch, seq_k, heads, head>>
!s = tensor<2x4x2x4xf32, #graph.dims<batch, seq, heads, seq_k>>
func.func @dropout(%q: !q, %k: !k, %v: !k) -> !q {
  %s = graph.contract %q, %k sum ["head"] : (!q, !k) -> !s
  %p = graph.softmax %s dim "seq_k" : !s
  %d = graph.dropout %p rate 1.000000e-01 mask 0 : !s
  %a = graph.contract %d, %v sum ["seq_k"] : (!s, !k) -> !q
  return %a : !q
}
// CHECK-LABEL: func.func @dropout(
// CHECK-NOT:   graph.attention
// CHECK:       return
