//===- SchedDialect.td - The pipeline schedule dialect -----*- tablegen -*-===//
#ifndef TESSEL_SCHED_DIALECT
#define TESSEL_SCHED_DIALECT

include "mlir/IR/OpBase.td"

def Sched_Dialect : Dialect {
  let name = "sched";
  let cppNamespace = "::tessel::sched";
  let summary = "Pipeline schedules: the stages, their layers and the schedule they run";
  let description = [{
    A `sched.pipeline` names the schedule (AFAB/GPipe, 1F1B, interleaved 1F1B, ZB-H1), the
    pipeline ranks, the micro-batches and the model chunks per rank, and which layers each
    virtual stage holds. What each rank does, in order, follows from the first four through
    common/schedule/Schedule.h, stated there once; the split reads the layers.
  }];
}

class Sched_Op<string mnemonic, list<Trait> traits = []>
    : Op<Sched_Dialect, mnemonic, traits>;

#endif // TESSEL_SCHED_DIALECT
