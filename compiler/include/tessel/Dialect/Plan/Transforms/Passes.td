//===- Passes.td - The plan dialect's passes ---------------*- tablegen -*-===//
#ifndef TESSEL_DIALECT_PLAN_TRANSFORMS_PASSES
#define TESSEL_DIALECT_PLAN_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def FoldAccumulate : Pass<"tessel-fold-accumulate", "mlir::ModuleOp"> {
  let summary = "Lets the kernel that computes a gradient add it into its accumulator";
  let description = [{
    A parameter's gradient is summed into its accumulator (`grad.NAME` state) by an
    `accumulate` kernel. When the gradient is a buffer that one `gemm` (a weight's gradient)
    or `reduce` (a bias's) writes whole and only that `accumulate` reads, the kernel adds its
    result into the accumulator itself (its `accumulate` parameter; for a GEMM, BLAS beta =
    1): the buffer, the kernel and a pass over the gradient's memory go. A program that reads
    or writes the same accumulator between the two keeps both, so sums are never reordered.
    A reduce adds its rounded sum as `accumulate` did, so the bits are the same; a GEMM adds
    its product inside BLAS, the same bits when the accumulator holds zero (one micro-batch
    per step) and within rounding otherwise.

    ```mlir
    plan.kernel "gemm" ins(%x, %dy : ...) outs(%g : memref<384x1536xf32>) {...}
    %s = plan.state "grad.w" : memref<384x1536xf32>
    plan.kernel "accumulate" ins(%g : ...) outs(%s : ...) {n = 589824 : i64}
    // becomes
    %s = plan.state "grad.w" : memref<384x1536xf32>
    plan.kernel "gemm" ins(%x, %dy : ...) outs(%s : memref<384x1536xf32>) {accumulate = 1 : i64, ...}
    ```
  }];
}

def MixedPrecision : Pass<"tessel-mixed-precision", "mlir::ModuleOp"> {
  let summary = "Stores activations and the parameters' working copies in bf16 (or f16)";
  let description = [{
    Mixed precision as the spec's `precision` says, on the plan's buffers once every kernel
    call is known (after the lowering and `-tessel-fold-accumulate`, before memory planning,
    which then sizes each buffer by its element type). Every kernel computes in f32 whatever
    its operands' types (a device widens 16-bit operands and rounds 16-bit results to nearest
    even), so the rewrite only chooses where values are stored:

    - An arena buffer (a `plan.alloc` and its views) becomes 16-bit unless something needs it
      at full width: a program result the host reads, an operand of a control kernel, an
      operand the kernel catalogue declares `F32` (losses, statistics carried between
      kernels, gradients on their way to the optimizer, the optimizer's values), one that is
      not a float type (`AnyType`), or a buffer a kernel adds into (`accumulate`).
    - A collective's operands follow their data (the catalogue's `Moved` and `Reduced`): the
      buffers one collective call ties, and the two ends of a transfer (a `send` and the
      `recv`s of its tag, in any program), narrow together, or stay f32 together when one of
      them must (an accumulator, an `F32` operand, an input). A communicator sums 16-bit
      values in f32 and rounds once. So weight gradients are computed from 16-bit
      activations into f32, reduced over the data axes in f32 and accumulated in f32, while
      activations cross tp, sp and ep in 16 bits.
    - Parameters (`plan.tensor` role `param`) stay f32: they are the master weights the
      optimizer updates. A parameter that some kernel reads as a `Float` operand gets a
      persistent 16-bit working copy, `plan.tensor "working.<name>" role "working" of
      "<name>"` (same dims, split and stages), and those reads take it instead (outside
      `optimizer_step`), as does a collective that gathers it into a 16-bit buffer (ZeRO-3).
      `optimizer_step` refreshes each copy right after its last write of the master (AdamW's
      `working` output, in the same pass, where AdamW writes the whole master; else a `copy`
      kernel), so the copies cost one rounding per weight per step, not per micro-batch, and a step that `guard_finite` ends leaves master and copy alike. A new
      program per stage, `working_copies`, makes every copy of the stage from its master; the
      runtime runs it whenever it sets the masters itself (initialisation, a checkpoint).
      Working copies are never checkpointed: they follow from the masters.
    - Program inputs and other persistent state keep their types.
    - A `fused_elementwise` call computes its whole body in f32, where its unfused kernels
      would each have stored a value: its `rounded` steps (with `narrow`, the 16-bit type)
      are those whose value an unfused kernel would store 16-bit (every step no output
      takes, and those whose output buffer is 16-bit), rounded as they compute, so fusion
      and recomputation do not change a 16-bit plan's bits.

    `precision` is the spec's word (fp32, bf16, fp16); empty reads the module's
    `tessel.train` precision. Under fp32 the pass changes nothing.

    ```mlir
    plan.tensor "working.w" role "working" of "w" ... : memref<128x512xbf16>
    plan.program "forward_backward" {
      %w16 = plan.state "working.w" : memref<128x512xbf16>
      plan.kernel "gemm" ins(%x, %w16 : memref<1024x128xbf16>, memref<128x512xbf16>) ...
    }
    plan.program "optimizer_step" {
      plan.kernel "adamw" ... outs(%w, %m, %v, %w16 : ..., memref<128x512xbf16>)
    }
    plan.program "working_copies" { ... a copy from master to working for every parameter ... }
    ```
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"\"",
           "fp32, bf16 or fp16; empty: the module's tessel.train precision">
  ];
}

def GroupOptimizer : Pass<"tessel-group-optimizer", "mlir::ModuleOp"> {
  let summary = "Merges the optimizer's per-tensor calls into multi-tensor calls";
  let description = [{
    The lowering calls `adamw` (or `sgd`) once per parameter; a GPU would launch a kernel for
    each, and a model has hundreds of small tensors (norms, biases). This pass merges the calls
    of a program that share their learning rate, clipping factor, hyperparameters and the type
    of their working copies into one call over many tensors (the catalogue's per-tensor
    operands, `n` listing each tensor's elements), which the devices run in a few launches.
    Each tensor's arithmetic is unchanged, so the bits are the same.

    Calls need not be adjacent: under ZeRO each one is preceded by the slice of its shard and
    followed by the gather of the result. The ops the merged calls depend on (through values,
    or through a buffer one writes and the other reads or writes) move before the merged call,
    the rest after it, each set in its order; collectives keep their order among themselves,
    and nothing moves across a control kernel (`guard_finite`, `wait`). A call that would have
    to move both before and after another starts a new group, as does one whose joining would
    make the ops moved before the merged call allocate more than `max-bytes` of the arena
    (default: the spec's `bucket_bytes`, 25 MiB when absent): those buffers (ZeRO's shards of
    the parameters) stay alive until the merged call, so this bounds what grouping adds to the
    program's peak. Without ZeRO nothing is allocated before the calls, and a program has one
    call per key.

    ```mlir
    plan.kernel "adamw" ins(%g1, %lr, %c : ...) outs(%p1, %m1, %v1 : ...) {n = array<i64: 8192>, ...}
    plan.kernel "adamw" ins(%g2, %lr, %c : ...) outs(%p2, %m2, %v2 : ...) {n = array<i64: 128>, ...}
    // becomes
    plan.kernel "adamw" ins(%g1, %g2, %lr, %c : ...) outs(%p1, %p2, %m1, %m2, %v1, %v2 : ...)
        {n = array<i64: 8192, 128>, ...}
    ```
  }];
  let options = [
    Option<"maxBytes", "max-bytes", "int64_t", /*default=*/"0",
           "the most arena bytes the ops moved before a merged call may allocate; 0: the spec's bucket_bytes">
  ];
}

def PlanMemory : Pass<"tessel-plan-memory", "mlir::ModuleOp"> {
  let summary = "Assigns arena offsets from liveness";
  let description = [{
    In each program, a buffer lives from its first use to its last (through views; from the
    start for program inputs, to the end for program outputs: tessel/Analysis/PlanLiveness.h). Buffers are placed largest first at the lowest
    64-byte-aligned offset that overlaps no buffer live at the same time. Sets `offset` on
    every `plan.alloc` and `plan.input` and the program's `arena_bytes` (its peak).
  }];
}

#endif // TESSEL_DIALECT_PLAN_TRANSFORMS_PASSES
