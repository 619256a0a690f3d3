// RUN: tessel-opt %s -split-input-file -tessel-mixed-precision | FileCheck %s
// RUN: tessel-opt %s -split-input-file -tessel-mixed-precision=precision=fp16 \
// RUN:   | FileCheck %s --check-prefix=F16
// RUN: tessel-opt %s -split-input-file -tessel-mixed-precision=precision=fp32 > %t.fp32
// RUN: tessel-opt %s -split-input-file > %t.none
// RUN: diff %t.fp32 %t.none
// RUN: not tessel-opt %s -split-input-file -tessel-mixed-precision=precision=fp8 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BAD
// BAD: error: -tessel-mixed-precision: precision 'fp8' is not fp32, bf16 or fp16
// -tessel-mixed-precision under the module's `precision = "bf16"` (and the option's fp16 and
// fp32): which buffers become 16-bit, where the parameters' working copies are made, and what
// stays f32.

// A linear layer, its loss and its weight gradient. w's working copy is a persistent bf16
// tensor that both gemms read; the optimizer remakes it right after it updates w, and the
// program working_copies makes it for the runtime's use; the activations h and y are
// bf16, and so is a copy of the logits' gradient that is all-reduced (a collective's operands
// follow their data); the loss (an `F32` operand of cross_entropy), the gradient accumulator
// (state), the seed of the loss gradient (`F32`) and a program result stay f32; the ids stay
// i32.
// CHECK: plan.tensor "w" role "param"
// CHECK: plan.tensor "working.w" role "working" of "w" init "zeros"(0.000000e+00, 0.000000e+00) dims ["embed", "vocab"] : memref<8x16xbf16>
// CHECK-LABEL: plan.program "forward_backward"
// CHECK: %[[X:.*]] = plan.input "x" : memref<4x8xf32>
// CHECK: %[[H:.*]] = plan.alloc : memref<4x16xbf16>
// CHECK-NEXT: %[[W16:.*]] = plan.state "working.w" : memref<8x16xbf16>
// CHECK-NEXT: plan.kernel "gemm" ins(%[[X]], %[[W16]] : memref<4x8xf32>, memref<8x16xbf16>) outs(%[[H]] : memref<4x16xbf16>)
// CHECK: %[[L:.*]] = plan.alloc : memref<f32>
// CHECK: plan.kernel "cross_entropy" ins(%[[H]], %{{.*}} : memref<4x16xbf16>, memref<4xi32>) outs(%[[L]] : memref<f32>)
// CHECK: %[[ONE:.*]] = plan.alloc : memref<f32>
// CHECK: %[[DH:.*]] = plan.alloc : memref<4x16xbf16>
// CHECK: plan.kernel "cross_entropy_grad" ins(%[[H]], %{{.*}}, %[[ONE]] : memref<4x16xbf16>, memref<4xi32>, memref<f32>) outs(%[[DH]] : memref<4x16xbf16>)
// CHECK: %[[GW:.*]] = plan.state "grad.w" : memref<8x16xf32>
// CHECK: plan.kernel "gemm" ins(%[[X]], %[[DH]] : memref<4x8xf32>, memref<4x16xbf16>) outs(%[[GW]] : memref<8x16xf32>)
// CHECK: %[[DX:.*]] = plan.alloc : memref<4x8xbf16>
// CHECK: plan.kernel "gemm" ins(%[[DH]], %[[W16]] : memref<4x16xbf16>, memref<8x16xbf16>) outs(%[[DX]] : memref<4x8xbf16>)
// CHECK: %[[R:.*]] = plan.alloc : memref<4x16xbf16>
// CHECK: plan.kernel "all_reduce" ins(%[[R]] : memref<4x16xbf16>) outs(%[[R]] : memref<4x16xbf16>)
// CHECK: plan.output "loss", %[[L]] : memref<f32>
// The optimizer updates the fp32 master and, in the same pass, remakes the copy from it
// (AdamW's `working` output).
// CHECK-LABEL: plan.program "optimizer_step"
// CHECK: %[[M:.*]] = plan.state "w" : memref<8x16xf32>
// CHECK: %[[C:.*]] = plan.state "working.w" : memref<8x16xbf16>
// CHECK-NEXT: plan.kernel "adamw" ins({{.*}} : memref<8x16xf32>, memref<f32>, memref<f32>) outs(%[[M]], %{{.*}}, %{{.*}}, %[[C]] : memref<8x16xf32>, memref<8x16xf32>, memref<8x16xf32>, memref<8x16xbf16>)
// CHECK-NEXT: {{^  }$}}
// CHECK-LABEL: plan.program "working_copies"
// CHECK-NEXT: %[[M:.*]] = plan.state "w" : memref<8x16xf32>
// CHECK-NEXT: %[[C:.*]] = plan.state "working.w" : memref<8x16xbf16>
// CHECK-NEXT: plan.kernel "copy" ins(%[[M]] : memref<8x16xf32>) outs(%[[C]] : memref<8x16xbf16>)
// CHECK-NEXT: {{^  }$}}

