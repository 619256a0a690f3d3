//===- Passes.td - Tessel's conversions between dialects -*- tablegen -*-===//
#ifndef TESSEL_CONVERSION_PASSES
#define TESSEL_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def LowerToPlan : Pass<"tessel-lower-to-plan", "mlir::ModuleOp"> {
  let summary = "Lowers the training functions to plan programs of kernel calls";
  let description = [{
    Each function becomes a `plan.program` (`forward` is named `eval`): every tensor value
    gets a buffer (a `plan.alloc`, or `plan.state` for parameters, gradients and moments),
    and every graph op one or more `plan.kernel` calls whose parameters resolve the named
    dims into sizes and strides. A contraction becomes a strided batched GEMM; an operand
    whose layout no GEMM can read is first copied into one it can. Splits and merges are
    views of the same bytes. The graph functions are removed, and the mesh they were
    partitioned over (`shard.grid`, from the spec's layout) becomes the plan's `plan.mesh`
    with one `plan.group` per set of its axes (and `world`), which the collectives name.

    A dialect conversion: tensors become memrefs, and the patterns are grouped by op family
    (elementwise, contraction, normalization, loss, attention, data movement, collectives,
    training state), one file each under `compiler/lib/Conversion/GraphToPlan/`. An op that
    cannot be lowered is reported with the reason, and the conversion goes on, so that one
    run reports every such op.
  }];
  let dependentDialects = ["::tessel::plan::PlanDialect", "::mlir::memref::MemRefDialect"];
}

#endif // TESSEL_CONVERSION_PASSES
