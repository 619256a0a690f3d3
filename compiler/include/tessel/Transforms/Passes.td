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
  let summary = "Builds @optimizer_step: clipping, learning-rate schedule and AdamW";
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

#endif // TESSEL_TRANSFORMS_PASSES
