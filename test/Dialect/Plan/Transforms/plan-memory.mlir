// RUN: tessel-opt %s -split-input-file -tessel-lower-to-plan -tessel-plan-memory | FileCheck %s
// -tessel-plan-memory on programs from -tessel-lower-to-plan. (tessel-opt does not register
// the plan dialect, so plan IR cannot be written by hand and read back; these graph functions
// are chosen so that their lowering has the buffers and lifetimes each case needs.)
//
// Each buffer is rounded up to 64 bytes and lives from its plan.alloc (its plan.input: from
// the start) to its last use; buffers are placed largest first at the lowest free offset.

// Reuse and the peak. Sizes: x 20 -> 64 bytes, y 80 -> 128, %3 and %4 400 -> 448, the
// [5] vectors 64. Lifetimes (op index): x [0,3], y [0,5], E [2,5], M [4,7], T [6,9],
// S [8,11], R [10,end].
//   M at 0; T overlaps M: 448; y overlaps M, not T: 448; x overlaps y only: 0;
//   E overlaps x, M and y: 576; S overlaps T only: 0 (M's bytes, M is dead);
//   R overlaps S: 64.
// The arena is the peak, 896 bytes, not the 1280 bytes of all buffers together.

!v = tensor<5xf32, #graph.dims<a>>
!w = tensor<20xf32, #graph.dims<b>>
!m = tensor<5x20xf32, #graph.dims<a, b>>
module {
  func.func @forward(%x: !v {graph.name = "x"}, %y: !w {graph.name = "y"}) -> !v {
    %0 = graph.unary exp %x : !v
    %1 = graph.mul %0, %y : (!v, !w) -> !m
    %2 = graph.unary tanh %1 : !m
    %3 = graph.sum %2 dims ["b"] : !m -> !v
    %4 = graph.unary exp %3 : !v
    return %4 : !v
  }
}

// CHECK: plan.program "eval" attributes {arena_bytes = 896 : i64} {
// CHECK-NEXT: %[[X:.*]] = plan.input "x" offset 0 : memref<5xf32>
// CHECK-NEXT: %[[Y:.*]] = plan.input "y" offset 448 : memref<20xf32>
// CHECK-NEXT: %[[E:.*]] = plan.alloc offset 576 : memref<5xf32>
// CHECK-NEXT: plan.kernel "unary" ins(%[[X]] : {{.*}}) outs(%[[E]] :
// CHECK-NEXT: %[[M:.*]] = plan.alloc offset 0 : memref<5x20xf32>
// CHECK-NEXT: plan.kernel "binary" ins(%[[E]], %[[Y]] : {{.*}}) outs(%[[M]] :
// CHECK-NEXT: %[[T:.*]] = plan.alloc offset 448 : memref<5x20xf32>
// CHECK-NEXT: plan.kernel "unary" ins(%[[M]] : {{.*}}) outs(%[[T]] :
// CHECK-NEXT: %[[S:.*]] = plan.alloc offset 0 : memref<5xf32>
// CHECK-NEXT: plan.kernel "reduce" ins(%[[T]] : {{.*}}) outs(%[[S]] :
// CHECK-NEXT: %[[R:.*]] = plan.alloc offset 64 : memref<5xf32>
// CHECK-NEXT: plan.kernel "unary" ins(%[[S]] : {{.*}}) outs(%[[R]] :
// CHECK-NEXT: plan.output "loss", %[[R]] : memref<5xf32>
// CHECK: // -----

// Views extend their source's lifetime. A is read through its split view by the third
// kernel, so B, allocated before that read, may not take A's bytes; the result D, allocated
// after it, does. C (read through its merge view by the add) and D do not overlap.

!x = tensor<4x8xf32, #graph.dims<a, b>>
!h = tensor<4x2x4xf32, #graph.dims<a, c, d>>
module {
  func.func @forward(%x: !x {graph.name = "x"}) -> !x {
    %0 = graph.unary exp %x : !x
    %1 = graph.split %0 dim "b" : !x -> !h
    %2 = graph.unary tanh %x : !x
    %3 = graph.unary exp %1 : !h
    %4 = graph.merge %3 dims ["c", "d"] : !h -> !x
    %5 = graph.add %4, %2 : (!x, !x) -> !x
    return %5 : !x
  }
}

