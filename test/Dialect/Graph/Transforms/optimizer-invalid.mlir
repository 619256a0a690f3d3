// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-optimizer
// The errors of -tessel-optimizer.

// expected-error @+1 {{unknown optimizer 'lion'; expected adamw, adam or sgd}}
module attributes {tessel.train = {optimizer = {kind = "lion", lr = 1.000000e-01 : f64}}} {
  func.func @forward_backward(%db: tensor<8xf32, #graph.dims<embed>>) {
    graph.accumulate_grad %db to "bias" : tensor<8xf32, #graph.dims<embed>>
    return
  }
}

// -----

// expected-error @+1 {{optimizer 'adam' with weight decay (L2, coupled) is not supported yet; use adamw, whose decay is decoupled}}
module attributes {tessel.train = {optimizer = {kind = "adam", weight_decay = 1.000000e-02 : f64}}} {
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
