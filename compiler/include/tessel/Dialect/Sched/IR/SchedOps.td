//===- SchedOps.td - Ops of the pipeline schedule dialect --*- tablegen -*-===//
#ifndef TESSEL_SCHED_OPS
#define TESSEL_SCHED_OPS

include "SchedDialect.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"

def Sched_PipelineOp : Sched_Op<"pipeline"> {
  let summary = "A pipeline schedule over `stages` ranks";
  let description = [{
    `schedule` is `afab`, `1f1b`, `interleaved` or `zbh1`; `virtual` model chunks per rank
    (interleaved, `virtual_stages`); `microbatches` per optimizer step. The model's layers are
    split into `stages * virtual` chunks; chunk `c` of rank `r` is virtual stage
    `c * stages + r`. `layers` lists, per virtual stage, its first layer and its number of
    layers. The estimates come from the action lists under the cost model of the assignment:
    `bubble` (idle time over compute time) and, per rank, `in_flight` (the most micro-batches
    whose activations are alive at once).

    Each rank's ordered list of actions (forward and backward passes of a chunk, sends and
    receives between neighbours) is a function of the schedule, `stages`, `microbatches` and
    `virtual`: `buildSchedule` in common/schedule/Schedule.h, the one statement of it, which
    the compiler's estimates, `tessel estimate --svg / --trace` (which draws the lists) and the
    runtime (from the plan's pipeline settings) all call. The op is verified against it: a
    schedule the library cannot build or check is refused.

    ```mlir
    sched.pipeline "1f1b" stages 2 microbatches 4 virtual 1
        attributes {layers = array<i64: 0, 2, 2, 2>}
    ```
  }];
  let arguments = (ins StrAttr:$schedule, I64Attr:$stages, I64Attr:$microbatches,
                       I64Attr:$virtual_stages, OptionalAttr<DenseI64ArrayAttr>:$layers,
                       OptionalAttr<F64Attr>:$bubble, OptionalAttr<DenseI64ArrayAttr>:$in_flight);
  let assemblyFormat = [{
    $schedule `stages` $stages `microbatches` $microbatches `virtual` $virtual_stages
    attr-dict-with-keyword
  }];
  let hasVerifier = 1;
}

#endif // TESSEL_SCHED_OPS
