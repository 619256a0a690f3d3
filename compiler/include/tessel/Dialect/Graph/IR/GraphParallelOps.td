//===- GraphParallelOps.td - Per-rank pieces of split ops --*- tablegen -*-===//
//
// Ops that only the partition pass creates: the per-rank parts of computations whose
// operands are split so that no rank can do them alone (cross-entropy over a split
// vocabulary, a norm over tensors split in different ways), the write-back of a parameter
// updated slice by slice, and the gradient buckets of data parallelism. Communication
// between the parts is always an upstream `shard` collective between them.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_GRAPH_PARALLEL_OPS
#define TESSEL_GRAPH_PARALLEL_OPS

def Graph_CEMaxOp : Graph_Op<"ce_max", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure]> {
  let summary = "Per-rank row maxima of logits whose class dim is split over `axis`";
  let description = [{
    The first step of vocabulary-parallel cross-entropy: the maximum over this rank's
    classes; a `shard.all_reduce` with `max` over `axis` gives the row maximum.

    ```mlir
    %m = graph.ce_max %logits dim "vocab" axis "tp"
        : tensor<8x64x128xf32, #graph.dims<batch, seq, vocab>>
        -> tensor<8x64xf32, #graph.dims<batch, seq>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$logits, StrAttr:$dim, StrAttr:$axis);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `dim` $dim `axis` $axis attr-dict `:` type($logits) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Graph_CESumsOp : Graph_Op<"ce_sums", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure]> {
  let summary = "Per-rank softmax denominators and target logits";
  let description = [{
    Given the global row maxima, this rank's part of `sum exp(logit - max)` and the target's
    logit when the target is one of this rank's classes (zero otherwise). Both are partial
    sums over `axis`.

    ```mlir
    %s, %t = graph.ce_sums %logits, %targets, %m dim "vocab" axis "tp"
        : (tensor<8x64x128xf32, #graph.dims<batch, seq, vocab>>,
           tensor<8x64xi32, #graph.dims<batch, seq>>, tensor<8x64xf32, #graph.dims<batch, seq>>)
        -> (tensor<8x64xf32, #graph.dims<batch, seq>>, tensor<8x64xf32, #graph.dims<batch, seq>>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$logits, Graph_IdTensor:$targets,
                       Graph_FloatTensor:$max, StrAttr:$dim, StrAttr:$axis);
  let results = (outs Graph_FloatTensor:$sums, Graph_FloatTensor:$picked);
  let assemblyFormat = [{
    $logits `,` $targets `,` $max `dim` $dim `axis` $axis attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_CELossOp : Graph_Op<"ce_loss", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure]> {
  let summary = "Cross-entropy from reduced row statistics";
  let description = [{
    `scale * sum over rows of (log sums + max - picked)`; `scale` is one over the number
    of positions in the whole batch.

    ```mlir
    %loss = graph.ce_loss %m, %s, %t scale 1.220703125E-4
        : (tensor<8x64xf32, #graph.dims<batch, seq>>, tensor<8x64xf32, #graph.dims<batch, seq>>,
           tensor<8x64xf32, #graph.dims<batch, seq>>) -> tensor<f32, #graph.dims<>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$max, Graph_FloatTensor:$sums,
                       Graph_FloatTensor:$picked, F64Attr:$scale);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $max `,` $sums `,` $picked `scale` $scale attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_CEGradOp : Graph_Op<"ce_grad", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure]> {
  let summary = "This rank's columns of the cross-entropy gradient";
  let description = [{
    `(exp(logits - max) / sums - onehot(targets)) * grad * scale` on this rank's classes.

    ```mlir
    %dl = graph.ce_grad %logits, %targets, %m, %s, %dloss dim "vocab" axis "tp"
        scale 1.220703125E-4 : (...) -> tensor<8x64x128xf32, #graph.dims<batch, seq, vocab>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$logits, Graph_IdTensor:$targets,
                       Graph_FloatTensor:$max, Graph_FloatTensor:$sums, Graph_FloatTensor:$grad,
                       StrAttr:$dim, StrAttr:$axis, F64Attr:$scale);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `,` $max `,` $sums `,` $grad `dim` $dim `axis` $axis `scale` $scale
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_SumSquaresOp : Graph_Op<"sum_squares", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure]> {
  let summary = "The sum of the squares of every element of the operands";
  let description = [{
    The per-rank part of a global norm over gradients that are split over the same axes;
    a `shard.all_reduce` over those axes completes it.

    ```mlir
    %s = graph.sum_squares %g0, %g1 : tensor<64xf32, #graph.dims<embed>>,
        tensor<128x64xf32, #graph.dims<vocab, embed>> -> tensor<f32, #graph.dims<>>
    ```
  }];
  let arguments = (ins Variadic<Graph_FloatTensor>:$inputs);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($result)";
  let hasVerifier = 1;
}

def Graph_AssignParamOp : Graph_Op<"assign_param", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, MemoryEffects<[MemWrite]>]> {
  let summary = "Overwrites a parameter with a value of its type";
  let description = [{
    The end of a ZeRO-1/2 update: the slices updated on each data-parallel rank,
    all-gathered, become the parameter again.

    ```mlir
    graph.assign_param %w to "wte" : tensor<128x128xf32, #graph.dims<vocab, embed>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$value, StrAttr:$name);
  let assemblyFormat = "$value `to` $name attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Graph_PackOp : Graph_Op<"pack", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure]> {
  let summary = "Copies gradients into one flat bucket for a single collective";
  let description = [{
    Each operand `i` is viewed as `[outer, ways, inner]` around its dim `dims[i]` (which
    `ways` ranks will split; "" or `ways = 1` for none), and the bucket is laid out as
    `[ways, sum of outer * inner]`: the block of every operand that rank `r` keeps is
    contiguous in the bucket's part `r`. One all-reduce (ways 1) or reduce-scatter over the
    bucket then does the work of one collective per gradient, and `graph.unpack` views the
    result as the separate (per-rank) gradients again.

    ```mlir
    %b = graph.pack %g0, %g1 dims ["embed", "vocab"] ways 2
        : tensor<128xf32, #graph.dims<embed>>, tensor<64x128xf32, #graph.dims<vocab, embed>>
        -> tensor<8320xf32, #graph.dims<bucket>>
    ```
  }];
  let arguments = (ins Variadic<Graph_FloatTensor>:$inputs, StrArrayAttr:$dims,
                       I64Attr:$ways);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $inputs `dims` $dims `ways` $ways attr-dict `:` type($inputs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Graph_UnpackOp : Graph_Op<"unpack", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure]> {
  let summary = "Views a flat bucket as the tensors packed into it";
  let description = [{
    The inverse of `graph.pack` on one rank's part: the results are consecutive blocks of
    the bucket, in order, each with its result type (no copy at run time).

    ```mlir
    %g0, %g1 = graph.unpack %b : tensor<4160xf32, #graph.dims<bucket>>
        -> tensor<64xf32, #graph.dims<embed>>, tensor<32x128xf32, #graph.dims<vocab, embed>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input);
  let results = (outs Variadic<Graph_FloatTensor>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($results)";
  let hasVerifier = 1;
}

def Graph_TiedGradSumOp : Graph_Op<"tied_grad_sum", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Sums a tied parameter's gradient over the pipeline stages that hold it";
  let description = [{
    A parameter that layers on several pipeline stages read (an embedding table tied to
    the output projection) has a copy on each of those stages, and each stage accumulates
    the gradient of its own uses. Before the optimizer step the copies' gradients are
    summed over `stages` (indices along the `pp` axis, ascending; the sum is taken in that
    order, so every copy gets the same bits and the copies stay identical).

    ```mlir
    %g = graph.tied_grad_sum %g0 stages [0, 3] : tensor<256x128xf32, #graph.dims<vocab, embed>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, DenseI64ArrayAttr:$stages);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input `stages` $stages attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // TESSEL_GRAPH_PARALLEL_OPS
