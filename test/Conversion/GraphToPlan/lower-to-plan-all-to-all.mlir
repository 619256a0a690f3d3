// RUN: tessel-opt %s -split-input-file -tessel-lower-to-plan | FileCheck %s

// shard.all_to_all becomes the all_to_all kernel over [outer, ways, chunk], outer being the
// dims before both the old and the new split dim, with at most one copy that transposes the
// blocks: before the kernel when the split moves to a later dim (its blocks are put right
// after outer), after it when the split moves to an earlier dim (the blocks that arrived are
// put back under the old dim), none when only dims of size 1 lie in between.

!tokens = tensor<3x2x4x5xf32, #graph.dims<layer, batch, experts, embed>>
!experts = tensor<3x4x2x5xf32, #graph.dims<layer, batch, experts, embed>>
module attributes {tessel.dims = {layer = 3 : i64, batch = 4 : i64, experts = 4 : i64, embed = 5 : i64}, tessel.parallel = #tessel.parallel<mesh = {ep = 2 : i64}, shard = {batch = ["ep"], experts = ["ep"]}>} {
  shard.grid @mesh(shape = 2)
  // The split moves from the batch to the later experts dim, the layer dim before both.
  // CHECK-LABEL: plan.program "eval"
  // CHECK:       plan.kernel "copy" ins(%{{.*}} : memref<3x2x4x5xf32>) outs(%[[SEND:.*]] : memref<3x2x2x2x5xf32>) {shape = array<i64: 3, 2, 2, 2, 5>, x_strides = array<i64: 40, 10, 20, 5, 1>}
  // CHECK-NEXT:  plan.kernel "all_to_all" ins(%[[SEND]] : memref<3x2x2x2x5xf32>) outs(%[[E:.*]] : memref<3x4x2x5xf32>) {chunk = 20 : i64, group = "ep", outer = 3 : i64}
  // And back, to the earlier batch dim.
  // CHECK:       plan.kernel "all_to_all" ins(%[[E]] : memref<3x4x2x5xf32>) outs(%[[RECV:.*]] : memref<3x2x2x2x5xf32>) {chunk = 20 : i64, group = "ep", outer = 3 : i64}
  // CHECK-NEXT:  plan.kernel "copy" ins(%[[RECV]] : memref<3x2x2x2x5xf32>) outs(%{{.*}} : memref<3x2x4x5xf32>) {shape = array<i64: 3, 2, 2, 2, 5>, x_strides = array<i64: 40, 10, 20, 5, 1>}
  func.func @forward(%x: !tokens {graph.name = "x"}) -> !tokens {
    %0 = shard.all_to_all %x on @mesh grid_axes = [0] split_axis = 2 concat_axis = 1 : !tokens -> !experts
    %1 = shard.all_to_all %0 on @mesh grid_axes = [0] split_axis = 1 concat_axis = 2 : !experts -> !tokens
    return %1 : !tokens
  }
}

// -----

// One sequence per rank: the blocks of experts are already outermost, and come back so.
!tokens = tensor<1x4x5xf32, #graph.dims<batch, experts, embed>>
!experts = tensor<2x2x5xf32, #graph.dims<batch, experts, embed>>
module attributes {tessel.dims = {batch = 2 : i64, experts = 4 : i64, embed = 5 : i64}, tessel.parallel = #tessel.parallel<mesh = {ep = 2 : i64}, shard = {batch = ["ep"], experts = ["ep"]}>} {
  shard.grid @mesh(shape = 2)
  // CHECK-LABEL: plan.program "eval"
  // CHECK-NOT:   "copy"
  // CHECK:       plan.kernel "all_to_all" ins(%{{.*}} : memref<1x4x5xf32>) outs(%[[E:.*]] : memref<2x2x5xf32>) {chunk = 10 : i64, group = "ep", outer = 1 : i64}
  // CHECK-NOT:   "copy"
  // CHECK:       plan.kernel "all_to_all" ins(%[[E]] : memref<2x2x5xf32>) outs(%{{.*}} : memref<1x4x5xf32>) {chunk = 10 : i64, group = "ep", outer = 1 : i64}
  // CHECK-NOT:   "copy"
  func.func @forward(%x: !tokens {graph.name = "x"}) -> !tokens {
    %0 = shard.all_to_all %x on @mesh grid_axes = [0] split_axis = 1 concat_axis = 0 : !tokens -> !experts
    %1 = shard.all_to_all %0 on @mesh grid_axes = [0] split_axis = 0 concat_axis = 1 : !experts -> !tokens
    return %1 : !tokens
  }
}
