// RUN: tessel-opt %s -split-input-file -tessel-group-optimizer | FileCheck %s
// RUN: tessel-opt %s -split-input-file -tessel-group-optimizer=max-bytes=300 \
// RUN:   | FileCheck %s --check-prefix=CAP
// -tessel-group-optimizer: which optimizer calls of a program become one multi-tensor call,
// where it goes, and what moves around it.

// Three adjacent calls with one learning rate, clipping factor and hyperparameters become one:
// each role's operands together, in call order, `n` listing the tensors. A call with another
// weight decay stays apart.
// CHECK-LABEL: plan.program "adjacent"
// CHECK: plan.kernel "adamw" ins(%[[G1:[^,]*]], %[[G2:[^,]*]], %[[G3:[^,]*]], %[[LR:[^,]*]], %[[C:[^ ]*]] :
// CHECK-SAME: outs(%[[P1:[^,]*]], %[[P2:[^,]*]], %[[P3:[^,]*]], %[[M1:[^,]*]], %[[M2:[^,]*]], %[[M3:[^,]*]], %[[V1:[^,]*]], %[[V2:[^,]*]], %[[V3:[^ ]*]] :
// CHECK-SAME: n = array<i64: 128, 8, 16>, weight_decay = 1.000000e-01
// CHECK: plan.kernel "adamw" ins({{.*}}) outs({{.*}}) {{{.*}}n = array<i64: 4>, weight_decay = 0.000000e+00
// CHECK-NOT: plan.kernel "adamw"
module {
  plan.program "adjacent" {
    %lr = plan.alloc : memref<f32>
    %c = plan.alloc : memref<f32>
    %g1 = plan.state "grad.a" : memref<8x16xf32>
    %p1 = plan.state "a" : memref<8x16xf32>
    %m1 = plan.state "adam_m.a" : memref<8x16xf32>
    %v1 = plan.state "adam_v.a" : memref<8x16xf32>
    plan.kernel "adamw" ins(%g1, %lr, %c : memref<8x16xf32>, memref<f32>, memref<f32>) outs(%p1, %m1, %v1 : memref<8x16xf32>, memref<8x16xf32>, memref<8x16xf32>) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, n = array<i64: 128>, weight_decay = 0.1 : f64}
    %g2 = plan.state "grad.b" : memref<8xf32>
    %p2 = plan.state "b" : memref<8xf32>
    %m2 = plan.state "adam_m.b" : memref<8xf32>
    %v2 = plan.state "adam_v.b" : memref<8xf32>
    plan.kernel "adamw" ins(%g2, %lr, %c : memref<8xf32>, memref<f32>, memref<f32>) outs(%p2, %m2, %v2 : memref<8xf32>, memref<8xf32>, memref<8xf32>) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, n = array<i64: 8>, weight_decay = 0.1 : f64}
    %g4 = plan.state "grad.d" : memref<4xf32>
    %p4 = plan.state "d" : memref<4xf32>
    %m4 = plan.state "adam_m.d" : memref<4xf32>
    %v4 = plan.state "adam_v.d" : memref<4xf32>
    plan.kernel "adamw" ins(%g4, %lr, %c : memref<4xf32>, memref<f32>, memref<f32>) outs(%p4, %m4, %v4 : memref<4xf32>, memref<4xf32>, memref<4xf32>) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, n = array<i64: 4>, weight_decay = 0.0 : f64}
    %g3 = plan.state "grad.c" : memref<16xf32>
    %p3 = plan.state "c" : memref<16xf32>
    %m3 = plan.state "adam_m.c" : memref<16xf32>
    %v3 = plan.state "adam_v.c" : memref<16xf32>
    plan.kernel "adamw" ins(%g3, %lr, %c : memref<16xf32>, memref<f32>, memref<f32>) outs(%p3, %m3, %v3 : memref<16xf32>, memref<16xf32>, memref<16xf32>) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, n = array<i64: 16>, weight_decay = 0.1 : f64}
  }
}

// -----

