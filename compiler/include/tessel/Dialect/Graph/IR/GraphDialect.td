//===- GraphDialect.td - The graph dialect -----------------*- tablegen -*-===//
#ifndef TESSEL_GRAPH_DIALECT
#define TESSEL_GRAPH_DIALECT

include "mlir/IR/OpBase.td"

def Graph_Dialect : Dialect {
  let name = "graph";
  let cppNamespace = "::tessel::graph";
  let summary = "Tensor computations over named dimensions, at global shapes";
  let description = [{
    The first IR level of Tessel. Each op computes on whole (unsharded) tensors whose
    dimensions carry names in the tensor type's encoding, e.g.
    `tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>`. Ops combine dims by name:
    elementwise ops broadcast by name, `graph.contract` sums over named dims. Composite ops
    (`graph.attention`, `graph.layernorm`, `graph.cross_entropy`, ...) stay whole so later
    passes can fuse, shard and differentiate them as units.
  }];
  let useDefaultAttributePrinterParser = 1;
  // The learning-rate op's schedule is the settings' enum.
  let dependentDialects = ["::tessel::settings::SettingsDialect"];
}

class Graph_Op<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic, traits>;

#endif // TESSEL_GRAPH_DIALECT