// F16: plan.tensor "working.w" role "working" of "w" {{.*}} : memref<8x16xf16>
// F16-LABEL: plan.program "forward_backward"
// F16: plan.kernel "cross_entropy" ins(%{{.*}}, %{{.*}} : memref<4x16xf16>, memref<4xi32>) outs(%{{.*}} : memref<f32>)

// Under fp32 nothing changes (the diff above).
module attributes {tessel.train = #tessel.train<precision = "bf16">} {
  plan.tensor "w" role "param" init "normal"(0.0, 0.02) dims ["embed", "vocab"] : memref<8x16xf32>
  plan.tensor "grad.w" role "grad" of "w" init "zeros"(0.0, 0.0) dims ["embed", "vocab"] : memref<8x16xf32>
  plan.tensor "adam_m.w" role "adam_m" of "w" init "zeros"(0.0, 0.0) dims ["embed", "vocab"] : memref<8x16xf32>
  plan.tensor "adam_v.w" role "adam_v" of "w" init "zeros"(0.0, 0.0) dims ["embed", "vocab"] : memref<8x16xf32>
  plan.program "forward_backward" {
    %x = plan.input "x" : memref<4x8xf32>
    %t = plan.input "targets" : memref<4xi32>
    %w = plan.state "w" : memref<8x16xf32>
    %h = plan.alloc : memref<4x16xf32>
    plan.kernel "gemm" ins(%x, %w : memref<4x8xf32>, memref<8x16xf32>) outs(%h : memref<4x16xf32>) {a_batch_strides = array<i64>, b_batch_strides = array<i64>, batch_shape = array<i64>, c_batch_strides = array<i64>, k = 8 : i64, lda = 8 : i64, ldb = 16 : i64, ldc = 16 : i64, m = 4 : i64, n = 16 : i64, trans_a = 0 : i64, trans_b = 0 : i64}
    %l = plan.alloc : memref<f32>
    plan.kernel "cross_entropy" ins(%h, %t : memref<4x16xf32>, memref<4xi32>) outs(%l : memref<f32>) {cols = 16 : i64, rows = 4 : i64, scale = 0.25 : f64}
    %one = plan.alloc : memref<f32>
    plan.kernel "fill" outs(%one : memref<f32>) {n = 1 : i64, value = 1.0 : f64}
    %dh = plan.alloc : memref<4x16xf32>
    plan.kernel "cross_entropy_grad" ins(%h, %t, %one : memref<4x16xf32>, memref<4xi32>, memref<f32>) outs(%dh : memref<4x16xf32>) {cols = 16 : i64, rows = 4 : i64, scale = 0.25 : f64}
    %gw = plan.state "grad.w" : memref<8x16xf32>
    plan.kernel "gemm" ins(%x, %dh : memref<4x8xf32>, memref<4x16xf32>) outs(%gw : memref<8x16xf32>) {a_batch_strides = array<i64>, accumulate = 1 : i64, b_batch_strides = array<i64>, batch_shape = array<i64>, c_batch_strides = array<i64>, k = 4 : i64, lda = 8 : i64, ldb = 16 : i64, ldc = 16 : i64, m = 8 : i64, n = 16 : i64, trans_a = 1 : i64, trans_b = 0 : i64}
    %dx = plan.alloc : memref<4x8xf32>
    plan.kernel "gemm" ins(%dh, %w : memref<4x16xf32>, memref<8x16xf32>) outs(%dx : memref<4x8xf32>) {a_batch_strides = array<i64>, b_batch_strides = array<i64>, batch_shape = array<i64>, c_batch_strides = array<i64>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldc = 8 : i64, m = 4 : i64, n = 8 : i64, trans_a = 0 : i64, trans_b = 1 : i64}
    %r = plan.alloc : memref<4x16xf32>
    plan.kernel "copy" ins(%dh : memref<4x16xf32>) outs(%r : memref<4x16xf32>) {shape = array<i64: 4, 16>, x_strides = array<i64: 16, 1>}
    plan.kernel "all_reduce" ins(%r : memref<4x16xf32>) outs(%r : memref<4x16xf32>) {group = "dp", n = 64 : i64, op = "sum"}
    plan.output "loss", %l : memref<f32>
  }
  plan.program "optimizer_step" {
    %g = plan.state "grad.w" : memref<8x16xf32>
    %lr = plan.alloc : memref<f32>
    plan.kernel "fill" outs(%lr : memref<f32>) {n = 1 : i64, value = 1.0e-3 : f64}
    %c = plan.alloc : memref<f32>
    plan.kernel "fill" outs(%c : memref<f32>) {n = 1 : i64, value = 1.0 : f64}
    %w = plan.state "w" : memref<8x16xf32>
    %m = plan.state "adam_m.w" : memref<8x16xf32>
    %v = plan.state "adam_v.w" : memref<8x16xf32>
    plan.kernel "adamw" ins(%g, %lr, %c : memref<8x16xf32>, memref<f32>, memref<f32>) outs(%w, %m, %v : memref<8x16xf32>, memref<8x16xf32>, memref<8x16xf32>) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, n = array<i64: 128>, weight_decay = 0.0 : f64}
  }
}

