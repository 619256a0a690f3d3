//===- SchedDialect.td - The pipeline schedule dialect -----*- tablegen -*-===//
#ifndef TESSEL_SCHED_DIALECT
#define TESSEL_SCHED_DIALECT

include "mlir/IR/OpBase.td"

def Sched_Dialect : Dialect {
  let name = "sched";
  let cppNamespace = "::tessel::sched";
  let summary = "Pipeline schedules: what each pipeline rank does, in order";
  let description = [{
    A `sched.pipeline` holds one `sched.rank` per pipeline rank, each an ordered list of
    actions on micro-batches: the forward and backward passes of a model chunk (the backward
    split into input and weight gradients for zero-bubble schedules), and the transfers of
    activations and gradients between neighbouring ranks. The list is the schedule: AFAB
    (GPipe), 1F1B, interleaved 1F1B and ZB-H1 differ only in the order of the same actions.
  }];
}

class Sched_Op<string mnemonic, list<Trait> traits = []>
    : Op<Sched_Dialect, mnemonic, traits>;

#endif // TESSEL_SCHED_DIALECT
