// RUN: tessel-opt %s -split-input-file -tessel-derive-sampler | FileCheck %s
// -tessel-derive-sampler clones @forward into @sample(tokens) -> logits: the batch dim is 1
// in every value, and the cross-entropy and its targets argument are gone.

!ids = tensor<4x6xi32, #graph.dims<batch, seq>>
!x = tensor<4x6x8xf32, #graph.dims<batch, seq, embed>>
!l = tensor<4x6x16xf32, #graph.dims<batch, seq, vocab>>
!t = tensor<16x8xf32, #graph.dims<vocab, embed>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward(%tok: !ids {graph.name = "tokens"}, %tgt: !ids {graph.name = "targets"}) -> !s {
    %wte = graph.param "wte" init <normal(0.0, 0.02)> : !t
    %wpe = graph.param "wpe" init <normal(0.0, 0.02)> : tensor<6x8xf32, #graph.dims<seq, embed>>
    %0 = graph.embedding %wte, %tok : (!t, !ids) -> !x
    %1 = graph.add %0, %wpe : (!x, tensor<6x8xf32, #graph.dims<seq, embed>>) -> !x
    %2 = graph.permute %1 : !x -> tensor<6x4x8xf32, #graph.dims<seq, batch, embed>>
    %3 = graph.unary gelu %2 : tensor<6x4x8xf32, #graph.dims<seq, batch, embed>>
    %4 = graph.permute %3 : tensor<6x4x8xf32, #graph.dims<seq, batch, embed>> -> !x
    %5 = graph.contract %4, %wte sum ["embed"] : (!x, !t) -> !l
    %6 = graph.cross_entropy %5, %tgt dim "vocab" : (!l, !ids) -> !s
    return %6 : !s
  }
}

// @forward is left as it was.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: {graph.name = "targets"}) -> tensor<f32, #graph.dims<>>
// CHECK: graph.cross_entropy
// CHECK-LABEL: func.func @sample(
// CHECK-SAME: %[[TOK:[^:]+]]: tensor<1x6xi32, #graph.dims<batch, seq>> {graph.name = "tokens"}) -> tensor<1x6x16xf32, #graph.dims<batch, seq, vocab>> {
// CHECK-NEXT: %[[WTE:.*]] = graph.param "wte" init <normal(0.000000e+00, 2.000000e-02)> : tensor<16x8xf32, #graph.dims<vocab, embed>>
// CHECK-NEXT: %[[WPE:.*]] = graph.param "wpe" init <normal(0.000000e+00, 2.000000e-02)> : tensor<6x8xf32, #graph.dims<seq, embed>>
// CHECK-NEXT: %[[E:.*]] = graph.embedding %[[WTE]], %[[TOK]] : (tensor<16x8xf32, #graph.dims<vocab, embed>>, tensor<1x6xi32, #graph.dims<batch, seq>>) -> tensor<1x6x8xf32, #graph.dims<batch, seq, embed>>
// CHECK-NEXT: %[[A:.*]] = graph.add %[[E]], %[[WPE]] : (tensor<1x6x8xf32, #graph.dims<batch, seq, embed>>, tensor<6x8xf32, #graph.dims<seq, embed>>) -> tensor<1x6x8xf32, #graph.dims<batch, seq, embed>>
// The batch dim is found by name wherever it stands.
// CHECK-NEXT: %[[P:.*]] = graph.permute %[[A]] : tensor<1x6x8xf32, #graph.dims<batch, seq, embed>> -> tensor<6x1x8xf32, #graph.dims<seq, batch, embed>>
// CHECK-NEXT: %[[G:.*]] = graph.unary gelu %[[P]] : tensor<6x1x8xf32, #graph.dims<seq, batch, embed>>
// CHECK-NEXT: %[[Q:.*]] = graph.permute %[[G]] : tensor<6x1x8xf32, #graph.dims<seq, batch, embed>> -> tensor<1x6x8xf32, #graph.dims<batch, seq, embed>>
// CHECK-NEXT: %[[LOGITS:.*]] = graph.contract %[[Q]], %[[WTE]] sum ["embed"] : (tensor<1x6x8xf32, #graph.dims<batch, seq, embed>>, tensor<16x8xf32, #graph.dims<vocab, embed>>) -> tensor<1x6x16xf32, #graph.dims<batch, seq, vocab>>
// CHECK-NEXT: return %[[LOGITS]] : tensor<1x6x16xf32, #graph.dims<batch, seq, vocab>>
// CHECK-NEXT: }
// CHECK-NEXT: }

// -----

// A model without a batch dim keeps its sizes.

!x = tensor<6x8xf32, #graph.dims<seq, embed>>
!ids = tensor<6xi32, #graph.dims<seq>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward(%tgt: !ids {graph.name = "targets"}, %x: !x {graph.name = "x"}) -> !s {
    %w = graph.param "w" init <ones> : !x
    %0 = graph.mul %x, %w : (!x, !x) -> !x
    %1 = graph.cross_entropy %0, %tgt dim "embed" : (!x, !ids) -> !s
    return %1 : !s
  }
}

// CHECK-LABEL: func.func @sample(
// CHECK-SAME: %[[X:[^:]+]]: tensor<6x8xf32, #graph.dims<seq, embed>> {graph.name = "x"}) -> tensor<6x8xf32, #graph.dims<seq, embed>> {
// CHECK-NEXT: %[[W:.*]] = graph.param "w"
// CHECK-NEXT: %[[L:.*]] = graph.mul %[[X]], %[[W]] : (tensor<6x8xf32, #graph.dims<seq, embed>>, tensor<6x8xf32, #graph.dims<seq, embed>>) -> tensor<6x8xf32, #graph.dims<seq, embed>>
// CHECK-NEXT: return %[[L]]

// -----

// Ops that reach nothing (an unused parameter and a dead chain) are dropped, not crashed on.

!t = tensor<2x4xi32, #graph.dims<batch, seq>>
!e = tensor<8x3xf32, #graph.dims<vocab, embed>>
!x = tensor<2x4x3xf32, #graph.dims<batch, seq, embed>>
!l = tensor<2x4x8xf32, #graph.dims<batch, seq, vocab>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward(%tokens: !t {graph.name = "tokens"}, %targets: !t {graph.name = "targets"}) -> !s {
    %spare = graph.param "spare" init <zeros> : tensor<3xf32, #graph.dims<embed>>
    %w = graph.param "w" init <ones> : !e
    %x = graph.embedding %w, %tokens : (!e, !t) -> !x
    %dead = graph.unary exp %x : !x
    %dead2 = graph.mean %dead dims ["batch", "seq", "embed"] : !x -> !s
    %logits = graph.contract %x, %w sum ["embed"] : (!x, !e) -> !l
    %loss = graph.cross_entropy %logits, %targets dim "vocab" : (!l, !t) -> !s
    return %loss : !s
  }
}

// CHECK-LABEL: func.func @sample(
// CHECK-NOT: graph.unary exp
// CHECK-NOT: "spare"
// CHECK: return {{.*}} : tensor<1x4x8xf32, #graph.dims<batch, seq, vocab>>
