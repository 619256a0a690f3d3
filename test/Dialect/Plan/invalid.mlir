// RUN: tessel-opt %s -split-input-file -verify-diagnostics
// The plan dialect's verifier errors.

module {
  // expected-error @+1 {{'plan.mesh' op gives axis 'tp' 1 ranks; an axis of one rank splits nothing and is left out}}
  plan.mesh ["dp", "tp"] sizes [2, 1]
}

// -----

module {
  // expected-error @+1 {{'plan.mesh' op names axis 'dp' twice or empty}}
  plan.mesh ["dp", "dp"] sizes [2, 2]
}

// -----

module {
  // expected-error @+1 {{'plan.mesh' op has 2 axes and 1 sizes}}
  plan.mesh ["dp", "tp"] sizes [2]
}

// -----

module {
  plan.mesh ["dp"] sizes [2]
  // expected-error @+1 {{'plan.mesh' op is the module's second mesh}}
  plan.mesh ["tp"] sizes [2]
}

// -----

module {
  // expected-error @+1 {{'plan.group' op needs the module's plan.mesh}}
  plan.group "world" axes []
}

// -----

module {
  plan.mesh ["dp", "tp"] sizes [2, 2]
  // expected-error @+1 {{'plan.group' op is named 'tp_dp' but spans 'dp_tp'}}
  plan.group "tp_dp" axes [0, 1]
}

// -----

module {
  plan.mesh ["dp", "tp"] sizes [2, 2]
  // expected-error @+1 {{'plan.group' op is named 'world' but spans 'tp'}}
  plan.group "world" axes [1]
}

// -----

module {
  plan.mesh ["dp", "tp"] sizes [2, 2]
  // expected-error @+1 {{'plan.group' op axes must be increasing indices into the mesh's 2 axes}}
  plan.group "dp" axes [2]
}

// -----

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
