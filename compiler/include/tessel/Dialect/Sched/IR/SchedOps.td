//===- SchedOps.td - Ops of the pipeline schedule dialect --*- tablegen -*-===//
#ifndef TESSEL_SCHED_OPS
#define TESSEL_SCHED_OPS

include "SchedDialect.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"

def Sched_PipelineOp : Sched_Op<"pipeline", [NoTerminator, SingleBlock]> {
  let summary = "A pipeline schedule over `stages` ranks";
  let description = [{
    `schedule` is `afab`, `1f1b`, `interleaved` or `zbh1`; `virtual` model chunks per rank
    (interleaved, `virtual_stages`); `microbatches` per optimizer step. The model's layers are split into
    `stages * virtual` chunks; chunk `c` of rank `r` is virtual stage `c * stages + r`.
    `layers` lists, per virtual stage, its first layer and its number of layers. The
    estimates come from the action lists under the cost model of the assignment:
    `bubble` (idle time over compute time) and, per rank, `in_flight` (the most
    micro-batches whose activations are alive at once).

    ```mlir
    sched.pipeline "1f1b" stages 2 microbatches 4 virtual 1 {
      sched.rank 0 {
        sched.forward 0 chunk 0
        sched.send "activation" 0 chunk 0 to 1
        ...
      }
      ...
    }
    ```
  }];
  let arguments = (ins StrAttr:$schedule, I64Attr:$stages, I64Attr:$microbatches,
                       I64Attr:$virtual_stages, OptionalAttr<DenseI64ArrayAttr>:$layers,
                       OptionalAttr<F64Attr>:$bubble, OptionalAttr<DenseI64ArrayAttr>:$in_flight);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $schedule `stages` $stages `microbatches` $microbatches `virtual` $virtual_stages attr-dict-with-keyword
    $body
  }];
  let hasVerifier = 1;
}

def Sched_RankOp : Sched_Op<"rank", [HasParent<"PipelineOp">, NoTerminator, SingleBlock]> {
  let summary = "The actions of one pipeline rank, in order";
  let arguments = (ins I64Attr:$rank);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$rank attr-dict-with-keyword $body";
}

class Sched_ComputeOp<string mnemonic, string what> : Sched_Op<mnemonic, [HasParent<"RankOp">]> {
  let summary = what # " of one micro-batch through one model chunk";
  let arguments = (ins I64Attr:$microbatch, I64Attr:$chunk);
  let assemblyFormat = "$microbatch `chunk` $chunk attr-dict";
}

def Sched_ForwardOp : Sched_ComputeOp<"forward", "The forward pass">;
def Sched_BackwardOp : Sched_ComputeOp<"backward", "The whole backward pass">;
def Sched_BackwardInputOp : Sched_ComputeOp<"backward_input",
                                            "The input-gradient half of the backward pass">;
def Sched_BackwardWeightOp : Sched_ComputeOp<"backward_weight",
                                             "The weight-gradient half of the backward pass">;

class Sched_TransferOp<string mnemonic, string direction>
    : Sched_Op<mnemonic, [HasParent<"RankOp">]> {
  let summary = "Sends or receives a micro-batch's activation or gradient";
  let description = [{
    `what` is `activation` (forward, to the next virtual stage) or `gradient` (backward, to
    the previous one); `chunk` is the local model chunk it belongs to.
  }];
  let arguments = (ins StrAttr:$what, I64Attr:$microbatch, I64Attr:$chunk, I64Attr:$peer);
  let assemblyFormat = "$what $microbatch `chunk` $chunk `" # direction # "` $peer attr-dict";
}

def Sched_SendOp : Sched_TransferOp<"send", "to">;
def Sched_RecvOp : Sched_TransferOp<"recv", "from">;

#endif // TESSEL_SCHED_OPS
