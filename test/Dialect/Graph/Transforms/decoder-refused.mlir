// RUN: tessel-opt %s -split-input-file -tessel-derive-decoder | FileCheck %s
// What the decode programs do not cover leaves the decoder module without functions and says
// why in tessel.decode_refused (generation then recomputes the window with @sample).

!ids = tensor<2x8xi32, #graph.dims<batch, seq>>
!x = tensor<2x8x8xf32, #graph.dims<batch, seq, embed>>
!q = tensor<2x8x4x2xf32, #graph.dims<batch, seq, heads, head>>
!l = tensor<2x8x16xf32, #graph.dims<batch, seq, vocab>>
!t = tensor<16x8xf32, #graph.dims<vocab, embed>>
!s = tensor<f32, #graph.dims<>>

// Attention without the causal mask sees later tokens.
// CHECK: module attributes {tessel.decode_refused = "{{.*}}attention without the causal mask reads later tokens"
// CHECK-NOT: func.func
module {
  func.func @forward(%tok: !ids {graph.name = "tokens"}, %tgt: !ids {graph.name = "targets"}) -> !s {
    %wte = graph.param "wte" init <normal(0.0, 0.02)> : !t
    %wq = graph.param "wq" init <normal(0.0, 0.02)> : tensor<8x4x2xf32, #graph.dims<embed, heads, head>>
    %wo = graph.param "wo" init <normal(0.0, 0.02)> : tensor<4x2x8xf32, #graph.dims<heads, head, embed>>
    %x = graph.embedding %wte, %tok : (!t, !ids) -> !x
    %q = graph.contract %x, %wq sum ["embed"] : (!x, tensor<8x4x2xf32, #graph.dims<embed, heads, head>>) -> !q
    %a = graph.attention %q, %q, %q scale 0.7 : (!q, !q, !q) -> !q
    %o = graph.contract %a, %wo sum ["heads", "head"] : (!q, tensor<4x2x8xf32, #graph.dims<heads, head, embed>>) -> !x
    %lg = graph.contract %o, %wte sum ["embed"] : (!x, !t) -> !l
    %ce = graph.cross_entropy %lg, %tgt dim "vocab" : (!l, !ids) -> !s
    return %ce : !s
  }
}

// -----

!ids = tensor<2x8xi32, #graph.dims<batch, seq>>
!x = tensor<2x8x8xf32, #graph.dims<batch, seq, embed>>
!q = tensor<2x8x4x2xf32, #graph.dims<batch, seq, heads, head>>
!l = tensor<2x8x16xf32, #graph.dims<batch, seq, vocab>>
!t = tensor<16x8xf32, #graph.dims<vocab, embed>>
!s = tensor<f32, #graph.dims<>>

// A mean over the sequence mixes its tokens.
// CHECK: module attributes {tessel.decode_refused = "{{.*}}'mean' mixes tokens along 'seq', which a KV cache does not keep"
// CHECK-NOT: func.func
module {
  func.func @forward(%tok: !ids {graph.name = "tokens"}, %tgt: !ids {graph.name = "targets"}) -> !s {
    %wte = graph.param "wte" init <normal(0.0, 0.02)> : !t
    %x = graph.embedding %wte, %tok : (!t, !ids) -> !x
    %m = graph.mean %x dims ["seq"] : !x -> tensor<2x8xf32, #graph.dims<batch, embed>>
    %y = graph.add %x, %m : (!x, tensor<2x8xf32, #graph.dims<batch, embed>>) -> !x
    %lg = graph.contract %y, %wte sum ["embed"] : (!x, !t) -> !l
    %ce = graph.cross_entropy %lg, %tgt dim "vocab" : (!l, !ids) -> !s
    return %ce : !s
  }
}

// -----

!ids = tensor<2x8xi32, #graph.dims<batch, seq>>
!x = tensor<2x8x8xf32, #graph.dims<batch, seq, embed>>
!q = tensor<2x8x4x2xf32, #graph.dims<batch, seq, heads, head>>
!l = tensor<2x8x16xf32, #graph.dims<batch, seq, vocab>>
!t = tensor<16x8xf32, #graph.dims<vocab, embed>>
!s = tensor<f32, #graph.dims<>>

// Positions along the sequence compare the tokens of one window.
// CHECK: module attributes {tessel.decode_refused = "{{.*}}positions(seq) compares tokens of one window
module {
  func.func @forward(%tok: !ids {graph.name = "tokens"}, %tgt: !ids {graph.name = "targets"}) -> !s {
    %wte = graph.param "wte" init <normal(0.0, 0.02)> : !t
    %x = graph.embedding %wte, %tok : (!t, !ids) -> !x
    %p = graph.positions : tensor<8xf32, #graph.dims<seq>>
    %y = graph.add %x, %p : (!x, tensor<8xf32, #graph.dims<seq>>) -> !x
    %lg = graph.contract %y, %wte sum ["embed"] : (!x, !t) -> !l
    %ce = graph.cross_entropy %lg, %tgt dim "vocab" : (!l, !ids) -> !s
    return %ce : !s
  }
}

// -----

!ids = tensor<2x8xi32, #graph.dims<batch, seq>>
!x = tensor<2x8x8xf32, #graph.dims<batch, seq, embed>>
!q = tensor<2x8x4x2xf32, #graph.dims<batch, seq, heads, head>>
!l = tensor<2x8x16xf32, #graph.dims<batch, seq, vocab>>
!t = tensor<16x8xf32, #graph.dims<vocab, embed>>
!s = tensor<f32, #graph.dims<>>

// A pipeline's stages are not split for decoding.
// CHECK: module attributes {tessel.decode_refused = "{{.*}}pipeline parallelism (pp) has no decode programs yet"
module attributes {tessel.parallel = #tessel.parallel<mesh = {pp = 2 : i64}>} {
  func.func @forward(%tok: !ids {graph.name = "tokens"}, %tgt: !ids {graph.name = "targets"}) -> !s {
    %wte = graph.param "wte" init <normal(0.0, 0.02)> : !t
    %x = graph.embedding %wte, %tok : (!t, !ids) -> !x
    %lg = graph.contract %x, %wte sum ["embed"] : (!x, !t) -> !l
    %ce = graph.cross_entropy %lg, %tgt dim "vocab" : (!l, !ids) -> !s
    return %ce : !s
  }
}
