//===- Passes.td - Tessel's passes -------------------------*- tablegen -*-===//
#ifndef TESSEL_TRANSFORMS_PASSES
#define TESSEL_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"tessel-autodiff", "mlir::ModuleOp"> {
  let summary = "Derives the forward-backward function from @forward";
  let description = [{
    Clones `@forward` into `@forward_backward`, which computes the loss, then the gradient of
    every parameter by walking the ops in reverse and asking each for its gradient rule
    (DifferentiableOpInterface), and adds each parameter's gradient into its accumulator with
    `graph.accumulate_grad`. The loss gradient is seeded with 1 / accumulation, so that the
    gradients summed over a step's micro-batches are those of the mean loss over the whole
    step batch.

    Each dropout gets a mask number shared by its forward and backward uses. `@forward` stays
    as the evaluation function, with dropout removed (evaluation does not drop).
  }];
  let dependentDialects = ["::tessel::graph::GraphDialect", "::mlir::func::FuncDialect"];
}

def BuildOptimizer : Pass<"tessel-optimizer", "mlir::ModuleOp"> {
  let summary = "Builds @optimizer_step: clipping, learning-rate schedule, AdamW or SGD";
  let description = [{
    From the module's `tessel.train` settings and the parameters that `@forward_backward`
    accumulates gradients for, emits `@optimizer_step() -> (grad_norm, lr)`: the global
    gradient norm, the clipping coefficient, the learning rate of the current step, one
    `graph.adamw` per parameter and the clearing of every accumulator.
  }];
  let dependentDialects = ["::tessel::graph::GraphDialect", "::mlir::func::FuncDialect"];
}

def DeriveSampler : Pass<"tessel-derive-sampler", "mlir::ModuleOp"> {
  let summary = "Derives @sample: the logits of one sequence, for text generation";
  let description = [{
    Clones `@forward` (already free of dropout) into `@sample(tokens) -> logits`: the batch
    dim becomes 1 wherever it appears, and the function returns the logits that the final
    cross-entropy read instead of the loss. Types carry dim names, so the batch dim is found
    by name in every value.
  }];
  let dependentDialects = ["::tessel::graph::GraphDialect", "::mlir::func::FuncDialect"];
}

def LowerToPlan : Pass<"tessel-lower-to-plan", "mlir::ModuleOp"> {
  let summary = "Lowers the training functions to plan programs of kernel calls";
  let description = [{
    Each function becomes a `plan.program` (`forward` is named `eval`): every tensor value
    gets a buffer (a `plan.alloc`, or `plan.state` for parameters, gradients and moments),
    and every graph op one or more `plan.kernel` calls whose parameters resolve the named
    dims into sizes and strides. A contraction becomes a strided batched GEMM; an operand
    whose layout no GEMM can read is first copied into one it can. Splits and merges are
    views of the same bytes. The graph functions are removed.
  }];
  let dependentDialects = ["::tessel::plan::PlanDialect", "::mlir::memref::MemRefDialect"];
}

def PlanMemory : Pass<"tessel-plan-memory", "mlir::ModuleOp"> {
  let summary = "Assigns arena offsets from liveness";
  let description = [{
    In each program, a buffer lives from its allocation to its last use (through views,
    and to the end for program outputs). Buffers are placed largest first at the lowest
    64-byte-aligned offset that overlaps no buffer live at the same time. Sets `offset` on
    every `plan.alloc` and `plan.input` and the program's `arena_bytes` (its peak).
  }];
}

#endif // TESSEL_TRANSFORMS_PASSES
