//===- GraphOps.td - Ops of the graph dialect --------------*- tablegen -*-===//
//
// Shape rules are not restated here: every verifier calls the shared rules of
// tessel/Shape/NamedShape.h, the same functions the front end types programs with.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_GRAPH_OPS
#define TESSEL_GRAPH_OPS

include "GraphDialect.td"
include "GraphAttrs.td"
include "GraphInterfaces.td"
include "tessel/Dialect/Settings/IR/SettingsEnums.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

// A ranked tensor whose dims are named by a #graph.dims encoding (checked by verifiers).
def Graph_Tensor : RankedTensorOf<[F32, BF16, F16, I32]>;
def Graph_FloatTensor : RankedTensorOf<[F32, BF16, F16]>;
def Graph_IdTensor : RankedTensorOf<[I32]>;

//===----------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------===//

def Graph_ParamOp : Graph_Op<"param", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "A trainable parameter";
  let description = [{
    A model weight with its dotted path and initialiser. The path is unique in the module;
    it names the tensor in checkpoints.

    The initialiser is written without its `#graph.init` prefix: a dialect attribute written
    in full right before `:` would take the type after the colon as its own.

    ```mlir
    %w = graph.param "layers.0.gpt_block.wq" init <normal(0.0, 0.02)>
        : tensor<128x4x32xf32, #graph.dims<embed, heads, head>>
    ```
  }];
  let arguments = (ins StrAttr:$name, Graph_InitAttr:$init);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$name `init` $init attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Graph_ConstantOp : Graph_Op<"constant", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "A scalar constant";
  let description = [{
    ```mlir
    %c = graph.constant 5.000000e-01 : tensor<f32, #graph.dims<>>
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Graph_BinaryOp<string mnemonic, string what>
    : Graph_Op<mnemonic, [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "Elementwise " # what # ", broadcasting by dim name";
  let description = [{
    The result has the dims of `lhs` followed by those of `rhs` that `lhs` lacks; a name in
    both operands has one size.

    ```mlir
    %y = graph.}] # mnemonic # [{ %a, %b : (tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>,
        tensor<128xf32, #graph.dims<embed>>) -> tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$lhs, Graph_FloatTensor:$rhs);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_AddOp : Graph_BinaryOp<"add", "sum">;
def Graph_SubOp : Graph_BinaryOp<"sub", "difference">;
def Graph_MulOp : Graph_BinaryOp<"mul", "product">;
def Graph_DivOp : Graph_BinaryOp<"div", "quotient">;

