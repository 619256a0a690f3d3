// RUN: tessel-opt %s -tessel-plan-memory | FileCheck %s
// -tessel-plan-memory on hand-written plan programs: cases the lowering never produces
// (an output in the middle of a program, a view of a view, sub-64-byte buffers of several
// element types).
//
// plan-memory.mlir covers the pass through the lowering. The offsets below were computed with the pass's algorithm (largest first, lowest free
// 64-byte-aligned offset over each buffer's lifetime) and agree with the pass on every
// program of the examples.

module {
  // An output keeps its buffer to the end of the program even though plan.output "early"
  // comes before the later ops: L, allocated after E's last use, does not take E's bytes
  // (128) but 256. All buffers are 128 bytes; lifetimes x [0,5], E [1,end], A [4,7],
  // B [6,9], L [8,end].
  // CHECK-LABEL: plan.program "early_output" attributes {arena_bytes = 384 : i64} {
  plan.program "early_output" {
    // CHECK-NEXT: plan.input "x" offset 0 : memref<32xf32>
    %0 = plan.input "x" : memref<32xf32>
    // CHECK-NEXT: plan.alloc offset 128 : memref<32xf32>
    %1 = plan.alloc : memref<32xf32>
    plan.kernel "unary" ins(%0 : memref<32xf32>) outs(%1 : memref<32xf32>) {n = 32 : i64, op = "exp"}
    plan.output "early", %1 : memref<32xf32>
    // CHECK: plan.alloc offset 256 : memref<32xf32>
    %2 = plan.alloc : memref<32xf32>
    plan.kernel "unary" ins(%0 : memref<32xf32>) outs(%2 : memref<32xf32>) {n = 32 : i64, op = "tanh"}
    // CHECK: plan.alloc offset 0 : memref<32xf32>
    %3 = plan.alloc : memref<32xf32>
    plan.kernel "unary" ins(%2 : memref<32xf32>) outs(%3 : memref<32xf32>) {n = 32 : i64, op = "exp"}
    // CHECK: plan.alloc offset 256 : memref<32xf32>
    %4 = plan.alloc : memref<32xf32>
    plan.kernel "unary" ins(%3 : memref<32xf32>) outs(%4 : memref<32xf32>) {n = 32 : i64, op = "exp"}
    plan.output "late", %4 : memref<32xf32>
  }

  // A view of a view: E is read through %3 by the add, so B (allocated before the add)
  // does not take E's bytes; R, allocated after it, does.
  // CHECK-LABEL: plan.program "views" attributes {arena_bytes = 384 : i64} {
  plan.program "views" {
    // CHECK-NEXT: plan.input "x" offset 0 : memref<4x8xf32>
    %0 = plan.input "x" : memref<4x8xf32>
    // CHECK-NEXT: plan.alloc offset 128 : memref<4x8xf32>
    %1 = plan.alloc : memref<4x8xf32>
    plan.kernel "unary" ins(%0 : memref<4x8xf32>) outs(%1 : memref<4x8xf32>) {n = 32 : i64, op = "exp"}
    %2 = plan.view %1 : memref<4x8xf32> to memref<32xf32>
    %3 = plan.view %2 : memref<32xf32> to memref<2x16xf32>
    // CHECK: plan.alloc offset 256 : memref<2x16xf32>
    %4 = plan.alloc : memref<2x16xf32>
    plan.kernel "unary" ins(%0 : memref<4x8xf32>) outs(%4 : memref<2x16xf32>) {n = 32 : i64, op = "tanh"}
    // CHECK: plan.alloc offset 0 : memref<2x16xf32>
    %5 = plan.alloc : memref<2x16xf32>
    plan.kernel "binary" ins(%3, %4 : memref<2x16xf32>, memref<2x16xf32>) outs(%5 : memref<2x16xf32>) {a_strides = array<i64: 16, 1>, b_strides = array<i64: 16, 1>, op = "add", shape = array<i64: 2, 16>}
    // CHECK: plan.alloc offset 128 : memref<2x16xf32>
    %6 = plan.alloc : memref<2x16xf32>
    plan.kernel "unary" ins(%5 : memref<2x16xf32>) outs(%6 : memref<2x16xf32>) {n = 32 : i64, op = "exp"}
    plan.output "y", %6 : memref<2x16xf32>
  }

  // Every buffer rounds up to 64 bytes: 17 x i32 = 68 -> 128, 3 x f32 = 12 -> 64,
  // 5 x bf16 = 10 -> 64, 17 x f32 = 68 -> 128. All live together at the end.
  // CHECK-LABEL: plan.program "sizes" attributes {arena_bytes = 448 : i64} {
  plan.program "sizes" {
    // CHECK-NEXT: plan.input "ids" offset 0 : memref<17xi32>
    %0 = plan.input "ids" : memref<17xi32>
    // CHECK-NEXT: plan.alloc offset 256 : memref<3xf32>
    %1 = plan.alloc : memref<3xf32>
    plan.kernel "fill" outs(%1 : memref<3xf32>) {n = 3 : i64, value = 1.000000e+00 : f64}
    // CHECK: plan.alloc offset 320 : memref<5xbf16>
    %2 = plan.alloc : memref<5xbf16>
    plan.kernel "fill" outs(%2 : memref<5xbf16>) {n = 5 : i64, value = 0.000000e+00 : f64}
    // CHECK: plan.alloc offset 384 : memref<16xf32>
    %3 = plan.alloc : memref<16xf32>
    plan.kernel "fill" outs(%3 : memref<16xf32>) {n = 16 : i64, value = 2.000000e+00 : f64}
    // CHECK: plan.alloc offset 128 : memref<17xf32>
    %4 = plan.alloc : memref<17xf32>
    plan.kernel "embedding" ins(%1, %0 : memref<3xf32>, memref<17xi32>) outs(%4 : memref<17xf32>) {cols = 1 : i64, n = 17 : i64, rows = 3 : i64}
    plan.output "a", %2 : memref<5xbf16>
    plan.output "b", %3 : memref<16xf32>
    plan.output "c", %4 : memref<17xf32>
  }
}
