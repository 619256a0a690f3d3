// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-verify-sharding
// The errors of -tessel-verify-sharding, on hand-written partitioned modules over
// mesh { tp = 2 }: x is [seq = 4, embed = 8] with embed split over tp (4 columns a rank),
// w is [embed, ffn = 16] with embed split the same way.

!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!w = tensor<4x16xf32, #graph.dims<embed, ffn>>
!h = tensor<4x16xf32, #graph.dims<seq, ffn>>

// A correct module: the contraction over the split embed is a partial sum over tp, which
// an add (linear) may pass on, and an all-reduce makes whole before gelu reads it.
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64, ffn = 16 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @ok(%x: !x {graph.sharding = #graph.sharding<[*, tp]>}, %w: !w {graph.sharding = #graph.sharding<[tp, *]>}) -> !h {
    %0 = graph.contract %x, %w sum ["embed"] {graph.sharding = [#graph.sharding<[*, *] partial [tp]>]} : (!x, !w) -> !h
    %1 = graph.add %0, %0 {graph.sharding = [#graph.sharding<[*, *] partial [tp]>]} : (!h, !h) -> !h
    %2 = shard.all_reduce %1 on @mesh grid_axes = [0] {graph.sharding = [#graph.sharding<[*, *]>]} : !h -> !h
    %3 = graph.unary gelu %2 {graph.sharding = [#graph.sharding<[*, *]>]} : !h
    return %3 : !h
  }
}

// -----

// A partial sum read by an op that is not linear in it.
!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!w = tensor<4x16xf32, #graph.dims<embed, ffn>>
!h = tensor<4x16xf32, #graph.dims<seq, ffn>>
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64, ffn = 16 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @partial_into_gelu(%x: !x {graph.sharding = #graph.sharding<[*, tp]>}, %w: !w {graph.sharding = #graph.sharding<[tp, *]>}) -> !h {
    %0 = graph.contract %x, %w sum ["embed"] {graph.sharding = [#graph.sharding<[*, *] partial [tp]>]} : (!x, !w) -> !h
    // expected-error @+1 {{the result of `@` over 'embed', which the layout splits over tp, is used as a whole value by `gelu`, but each tp rank holds only its part of the sum}}
    %1 = graph.unary gelu %0 {graph.sharding = [#graph.sharding<[*, *]>]} : !h
    %2 = shard.all_reduce %1 on @mesh grid_axes = [0] {graph.sharding = [#graph.sharding<[*, *]>]} : !h -> !h
    return %2 : !h
  }
}

// -----

// A partial sum added to a whole value: add is linear only in operands partial alike.
!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!w = tensor<4x16xf32, #graph.dims<embed, ffn>>
!h = tensor<4x16xf32, #graph.dims<seq, ffn>>
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64, ffn = 16 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @partial_plus_whole(%x: !x {graph.sharding = #graph.sharding<[*, tp]>}, %w: !w {graph.sharding = #graph.sharding<[tp, *]>}, %b: !h {graph.sharding = #graph.sharding<[*, *]>}) -> !h {
    %0 = graph.contract %x, %w sum ["embed"] {graph.sharding = [#graph.sharding<[*, *] partial [tp]>]} : (!x, !w) -> !h
    // expected-error @+1 {{the result of `@` over 'embed', which the layout splits over tp, is used as a whole value by `+`, but each tp rank holds only its part of the sum}}
    %1 = graph.add %0, %b {graph.sharding = [#graph.sharding<[*, *] partial [tp]>]} : (!h, !h) -> !h
    %2 = shard.all_reduce %1 on @mesh grid_axes = [0] {graph.sharding = [#graph.sharding<[*, *]>]} : !h -> !h
    return %2 : !h
  }
}

// -----

// A partial sum accumulated into a gradient laid out whole.
!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!w = tensor<4x16xf32, #graph.dims<embed, ffn>>
!h = tensor<4x16xf32, #graph.dims<seq, ffn>>
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64, ffn = 16 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>, tessel.state = {b = {grad = #graph.sharding<[*, *]>, optimizer = #graph.sharding<[*, *]>, param = #graph.sharding<[*, *]>}}} {
  shard.grid @mesh(shape = 2)
  func.func @forward_backward(%x: !x {graph.sharding = #graph.sharding<[*, tp]>}, %w: !w {graph.sharding = #graph.sharding<[tp, *]>}) {
    %0 = graph.contract %x, %w sum ["embed"] {graph.sharding = [#graph.sharding<[*, *] partial [tp]>]} : (!x, !w) -> !h
    // expected-error @+1 {{the result of `@` over 'embed', which the layout splits over tp, is used as a whole value by the gradient accumulation, but each tp rank holds only its part of the sum}}
    graph.accumulate_grad %0 to "b" {graph.sharding = []} : !h
    return
  }
}

// -----

// A partial sum scaled by a factor every rank holds alike is still a partial sum: a mean over
// a split dim is partitioned so (each rank's mean times its share of the dim).
!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!m = tensor<4xf32, #graph.dims<seq>>
!s = tensor<f32, #graph.dims<>>
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @scaled_mean(%x: !x {graph.sharding = #graph.sharding<[*, tp]>}) -> !m {
    %0 = graph.mean %x dims ["embed"] {graph.sharding = [#graph.sharding<[*] partial [tp]>]} : !x -> !m
    %1 = graph.constant 5.000000e-01 {graph.sharding = [#graph.sharding<[]>]} : !s
    %2 = graph.mul %0, %1 {graph.sharding = [#graph.sharding<[*] partial [tp]>]} : (!m, !s) -> !m
    %3 = graph.div %2, %1 {graph.sharding = [#graph.sharding<[*] partial [tp]>]} : (!m, !s) -> !m
    %4 = shard.all_reduce %3 on @mesh grid_axes = [0] {graph.sharding = [#graph.sharding<[*]>]} : !m -> !m
    return %4 : !m
  }
}

// -----

// Two partial sums multiplied: the product of sums is not the sum of the products.
!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!m = tensor<4xf32, #graph.dims<seq>>
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @partial_times_partial(%x: !x {graph.sharding = #graph.sharding<[*, tp]>}) -> !m {
    %0 = graph.mean %x dims ["embed"] {graph.sharding = [#graph.sharding<[*] partial [tp]>]} : !x -> !m
    // expected-error @+1 {{the result of `mean` over 'embed', which the layout splits over tp, is used as a whole value by `*`, but each tp rank holds only its part of the sum}}
    %1 = graph.mul %0, %0 {graph.sharding = [#graph.sharding<[*] partial [tp]>]} : (!m, !m) -> !m
    %2 = shard.all_reduce %1 on @mesh grid_axes = [0] {graph.sharding = [#graph.sharding<[*]>]} : !m -> !m
    return %2 : !m
  }
}

// -----

// A partial sum as a divisor, found through the product that scaled it.
!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!m = tensor<4xf32, #graph.dims<seq>>
!s = tensor<f32, #graph.dims<>>
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @divide_by_partial(%x: !x {graph.sharding = #graph.sharding<[*, tp]>}) -> !m {
    %0 = graph.sum %x dims ["embed"] {graph.sharding = [#graph.sharding<[*] partial [tp]>]} : !x -> !m
    %1 = graph.constant 2.000000e+00 {graph.sharding = [#graph.sharding<[]>]} : !s
    %2 = graph.mul %0, %1 {graph.sharding = [#graph.sharding<[*] partial [tp]>]} : (!m, !s) -> !m
    // expected-error @+1 {{the result of `sum` over 'embed', which the layout splits over tp, is used as a whole value by `/`, but each tp rank holds only its part of the sum}}
    %3 = graph.div %1, %2 {graph.sharding = [#graph.sharding<[*] partial [tp]>]} : (!s, !m) -> !m
    %4 = shard.all_reduce %3 on @mesh grid_axes = [0] {graph.sharding = [#graph.sharding<[*]>]} : !m -> !m
    return %4 : !m
  }
}

// -----

// Mismatched splits: the operands of an add split seq differently.
!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!w = tensor<4x16xf32, #graph.dims<embed, ffn>>
!h = tensor<4x16xf32, #graph.dims<seq, ffn>>
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64, ffn = 16 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @mismatched_operands(%a: tensor<2x8xf32, #graph.dims<seq, embed>> {graph.sharding = #graph.sharding<[tp, *]>}, %b: tensor<2x8xf32, #graph.dims<seq, embed>> {graph.sharding = #graph.sharding<[*, *]>}) -> tensor<4x8xf32, #graph.dims<seq, embed>> {
    // expected-error @+1 {{'graph.add' op operand #1 splits dim 'seq' over '*' where another operand splits it over 'tp'}}
    %0 = graph.add %a, %b {graph.sharding = [#graph.sharding<[tp, *]>]} : (tensor<2x8xf32, #graph.dims<seq, embed>>, tensor<2x8xf32, #graph.dims<seq, embed>>) -> tensor<2x8xf32, #graph.dims<seq, embed>>
    %1 = shard.all_gather %0 on @mesh grid_axes = [0] gather_axis = 0 {graph.sharding = [#graph.sharding<[*, *]>]} : tensor<2x8xf32, #graph.dims<seq, embed>> -> tensor<4x8xf32, #graph.dims<seq, embed>>
    return %1 : tensor<4x8xf32, #graph.dims<seq, embed>>
  }
}

// -----

// Mismatched splits: a contraction whose operands split the summed dim differently (one over
// tp, one not at all, though the per-rank sizes happen to agree).
!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!w = tensor<4x16xf32, #graph.dims<embed, ffn>>
!h = tensor<4x16xf32, #graph.dims<seq, ffn>>
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64, ffn = 16 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @mismatched_contraction(%x: !x {graph.sharding = #graph.sharding<[*, tp]>}, %w: !w {graph.sharding = #graph.sharding<[*, *]>}) -> !h {
    // expected-error @+1 {{'graph.contract' op operand #1 splits dim 'embed' over '*' where another operand splits it over 'tp'}}
    %0 = graph.contract %x, %w sum ["embed"] {graph.sharding = [#graph.sharding<[*, *] partial [tp]>]} : (!x, !w) -> !h
    %1 = shard.all_reduce %0 on @mesh grid_axes = [0] {graph.sharding = [#graph.sharding<[*, *]>]} : !h -> !h
    return %1 : !h
  }
}

// -----

// Mismatched splits: a result laid out otherwise than the operand it is computed from
// elementwise.
!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!w = tensor<4x16xf32, #graph.dims<embed, ffn>>
!h = tensor<4x16xf32, #graph.dims<seq, ffn>>
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64, ffn = 16 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @mismatched_result(%x: !x {graph.sharding = #graph.sharding<[*, tp]>}) -> !x {
    // expected-error @+1 {{'graph.unary' op result #0 splits dim 'embed' over '*' where another operand splits it over 'tp'}}
    %0 = graph.unary gelu %x {graph.sharding = [#graph.sharding<[*, *]>]} : !x
    return %0 : !x
  }
}

// -----

// A collective that does not convert between the shardings on its two sides: an all-reduce
// of a value that is not a partial sum.
!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!w = tensor<4x16xf32, #graph.dims<embed, ffn>>
!h = tensor<4x16xf32, #graph.dims<seq, ffn>>
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64, ffn = 16 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @all_reduce_whole(%h: !h {graph.sharding = #graph.sharding<[*, *]>}) -> !h {
    // expected-error @+1 {{'shard.all_reduce' op reduces over 'tp', but its operand is not partial over it (operand [*, *], result [*, *])}}
    %0 = shard.all_reduce %h on @mesh grid_axes = [0] {graph.sharding = [#graph.sharding<[*, *]>]} : !h -> !h
    return %0 : !h
  }
}

// -----

// An all-gather along a dim its operand does not split.
!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!w = tensor<4x16xf32, #graph.dims<embed, ffn>>
!h = tensor<4x16xf32, #graph.dims<seq, ffn>>
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64, ffn = 16 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @all_gather_whole_dim(%x: !x {graph.sharding = #graph.sharding<[*, tp]>}) -> tensor<8x4xf32, #graph.dims<seq, embed>> {
    // expected-error @+1 {{'shard.all_gather' op gathers a dim over 'tp' that its operand does not split over it (operand [*, tp], result [*, *])}}
    %0 = shard.all_gather %x on @mesh grid_axes = [0] gather_axis = 0 {graph.sharding = [#graph.sharding<[*, *]>]} : !x -> tensor<8x4xf32, #graph.dims<seq, embed>>
    return %0 : tensor<8x4xf32, #graph.dims<seq, embed>>
  }
}

// -----

// A reduce-scatter whose recorded result is not the scattered sum.
!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!w = tensor<4x16xf32, #graph.dims<embed, ffn>>
!h = tensor<4x16xf32, #graph.dims<seq, ffn>>
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64, ffn = 16 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @reduce_scatter_result(%x: !x {graph.sharding = #graph.sharding<[*, tp]>}, %w: !w {graph.sharding = #graph.sharding<[tp, *]>}) -> !h {
    %0 = graph.contract %x, %w sum ["embed"] {graph.sharding = [#graph.sharding<[*, *] partial [tp]>]} : (!x, !w) -> !h
    // expected-error @+1 {{'shard.reduce_scatter' op has a result sharding other than its operand's after the collective (operand [*, *] partial [tp], result [*, *])}}
    %1 = shard.reduce_scatter %0 on @mesh grid_axes = [0] scatter_axis = 0 {graph.sharding = [#graph.sharding<[*, *]>]} : !h -> tensor<2x16xf32, #graph.dims<seq, ffn>>
    %2 = shard.all_gather %1 on @mesh grid_axes = [0] gather_axis = 0 {graph.sharding = [#graph.sharding<[*, *]>]} : tensor<2x16xf32, #graph.dims<seq, ffn>> -> !h
    return %2 : !h
  }
}

// -----

// A function result that is not whole on every rank.
!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!w = tensor<4x16xf32, #graph.dims<embed, ffn>>
!h = tensor<4x16xf32, #graph.dims<seq, ffn>>
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64, ffn = 16 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @split_result(%x: !x {graph.sharding = #graph.sharding<[*, tp]>}) -> !x {
    %0 = graph.unary gelu %x {graph.sharding = [#graph.sharding<[*, tp]>]} : !x
    // expected-error @+1 {{'func.return' op returns result #0 laid out as [*, tp]; every rank must return it whole}}
    return %0 : !x
  }
}

// -----

// A value with no recorded sharding.
!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!w = tensor<4x16xf32, #graph.dims<embed, ffn>>
!h = tensor<4x16xf32, #graph.dims<seq, ffn>>
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64, ffn = 16 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @unrecorded(%x: !x) -> !x {
    // expected-error @+1 {{'graph.unary' op uses a value without a recorded sharding}}
    %0 = graph.unary gelu %x {graph.sharding = [#graph.sharding<[*, *]>]} : !x
    return %0 : !x
  }
}

// -----

// A sharding with the wrong number of dims, and one that uses an axis twice.
!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!w = tensor<4x16xf32, #graph.dims<embed, ffn>>
!h = tensor<4x16xf32, #graph.dims<seq, ffn>>
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64, ffn = 16 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @wrong_rank(%x: !x {graph.sharding = #graph.sharding<[tp]>}) -> !x {
    // expected-error @+1 {{'graph.unary' op uses a value whose sharding [tp] does not fit its 2 dims}}
    %0 = graph.unary gelu %x {graph.sharding = [#graph.sharding<[*, *]>]} : !x
    return %0 : !x
  }
}

// -----

!x = tensor<4x4xf32, #graph.dims<seq, embed>>
!w = tensor<4x16xf32, #graph.dims<embed, ffn>>
!h = tensor<4x16xf32, #graph.dims<seq, ffn>>
module attributes {tessel.dims = {seq = 4 : i64, embed = 8 : i64, ffn = 16 : i64}, tessel.parallel = #tessel.parallel<mesh = {tp = 2 : i64}, shard = {embed = ["tp"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @axis_twice(%x: tensor<2x4xf32, #graph.dims<seq, embed>> {graph.sharding = #graph.sharding<[tp, tp]>}) -> tensor<2x4xf32, #graph.dims<seq, embed>> {
    // expected-error @+1 {{'graph.unary' op uses a value laid out as [tp, tp], which uses axis 'tp' twice}}
    %0 = graph.unary gelu %x {graph.sharding = [#graph.sharding<[tp, tp]>]} : tensor<2x4xf32, #graph.dims<seq, embed>>
    return %0 : tensor<2x4xf32, #graph.dims<seq, embed>>
  }
}

// -----

// An all-to-all that moves a split from a dim its operand does not split over that axis.
!t = tensor<2x4xf32, #graph.dims<batch, experts>>
!e = tensor<1x8xf32, #graph.dims<batch, experts>>
module attributes {tessel.dims = {batch = 4 : i64, experts = 4 : i64}, tessel.parallel = #tessel.parallel<mesh = {ep = 2 : i64}, shard = {batch = ["ep"], experts = ["ep"]}>} {
  shard.grid @mesh(shape = 2)
  func.func @all_to_all_from_whole_dim(%x: !t {graph.sharding = #graph.sharding<[ep, *]>}) -> !e {
    // expected-error @+1 {{'shard.all_to_all' op moves a split over 'ep' from a dim its operand does not split over it innermost, or onto a dim split over it (operand [ep, *], result [*, ep])}}
    %0 = shard.all_to_all %x on @mesh grid_axes = [0] split_axis = 0 concat_axis = 1 {graph.sharding = [#graph.sharding<[*, ep]>]} : !t -> !e
    return %0 : !e
  }
}
