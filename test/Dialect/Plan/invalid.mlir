// RUN: tessel-opt %s -split-input-file -verify-diagnostics
// The plan dialect's verifier errors.
//
// tessel-opt does not register the plan dialect yet (see test/Dialect/Plan/ops.mlir).

module {
  plan.program "p" {
    %a = plan.alloc : memref<4x8xf32>
    // expected-error @+1 {{'plan.view' op cannot view 'memref<4x8xf32>' as 'memref<33xf32>': a view keeps the element type and count}}
    %v = plan.view %a : memref<4x8xf32> to memref<33xf32>
  }
}

// -----

module {
  plan.program "p" {
    %a = plan.alloc : memref<4x8xf32>
    // expected-error @+1 {{'plan.view' op cannot view 'memref<4x8xf32>' as 'memref<32xi32>': a view keeps the element type and count}}
    %v = plan.view %a : memref<4x8xf32> to memref<32xi32>
  }
}

// -----

func.func @program_outside_module() {
  // expected-error @+1 {{'plan.program' op expects parent op 'builtin.module'}}
  plan.program "p" {
    %a = plan.alloc : memref<4xf32>
  }
  return
}
