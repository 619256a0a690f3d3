// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-derive-sampler
// The errors of -tessel-derive-sampler.

// expected-error @+1 {{has no @forward function}}
module {
  func.func @main() {
    return
  }
}

// -----

module {
  // expected-error @+1 {{must return a cross_entropy to derive @sample from it}}
  func.func @forward(%x: tensor<4xf32, #graph.dims<batch>>) -> tensor<f32, #graph.dims<>> {
    %0 = graph.sum %x dims ["batch"] : tensor<4xf32, #graph.dims<batch>> -> tensor<f32, #graph.dims<>>
    return %0 : tensor<f32, #graph.dims<>>
  }
}
