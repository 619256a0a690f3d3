//===- GraphGradientOps.td - Gradient ops of the graph dialect -*- tablegen -*-===//
//
// Ops that only the autodiff pass emits: the gradients of the composite ops, kept whole so
// that each runs as one kernel, and the broadcast that undoes a reduction.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_GRAPH_GRADIENT_OPS
#define TESSEL_GRAPH_GRADIENT_OPS

def Graph_BroadcastOp : Graph_Op<"broadcast", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure]> {
  let summary = "Repeats a tensor along the dims of the result type it lacks";
  let description = [{
    The gradient of a sum. The input's dims are a subset of the result's, in any order.

    ```mlir
    %y = graph.broadcast %x : tensor<128xf32, #graph.dims<embed>>
        -> tensor<8x128xf32, #graph.dims<batch, embed>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Graph_UnaryGradOp : Graph_Op<"unary_grad",
    [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, AllTypesMatch<["input", "output", "grad", "result"]>]> {
  let summary = "The gradient of an elementwise function";
  let description = [{
    `dx = dy * f'(x)` for the elementwise function `fn` of the forward `graph.unary`. `y` is
    the forward result, which several derivatives read instead of recomputing f. `pow`
    carries its exponent.

    ```mlir
    %dx = graph.unary_grad gelu %x, %y, %dy : tensor<8x512xf32, #graph.dims<tokens, ffn>>
    %dp = graph.unary_grad pow %x, %y, %dy exponent 3.000000e+00 : tensor<8xf32, #graph.dims<seq>>
    ```
  }];
  let arguments = (ins Graph_UnaryFnAttr:$fn, Graph_FloatTensor:$input, Graph_FloatTensor:$output,
                       Graph_FloatTensor:$grad, OptionalAttr<F64Attr>:$exponent);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat =
      "$fn $input `,` $output `,` $grad (`exponent` $exponent^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Graph_SoftmaxGradOp : Graph_Op<"softmax_grad",
    [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, AllTypesMatch<["output", "grad", "result"]>]> {
  let summary = "The gradient of softmax from its output";
  let description = [{
    `dx = y * (dy - sum_dim(dy * y))`.

    ```mlir
    %dx = graph.softmax_grad %y, %dy dim "vocab" : tensor<8x256xf32, #graph.dims<tokens, vocab>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$output, Graph_FloatTensor:$grad, StrAttr:$dim);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$output `,` $grad `dim` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Graph_LayerNormGradOp : Graph_Op<"layernorm_grad", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure]> {
  let summary = "The gradients of layernorm's input, scale and bias";
  let description = [{
    Recomputes the statistics from `input`. The scale and bias gradients sum over every
    position.

    ```mlir
    %dx, %dg, %db = graph.layernorm_grad %x, %g, %dy eps 1.000000e-05
        : (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<128xf32, #graph.dims<embed>>,
           tensor<8x128xf32, #graph.dims<tokens, embed>>)
        -> (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<128xf32, #graph.dims<embed>>,
            tensor<128xf32, #graph.dims<embed>>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale,
                       Graph_FloatTensor:$grad, F64Attr:$eps);
  let results = (outs Graph_FloatTensor:$input_grad, Graph_FloatTensor:$scale_grad,
                      Graph_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad `eps` $eps attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_RMSNormGradOp : Graph_Op<"rmsnorm_grad", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure]> {
  let summary = "The gradients of rmsnorm's input and scale";
  let description = [{
    ```mlir
    %dx, %dg = graph.rmsnorm_grad %x, %g, %dy eps 1.000000e-05
        : (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<128xf32, #graph.dims<embed>>,
           tensor<8x128xf32, #graph.dims<tokens, embed>>)
        -> (tensor<8x128xf32, #graph.dims<tokens, embed>>, tensor<128xf32, #graph.dims<embed>>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale,
                       Graph_FloatTensor:$grad, F64Attr:$eps);
  let results = (outs Graph_FloatTensor:$input_grad, Graph_FloatTensor:$scale_grad);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad `eps` $eps attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_EmbeddingGradOp : Graph_Op<"embedding_grad", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface, ["partition"]>, Pure]> {
  let summary = "Scatters the gradient of looked-up rows back into the table's shape";
  let description = [{
    ```mlir
    %dw = graph.embedding_grad %dy, %ids
        : (tensor<8x64x128xf32, #graph.dims<batch, seq, embed>>,
           tensor<8x64xi32, #graph.dims<batch, seq>>)
        -> tensor<256x128xf32, #graph.dims<vocab, embed>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$grad, Graph_IdTensor:$ids,
                       OptionalAttr<StrAttr>:$row_axis);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $ids attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_CrossEntropyGradOp : Graph_Op<"cross_entropy_grad", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface, ["partition"]>, Pure]> {
  let summary = "The gradient of the mean cross-entropy with respect to the logits";
  let description = [{
    `(softmax(logits) - onehot(targets)) * dloss / positions`.

    ```mlir
    %dl = graph.cross_entropy_grad %logits, %targets, %dloss dim "vocab"
        : (tensor<8x256xf32, #graph.dims<tokens, vocab>>, tensor<8xi32, #graph.dims<tokens>>,
           tensor<f32, #graph.dims<>>) -> tensor<8x256xf32, #graph.dims<tokens, vocab>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$logits, Graph_IdTensor:$targets,
                       Graph_FloatTensor:$grad, StrAttr:$dim, OptionalAttr<F64Attr>:$scale);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `,` $grad `dim` $dim attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_AttentionGradOp : Graph_Op<"attention_grad", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface, ["partition"]>, Pure, AttrSizedOperandSegments]> {
  let summary = "The gradients of attention's query, key and value";
  let description = [{
    Recomputes the attention probabilities from `query` and `key` rather than storing them,
    as flash attention does. With `saved` (the forward `graph.attention`'s output and
    log-sum-exp, both or neither) the probabilities come from the log-sum-exp and the output
    gives each row's sum of p · dp, so the forward pass is not computed again. `heads_over` is as `graph.attention`'s; `key_grad` and
    `value_grad` are then this rank's addends: zero at the kv heads its query heads do not
    read. `seq_over` is as `graph.attention`'s too: `key_grad` and `value_grad` then cover the
    whole sequence and are this rank's addends, from its queries.

    ```mlir
    %dq, %dk, %dv = graph.attention_grad %q, %k, %v, %dy causal scale 1.767767e-01
        : (tensor<8x64x4x32xf32, #graph.dims<batch, seq, heads, head>>, ...) -> (...)
    %dq, %dk, %dv = graph.attention_grad %q, %k, %v, %dy saved %o, %lse causal ...
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$query, Graph_FloatTensor:$key,
                       Graph_FloatTensor:$value, Graph_FloatTensor:$grad,
                       Optional<Graph_FloatTensor>:$out, Optional<Graph_FloatTensor>:$lse,
                       UnitAttr:$causal,
                       F64Attr:$scale, OptionalAttr<I64Attr>:$window,
                       OptionalAttr<StrAttr>:$heads_over, OptionalAttr<StrAttr>:$seq_over);
  let results = (outs Graph_FloatTensor:$query_grad, Graph_FloatTensor:$key_grad,
                      Graph_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $grad (`saved` $out^ `,` $lse)? (`causal` $causal^)?
    (`window` $window^)?
    (`heads_over` $heads_over^)? (`seq_over` $seq_over^)? `scale` $scale attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // TESSEL_GRAPH_GRADIENT_OPS
