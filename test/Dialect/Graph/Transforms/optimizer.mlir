// RUN: tessel-opt %s -split-input-file -tessel-optimizer | FileCheck %s
// @optimizer_step as -tessel-optimizer builds it from tessel.train and the accumulate_grad
// ops of @forward_backward.

// Clipping at 1.0, a cosine schedule and AdamW with every setting given.

!b = tensor<8xf32, #graph.dims<embed>>
!w = tensor<8x16xf32, #graph.dims<embed, ffn>>
!s = tensor<f32, #graph.dims<>>
module attributes {tessel.train = #tessel.train<steps = 600,
    optimizer = <kind = adamw, lr = 3.000000e-03, beta1 = 8.500000e-01, beta2 = 9.900000e-01,
                 eps = 1.000000e-07, weight_decay = 1.000000e-02>,
    lr_schedule = <kind = cosine, warmup = 50, min_lr = 3.000000e-04>, clip = 1.000000e+00>} {
  func.func @forward_backward(%db: !b, %dw: !w) -> !s {
    %l = graph.constant 0.0 : !s
    graph.accumulate_grad %db to "bias" : !b
    graph.accumulate_grad %dw to "layers.0.w" : !w
    return %l : !s
  }
}

// CHECK-LABEL: func.func @optimizer_step() -> (tensor<f32, #graph.dims<>>, tensor<f32, #graph.dims<>>) {
// CHECK-NEXT: %[[GB:.*]] = graph.grad "bias" : tensor<8xf32, #graph.dims<embed>>
// CHECK-NEXT: %[[GW:.*]] = graph.grad "layers.0.w" : tensor<8x16xf32, #graph.dims<embed, ffn>>
// CHECK-NEXT: %[[NORM:.*]] = graph.global_norm %[[GB]], %[[GW]] : tensor<8xf32, #graph.dims<embed>>, tensor<8x16xf32, #graph.dims<embed, ffn>> -> tensor<f32, #graph.dims<>>
// CHECK-NEXT: graph.guard_finite %[[NORM]] : tensor<f32, #graph.dims<>>
// CHECK-NEXT: %[[C:.*]] = graph.clip_coefficient %[[NORM]] max 1.000000e+00 : tensor<f32, #graph.dims<>>
// CHECK-NEXT: %[[LR:.*]] = graph.learning_rate cosine lr 3.000000e-03 min_lr 3.000000e-04 warmup 50 steps 600 : tensor<f32, #graph.dims<>>
// CHECK-NEXT: graph.adamw "bias", %[[GB]], %[[LR]], %[[C]] beta1 8.500000e-01 beta2 0.98999999999999999 eps 9.9999999999999995E-8 weight_decay 1.000000e-02 : tensor<8xf32, #graph.dims<embed>>, tensor<f32, #graph.dims<>>, tensor<f32, #graph.dims<>>
// CHECK-NEXT: graph.adamw "layers.0.w", %[[GW]], %[[LR]], %[[C]] beta1 8.500000e-01 beta2 0.98999999999999999 eps 9.9999999999999995E-8 weight_decay 1.000000e-02 : tensor<8x16xf32, #graph.dims<embed, ffn>>, tensor<f32, #graph.dims<>>, tensor<f32, #graph.dims<>>
// CHECK-NEXT: graph.zero_grad "bias"
// CHECK-NEXT: graph.zero_grad "layers.0.w"
// CHECK-NEXT: return %[[NORM]], %[[LR]] : tensor<f32, #graph.dims<>>, tensor<f32, #graph.dims<>>
// CHECK-NEXT: }

// -----

// No clip (clip = 0): the coefficient is the constant 1. Without settings the schedule is
// constant at lr 1e-3 over 1 step, and AdamW has its defaults.

!b = tensor<8xf32, #graph.dims<embed>>
!s = tensor<f32, #graph.dims<>>
module attributes {tessel.train = #tessel.train<clip = 0.000000e+00>} {
  func.func @forward_backward(%db: !b) -> !s {
    %l = graph.constant 0.0 : !s
    graph.accumulate_grad %db to "bias" : !b
    return %l : !s
  }
}

// CHECK-LABEL: func.func @optimizer_step()
// CHECK-NEXT: %[[G:.*]] = graph.grad "bias"
// CHECK-NEXT: %[[NORM:.*]] = graph.global_norm %[[G]] : tensor<8xf32, #graph.dims<embed>> -> tensor<f32, #graph.dims<>>
// CHECK-NEXT: graph.guard_finite %[[NORM]]
// CHECK-NEXT: %[[ONE:.*]] = graph.constant 1.000000e+00 : tensor<f32, #graph.dims<>>
// CHECK-NEXT: %[[LR:.*]] = graph.learning_rate constant lr 1.000000e-03 min_lr 0.000000e+00 warmup 0 steps 1000 :
// CHECK-NEXT: graph.adamw "bias", %[[G]], %[[LR]], %[[ONE]] beta1 9.000000e-01 beta2 0.99899999999999999 eps 1.000000e-08 weight_decay 0.000000e+00 :
// CHECK-NEXT: graph.zero_grad "bias"
// CHECK-NEXT: return %[[NORM]], %[[LR]]
// CHECK-NOT: clip_coefficient

// -----

// Adam without weight decay is AdamW without weight decay.

!b = tensor<8xf32, #graph.dims<embed>>
!s = tensor<f32, #graph.dims<>>
module attributes {tessel.train = #tessel.train<optimizer = <kind = adam, lr = 5.000000e-01, weight_decay = 0.000000e+00>>} {
  func.func @forward_backward(%db: !b) -> !s {
    %l = graph.constant 0.0 : !s
    graph.accumulate_grad %db to "bias" : !b
    return %l : !s
  }
}

// CHECK-LABEL: func.func @optimizer_step()
// CHECK: graph.learning_rate constant lr 5.000000e-01
// CHECK: graph.adamw "bias", {{.*}} weight_decay 0.000000e+00

// -----

// SGD with momentum and (coupled) weight decay: one graph.sgd per parameter.

module attributes {tessel.train = #tessel.train<optimizer = <kind = sgd, lr = 1.000000e-01, weight_decay = 1.000000e-04, momentum = 9.000000e-01>>} {
  func.func @forward_backward(%db: tensor<8xf32, #graph.dims<embed>>) {
    graph.accumulate_grad %db to "bias" : tensor<8xf32, #graph.dims<embed>>
    return
  }
}

// CHECK-LABEL: func.func @optimizer_step()
// CHECK: %[[G:.*]] = graph.grad "bias"
// CHECK: %[[LR:.*]] = graph.learning_rate constant lr 1.000000e-01
// CHECK-NEXT: graph.sgd "bias", %[[G]], %[[LR]], %{{.*}} momentum 9.000000e-01 weight_decay 1.000000e-04
// CHECK-NOT: graph.adamw
// CHECK: graph.zero_grad "bias"
