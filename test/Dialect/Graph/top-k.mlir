// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// The mask of the k largest router scores, printed and parsed back.

// CHECK-LABEL: func.func @route
func.func @route(%p: tensor<2x8x4xf32, #graph.dims<batch, seq, experts>>) -> tensor<2x8x4xf32, #graph.dims<batch, seq, experts>> {
  // CHECK: graph.top_k %{{.*}} dim "experts" k 2 : tensor<2x8x4xf32, #graph.dims<batch, seq, experts>>
  %m = graph.top_k %p dim "experts" k 2 : tensor<2x8x4xf32, #graph.dims<batch, seq, experts>>
  return %m : tensor<2x8x4xf32, #graph.dims<batch, seq, experts>>
}
