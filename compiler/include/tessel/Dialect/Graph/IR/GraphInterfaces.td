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

def Graph_ShardableOpInterface : OpInterface<"ShardableOpInterface"> {
  let cppNamespace = "::tessel::graph";
  let description = [{
    An op that states how it runs on split operands. The partition pass walks each function
    in order, asks every op which shardings it needs its operands in (given those they have)
    and what its results will be, inserts the collectives that convert one into the other,
    and then lets the op rewrite itself on per-rank shapes. The pass never switches on op
    kinds: a new op joins every parallel layout once it implements this.
  }];
  let methods = [
    InterfaceMethod<[{
        Fills `rule` with one required sharding per operand and one sharding per result,
        given the shardings the operands have. Fails (with a diagnostic) when the op cannot
        run in any layout the mesh allows.
      }],
      "::mlir::LogicalResult", "inferSharding",
      (ins "const ::tessel::graph::MeshLayout &":$mesh,
           "::llvm::ArrayRef<::tessel::graph::Sharding>":$operands,
           "::tessel::graph::ShardingRule &":$rule)>,
    InterfaceMethod<[{
        Emits the per-rank form of the op on `operands` (already converted to the shardings
        `rule` asks for) and returns its results, one per result of the op. The default
        clones the op with per-rank result types; ops whose per-rank form differs (a split
        vocabulary, a reduction over a split dim) override it.
      }],
      "::mlir::LogicalResult", "partition",
      (ins "::tessel::graph::Partitioner &":$partitioner,
           "::llvm::ArrayRef<::mlir::Value>":$operands,
           "const ::tessel::graph::ShardingRule &":$rule,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$results),
      [{}],
      [{ return ::tessel::graph::partitionByCloning($_op, partitioner, operands, rule, results); }]>
  ];
}

#endif // TESSEL_GRAPH_INTERFACES