// ZeRO's shape: each update is preceded by the slice of its shard and followed by the gather of
// the result and its copy back. The slices (and what they read and allocate) move before the
// merged call; the gathers stay after it, in their order. With max-bytes 300 the second slice
// (256 bytes, moved before the first update) fits but the third would make 512: two calls.
// CHECK-LABEL: plan.program "zero"
// CHECK: plan.kernel "shard_slice" ins(%[[A:.*]] : memref<8x16xf32>) outs(%[[SA:.*]] : memref<8x8xf32>)
// CHECK: plan.kernel "shard_slice" ins(%[[B:.*]] : memref<8x16xf32>) outs(%[[SB:.*]] : memref<8x8xf32>)
// CHECK: plan.kernel "shard_slice" ins(%[[C:.*]] : memref<8x16xf32>) outs(%[[SC:.*]] : memref<8x8xf32>)
// CHECK-NOT: plan.kernel "all_gather"
// CHECK: plan.kernel "adamw" ins({{.*}}) outs(%[[SA]], %[[SB]], %[[SC]], {{.*}}) {{.*}}n = array<i64: 64, 64, 64>
// CHECK-NEXT: plan.alloc
// CHECK-NEXT: plan.kernel "all_gather" ins(%[[SA]]
// CHECK: plan.kernel "copy"
// CHECK: plan.kernel "all_gather" ins(%[[SB]]
// CHECK: plan.kernel "copy"
// CHECK: plan.kernel "all_gather" ins(%[[SC]]
// CHECK: plan.kernel "copy"
// CAP-LABEL: plan.program "zero"
// CAP: plan.kernel "adamw" {{.*}}n = array<i64: 64, 64>
// CAP: plan.kernel "adamw" {{.*}}n = array<i64: 64>,
module {
  plan.program "zero" {
    %lr = plan.alloc : memref<f32>
    %c = plan.alloc : memref<f32>
    %ga = plan.alloc : memref<8x8xf32>
    %gb = plan.alloc : memref<8x8xf32>
    %gc = plan.alloc : memref<8x8xf32>
    plan.kernel "fill" outs(%ga : memref<8x8xf32>) {n = 64 : i64, value = 1.0 : f64}
    plan.kernel "fill" outs(%gb : memref<8x8xf32>) {n = 64 : i64, value = 1.0 : f64}
    plan.kernel "fill" outs(%gc : memref<8x8xf32>) {n = 64 : i64, value = 1.0 : f64}

    %a = plan.state "a" : memref<8x16xf32>
    %sa = plan.alloc : memref<8x8xf32>
    plan.kernel "shard_slice" ins(%a : memref<8x16xf32>) outs(%sa : memref<8x8xf32>) {chunk = 8 : i64, group = "dp", outer = 8 : i64}
    %ma = plan.state "adam_m.a" : memref<8x8xf32>
    %va = plan.state "adam_v.a" : memref<8x8xf32>
    plan.kernel "adamw" ins(%ga, %lr, %c : memref<8x8xf32>, memref<f32>, memref<f32>) outs(%sa, %ma, %va : memref<8x8xf32>, memref<8x8xf32>, memref<8x8xf32>) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, n = array<i64: 64>, weight_decay = 0.1 : f64}
    %xa = plan.alloc : memref<8x16xf32>
    plan.kernel "all_gather" ins(%sa : memref<8x8xf32>) outs(%xa : memref<8x16xf32>) {chunk = 8 : i64, group = "dp", outer = 8 : i64}
    %a2 = plan.state "a" : memref<8x16xf32>
    plan.kernel "copy" ins(%xa : memref<8x16xf32>) outs(%a2 : memref<8x16xf32>) {shape = array<i64: 8, 16>, x_strides = array<i64: 16, 1>}

    %b = plan.state "b" : memref<8x16xf32>
    %sb = plan.alloc : memref<8x8xf32>
    plan.kernel "shard_slice" ins(%b : memref<8x16xf32>) outs(%sb : memref<8x8xf32>) {chunk = 8 : i64, group = "dp", outer = 8 : i64}
    %mb = plan.state "adam_m.b" : memref<8x8xf32>
    %vb = plan.state "adam_v.b" : memref<8x8xf32>
    plan.kernel "adamw" ins(%gb, %lr, %c : memref<8x8xf32>, memref<f32>, memref<f32>) outs(%sb, %mb, %vb : memref<8x8xf32>, memref<8x8xf32>, memref<8x8xf32>) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, n = array<i64: 64>, weight_decay = 0.1 : f64}
    %xb = plan.alloc : memref<8x16xf32>
    plan.kernel "all_gather" ins(%sb : memref<8x8xf32>) outs(%xb : memref<8x16xf32>) {chunk = 8 : i64, group = "dp", outer = 8 : i64}
    %b2 = plan.state "b" : memref<8x16xf32>
    plan.kernel "copy" ins(%xb : memref<8x16xf32>) outs(%b2 : memref<8x16xf32>) {shape = array<i64: 8, 16>, x_strides = array<i64: 16, 1>}

    %cc = plan.state "c" : memref<8x16xf32>
    %sc = plan.alloc : memref<8x8xf32>
    plan.kernel "shard_slice" ins(%cc : memref<8x16xf32>) outs(%sc : memref<8x8xf32>) {chunk = 8 : i64, group = "dp", outer = 8 : i64}
    %mc = plan.state "adam_m.c" : memref<8x8xf32>
    %vc = plan.state "adam_v.c" : memref<8x8xf32>
    plan.kernel "adamw" ins(%gc, %lr, %c : memref<8x8xf32>, memref<f32>, memref<f32>) outs(%sc, %mc, %vc : memref<8x8xf32>, memref<8x8xf32>, memref<8x8xf32>) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, n = array<i64: 64>, weight_decay = 0.1 : f64}
    %xc = plan.alloc : memref<8x16xf32>
    plan.kernel "all_gather" ins(%sc : memref<8x8xf32>) outs(%xc : memref<8x16xf32>) {chunk = 8 : i64, group = "dp", outer = 8 : i64}
    %c2 = plan.state "c" : memref<8x16xf32>
    plan.kernel "copy" ins(%xc : memref<8x16xf32>) outs(%c2 : memref<8x16xf32>) {shape = array<i64: 8, 16>, x_strides = array<i64: 16, 1>}
  }
}

