// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-optimizer
// Optimizer settings the training settings refuse, and the errors of -tessel-optimizer.

// expected-error @+3 {{expected one of [adamw, adam, sgd] for the optimizer, got: lion}}
// expected-error @+2 {{failed to parse Settings_OptimizerAttr parameter 'kind'}}
// expected-error @+1 {{failed to parse Settings_TrainAttr parameter 'optimizer'}}
module attributes {tessel.train = #tessel.train<optimizer = <kind = lion, lr = 1.000000e-01>>} {
  func.func @forward_backward(%db: tensor<8xf32, #graph.dims<embed>>) {
    graph.accumulate_grad %db to "bias" : tensor<8xf32, #graph.dims<embed>>
    return
  }
}

// -----

// expected-error @+2 {{optimizer 'adam' with weight decay (L2, coupled) is not supported yet; use adamw, whose decay is decoupled}}
// expected-error @+1 {{failed to parse Settings_TrainAttr parameter 'optimizer'}}
module attributes {tessel.train = #tessel.train<optimizer = <kind = adam, weight_decay = 1.000000e-02>>} {
  func.func @forward_backward(%db: tensor<8xf32, #graph.dims<embed>>) {
    graph.accumulate_grad %db to "bias" : tensor<8xf32, #graph.dims<embed>>
    return
  }
}

// -----

// expected-error @+1 {{has no @forward_backward; run -tessel-autodiff first}}
module {
  func.func @forward(%x: tensor<f32, #graph.dims<>>) -> tensor<f32, #graph.dims<>> {
    return %x : tensor<f32, #graph.dims<>>
  }
}

// -----

module {
  // expected-error @+1 {{accumulates no gradient: no parameter reaches the loss}}
  func.func @forward_backward(%x: tensor<f32, #graph.dims<>>) -> tensor<f32, #graph.dims<>> {
    return %x : tensor<f32, #graph.dims<>>
  }
}