class Graph_CompareOp<string mnemonic, string what>
    : Graph_Op<mnemonic, [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "Elementwise comparison `" # what # "`, broadcasting by dim name";
  let description = [{
    1.0 where `lhs }] # what # [{ rhs` holds and 0.0 elsewhere, as a tensor of the operands'
    element type (a mask that `where` selects with, or that multiplies). Dims combine as
    for the arithmetic ops. A comparison is piecewise constant: no gradient flows through it.

    ```mlir
    %m = graph.}] # mnemonic # [{ %k, %q : (tensor<64xf32, #graph.dims<seq_k>>,
        tensor<64xf32, #graph.dims<seq>>) -> tensor<64x64xf32, #graph.dims<seq_k, seq>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$lhs, Graph_FloatTensor:$rhs);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_LtOp : Graph_CompareOp<"lt", "<">;
def Graph_LeOp : Graph_CompareOp<"le", "<=">;
def Graph_GtOp : Graph_CompareOp<"gt", ">">;
def Graph_GeOp : Graph_CompareOp<"ge", ">=">;
def Graph_EqOp : Graph_CompareOp<"eq", "==">;
def Graph_NeOp : Graph_CompareOp<"ne", "!=">;

def Graph_WhereOp : Graph_Op<"where", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "Elementwise selection: `lhs` where `cond` is non-zero, else `rhs`";
  let description = [{
    The result has the dims of `lhs`, then those of `rhs` that `lhs` lacks, then those of
    `cond` that neither has; every operand broadcasts by name. The gradient flows to `lhs`
    where `cond` holds and to `rhs` elsewhere; `cond` takes none.

    ```mlir
    %s = graph.where %mask, %scores, %neg_inf : (tensor<64x64xf32, #graph.dims<seq_k, seq>>,
        tensor<8x64x4x64xf32, #graph.dims<batch, seq, heads, seq_k>>, tensor<f32, #graph.dims<>>)
        -> tensor<8x64x4x64xf32, #graph.dims<batch, seq, heads, seq_k>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$cond, Graph_FloatTensor:$lhs, Graph_FloatTensor:$rhs);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$cond `,` $lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_PositionsOp : Graph_Op<"positions", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "The positions 0, 1, ..., n-1 along the result's one dim";
  let description = [{
    An iota: element i is i, as a float (exact up to 2^24). With comparisons and `where`
    it builds masks (causal, sliding window) and position-dependent biases (ALiBi).

    ```mlir
    %p = graph.positions : tensor<64xf32, #graph.dims<seq>>
    ```
  }];
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Graph_RenameOp : Graph_Op<"rename", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "The same tensor with some dims under other names of the same size";
  let description = [{
    Dim i of the result is dim i of the input; only names change (the data is not moved).
    Renaming `seq` to `seq_k` lets keys and queries be distinct dims of one score tensor.

    ```mlir
    %k2 = graph.rename %k : tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>
        -> tensor<8x64x4x32xf32, #graph.dims<batch, seq_k, heads, head>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Graph_UnaryOp : Graph_Op<"unary", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, SameOperandsAndResultType, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "An elementwise function";
  let description = [{
    `y = fn(x)` for each element, `fn` one of the kernel catalogue's elementwise functions
    (`UnaryOp` in common/catalogue/KernelCatalogue.def, the one list of them: gelu is the tanh
    form GPT-2 uses, gelu_erf the exact one). The language calls each by its word (`-x` for
    neg); the op lowers to the `unary` kernel with that word. `pow` carries its constant exponent (`x^exponent`, NaN for a negative `x` and a
    non-integer exponent, as `torch.pow`), and only pow does.

    ```mlir
    %y = graph.unary gelu %x : tensor<8x64x512xf32, #graph.dims<batch, seq, ffn>>
    %r = graph.unary pow %v exponent -5.000000e-01 : tensor<8x64xf32, #graph.dims<batch, seq>>
    ```
  }];
  let arguments = (ins Graph_UnaryFnAttr:$fn, Graph_FloatTensor:$input,
                       OptionalAttr<F64Attr>:$exponent);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$fn $input (`exponent` $exponent^)? attr-dict `:` type($result)";
  let builders = [
    OpBuilder<(ins "::mlir::Type":$type, "::tessel::graph::UnaryFn":$fn, "::mlir::Value":$input), [{
      build($_builder, $_state, type, UnaryFnAttr::get($_builder.getContext(), fn), input,
            ::mlir::FloatAttr());
    }]>
  ];
  let hasVerifier = 1;
}

def Graph_DropoutOp
    : Graph_Op<"dropout", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, SameOperandsAndResultType, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "Zeroes elements with probability `rate` and rescales the rest";
  let description = [{
    Not `Pure`: each execution draws a fresh mask. The autodiff pass numbers each dropout
    with `mask`; the runtime derives the mask from the run's seed, the step, the micro-batch
    and that number, so the backward pass (a dropout of the gradient with the same `mask`)
    applies the same mask without storing it.

    ```mlir
    %y = graph.dropout %x rate 1.000000e-01 : tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, F64Attr:$rate, OptionalAttr<I64Attr>:$mask);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input `rate` $rate (`mask` $mask^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Contractions and reductions
//===----------------------------------------------------------------------===//

def Graph_ContractOp : Graph_Op<"contract", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "Sums the product of two tensors over named dims";
  let description = [{
    The einsum of named dims: `sum` lists the dims summed over (each in both operands);
    other shared dims are batch dims. The result lists `lhs`'s kept dims, then `rhs`'s.
    `x @ w` in the spec language contracts every shared dim.

    ```mlir
    %y = graph.contract %x, %w sum ["embed"]
        : (tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>,
           tensor<128x512xf32, #graph.dims<embed, ffn>>)
        -> tensor<8x64x512xf32, #graph.dims<batch, seq, ffn>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$lhs, Graph_FloatTensor:$rhs, StrArrayAttr:$sum);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs `sum` $sum attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

class Graph_ReduceOp<string mnemonic, string what>
    : Graph_Op<mnemonic, [DeclareOpInterfaceMethods<Graph_ShardableOpInterface, ["partition"]>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "The " # what # " over named dims";
  let description = [{
    ```mlir
    %s = graph.}] # mnemonic # [{ %x dims ["batch", "seq"]
        : tensor<8x64xf32, #graph.dims<batch, seq>> -> tensor<f32, #graph.dims<>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, StrArrayAttr:$dims);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input `dims` $dims attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Graph_SumOp : Graph_ReduceOp<"sum", "sum">;
def Graph_MeanOp : Graph_ReduceOp<"mean", "mean">;

def Graph_SoftmaxOp : Graph_Op<"softmax",
    [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, SameOperandsAndResultType, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "Softmax along one named dim";
  let description = [{
    ```mlir
    %p = graph.softmax %x dim "vocab" : tensor<8x64x256xf32, #graph.dims<batch, seq, vocab>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, StrAttr:$dim);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input `dim` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Graph_TopKOp : Graph_Op<"top_k",
    [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, SameOperandsAndResultType, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "Mask of the k largest entries along one named dim";
  let description = [{
    1.0 at the `k` largest entries of each line along `dim` and 0.0 elsewhere; of equal
    entries the one at the lower index is chosen first, so the mask is deterministic. A
    mixture of experts routes each token with it. Like a comparison it is piecewise constant:
    no gradient flows through it.

    ```mlir
    %m = graph.top_k %p dim "experts" k 2 : tensor<8x64x4xf32, #graph.dims<batch, seq, experts>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, StrAttr:$dim, I64Attr:$k);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input `dim` $dim `k` $k attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Composite ops, kept whole for fusion
//===----------------------------------------------------------------------===//

def Graph_LayerNormOp : Graph_Op<"layernorm", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "Layer normalisation over the dims of its scale";
  let description = [{
    `(x - mean) / sqrt(var + eps) * scale + bias`, with mean and variance over the dims of
    `scale` (which `bias` shares).

    ```mlir
    %y = graph.layernorm %x, %g, %b eps 1.000000e-05
        : (tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>,
           tensor<128xf32, #graph.dims<embed>>, tensor<128xf32, #graph.dims<embed>>)
        -> tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale,
                       Graph_FloatTensor:$bias, F64Attr:$eps);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $bias `eps` $eps attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_RMSNormOp : Graph_Op<"rmsnorm", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "Root-mean-square normalisation over the dims of its scale";
  let description = [{
    ```mlir
    %y = graph.rmsnorm %x, %g eps 9.9999999999999995E-7
        : (tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>,
           tensor<128xf32, #graph.dims<embed>>)
        -> tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale, F64Attr:$eps);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `eps` $eps attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_EmbeddingOp : Graph_Op<"embedding", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface, ["partition"]>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "Looks up rows of a [rows, features] table";
  let description = [{
    With `row_axis`, the table holds this rank's block of rows along that mesh axis: ids of
    other blocks give zero rows, and the ranks' results add up to the lookup.

    ```mlir
    %e = graph.embedding %wte, %tokens
        : (tensor<256x128xf32, #graph.dims<vocab, embed>>,
           tensor<8x64xi32, #graph.dims<batch, seq>>)
        -> tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$table, Graph_IdTensor:$ids,
                       OptionalAttr<StrAttr>:$row_axis);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$table `,` $ids attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_CrossEntropyOp : Graph_Op<"cross_entropy", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface, ["partition"]>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "Mean softmax cross-entropy over the class dim";
  let description = [{
    `targets` has the dims of `logits` but the class dim `dim`; the result is the mean loss
    over all positions. With `scale`, the result is `scale` times the sum over positions
    instead: a rank holding part of the batch divides by the whole batch's positions.

    ```mlir
    %loss = graph.cross_entropy %logits, %targets dim "vocab"
        : (tensor<8x64x256xf32, #graph.dims<batch, seq, vocab>>,
           tensor<8x64xi32, #graph.dims<batch, seq>>) -> tensor<f32, #graph.dims<>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$logits, Graph_IdTensor:$targets, StrAttr:$dim,
                       OptionalAttr<F64Attr>:$scale);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `dim` $dim attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_AttentionOp : Graph_Op<"attention", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface, ["partition"]>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "Scaled dot-product attention, multi-head or grouped-query";
  let description = [{
    `q` is [..., seq, heads, head]; `k` and `v` are [..., kv_seq, kv_heads, head] with the
    same leading dims. When kv_heads is smaller than heads, each group of heads / kv_heads
    query heads shares one key/value head. `causal` masks future positions; with it,
    `window` W masks those W or more before the query too (a sliding window: query i sees
    keys i - W + 1 .. i, as Mistral's).

    With `heads_over` A (set by the partition pass when the mesh axis A splits the query
    heads but does not divide the kv heads, as multi-query attention under tensor
    parallelism), `q` holds this rank's block of the query heads and `k`, `v` every kv head:
    query head h of the block is head `index(A) * heads + h` of the whole and reads kv head
    `(index(A) * heads + h) / (heads * size(A) / kv_heads)`.

    With `seq_over` A (set by the partition pass under context parallelism, A being `cp`),
    `q` and the result hold this rank's head-tail block of the sequence (chunks `index(A)` and
    `2 * size(A) - 1 - index(A)` of its 2 * size(A) chunks) and `k`, `v` the whole sequence:
    the causal mask compares the queries' places in the whole sequence with the keys'.

    The optional second result `lse` is each query row's log-sum-exp of its scaled, masked
    scores, f32 over `q`'s dims without `head` (-inf for a row that sees no key). The pass
    that keeps it (`tessel-save-attention-statistics`) hands it, with the output, to
    `graph.attention_grad`, so the backward pass does not compute the forward pass again.

    ```mlir
    %a = graph.attention %q, %k, %v causal scale 1.767767e-01
        : (tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>,
           tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>,
           tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>)
        -> tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$query, Graph_FloatTensor:$key,
                       Graph_FloatTensor:$value, UnitAttr:$causal, F64Attr:$scale,
                       OptionalAttr<I64Attr>:$window, OptionalAttr<StrAttr>:$heads_over,
                       OptionalAttr<StrAttr>:$seq_over);
  let results = (outs Graph_FloatTensor:$result, Optional<Graph_FloatTensor>:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`causal` $causal^)? (`window` $window^)?
    (`heads_over` $heads_over^)? (`seq_over` $seq_over^)? `scale` $scale attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_RopeOp : Graph_Op<"rope",
    [DeclareOpInterfaceMethods<Graph_ShardableOpInterface, ["partition"]>, Pure, SameOperandsAndResultType, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "Rotary position embedding on [..., seq, heads, head]";
  let description = [{
    Feature i < head/2 pairs with i + head/2 and turns by pos * theta^(-2i/head).
    `inverse` turns the other way: a rotation's gradient is its inverse. With `seq_over` A
    (context parallelism, set by the partition pass) the input holds this rank's head-tail
    block of the sequence over axis A, and each position turns by its place in the whole.
    `scaling` = [factor, low_freq_factor, high_freq_factor, original_context] rescales the
    frequencies as Llama 3.1 does (kernels/RopeFrequency.h).

    ```mlir
    %r = graph.rope %q theta 1.000000e+04 : tensor<8x64x8x16xf32, #graph.dims<batch, seq, heads, head>>
    %s = graph.rope %q theta 5.000000e+05 scaling [8.0, 1.0, 4.0, 8192.0] : ...
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, F64Attr:$theta, UnitAttr:$inverse,
                       OptionalAttr<StrAttr>:$seq_over, OptionalAttr<DenseF64ArrayAttr>:$scaling);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `theta` $theta (`scaling` $scaling^)? (`inverse` $inverse^)? (`seq_over` $seq_over^)?
    attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

def Graph_SplitOp : Graph_Op<"split", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "Splits one dim into several";
  let description = [{
    The result type names the parts; their sizes multiply to the size of `dim`.

    ```mlir
    %y = graph.split %x dim "embed" : tensor<8x128xf32, #graph.dims<batch, embed>>
        -> tensor<8x4x32xf32, #graph.dims<batch, heads, head>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, StrAttr:$dim);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input `dim` $dim attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Graph_MergeOp : Graph_Op<"merge", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "Merges adjacent dims into one";
  let description = [{
    ```mlir
    %y = graph.merge %x dims ["heads", "head"] : tensor<8x4x32xf32, #graph.dims<batch, heads, head>>
        -> tensor<8x128xf32, #graph.dims<batch, embed>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, StrArrayAttr:$dims);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input `dims` $dims attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Graph_PermuteOp : Graph_Op<"permute", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = "Reorders dims; the result type gives the order";
  let description = [{
    ```mlir
    %y = graph.permute %x : tensor<8x64xf32, #graph.dims<batch, seq>>
        -> tensor<64x8xf32, #graph.dims<seq, batch>>
    ```
  }];
  let arguments = (ins Graph_Tensor:$input);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused
//===----------------------------------------------------------------------===//

def Graph_FusedElementwiseOp : Graph_Op<"fused_elementwise", [Pure]> {
  let summary = "A group of elementwise ops computed in one pass over memory";
  let description = [{
    Made by `-tessel-fuse-elementwise` from a chain or tree of elementwise ops of one result
    type. `body` is the group's program (the text `fused_elementwise` carries in the plan,
    docs/plan-format.md): one step per `;`, each a `unary`/`binary` word, `const`, `unary_grad`
    or `where` with its operands, `xK` the K-th input and `tK` the value of step K. Result i is
    the value of step `outputs[i]`. Every result has the type of the group's values; an input
    has a subset of its dims (by name) and is broadcast over the others. The location fuses the
    locations of the ops it replaces.

    ```mlir
    %y:2 = graph.fused_elementwise %h, %b body "add x0 x1; gelu t0" outputs [0, 1]
        : (tensor<8x64x512xf32, #graph.dims<batch, seq, ffn>>, tensor<512xf32, #graph.dims<ffn>>)
        -> (tensor<8x64x512xf32, #graph.dims<batch, seq, ffn>>,
            tensor<8x64x512xf32, #graph.dims<batch, seq, ffn>>)
    ```
  }];
  let arguments = (ins Variadic<Graph_FloatTensor>:$inputs, StrAttr:$body,
                       DenseI64ArrayAttr:$outputs);
  let results = (outs Variadic<Graph_FloatTensor>:$results);
  let assemblyFormat = [{
    $inputs `body` $body `outputs` $outputs attr-dict `:` functional-type($inputs, results)
  }];
  let hasVerifier = 1;
}

def Graph_LinearCrossEntropyOp : Graph_Op<"linear_cross_entropy", [Pure]> {
  let summary = "Cross-entropy of a linear output head, computed a chunk of rows at a time";
  let description = [{
    `cross_entropy(contract(input, weight, sum [K]), targets)` without the logits: made by
    `-tessel-fuse-linear-cross-entropy`. `input` is [rows..., K], `weight` holds the dims K
    and `dim` (the classes) in either order, `targets` is [rows...]. The result is `scale`
    times the sum over rows of `-log softmax(logits)[target]`. The plan computes `chunk` rows'
    logits at a time into a scratch buffer of chunk x classes, so the whole logits tensor
    never exists.

    With `axis`, `weight` holds this rank's block of the classes (vocabulary parallelism):
    each chunk's row maxima and softmax sums are all-reduced over `axis`, as
    `graph.ce_max` / `graph.ce_sums` do.

    ```mlir
    %loss = graph.linear_cross_entropy %x, %wte, %targets dim "vocab" scale 6.250000e-02
        chunk 8 : (tensor<2x8x16xf32, #graph.dims<batch, seq, embed>>,
                   tensor<48x16xf32, #graph.dims<vocab, embed>>,
                   tensor<2x8xi32, #graph.dims<batch, seq>>) -> tensor<f32, #graph.dims<>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$weight,
                       Graph_IdTensor:$targets, StrAttr:$dim, OptionalAttr<StrAttr>:$axis,
                       F64Attr:$scale, I64Attr:$chunk);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $targets `dim` $dim (`axis` $axis^)? `scale` $scale `chunk` $chunk
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_LinearCrossEntropyGradOp : Graph_Op<"linear_cross_entropy_grad", [Pure]> {
  let summary = "The loss of a linear output head and its input and weight gradients";
  let description = [{
    What `graph.linear_cross_entropy` computes, together with the gradients of `input` and
    `weight` for the loss gradient `grad`: per chunk of rows, the logits are computed into a
    scratch buffer, turned into their gradient `(softmax - onehot(target)) * grad * scale` in
    place, multiplied into the chunk's rows of `input_grad` and added into `weight_grad`
    (f32). The backward pass needs the logits at the point where the loss is computed, so
    both happen here, as Liger-Kernel's fused linear cross-entropy does; the logits and their
    gradient never exist whole.

    With `axis` (vocabulary parallelism), `weight` and `weight_grad` hold this rank's classes
    and `input_grad` is this rank's addend: the sum over `axis` is the gradient.

    ```mlir
    %loss, %dx, %dw = graph.linear_cross_entropy_grad %x, %wte, %targets, %dloss dim "vocab"
        scale 6.250000e-02 chunk 8
        : (tensor<2x8x16xf32, #graph.dims<batch, seq, embed>>,
           tensor<48x16xf32, #graph.dims<vocab, embed>>, tensor<2x8xi32, #graph.dims<batch, seq>>,
           tensor<f32, #graph.dims<>>)
        -> (tensor<f32, #graph.dims<>>, tensor<2x8x16xf32, #graph.dims<batch, seq, embed>>,
            tensor<48x16xf32, #graph.dims<vocab, embed>>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$weight,
                       Graph_IdTensor:$targets, Graph_FloatTensor:$grad, StrAttr:$dim,
                       OptionalAttr<StrAttr>:$axis, F64Attr:$scale, I64Attr:$chunk);
  let results = (outs Graph_FloatTensor:$loss, Graph_FloatTensor:$input_grad,
                      Graph_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $targets `,` $grad `dim` $dim (`axis` $axis^)? `scale` $scale
    `chunk` $chunk attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

include "GraphGradientOps.td"
include "GraphTrainOps.td"
include "GraphParallelOps.td"
include "GraphDecodeOps.td"

#endif // TESSEL_GRAPH_OPS
