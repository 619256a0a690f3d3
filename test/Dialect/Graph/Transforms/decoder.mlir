// RUN: tessel-opt %s -split-input-file '-tessel-derive-decoder=batches=2 prefill=4 block=4' | FileCheck %s
// -tessel-derive-decoder clones @forward (without its loss) into @prefill (one sequence, 4 new
// tokens) and @decode_b2 (two sequences, one new token each), both over the same paged KV
// cache: attention becomes paged_attention over a cache of the kv heads, rope turns by the
// tokens' positions, the learned positions are looked up at them. The prefill computes the
// logits of its last token only: what follows its attention takes the last row. @forward
// itself goes: the decoder module holds the decode programs only.

!ids = tensor<2x8xi32, #graph.dims<batch, seq>>
!x = tensor<2x8x8xf32, #graph.dims<batch, seq, embed>>
!q = tensor<2x8x4x2xf32, #graph.dims<batch, seq, heads, head>>
!k = tensor<2x8x2x2xf32, #graph.dims<batch, seq, kv_heads, head>>
!l = tensor<2x8x16xf32, #graph.dims<batch, seq, vocab>>
!t = tensor<16x8xf32, #graph.dims<vocab, embed>>
!p = tensor<8x8xf32, #graph.dims<seq, embed>>
!s = tensor<f32, #graph.dims<>>
module attributes {tessel.parallel = #tessel.parallel<mesh = {dp = 1 : i64}, shard = {}>} {
  func.func @forward(%tok: !ids {graph.name = "tokens"}, %tgt: !ids {graph.name = "targets"}) -> !s {
    %wte = graph.param "wte" init <normal(0.0, 0.02)> : !t
    %wpe = graph.param "wpe" init <normal(0.0, 0.02)> : !p
    %wq = graph.param "wq" init <normal(0.0, 0.02)> : tensor<8x4x2xf32, #graph.dims<embed, heads, head>>
    %wk = graph.param "wk" init <normal(0.0, 0.02)> : tensor<8x2x2xf32, #graph.dims<embed, kv_heads, head>>
    %wo = graph.param "wo" init <normal(0.0, 0.02)> : tensor<4x2x8xf32, #graph.dims<heads, head, embed>>
    %e = graph.embedding %wte, %tok : (!t, !ids) -> !x
    %x = graph.add %e, %wpe : (!x, !p) -> !x
    %q = graph.contract %x, %wq sum ["embed"] : (!x, tensor<8x4x2xf32, #graph.dims<embed, heads, head>>) -> !q
    %k = graph.contract %x, %wk sum ["embed"] : (!x, tensor<8x2x2xf32, #graph.dims<embed, kv_heads, head>>) -> !k
    %qr = graph.rope %q theta 1.0e4 : !q
    %kr = graph.rope %k theta 1.0e4 : !k
    %a = graph.attention %qr, %kr, %k causal window 4 scale 0.7 : (!q, !k, !k) -> !q
    %o = graph.contract %a, %wo sum ["heads", "head"] : (!q, tensor<4x2x8xf32, #graph.dims<heads, head, embed>>) -> !x
    %lg = graph.contract %o, %wte sum ["embed"] : (!x, !t) -> !l
    %ce = graph.cross_entropy %lg, %tgt dim "vocab" : (!l, !ids) -> !s
    return %ce : !s
  }
}

// CHECK-NOT: func.func @forward
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME: %[[TOK:[^:]+]]: tensor<1x4xi32, #graph.dims<batch, seq>> {graph.name = "tokens"}
// CHECK-SAME: %[[POS:[^:]+]]: tensor<1x4xi32, #graph.dims<batch, seq>> {graph.name = "positions"}
// CHECK-SAME: %[[TABLE:[^:]+]]: tensor<1x2xi32, #graph.dims<batch, table_blocks>> {graph.name = "block_table"}
// CHECK-SAME: -> (tensor<1x1x16xf32, #graph.dims<batch, seq, vocab>> {graph.name = "logits"})
// Two sequences of the whole seq (8 positions: 2 blocks of 4 each) fit the cache; its heads
// are the keys' kv heads.
// CHECK-NEXT: %[[KC:.*]] = graph.kv_cache "kv.0.key" : tensor<4x4x2x2xf32, #graph.dims<cache_blocks, block_slot, kv_heads, head>>
// CHECK-NEXT: %[[VC:.*]] = graph.kv_cache "kv.0.value" : tensor<4x4x2x2xf32, #graph.dims<cache_blocks, block_slot, kv_heads, head>>
// The parameter keeps its rows: it is looked up at the positions.
// CHECK: %[[WPE:.*]] = graph.param "wpe" {{.*}} : tensor<8x8xf32, #graph.dims<seq, embed>>
// CHECK-NEXT: %[[ROWS:.*]] = graph.rename %[[WPE]] : {{.*}} -> tensor<8x8xf32, #graph.dims<seq_rows, embed>>
// CHECK-NEXT: %[[AT:.*]] = graph.embedding %[[ROWS]], %[[POS]] : {{.*}} -> tensor<1x4x8xf32, #graph.dims<batch, seq, embed>>
// CHECK: %[[E:.*]] = graph.embedding {{.*}}, %[[TOK]]
// CHECK-NEXT: %[[X:.*]] = graph.add %[[E]], %[[AT]]
// CHECK: %[[Q:.*]] = graph.rope_at {{.*}}, %[[POS]] theta 1.000000e+04 : (tensor<1x4x4x2xf32
// CHECK-NEXT: %[[K:.*]] = graph.rope_at {{.*}}, %[[POS]] theta 1.000000e+04 : (tensor<1x4x2x2xf32
// CHECK-NEXT: %[[A:.*]] = graph.paged_attention %[[Q]], %[[K]], %{{.*}}, %[[POS]], %[[TABLE]], %[[KC]], %[[VC]] window 4 scale 0.69
// CHECK-NEXT: %[[LAST:.*]] = graph.slice %[[A]] dim "seq" start 3 : tensor<1x4x4x2xf32, #graph.dims<batch, seq, heads, head>> -> tensor<1x1x4x2xf32, #graph.dims<batch, seq, heads, head>>
// CHECK-NEXT: graph.contract %[[LAST]], {{.*}} -> tensor<1x1x8xf32, #graph.dims<batch, seq, embed>>
// CHECK-NOT: graph.cross_entropy
// CHECK: return {{.*}} : tensor<1x1x16xf32, #graph.dims<batch, seq, vocab>>
// CHECK-LABEL: func.func @decode_b2(
// CHECK-SAME: tensor<2x1xi32, #graph.dims<batch, seq>> {graph.name = "tokens"}
// CHECK-SAME: tensor<2x2xi32, #graph.dims<batch, table_blocks>> {graph.name = "block_table"}
// CHECK-NEXT: graph.kv_cache "kv.0.key" : tensor<4x4x2x2xf32
// CHECK: graph.paged_attention {{.*}} -> tensor<2x1x4x2xf32, #graph.dims<batch, seq, heads, head>>
// CHECK: return {{.*}} : tensor<2x1x16xf32, #graph.dims<batch, seq, vocab>>
