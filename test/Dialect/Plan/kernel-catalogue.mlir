// RUN: tessel-opt %s -split-input-file -verify-diagnostics
// plan.kernel is checked against the kernel catalogue (common/catalogue/KernelCatalogue.def): the kernel,
// its operand count and element types, each parameter's presence, type and enum word, and no
// parameter it does not take. The runtime refuses the same plans at load, from the same table.

module {
  plan.program "p" {
    %a = plan.alloc : memref<4xf32>
    // expected-error @+1 {{'plan.kernel' op calls 'nope', which is not in the kernel catalogue}}
    plan.kernel "nope" outs(%a : memref<4xf32>) {}
  }
}

// -----

module {
  plan.program "p" {
    %t = plan.alloc : memref<4x2xf32>
    %i = plan.alloc : memref<4xf32>
    %y = plan.alloc : memref<4x2xf32>
    // expected-error @+1 {{'embedding' input 1 (`ids`) is f32; it takes i32}}
    plan.kernel "embedding" ins(%t, %i : memref<4x2xf32>, memref<4xf32>) outs(%y : memref<4x2xf32>) {n = 4 : i64, rows = 4 : i64, cols = 2 : i64}
  }
}

// -----

module {
  plan.program "p" {
    %a = plan.alloc : memref<4xf32>
    // expected-error @+1 {{'softmax' takes 1 input, not 2}}
    plan.kernel "softmax" ins(%a, %a : memref<4xf32>, memref<4xf32>) outs(%a : memref<4xf32>) {rows = 1 : i64, cols = 4 : i64}
  }
}

// -----

module {
  plan.program "p" {
    %a = plan.alloc : memref<4xf32>
    // expected-error @+1 {{'softmax' needs parameter 'cols'}}
    plan.kernel "softmax" ins(%a : memref<4xf32>) outs(%a : memref<4xf32>) {rows = 1 : i64}
  }
}

// -----

module {
  plan.program "p" {
    %a = plan.alloc : memref<4xf32>
    // expected-error @+1 {{'softmax' has parameter 'rows' of the wrong type; it takes an integer}}
    plan.kernel "softmax" ins(%a : memref<4xf32>) outs(%a : memref<4xf32>) {rows = 1.0 : f64, cols = 4 : i64}
  }
}

// -----

module {
  plan.program "p" {
    %a = plan.alloc : memref<4xf32>
    // expected-error @+1 {{'binary' has op 'pow'; it takes add, sub, mul, div}}
    plan.kernel "binary" ins(%a, %a : memref<4xf32>, memref<4xf32>) outs(%a : memref<4xf32>) {op = "pow", shape = array<i64: 4>, a_strides = array<i64: 1>, b_strides = array<i64: 1>}
  }
}

// -----

module {
  plan.program "p" {
    %a = plan.alloc : memref<4xf32>
    // expected-error @+1 {{'fill' has parameter 'event', which it does not take}}
    plan.kernel "fill" outs(%a : memref<4xf32>) {n = 4 : i64, value = 0.0 : f64, event = 1 : i64}
  }
}

// -----

module {
  plan.program "p" {
    %a = plan.alloc : memref<2x2xf32>
    // expected-error @+1 {{'gemm' has parameter 'trans_a' of the wrong type; it takes a flag (0 or 1)}}
    plan.kernel "gemm" ins(%a, %a : memref<2x2xf32>, memref<2x2xf32>) outs(%a : memref<2x2xf32>) {batch_shape = array<i64>, a_batch_strides = array<i64>, b_batch_strides = array<i64>, c_batch_strides = array<i64>, m = 2 : i64, n = 2 : i64, k = 2 : i64, trans_a = 2 : i64, trans_b = 0 : i64, lda = 2 : i64, ldb = 2 : i64, ldc = 2 : i64}
  }
}

// -----

// Variadic inputs, an optional parameter, and 16-bit floats are accepted.
module {
  plan.program "p" {
    %a = plan.alloc : memref<4xbf16>
    %b = plan.alloc : memref<8xf16>
    %n = plan.alloc : memref<1xf32>
    plan.kernel "sum_squares" ins(%a, %b : memref<4xbf16>, memref<8xf16>) outs(%n : memref<1xf32>) {}
    plan.kernel "all_reduce" ins(%n : memref<1xf32>) outs(%n : memref<1xf32>) {group = "dp", op = "sum", n = 1 : i64, event = 1 : i64}
    plan.kernel "wait" {event = 1 : i64}
  }
}

// -----

// A fused elementwise body is parsed by the verifier as the runtime parses it at load.
module {
  plan.program "p" {
    %a = plan.alloc : memref<4xf32>
    // expected-error @+1 {{'fused_elementwise' has a body it cannot run: step 1 reads t3, which is not an earlier step}}
    plan.kernel "fused_elementwise" ins(%a : memref<4xf32>) outs(%a : memref<4xf32>) {body = "exp x0; mul t3 x0", outputs = array<i64: 1>, shape = array<i64: 4>, x_strides = array<i64: 1>}
  }
}

