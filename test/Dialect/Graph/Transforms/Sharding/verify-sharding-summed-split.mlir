// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-verify-sharding
// -tessel-verify-sharding must reject a sum over a dim that its operands split whose result
// is recorded whole: each rank has summed only its part of the dim, so the result is a
// partial sum over that axis whatever its recorded sharding says, and ops reading it as a
// whole value compute garbage. (The expected messages only require the diagnostic to speak
// of the missing partial sum.)

!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!w = tensor<4x16xf32, #graph.dims<embed, ffn>>
!h = tensor<4x16xf32, #graph.dims<seq, ffn>>

// A contraction over embed, split over tp in both operands, recorded whole.
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64, ffn = 16 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @contract_over_split_dim(%x: !x {graph.sharding = #graph.sharding<[*, tp]>}, %w: !w {graph.sharding = #graph.sharding<[tp, *]>}) -> !h {
    // expected-error @+1 {{partial}}
    %0 = graph.contract %x, %w sum ["embed"] {graph.sharding = [#graph.sharding<[*, *]>]} : (!x, !w) -> !h
    %1 = graph.unary gelu %0 {graph.sharding = [#graph.sharding<[*, *]>]} : !h
    return %1 : !h
  }
}

// -----

!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!r = tensor<4xf32, #graph.dims<seq>>

// A reduction over embed, split over tp, recorded whole.
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64, ffn = 16 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @sum_over_split_dim(%x: !x {graph.sharding = #graph.sharding<[*, tp]>}) -> !r {
    // expected-error @+1 {{partial}}
    %0 = graph.sum %x dims ["embed"] {graph.sharding = [#graph.sharding<[*]>]} : !x -> !r
    %1 = graph.unary exp %0 {graph.sharding = [#graph.sharding<[*]>]} : !r
    return %1 : !r
  }
}
