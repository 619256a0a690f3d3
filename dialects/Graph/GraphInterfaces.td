//===- GraphInterfaces.td - Interfaces of the graph dialect -*- tablegen -*-===//
#ifndef TESSEL_GRAPH_INTERFACES
#define TESSEL_GRAPH_INTERFACES

include "mlir/IR/OpBase.td"

def Graph_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::tessel::graph";
  let description = [{
    An op that knows its own gradient rule. The autodiff pass walks the forward function
    backwards and asks each op for the gradients of its operands given those of its results;
    it never switches on op kinds, so a new op is differentiable once it implements this.
  }];
  let methods = [
    InterfaceMethod<[{
        Emits, at the builder's insertion point, ops computing the gradient of each operand
        from `resultGradients` (one per result; null where a result has none). Fills
        `operandGradients` with one value per operand, null for operands that take no
        gradient (integer ids and targets).
      }],
      "::mlir::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultGradients,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGradients)>
  ];
}

#endif // TESSEL_GRAPH_INTERFACES