// -----

module {
  plan.program "p" {
    %a = plan.alloc : memref<4xf32>
    // expected-error @+1 {{'fused_elementwise' has a body it cannot run: step 0 'pow' takes 1 operand and an exponent}}
    plan.kernel "fused_elementwise" ins(%a : memref<4xf32>) outs(%a : memref<4xf32>) {body = "pow x0", outputs = array<i64: 0>, shape = array<i64: 4>, x_strides = array<i64: 1>}
  }
}

// -----

module {
  plan.program "p" {
    %a = plan.alloc : memref<4xf32>
    %b = plan.alloc : memref<4xf32>
    plan.kernel "fused_elementwise" ins(%a : memref<4xf32>) outs(%b : memref<4xf32>) {body = "const 2; pow x0 0.5; unary_grad sqrt x0 t1 t0; where x0 t2 t0; lt t3 x0", outputs = array<i64: 4>, shape = array<i64: 4>, x_strides = array<i64: 1>}
  }
}

// -----

// A collective's operands follow its data: one element type for x and y, and a float type for
// a reduction (which sums in f32 and rounds once).
module {
  plan.program "p" {
    %a = plan.alloc : memref<4xf32>
    %b = plan.alloc : memref<8xbf16>
    // expected-error @+1 {{'all_gather' has `x` of f32 but `y` of bf16; they must have one element type}}
    plan.kernel "all_gather" ins(%a : memref<4xf32>) outs(%b : memref<8xbf16>) {group = "dp", outer = 1 : i64, chunk = 4 : i64}
  }
}

// -----

module {
  plan.program "p" {
    %a = plan.alloc : memref<4xi32>
    // expected-error @+1 {{'all_reduce' input 0 (`x`) is i32; it takes f32, bf16 or f16}}
    plan.kernel "all_reduce" ins(%a : memref<4xi32>) outs(%a : memref<4xi32>) {group = "dp", n = 4 : i64, op = "sum"}
  }
}

// -----

module {
  plan.program "p" {
    %a = plan.alloc : memref<4xbf16>
    %b = plan.alloc : memref<8xbf16>
    plan.kernel "all_reduce" ins(%a : memref<4xbf16>) outs(%a : memref<4xbf16>) {group = "dp", n = 4 : i64, op = "sum"}
    plan.kernel "all_gather" ins(%a : memref<4xbf16>) outs(%b : memref<8xbf16>) {group = "dp", outer = 1 : i64, chunk = 4 : i64}
  }
}

// -----

// A multi-tensor call: each per-tensor role has an operand per tensor, an optional one all or
// none, and `n` lists as many tensors.
module {
  plan.program "p" {
    %g = plan.alloc : memref<4xf32>
    %s = plan.alloc : memref<f32>
    // expected-error @+1 {{'adamw' takes 6 outputs (or 8) for 2 tensors, not 7}}
    plan.kernel "adamw" ins(%g, %g, %s, %s : memref<4xf32>, memref<4xf32>, memref<f32>, memref<f32>) outs(%g, %g, %g, %g, %g, %g, %g : memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, n = array<i64: 4, 4>, weight_decay = 0.0 : f64}
  }
}

// -----

module {
  plan.program "p" {
    %s = plan.alloc : memref<f32>
    // expected-error @+1 {{'sgd' takes 2 inputs and 1 per tensor, for one tensor or more; not 2}}
    plan.kernel "sgd" ins(%s, %s : memref<f32>, memref<f32>) {momentum = 0.9 : f64, n = array<i64>, weight_decay = 0.0 : f64}
  }
}

// -----

module {
  plan.program "p" {
    %g = plan.alloc : memref<4xf32>
    %h = plan.alloc : memref<4xbf16>
    %s = plan.alloc : memref<f32>
    // expected-error @+1 {{'sgd' output 3 (`momentum`) is bf16; it takes f32}}
    plan.kernel "sgd" ins(%g, %g, %s, %s : memref<4xf32>, memref<4xf32>, memref<f32>, memref<f32>) outs(%g, %g, %g, %h : memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<4xbf16>) {momentum = 0.9 : f64, n = array<i64: 4, 4>, weight_decay = 0.0 : f64}
  }
}

// -----

module {
  plan.program "p" {
    %g = plan.alloc : memref<4xf32>
    %s = plan.alloc : memref<f32>
    // expected-error @+1 {{'sgd' lists 1 tensor in `n` but has operands for 2}}
    plan.kernel "sgd" ins(%g, %g, %s, %s : memref<4xf32>, memref<4xf32>, memref<f32>, memref<f32>) outs(%g, %g, %g, %g : memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>) {momentum = 0.9 : f64, n = array<i64: 8>, weight_decay = 0.0 : f64}
  }
}
