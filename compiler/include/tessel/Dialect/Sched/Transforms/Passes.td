//===- Passes.td - The sched dialect's passes --------------*- tablegen -*-===//
#ifndef TESSEL_DIALECT_SCHED_TRANSFORMS_PASSES
#define TESSEL_DIALECT_SCHED_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def PipelineSchedule : Pass<"tessel-pipeline-schedule", "mlir::ModuleOp"> {
  let summary = "Splits the layers into pipeline stages and writes the schedule";
  let description = [{
    With a `pp` axis larger than 1: the repeated layers are split into `pp * virtual` stages,
    by the spec's `stage_map` or, without one, by a cost model (multiply-adds of each layer's
    contractions and elements of its other ops, with the embedding counted on the first
    stage and the loss on the last, so those may get fewer layers; interleaving splits
    evenly). The schedule the spec names (AFAB, 1F1B, interleaved 1F1B, ZB-H1) becomes a
    `sched.pipeline` with the stages' layers; its action lists (one per pipeline rank, from
    common/schedule/Schedule.h) are checked for completeness and freedom from deadlock. The
    bubble (idle over compute time, unit costs forward 1, backward 2) and the peak
    micro-batches in flight per rank are read off the lists and recorded on the op and in the
    module's `#tessel.pipeline`.
  }];
  let dependentDialects = ["::tessel::sched::SchedDialect"];
}

def PipelineSplit : Pass<"tessel-pipeline-split", "mlir::ModuleOp"> {
  let summary = "Cuts the per-rank functions into the programs of the pipeline stages";
  let description = [{
    With a `pp` axis larger than 1, after partitioning: every op of `@forward_backward` is
    placed in a virtual stage (by its `graph.layer`, through the `sched.pipeline` layer runs;
    what comes before the layers goes with its first user, what comes after with the last
    stage) and a phase (forward: what the loss depends on; backward; and for ZB-H1 the
    weight-gradient part of backward that no earlier stage waits for). Each (stage, phase)
    becomes a function `@forward.c`, `@backward.c` (or `@backward_input.c` and
    `@backward_weight.c`) whose arguments and results named `vN` are the values that cross
    between them: the activations and gradients sent between neighbouring stages and what a
    stage keeps from its forward for its backward. `@forward` and `@sample` become
    `@eval.c` and `@sample.c` likewise. Parameters live on the stages that use them; a
    parameter used on several stages (a tied embedding) gets one gradient accumulation per
    stage, summed by `graph.tied_grad_sum` in the optimizer step. `@optimizer_step` becomes
    one function per stage that updates that stage's parameters; the squared-gradient sum of
    the clipping norm is all-reduced over `pp`. The stages holding each parameter are
    recorded in the module's `tessel.stages`.
  }];
}

#endif // TESSEL_DIALECT_SCHED_TRANSFORMS_PASSES
