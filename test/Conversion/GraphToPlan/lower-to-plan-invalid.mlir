// RUN: tessel-opt %s -split-input-file -verify-diagnostics -tessel-lower-to-plan
// The errors of -tessel-lower-to-plan: ops whose layout the CPU kernels cannot read, and
// programs that do not hang together.

// expected-error @+1 {{has no function to lower; expected @forward_backward, @optimizer_step, @forward, @sample or decode programs}}
module {
  func.func @main() {
    return
  }
}

// -----

!l = tensor<2x4x16xf32, #graph.dims<batch, seq, vocab>>
!t = tensor<4x2xi32, #graph.dims<seq, batch>>
module {
  func.func @forward(%l: !l {graph.name = "logits"}, %t: !t {graph.name = "targets"}) -> tensor<f32, #graph.dims<>> {
    // expected-error @+1 {{'graph.cross_entropy' op targets [seq=4, batch=2] must list the logits' other dims in their order [batch=2, seq=4] for the CPU lowering}}
    %0 = graph.cross_entropy %l, %t dim "vocab" : (!l, !t) -> tensor<f32, #graph.dims<>>
    return %0 : tensor<f32, #graph.dims<>>
  }
}

// -----

module {
  // expected-error @+1 {{argument #0 has no graph.name}}
  func.func @forward(%x: tensor<f32, #graph.dims<>>) -> tensor<f32, #graph.dims<>> {
    return %x : tensor<f32, #graph.dims<>>
  }
}

// -----

!s = tensor<f32, #graph.dims<>>
module {
  func.func @optimizer_step() -> (!s, !s) {
    %0 = graph.grad "w" : tensor<8xf32, #graph.dims<embed>>
    %1 = graph.global_norm %0 : tensor<8xf32, #graph.dims<embed>> -> !s
    // expected-error @+1 {{'graph.adamw' op updates 'w', which no lowered function declares as a parameter}}
    graph.adamw "w", %0, %1, %1 beta1 0.9 beta2 0.999 eps 1.0e-8 weight_decay 0.0 : tensor<8xf32, #graph.dims<embed>>, !s, !s
    return %1, %1 : !s, !s
  }
}

// -----

!s = tensor<f32, #graph.dims<>>
module {
  func.func @optimizer_step() -> (!s, !s) {
    %0 = graph.constant 1.0 : !s
    // expected-error @+1 {{'graph.zero_grad' op clears a gradient that nothing accumulates}}
    graph.zero_grad "w"
    return %0, %0 : !s, !s
  }
}

// -----

!x = tensor<4xf32, #graph.dims<batch>>
module {
  func.func private @helper(!x) -> !x
  func.func @forward(%x: !x {graph.name = "x"}) -> !x {
    // expected-error @+1 {{'func.call' op has no lowering to the plan dialect}}
    %0 = func.call @helper(%x) : (!x) -> !x
    return %0 : !x
  }
}

// -----

// Every op that cannot be lowered is reported in one run, not only the first.
!l = tensor<2x4x16xf32, #graph.dims<batch, seq, vocab>>
!t = tensor<4x2xi32, #graph.dims<seq, batch>>
!x = tensor<4xf32, #graph.dims<batch>>
module {
  func.func private @helper(!x) -> !x
  func.func @forward(%l: !l {graph.name = "logits"}, %t: !t {graph.name = "targets"},
                     %x: !x {graph.name = "x"}) -> tensor<f32, #graph.dims<>> {
    // expected-error @+1 {{'func.call' op has no lowering to the plan dialect}}
    %0 = func.call @helper(%x) : (!x) -> !x
    // expected-error @+1 {{'graph.cross_entropy' op targets [seq=4, batch=2] must list the logits' other dims}}
    %1 = graph.cross_entropy %l, %t dim "vocab" : (!l, !t) -> tensor<f32, #graph.dims<>>
    return %1 : tensor<f32, #graph.dims<>>
  }
}