// -----

// Views follow their buffer: a bf16 buffer's views are bf16, and a parameter read through a
// view is read through the same view of its working copy, made once. A plan without an
// optimizer step still has its working_copies program.
// The master, no longer read, goes with its views.
// CHECK-LABEL: plan.program "views"
// CHECK-NOT: plan.state "w"
// CHECK: %[[A:.*]] = plan.alloc : memref<4x8xbf16>
// CHECK-NEXT: %[[AV:.*]] = plan.view %[[A]] : memref<4x8xbf16> to memref<32xbf16>
// CHECK-NEXT: %[[W16:.*]] = plan.state "working.w" : memref<4x2x8xbf16>
// CHECK-NEXT: %[[V16:.*]] = plan.view %[[W16]] offset 8 : memref<4x2x8xbf16> to memref<4x8xbf16>
// CHECK-NEXT: plan.kernel "unary" ins(%[[V16]] : memref<4x8xbf16>) outs(%[[AV]] : memref<32xbf16>)
// The last result is read by the host: f32, and so are its views.
// CHECK: %[[O:.*]] = plan.alloc : memref<32xf32>
// CHECK-NEXT: plan.kernel "unary" ins(%[[V16]] : memref<4x8xbf16>) outs(%[[O]] : memref<32xf32>)
// CHECK-NEXT: plan.view %[[O]] : memref<32xf32> to memref<4x8xf32>
// CHECK: plan.program "working_copies"
// CHECK-NEXT: plan.state "w"
// CHECK-NEXT: plan.state "working.w"
// CHECK-NEXT: plan.kernel "copy"
module attributes {tessel.train = #tessel.train<precision = "bf16">} {
  plan.tensor "w" role "param" init "normal"(0.0, 0.02) dims ["a", "b", "c"] : memref<4x2x8xf32>
  plan.program "views" {
    %w = plan.state "w" : memref<4x2x8xf32>
    %wv = plan.view %w offset 8 : memref<4x2x8xf32> to memref<4x8xf32>
    %a = plan.alloc : memref<4x8xf32>
    %av = plan.view %a : memref<4x8xf32> to memref<32xf32>
    plan.kernel "unary" ins(%wv : memref<4x8xf32>) outs(%av : memref<32xf32>) {n = 32 : i64, op = "exp"}
    %o = plan.alloc : memref<32xf32>
    plan.kernel "unary" ins(%wv : memref<4x8xf32>) outs(%o : memref<32xf32>) {n = 32 : i64, op = "neg"}
    %ov = plan.view %o : memref<32xf32> to memref<4x8xf32>
    plan.output "y", %ov : memref<4x8xf32>
  }
}

