// RUN: tessel-opt %s -split-input-file -tessel-fold-accumulate | FileCheck %s
// -tessel-fold-accumulate: a gradient that one gemm or reduce writes whole and only its
// `accumulate` reads is added into the accumulator by that kernel; every other case keeps
// the `accumulate`.

// A weight's gradient GEMM and a bias's gradient reduce add into their accumulators; the
// buffers they wrote and the accumulate kernels go.
// CHECK-LABEL: plan.program "forward_backward"
// CHECK-NEXT: %[[X:.*]] = plan.input "x"
// CHECK-NEXT: %[[DY:.*]] = plan.input "dy"
// CHECK-NEXT: %[[GW:.*]] = plan.state "grad.w" : memref<4x8xf32>
// CHECK-NEXT: plan.kernel "gemm" ins(%[[X]], %[[DY]] : {{.*}}) outs(%[[GW]] : memref<4x8xf32>) {{{.*}}accumulate = 1 : i64{{.*}}}
// CHECK-NEXT: %[[GB:.*]] = plan.state "grad.b" : memref<8xf32>
// CHECK-NEXT: plan.kernel "reduce" ins(%[[DY]] : {{.*}}) outs(%[[GB]] : memref<8xf32>) {accumulate = 1 : i64, {{.*}}}
// CHECK-NEXT: }
// CHECK-NOT: "accumulate"
plan.program "forward_backward" {
  %x = plan.input "x" : memref<16x4xf32>
  %dy = plan.input "dy" : memref<16x8xf32>
  %g = plan.alloc : memref<4x8xf32>
  plan.kernel "gemm" ins(%x, %dy : memref<16x4xf32>, memref<16x8xf32>) outs(%g : memref<4x8xf32>) {a_batch_strides = array<i64>, b_batch_strides = array<i64>, batch_shape = array<i64>, c_batch_strides = array<i64>, k = 16 : i64, lda = 4 : i64, ldb = 8 : i64, ldc = 8 : i64, m = 4 : i64, n = 8 : i64, trans_a = 1 : i64, trans_b = 0 : i64}
  %gb = plan.alloc : memref<8xf32>
  plan.kernel "reduce" ins(%dy : memref<16x8xf32>) outs(%gb : memref<8xf32>) {scale = 1.0 : f64, shape = array<i64: 16, 8>, y_elements = 8 : i64, y_strides = array<i64: 0, 1>}
  %sw = plan.state "grad.w" : memref<4x8xf32>
  plan.kernel "accumulate" ins(%g : memref<4x8xf32>) outs(%sw : memref<4x8xf32>) {n = 32 : i64}
  %sb = plan.state "grad.b" : memref<8xf32>
  plan.kernel "accumulate" ins(%gb : memref<8xf32>) outs(%sb : memref<8xf32>) {n = 8 : i64}
}

// -----

// Not folded: the gradient is read by something else too (a norm); the accumulator is used
// between the GEMM and the accumulate (a tied parameter's other gradient), which folding
// would reorder.
// CHECK-LABEL: plan.program "forward_backward"
// CHECK-COUNT-3: plan.kernel "accumulate"
// CHECK-NOT: accumulate = 1
plan.program "forward_backward" {
  %x = plan.input "x" : memref<16x4xf32>
  %dy = plan.input "dy" : memref<16x8xf32>
  %g = plan.alloc : memref<4x8xf32>
  plan.kernel "gemm" ins(%x, %dy : memref<16x4xf32>, memref<16x8xf32>) outs(%g : memref<4x8xf32>) {a_batch_strides = array<i64>, b_batch_strides = array<i64>, batch_shape = array<i64>, c_batch_strides = array<i64>, k = 16 : i64, lda = 4 : i64, ldb = 8 : i64, ldc = 8 : i64, m = 4 : i64, n = 8 : i64, trans_a = 1 : i64, trans_b = 0 : i64}
  %norm = plan.alloc : memref<f32>
  plan.kernel "global_norm" ins(%g : memref<4x8xf32>) outs(%norm : memref<f32>) {}
  %s = plan.state "grad.w" : memref<4x8xf32>
  plan.kernel "accumulate" ins(%g : memref<4x8xf32>) outs(%s : memref<4x8xf32>) {n = 32 : i64}

  %t = plan.alloc : memref<4x8xf32>
  plan.kernel "gemm" ins(%x, %dy : memref<16x4xf32>, memref<16x8xf32>) outs(%t : memref<4x8xf32>) {a_batch_strides = array<i64>, b_batch_strides = array<i64>, batch_shape = array<i64>, c_batch_strides = array<i64>, k = 16 : i64, lda = 4 : i64, ldb = 8 : i64, ldc = 8 : i64, m = 4 : i64, n = 8 : i64, trans_a = 1 : i64, trans_b = 0 : i64}
  %u = plan.alloc : memref<4x8xf32>
  plan.kernel "fill" outs(%u : memref<4x8xf32>) {n = 32 : i64, value = 1.0 : f64}
  %s2 = plan.state "grad.v" : memref<4x8xf32>
  plan.kernel "accumulate" ins(%u : memref<4x8xf32>) outs(%s2 : memref<4x8xf32>) {n = 32 : i64}
  %s3 = plan.state "grad.v" : memref<4x8xf32>
  plan.kernel "accumulate" ins(%t : memref<4x8xf32>) outs(%s3 : memref<4x8xf32>) {n = 32 : i64}
}

// -----

// A gemm that writes only the first two rows of its buffer keeps its accumulate.
// CHECK-LABEL: plan.program "forward_backward"
// CHECK: plan.kernel "accumulate"
plan.program "forward_backward" {
  %x = plan.input "x" : memref<16x4xf32>
  %dy = plan.input "dy" : memref<16x8xf32>
  %g = plan.alloc : memref<4x8xf32>
  plan.kernel "gemm" ins(%x, %dy : memref<16x4xf32>, memref<16x8xf32>) outs(%g : memref<4x8xf32>) {a_batch_strides = array<i64>, b_batch_strides = array<i64>, batch_shape = array<i64>, c_batch_strides = array<i64>, k = 16 : i64, lda = 4 : i64, ldb = 8 : i64, ldc = 8 : i64, m = 2 : i64, n = 8 : i64, trans_a = 1 : i64, trans_b = 0 : i64}
  %s = plan.state "grad.w" : memref<4x8xf32>
  plan.kernel "accumulate" ins(%g : memref<4x8xf32>) outs(%s : memref<4x8xf32>) {n = 32 : i64}
}
