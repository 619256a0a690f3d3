// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// Every op of the plan dialect, printed and parsed back.

// CHECK-LABEL: module {
module {
  // The mesh (axes outermost first) and its communicator groups.
  // CHECK: plan.mesh ["dp", "tp"] sizes [2, 4]
  plan.mesh ["dp", "tp"] sizes [2, 4]
  // CHECK: plan.group "world" axes [0, 1]
  plan.group "world" axes [0, 1]
  // CHECK: plan.group "tp" axes [1]
  plan.group "tp" axes [1]
  // CHECK: plan.group "dp_tp" axes [0, 1]
  plan.group "dp_tp" axes [0, 1]
  // CHECK: plan.tensor "wte" role "param" init "normal"(0.000000e+00, 2.000000e-02) dims ["vocab", "embed"] : memref<256x128xf32>
  plan.tensor "wte" role "param" init "normal"(0.0, 0.02) dims ["vocab", "embed"] : memref<256x128xf32>
  // CHECK: plan.tensor "ln_g" role "param" init "ones"(0.000000e+00, 0.000000e+00) dims ["embed"] : memref<128xf32>
  plan.tensor "ln_g" role "param" init "ones"(0.0, 0.0) dims ["embed"] : memref<128xf32>
  // CHECK: plan.tensor "grad.wte" role "grad" of "wte" init "zeros"(0.000000e+00, 0.000000e+00) dims ["vocab", "embed"] : memref<256x128xf32>
  plan.tensor "grad.wte" role "grad" of "wte" init "zeros"(0.0, 0.0) dims ["vocab", "embed"] : memref<256x128xf32>
  // CHECK: plan.tensor "adam_m.wte" role "adam_m" of "wte" init "zeros"
  plan.tensor "adam_m.wte" role "adam_m" of "wte" init "zeros"(0.0, 0.0) dims ["vocab", "embed"] : memref<256x128xf32>
  // CHECK: plan.tensor "adam_v.wte" role "adam_v" of "wte" init "zeros"
  plan.tensor "adam_v.wte" role "adam_v" of "wte" init "zeros"(0.0, 0.0) dims ["vocab", "embed"] : memref<256x128xf32>
  // A scalar has no dims.
  // CHECK: plan.tensor "scale" role "param" init "constant"(5.000000e-01, 0.000000e+00) dims [] : memref<f32>
  plan.tensor "scale" role "param" init "constant"(0.5, 0.0) dims [] : memref<f32>

  // CHECK: plan.program "forward_backward" attributes {arena_bytes = 8192 : i64} {
  plan.program "forward_backward" attributes {arena_bytes = 8192 : i64} {
    // CHECK-NEXT: %[[T:.*]] = plan.input "tokens" offset 0 : memref<2x4xi32>
    %t = plan.input "tokens" offset 0 : memref<2x4xi32>
    // CHECK-NEXT: %[[W:.*]] = plan.state "wte" : memref<256x128xf32>
    %w = plan.state "wte" : memref<256x128xf32>
    // CHECK-NEXT: %[[E:.*]] = plan.alloc offset 64 : memref<2x4x128xf32>
    %e = plan.alloc offset 64 : memref<2x4x128xf32>
    // CHECK-NEXT: plan.kernel "embedding" ins(%[[W]], %[[T]] : memref<256x128xf32>, memref<2x4xi32>) outs(%[[E]] : memref<2x4x128xf32>) {cols = 128 : i64, n = 8 : i64, rows = 256 : i64}
    plan.kernel "embedding" ins(%w, %t : memref<256x128xf32>, memref<2x4xi32>) outs(%e : memref<2x4x128xf32>) {cols = 128 : i64, n = 8 : i64, rows = 256 : i64}
    // CHECK-NEXT: %[[V:.*]] = plan.view %[[E]] : memref<2x4x128xf32> to memref<2x4x4x32xf32>
    %v = plan.view %e : memref<2x4x128xf32> to memref<2x4x4x32xf32>
    // A kernel without inputs, and strides as dense arrays.
    // CHECK-NEXT: %[[L:.*]] = plan.alloc offset 4160 : memref<f32>
    %l = plan.alloc offset 4160 : memref<f32>
    // CHECK-NEXT: plan.kernel "fill" outs(%[[L]] : memref<f32>) {n = 1 : i64, value = 1.000000e+00 : f64}
    plan.kernel "fill" outs(%l : memref<f32>) {n = 1 : i64, value = 1.000000e+00 : f64}
    // CHECK-NEXT: plan.kernel "copy" ins(%[[L]] : memref<f32>) outs(%[[E]] : memref<2x4x128xf32>) {shape = array<i64: 2, 4, 128>, x_strides = array<i64: 0, 0, 0>}
    plan.kernel "copy" ins(%l : memref<f32>) outs(%e : memref<2x4x128xf32>) {shape = array<i64: 2, 4, 128>, x_strides = array<i64: 0, 0, 0>}
    // Several outputs, empty params.
    // CHECK-NEXT: plan.kernel "global_norm" ins(%[[V]], %[[W]] : memref<2x4x4x32xf32>, memref<256x128xf32>) outs(%[[L]] : memref<f32>) {}
    plan.kernel "global_norm" ins(%v, %w : memref<2x4x4x32xf32>, memref<256x128xf32>) outs(%l : memref<f32>) {}
    // CHECK-NEXT: plan.output "loss", %[[L]] : memref<f32>
    plan.output "loss", %l : memref<f32>
    // CHECK-NEXT: }
  }

  // Before memory planning: no arena_bytes, no offsets.
  // CHECK: plan.program "eval" {
  plan.program "eval" {
    // CHECK-NEXT: %[[X:.*]] = plan.input "x" : memref<8xbf16>
    %x = plan.input "x" : memref<8xbf16>
    // CHECK-NEXT: %[[Y:.*]] = plan.alloc : memref<8xbf16>
    %y = plan.alloc : memref<8xbf16>
    // CHECK-NEXT: plan.kernel "unary" ins(%[[X]] : memref<8xbf16>) outs(%[[Y]] : memref<8xbf16>) {n = 8 : i64, op = "gelu"}
    plan.kernel "unary" ins(%x : memref<8xbf16>) outs(%y : memref<8xbf16>) {n = 8 : i64, op = "gelu"}
    // CHECK-NEXT: plan.output "y", %[[Y]] : memref<8xbf16>
    plan.output "y", %y : memref<8xbf16>
  }
}