// -----

// A collective's operands follow their data. A ZeRO-3 gather of a weight's shard gathers the
// shard's working copy into a bf16 buffer; a tensor-parallel partial sum is reduced in bf16
// (the communicator sums in f32 and rounds once); the weight gradient and its reduce-scatter
// stay f32, tied through the collective to the f32 accumulate into the gradient.
// CHECK: plan.tensor "working.w" role "working" of "w" {{.*}} : memref<4x8xbf16>
// CHECK-LABEL: plan.program "forward_backward"
// CHECK-NOT: plan.state "w"
// CHECK: %[[WG:.*]] = plan.alloc : memref<8x8xbf16>
// CHECK-NEXT: %[[W16:.*]] = plan.state "working.w" : memref<4x8xbf16>
// CHECK-NEXT: plan.kernel "all_gather" ins(%[[W16]] : memref<4x8xbf16>) outs(%[[WG]] : memref<8x8xbf16>)
// CHECK: %[[P:.*]] = plan.alloc : memref<2x8xbf16>
// CHECK: plan.kernel "all_reduce" ins(%[[P]] : memref<2x8xbf16>) outs(%[[P]] : memref<2x8xbf16>)
// CHECK: %[[G:.*]] = plan.alloc : memref<8x8xf32>
// CHECK: %[[GS:.*]] = plan.alloc : memref<4x8xf32>
// CHECK-NEXT: plan.kernel "reduce_scatter" ins(%[[G]] : memref<8x8xf32>) outs(%[[GS]] : memref<4x8xf32>)
module attributes {tessel.train = #tessel.train<precision = "bf16">} {
  plan.tensor "w" role "param" init "normal"(0.0, 0.02) dims ["a", "b"] split ["dp", ""] : memref<4x8xf32>
  plan.tensor "grad.w" role "grad" of "w" init "zeros"(0.0, 0.0) dims ["a", "b"] split ["dp", ""] : memref<4x8xf32>
  plan.program "forward_backward" {
    %w = plan.state "w" : memref<4x8xf32>
    %wg = plan.alloc : memref<8x8xf32>
    plan.kernel "all_gather" ins(%w : memref<4x8xf32>) outs(%wg : memref<8x8xf32>) {chunk = 32 : i64, group = "dp", outer = 1 : i64}
    %x = plan.input "x" : memref<2x8xf32>
    %p = plan.alloc : memref<2x8xf32>
    plan.kernel "gemm" ins(%x, %wg : memref<2x8xf32>, memref<8x8xf32>) outs(%p : memref<2x8xf32>) {a_batch_strides = array<i64>, b_batch_strides = array<i64>, batch_shape = array<i64>, c_batch_strides = array<i64>, k = 8 : i64, lda = 8 : i64, ldb = 8 : i64, ldc = 8 : i64, m = 2 : i64, n = 8 : i64, trans_a = 0 : i64, trans_b = 0 : i64}
    plan.kernel "all_reduce" ins(%p : memref<2x8xf32>) outs(%p : memref<2x8xf32>) {group = "tp", n = 16 : i64, op = "sum"}
    %h = plan.alloc : memref<2x8xf32>
    plan.kernel "unary" ins(%p : memref<2x8xf32>) outs(%h : memref<2x8xf32>) {n = 16 : i64, op = "exp"}
    %g = plan.alloc : memref<8x8xf32>
    plan.kernel "gemm" ins(%x, %h : memref<2x8xf32>, memref<2x8xf32>) outs(%g : memref<8x8xf32>) {a_batch_strides = array<i64>, b_batch_strides = array<i64>, batch_shape = array<i64>, c_batch_strides = array<i64>, k = 2 : i64, lda = 8 : i64, ldb = 8 : i64, ldc = 8 : i64, m = 8 : i64, n = 8 : i64, trans_a = 1 : i64, trans_b = 0 : i64}
    %gs = plan.alloc : memref<4x8xf32>
    plan.kernel "reduce_scatter" ins(%g : memref<8x8xf32>) outs(%gs : memref<4x8xf32>) {chunk = 32 : i64, group = "dp", outer = 1 : i64}
    %acc = plan.state "grad.w" : memref<4x8xf32>
    plan.kernel "accumulate" ins(%gs : memref<4x8xf32>) outs(%acc : memref<4x8xf32>) {n = 32 : i64}
  }
}

