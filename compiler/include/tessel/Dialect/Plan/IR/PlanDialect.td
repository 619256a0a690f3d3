//===- PlanDialect.td - The plan dialect -------------------*- tablegen -*-===//
#ifndef TESSEL_PLAN_DIALECT
#define TESSEL_PLAN_DIALECT

include "mlir/IR/OpBase.td"

def Plan_Dialect : Dialect {
  let name = "plan";
  let cppNamespace = "::tessel::plan";
  let summary = "What the runtime executes: kernel calls on buffers at static offsets";
  let description = [{
    The last IR level. A module holds the persistent state (`plan.tensor`: parameters,
    gradient accumulators, optimizer moments) and, per rank, programs (`plan.program`):
    straight-line kernel calls (`plan.kernel`) on memrefs that are either state
    (`plan.state`) or byte ranges of the rank's one arena (`plan.alloc`, `plan.input`), whose
    offsets the memory planner assigns from liveness. Shapes are resolved: a kernel's
    attributes give sizes and strides, never dim names. The module serialises one-to-one
    into the binary plan file the runtime loads (common/plan/PlanFile.h).
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

class Plan_Op<string mnemonic, list<Trait> traits = []>
    : Op<Plan_Dialect, mnemonic, traits>;

#endif // TESSEL_PLAN_DIALECT