// -----

// What cannot merge, in one weight decay. The second update's gradient is computed from the
// first's result (it would have to come both before and after the merged call); the third's
// gradient comes from an all-reduce issued after the gather of the second's result
// (collectives keep their order, so the same); the fourth follows a guard_finite (nothing
// crosses a control kernel). The fifth has a bf16 working copy and the others none, so it stays
// apart, while the sixth joins the fourth. Adjacent sgd calls merge too.
// CHECK-LABEL: plan.program "apart"
// CHECK: plan.kernel "adamw" {{.*}}n = array<i64: 8>,
// CHECK: plan.kernel "adamw" {{.*}}n = array<i64: 8>,
// CHECK: plan.kernel "adamw" {{.*}}n = array<i64: 8>,
// CHECK: plan.kernel "guard_finite"
// CHECK: plan.kernel "adamw" {{.*}}n = array<i64: 4, 6>,
// CHECK: plan.kernel "adamw" {{.*}}memref<2xbf16>) {{.*}}n = array<i64: 2>,
// CHECK-NOT: plan.kernel "adamw"
// CHECK: plan.kernel "sgd" ins({{.*}}) outs({{.*}}) {{{.*}}n = array<i64: 8, 8>
module {
  plan.program "apart" {
    %lr = plan.alloc : memref<f32>
    %c = plan.alloc : memref<f32>
    %g1 = plan.state "grad.a" : memref<8xf32>
    %p1 = plan.state "a" : memref<8xf32>
    %m1 = plan.state "adam_m.a" : memref<8xf32>
    %v1 = plan.state "adam_v.a" : memref<8xf32>
    plan.kernel "adamw" ins(%g1, %lr, %c : memref<8xf32>, memref<f32>, memref<f32>) outs(%p1, %m1, %v1 : memref<8xf32>, memref<8xf32>, memref<8xf32>) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, n = array<i64: 8>, weight_decay = 0.1 : f64}

    %g2 = plan.alloc : memref<8xf32>
    plan.kernel "unary" ins(%p1 : memref<8xf32>) outs(%g2 : memref<8xf32>) {n = 8 : i64, op = "exp"}
    %p2 = plan.state "b" : memref<8xf32>
    %m2 = plan.state "adam_m.b" : memref<8xf32>
    %v2 = plan.state "adam_v.b" : memref<8xf32>
    plan.kernel "adamw" ins(%g2, %lr, %c : memref<8xf32>, memref<f32>, memref<f32>) outs(%p2, %m2, %v2 : memref<8xf32>, memref<8xf32>, memref<8xf32>) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, n = array<i64: 8>, weight_decay = 0.1 : f64}
    %x2 = plan.alloc : memref<8xf32>
    plan.kernel "all_gather" ins(%p2 : memref<8xf32>) outs(%x2 : memref<8xf32>) {chunk = 8 : i64, group = "dp", outer = 1 : i64}

    %g3 = plan.alloc : memref<8xf32>
    plan.kernel "all_reduce" ins(%g3 : memref<8xf32>) outs(%g3 : memref<8xf32>) {group = "dp", n = 8 : i64, op = "sum"}
    %p3 = plan.state "c" : memref<8xf32>
    %m3 = plan.state "adam_m.c" : memref<8xf32>
    %v3 = plan.state "adam_v.c" : memref<8xf32>
    plan.kernel "adamw" ins(%g3, %lr, %c : memref<8xf32>, memref<f32>, memref<f32>) outs(%p3, %m3, %v3 : memref<8xf32>, memref<8xf32>, memref<8xf32>) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, n = array<i64: 8>, weight_decay = 0.1 : f64}

    plan.kernel "guard_finite" ins(%lr : memref<f32>) {}
    %g4 = plan.state "grad.d" : memref<4xf32>
    %p4 = plan.state "d" : memref<4xf32>
    %m4 = plan.state "adam_m.d" : memref<4xf32>
    %v4 = plan.state "adam_v.d" : memref<4xf32>
    plan.kernel "adamw" ins(%g4, %lr, %c : memref<4xf32>, memref<f32>, memref<f32>) outs(%p4, %m4, %v4 : memref<4xf32>, memref<4xf32>, memref<4xf32>) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, n = array<i64: 4>, weight_decay = 0.1 : f64}

    %g5 = plan.state "grad.e" : memref<2xf32>
    %p5 = plan.state "e" : memref<2xf32>
    %m5 = plan.state "adam_m.e" : memref<2xf32>
    %v5 = plan.state "adam_v.e" : memref<2xf32>
    %w5 = plan.state "working.e" : memref<2xbf16>
    plan.kernel "adamw" ins(%g5, %lr, %c : memref<2xf32>, memref<f32>, memref<f32>) outs(%p5, %m5, %v5, %w5 : memref<2xf32>, memref<2xf32>, memref<2xf32>, memref<2xbf16>) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, n = array<i64: 2>, weight_decay = 0.1 : f64}
    %g6 = plan.state "grad.f" : memref<6xf32>
    %p6 = plan.state "f" : memref<6xf32>
    %m6 = plan.state "adam_m.f" : memref<6xf32>
    %v6 = plan.state "adam_v.f" : memref<6xf32>
    plan.kernel "adamw" ins(%g6, %lr, %c : memref<6xf32>, memref<f32>, memref<f32>) outs(%p6, %m6, %v6 : memref<6xf32>, memref<6xf32>, memref<6xf32>) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, n = array<i64: 6>, weight_decay = 0.1 : f64}

    %g7 = plan.state "grad.g" : memref<8xf32>
    %p7 = plan.state "g" : memref<8xf32>
    %b7 = plan.state "momentum.g" : memref<8xf32>
    plan.kernel "sgd" ins(%g7, %lr, %c : memref<8xf32>, memref<f32>, memref<f32>) outs(%p7, %b7 : memref<8xf32>, memref<8xf32>) {momentum = 0.9 : f64, n = array<i64: 8>, weight_decay = 0.0 : f64}
    %g8 = plan.state "grad.h" : memref<8xf32>
    %p8 = plan.state "h" : memref<8xf32>
    %b8 = plan.state "momentum.h" : memref<8xf32>
    plan.kernel "sgd" ins(%g8, %lr, %c : memref<8xf32>, memref<f32>, memref<f32>) outs(%p8, %b8 : memref<8xf32>, memref<8xf32>) {momentum = 0.9 : f64, n = array<i64: 8>, weight_decay = 0.0 : f64}
  }
}