// -----

// The two ends of a transfer, a send and the receive of its tag in another program, narrow
// together: tag 1's receiver reads it as bf16, so both ends are bf16; tag 2's receiver hands
// it to the host, so both ends stay f32.
// CHECK-LABEL: plan.program "sender"
// CHECK: plan.kernel "send" ins(%{{.*}} : memref<8xbf16>) {{{.*}}tag = 1
// CHECK: plan.kernel "send" ins(%{{.*}} : memref<8xf32>) {{{.*}}tag = 2
// CHECK-LABEL: plan.program "receiver"
// CHECK: plan.kernel "recv" outs(%{{.*}} : memref<8xbf16>) {{{.*}}tag = 1
// CHECK: plan.kernel "recv" outs(%{{.*}} : memref<8xf32>) {{{.*}}tag = 2
module attributes {tessel.train = #tessel.train<precision = "bf16">} {
  plan.program "sender" {
    %x = plan.input "x" : memref<8xf32>
    %a = plan.alloc : memref<8xf32>
    plan.kernel "unary" ins(%x : memref<8xf32>) outs(%a : memref<8xf32>) {n = 8 : i64, op = "exp"}
    plan.kernel "send" ins(%a : memref<8xf32>) {group = "pp", n = 8 : i64, peer = 1 : i64, tag = 1 : i64}
    %b = plan.alloc : memref<8xf32>
    plan.kernel "unary" ins(%x : memref<8xf32>) outs(%b : memref<8xf32>) {n = 8 : i64, op = "neg"}
    plan.kernel "send" ins(%b : memref<8xf32>) {group = "pp", n = 8 : i64, peer = 1 : i64, tag = 2 : i64}
  }
  plan.program "receiver" {
    %a = plan.alloc : memref<8xf32>
    plan.kernel "recv" outs(%a : memref<8xf32>) {group = "pp", n = 8 : i64, peer = 0 : i64, tag = 1 : i64}
    %h = plan.alloc : memref<8xf32>
    plan.kernel "unary" ins(%a : memref<8xf32>) outs(%h : memref<8xf32>) {n = 8 : i64, op = "exp"}
    %b = plan.alloc : memref<8xf32>
    plan.kernel "recv" outs(%b : memref<8xf32>) {group = "pp", n = 8 : i64, peer = 0 : i64, tag = 2 : i64}
    plan.output "y", %b : memref<8xf32>
  }
}

// -----

