//===- GraphEnums.td - Enumerated attributes of the graph dialect -*- tablegen -*-===//
//
// Words the passes and the lowering switch on, as enums rather than strings. Their spellings
// are the words the plan's kernels take (common/catalogue/KernelCatalogue.def: UnaryOp);
// the plan dialect's verifier checks every lowered parameter against the catalogue, so a word
// here the kernels do not know fails the first compile that uses it.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_GRAPH_ENUMS
#define TESSEL_GRAPH_ENUMS

include "GraphDialect.td"
include "mlir/IR/EnumAttr.td"

def Graph_UnaryFn : I32EnumAttr<"UnaryFn",
    "an elementwise function with a derivative rule (the mnemonic of its forward op)", [
      I32EnumAttrCase<"Exp", 0, "exp">,
      I32EnumAttrCase<"Log", 1, "log">,
      I32EnumAttrCase<"Sqrt", 2, "sqrt">,
      I32EnumAttrCase<"Rsqrt", 3, "rsqrt">,
      I32EnumAttrCase<"Tanh", 4, "tanh">,
      I32EnumAttrCase<"Gelu", 5, "gelu">,
      I32EnumAttrCase<"Silu", 6, "silu">,
      I32EnumAttrCase<"Relu", 7, "relu">,
      I32EnumAttrCase<"Sigmoid", 8, "sigmoid">,
      I32EnumAttrCase<"Square", 9, "square">,
      I32EnumAttrCase<"GeluErf", 10, "gelu_erf">,
      I32EnumAttrCase<"Pow", 11, "pow">]> {
  let cppNamespace = "::tessel::graph";
  let genSpecializedAttr = 0;
}
def Graph_UnaryFnAttr : EnumAttr<Graph_Dialect, Graph_UnaryFn, "unary_fn">;

#endif // TESSEL_GRAPH_ENUMS
