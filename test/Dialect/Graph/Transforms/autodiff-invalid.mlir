// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-autodiff
// The errors of -tessel-autodiff.

// expected-error @+1 {{has no @forward function to differentiate}}
module {
  func.func @main() {
    return
  }
}

// -----

module {
  // expected-error @+1 {{must return the scalar loss to be differentiated}}
  func.func @forward(%x: tensor<4xf32, #graph.dims<batch>>) -> tensor<4xf32, #graph.dims<batch>> {
    return %x : tensor<4xf32, #graph.dims<batch>>
  }
}

// -----

module {
  // Two scalars are not one loss.
  // expected-error @+1 {{must return the scalar loss to be differentiated}}
  func.func @forward(%x: tensor<4xf32, #graph.dims<batch>>) -> (tensor<f32, #graph.dims<>>, tensor<f32, #graph.dims<>>) {
    %0 = graph.sum %x dims ["batch"] : tensor<4xf32, #graph.dims<batch>> -> tensor<f32, #graph.dims<>>
    return %0, %0 : tensor<f32, #graph.dims<>>, tensor<f32, #graph.dims<>>
  }
}

// -----

// expected-error @+1 {{already has @forward_backward}}
module {
  func.func @forward(%x: tensor<f32, #graph.dims<>>) -> tensor<f32, #graph.dims<>> {
    return %x : tensor<f32, #graph.dims<>>
  }
  func.func @forward_backward() {
    return
  }
}

// -----

module {
  func.func @forward(%x: tensor<f32, #graph.dims<>>) -> tensor<f32, #graph.dims<>> {
    %w = graph.param "w" init <ones> : tensor<f32, #graph.dims<>>
    // graph.broadcast is emitted by autodiff only; it has no rule of its own.
    // expected-error @+1 {{'graph.broadcast' op has no gradient rule}}
    %b = graph.broadcast %w : tensor<f32, #graph.dims<>> -> tensor<4xf32, #graph.dims<batch>>
    %0 = graph.sum %b dims ["batch"] : tensor<4xf32, #graph.dims<batch>> -> tensor<f32, #graph.dims<>>
    return %0 : tensor<f32, #graph.dims<>>
  }
}