// A value one program outputs and another inputs by name (a pipeline stage boundary, a
// stashed activation) narrows with every input of its name: "h" is bf16 at both ends. "s" stays f32 at both ends, since its reader accumulates into it;
// "y", which no program inputs, is the host's and stays f32, as does the host input "x".
// CHECK-LABEL: plan.program "forward.0"
// CHECK: %[[X:.*]] = plan.input "x" : memref<8xf32>
// CHECK: %[[H:.*]] = plan.alloc : memref<8xbf16>
// CHECK: %[[S:.*]] = plan.alloc : memref<8xf32>
// CHECK: plan.output "h", %[[H]] : memref<8xbf16>
// CHECK: plan.output "s", %[[S]] : memref<8xf32>
// CHECK-LABEL: plan.program "forward.1"
// CHECK: %[[H1:.*]] = plan.input "h" : memref<8xbf16>
// CHECK: %[[S1:.*]] = plan.input "s" : memref<8xf32>
// CHECK: %[[Y:.*]] = plan.alloc : memref<8xf32>
// CHECK: plan.kernel "accumulate" ins(%[[Y]] : memref<8xf32>) outs(%[[S1]] : memref<8xf32>)
// CHECK: plan.output "y", %[[Y]] : memref<8xf32>
module attributes {tessel.train = #tessel.train<precision = "bf16">} {
  plan.program "forward.0" {
    %x = plan.input "x" : memref<8xf32>
    %h = plan.alloc : memref<8xf32>
    plan.kernel "unary" ins(%x : memref<8xf32>) outs(%h : memref<8xf32>) {n = 8 : i64, op = "exp"}
    %s = plan.alloc : memref<8xf32>
    plan.kernel "unary" ins(%x : memref<8xf32>) outs(%s : memref<8xf32>) {n = 8 : i64, op = "neg"}
    plan.output "h", %h : memref<8xf32>
    plan.output "s", %s : memref<8xf32>
  }
  plan.program "forward.1" {
    %h = plan.input "h" : memref<8xf32>
    %s = plan.input "s" : memref<8xf32>
    %y = plan.alloc : memref<8xf32>
    plan.kernel "unary" ins(%h : memref<8xf32>) outs(%y : memref<8xf32>) {n = 8 : i64, op = "exp"}
    plan.kernel "accumulate" ins(%y : memref<8xf32>) outs(%s : memref<8xf32>) {n = 8 : i64}
    plan.output "y", %y : memref<8xf32>
  }
}

// -----

// Another optimizer (sgd) leaves the copy to a `copy` right after its update.
// CHECK-LABEL: plan.program "optimizer_step"
// CHECK: plan.kernel "sgd"
// CHECK-NEXT: %[[M:.*]] = plan.state "w" : memref<8xf32>
// CHECK-NEXT: %[[C:.*]] = plan.state "working.w" : memref<8xbf16>
// CHECK-NEXT: plan.kernel "copy" ins(%[[M]] : memref<8xf32>) outs(%[[C]] : memref<8xbf16>)
module attributes {tessel.train = #tessel.train<precision = "bf16">} {
  plan.tensor "w" role "param" init "normal"(0.0, 0.02) dims ["a"] : memref<8xf32>
  plan.tensor "grad.w" role "grad" of "w" init "zeros"(0.0, 0.0) dims ["a"] : memref<8xf32>
  plan.tensor "momentum.w" role "momentum" of "w" init "zeros"(0.0, 0.0) dims ["a"] : memref<8xf32>
  plan.program "forward_backward" {
    %w = plan.state "w" : memref<8xf32>
    %h = plan.alloc : memref<8xf32>
    plan.kernel "unary" ins(%w : memref<8xf32>) outs(%h : memref<8xf32>) {n = 8 : i64, op = "exp"}
    %g = plan.state "grad.w" : memref<8xf32>
    plan.kernel "accumulate" ins(%h : memref<8xf32>) outs(%g : memref<8xf32>) {n = 8 : i64}
  }
  plan.program "optimizer_step" {
    %g = plan.state "grad.w" : memref<8xf32>
    %lr = plan.alloc : memref<f32>
    plan.kernel "fill" outs(%lr : memref<f32>) {n = 1 : i64, value = 1.0e-3 : f64}
    %c = plan.alloc : memref<f32>
    plan.kernel "fill" outs(%c : memref<f32>) {n = 1 : i64, value = 1.0 : f64}
    %w = plan.state "w" : memref<8xf32>
    %b = plan.state "momentum.w" : memref<8xf32>
    plan.kernel "sgd" ins(%g, %lr, %c : memref<8xf32>, memref<f32>, memref<f32>) outs(%w, %b : memref<8xf32>, memref<8xf32>) {momentum = 0.9 : f64, n = array<i64: 8>, weight_decay = 0.0 : f64}
  }
}