// CHECK: plan.program "eval" attributes {arena_bytes = 384 : i64} {
// CHECK-NEXT: %[[X:.*]] = plan.input "x" offset 0 : memref<4x8xf32>
// CHECK-NEXT: %[[A:.*]] = plan.alloc offset 128 : memref<4x8xf32>
// CHECK-NEXT: plan.kernel "unary" ins(%[[X]] : {{.*}}) outs(%[[A]] :
// CHECK-NEXT: %[[AV:.*]] = plan.view %[[A]] : memref<4x8xf32> to memref<4x2x4xf32>
// CHECK-NEXT: %[[B:.*]] = plan.alloc offset 256 : memref<4x8xf32>
// CHECK-NEXT: plan.kernel "unary" ins(%[[X]] : {{.*}}) outs(%[[B]] :
// CHECK-NEXT: %[[C:.*]] = plan.alloc offset 0 : memref<4x2x4xf32>
// CHECK-NEXT: plan.kernel "unary" ins(%[[AV]] : {{.*}}) outs(%[[C]] :
// CHECK-NEXT: %[[CV:.*]] = plan.view %[[C]] : memref<4x2x4xf32> to memref<4x8xf32>
// CHECK-NEXT: %[[D:.*]] = plan.alloc offset 128 : memref<4x8xf32>
// CHECK-NEXT: plan.kernel "binary" ins(%[[CV]], %[[B]] : {{.*}}) outs(%[[D]] :
// CHECK-NEXT: plan.output "loss", %[[D]] : memref<4x8xf32>
// CHECK: // -----

// Outputs live to the end: the loss, computed first, keeps its bytes while the later
// temporaries reuse each other's (and the dead input's).

!x = tensor<4x8xf32, #graph.dims<a, b>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward_backward(%x: !x {graph.name = "x"}) -> !s {
    %l = graph.sum %x dims ["a", "b"] : !x -> !s
    %0 = graph.unary exp %x : !x
    %1 = graph.sum %0 dims ["a", "b"] : !x -> !s
    %2 = graph.unary tanh %1 : !s
    %3 = graph.unary exp %2 : !s
    return %l : !s
  }
}

// CHECK: plan.program "forward_backward" attributes {arena_bytes = 320 : i64} {
// CHECK-NEXT: plan.input "x" offset 0 : memref<4x8xf32>
// CHECK-NEXT: %[[L:.*]] = plan.alloc offset 256 : memref<f32>
// CHECK-NEXT: plan.kernel "reduce"
// CHECK-NEXT: plan.alloc offset 128 : memref<4x8xf32>
// CHECK-NEXT: plan.kernel "unary"
// CHECK-NEXT: plan.alloc offset 0 : memref<f32>
// CHECK-NEXT: plan.kernel "reduce"
// CHECK-NEXT: plan.alloc offset 64 : memref<f32>
// CHECK-NEXT: plan.kernel "unary"
// CHECK-NEXT: plan.alloc offset 0 : memref<f32>
// CHECK-NEXT: plan.kernel "unary"
// CHECK-NEXT: plan.output "loss", %[[L]] : memref<f32>
// CHECK: // -----

// Every program gets its own arena_bytes; state (parameters, gradients, moments) is not in
// the arena. Element types set the byte size: 17 x i32 = 68 bytes -> 128.

!ids = tensor<17xi32, #graph.dims<t>>
!l = tensor<17x3xf32, #graph.dims<t, c>>
!s = tensor<f32, #graph.dims<>>
module {
  func.func @forward_backward(%t: !ids {graph.name = "targets"}, %l: !l {graph.name = "logits"}) -> !s {
    %w = graph.param "w" init <ones> : !l
    %0 = graph.mul %l, %w : (!l, !l) -> !l
    %1 = graph.cross_entropy %0, %t dim "c" : (!l, !ids) -> !s
    graph.accumulate_grad %0 to "w" : !l
    return %1 : !s
  }
  func.func @optimizer_step() -> (!s, !s) {
    %0 = graph.grad "w" : !l
    %1 = graph.global_norm %0 : !l -> !s
    %2 = graph.learning_rate constant lr 1.0e-3 min_lr 0.0 warmup 0 steps 1 : !s
    graph.adamw "w", %0, %2, %1 beta1 0.9 beta2 0.999 eps 1.0e-8 weight_decay 0.0 : !l, !s, !s
    graph.zero_grad "w"
    return %1, %2 : !s, !s
  }
}

// targets 128, logits 204 -> 256, the product 256, the loss 64. The logits are dead once
// multiplied, so the loss takes their first 64 bytes: the peak is 640.
// CHECK: plan.program "forward_backward" attributes {arena_bytes = 640 : i64} {
// CHECK-NEXT: plan.input "targets" offset 512 : memref<17xi32>
// CHECK-NEXT: plan.input "logits" offset 0 : memref<17x3xf32>
// CHECK-NEXT: plan.state "w"
// CHECK-NEXT: plan.alloc offset 256 : memref<17x3xf32>
// CHECK: plan.alloc offset 0 : memref<f32>
// Two scalars, both outputs.
// CHECK: plan.program "optimizer_step" attributes {arena_bytes = 128 : i64} {
// CHECK-NEXT: plan.state "grad.w"
// CHECK-NEXT: plan.alloc offset 0 : memref<f32>
// CHECK: plan.alloc offset 64 : memref<f32>
