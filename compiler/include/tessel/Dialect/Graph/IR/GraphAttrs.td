//===- GraphAttrs.td - Attributes of the graph dialect -----*- tablegen -*-===//
#ifndef TESSEL_GRAPH_ATTRS
#define TESSEL_GRAPH_ATTRS

include "GraphDialect.td"
include "mlir/IR/AttrTypeBase.td"

class Graph_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Graph_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Graph_DimsAttr : Graph_Attr<"Dims", "dims"> {
  let summary = "The names of a tensor's dimensions, in order";
  let description = [{
    Used as the encoding of a ranked tensor type: one name per dimension, unique within the
    type. A scalar has no names.

    ```mlir
    tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>
    tensor<f32, #graph.dims<>>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::StringAttr", "dim names">:$names);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Graph_InitAttr : Graph_Attr<"Init", "init"> {
  let summary = "How a parameter is initialised";
  let description = [{
    One of `normal(mean, std)`, `uniform(low, high)`, `zeros`, `ones`, `constant(value)`, or
    `load("stored name")`: the tensor of that name in the weights the run starts from (a
    Hugging Face folder or a checkpoint), whole or one of `parts` equal pieces along `axis`
    or only the first `rows` entries of its first dim (`slice` = [part, parts, axis, rows],
    rows -1 for all).

    ```mlir
    #graph.init<normal(0.0, 0.02)>
    #graph.init<ones>
    #graph.init<load("model.layers.0.mlp.up_proj.weight")>
    #graph.init<load("h.0.attn.c_attn.weight", [0, 3, -1, -1])>
    ```
  }];
  let parameters = (ins StringRefParameter<"distribution">:$kind,
                        APFloatParameter<"first argument">:$a,
                        APFloatParameter<"second argument">:$b,
                        StringRefParameter<"stored tensor (load)", "\"\"">:$source,
                        OptionalArrayRefParameter<"int64_t", "part, parts, axis, rows (load)">:$slice);
  let builders = [
    AttrBuilder<(ins "::llvm::StringRef":$kind, "::llvm::APFloat":$a, "::llvm::APFloat":$b), [{
      return $_get($_ctxt, kind, a, b, ::llvm::StringRef(), ::llvm::ArrayRef<int64_t>());
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Graph_UnaryFnAttr : Graph_Attr<"UnaryFn", "unary_fn"> {
  let summary = "An elementwise function of the kernel catalogue";
  let description = [{
    One of the words of the catalogue's `UnaryOp` (common/catalogue/KernelCatalogue.def):
    the functions the `unary` and `unary_grad` kernels compute, which are also the language's
    elementwise built-ins. The list is stated there alone; this attribute holds the
    catalogue's own enum value and reads and prints its word. Inside an op it is written bare.

    ```mlir
    #graph<unary_fn gelu>
    %y = graph.unary gelu %x : tensor<8x512xf32, #graph.dims<tokens, ffn>>
    ```
  }];
  let parameters = (ins "::tessel::graph::UnaryFn":$value);
  let hasCustomAssemblyFormat = 1;
  // An op's accessor gives the function itself.
  let returnType = "::tessel::graph::UnaryFn";
  let convertFromStorage = "::llvm::cast<::tessel::graph::UnaryFnAttr>($_self).getValue()";
}

def Graph_ShardingAttr : Graph_Attr<"Sharding", "sharding"> {
  let summary = "How a value is laid over the device mesh";
  let description = [{
    One entry per dim of the value: the mesh axis that splits it, or `*` when every rank
    holds the whole dim; then, optionally, the axes over which the value is a partial sum
    that is still to be reduced.
    ```mlir
    #graph.sharding<[dp, *, tp]>               // batch split over dp, the third dim over tp
    #graph.sharding<[dp, *, *], partial [tp]>  // tp ranks hold addends of the value
    ```
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::StringAttr", "axis per dim">:$axes,
                        ArrayRefParameter<"::mlir::StringAttr", "partial axes">:$partial);
  let hasCustomAssemblyFormat = 1;
}

#endif // TESSEL_GRAPH_ATTRS
