//===- GraphDecodeOps.td - Ops of the decode programs ------*- tablegen -*-===//
//
// Generation with a KV cache: the decode programs (-tessel-derive-decoder) run the forward
// graph on a few new tokens per sequence, keeping each attention's keys and values in a
// paged cache that outlives the program, each running sum along the sequence (a mixture of
// experts' count of the tokens each expert took) in per-sequence totals, and placing each
// token by its position in its sequence rather than by its index in the program's `seq` dim.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_GRAPH_DECODE_OPS
#define TESSEL_GRAPH_DECODE_OPS

def Graph_KvCacheOp : Graph_Op<"kv_cache", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure]> {
  let summary = "A persistent key or value cache of one attention";
  let description = [{
    `[cache_blocks, block_slot, kv_heads, head]`: a pool of blocks of `block_slot` positions,
    which sequences take as they grow (their block tables say which); it starts at zero and
    lives across the runs of the decode programs, as parameters do, but is never saved.
    `paged_attention` writes it.

    ```mlir
    %kc = graph.kv_cache "kv.0.key"
        : tensor<64x16x4x32xf32, #graph.dims<cache_blocks, block_slot, heads, head>>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Graph_PagedAttentionOp : Graph_Op<"paged_attention", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, MemoryEffects<[MemWrite]>]> {
  let summary = "Attention of new tokens over their sequences' paged key/value caches";
  let description = [{
    `query` is `[batch, seq, heads, head]` and `key`, `value` `[batch, seq, kv_heads, head]`:
    the new tokens of `batch` sequences. `positions` `[batch, seq]` gives each new token's
    position in its sequence (negative: a padding slot) and `block_table`
    `[batch, table_blocks]` the cache blocks of each sequence, position p living in slot
    p % block_slot of block `block_table[b, p / block_slot]`. The new keys and values are
    stored into `key_cache` and `value_cache` first; then each token at position p attends
    over the positions 0 .. p of its sequence (with `window` W: p - W + 1 .. p), as the causal
    `attention` it replaces does over the whole sequence.

    ```mlir
    %a = graph.paged_attention %q, %k, %v, %pos, %table, %kc, %vc scale 1.767767e-01
        : (tensor<1x1x4x32xf32, #graph.dims<batch, seq, heads, head>>, ...) -> ...
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$query, Graph_FloatTensor:$key,
                       Graph_FloatTensor:$value, Graph_IdTensor:$positions,
                       Graph_IdTensor:$block_table, Graph_FloatTensor:$key_cache,
                       Graph_FloatTensor:$value_cache, F64Attr:$scale,
                       OptionalAttr<I64Attr>:$window);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $positions `,` $block_table `,` $key_cache `,` $value_cache
    (`window` $window^)? `scale` $scale attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_RopeAtOp : Graph_Op<"rope_at", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure]> {
  let summary = "Rotary position embedding at given positions";
  let description = [{
    `rope` of `[batch, seq, heads, head]` where token (b, s) turns by `positions[b, s]`
    instead of by s: the new tokens of a decode program, each at its place in its sequence.

    ```mlir
    %r = graph.rope_at %q, %pos theta 1.000000e+04
        : (tensor<8x1x8x16xf32, #graph.dims<batch, seq, heads, head>>,
           tensor<8x1xi32, #graph.dims<batch, seq>>)
        -> tensor<8x1x8x16xf32, #graph.dims<batch, seq, heads, head>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_IdTensor:$positions, F64Attr:$theta,
                       OptionalAttr<DenseF64ArrayAttr>:$scaling);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $positions `theta` $theta (`scaling` $scaling^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_RunningTotalsOp : Graph_Op<"running_totals", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure]> {
  let summary = "The persistent per-sequence totals of one running sum";
  let description = [{
    `[cache_blocks, ...]`: row i holds the running sum of the sequence whose first cache
    block is block i (a block belongs to one sequence at a time). Like a `kv_cache` it starts
    at zero and lives across the runs of the decode programs, but is never saved; always f32.
    `running_sum` writes it.

    ```mlir
    %t = graph.running_totals "sum.0"
        : tensor<64x4xf32, #graph.dims<cache_blocks, experts>>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Graph_RunningSumOp : Graph_Op<"running_sum", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, MemoryEffects<[MemWrite]>]> {
  let summary = "A sum over each sequence's earlier tokens, carried across decode programs";
  let description = [{
    `input` is `[batch, seq, ...]`: the new tokens of `batch` sequences, at the positions
    `positions` `[batch, seq]` gives (negative: a padding slot), in position order. The token
    at position p gets the sum of `input` over the tokens of its sequence at positions before
    p (up to p with `inclusive`), earlier calls' tokens included: `totals` row
    `block_table[b, 0]` holds what sequence b's earlier tokens summed to, and a call whose
    first token is at position 0 starts from zero; the call leaves there the sum up to its
    last token. A padding slot adds nothing and gets -1, which no count of tokens is. It is
    what the contraction of a sequence's values with the mask
    `positions(seq_k) < positions(seq)` computes over a whole window.

    ```mlir
    %s = graph.running_sum %x, %pos, %table, %t
        : (tensor<8x1x4xf32, #graph.dims<batch, seq, experts>>, ...) -> ...
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_IdTensor:$positions,
                       Graph_IdTensor:$block_table, Graph_FloatTensor:$totals,
                       UnitAttr:$inclusive);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $positions `,` $block_table `,` $totals (`inclusive` $inclusive^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_SliceOp : Graph_Op<"slice", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure]> {
  let summary = "Positions [start, start + n) of one dim";
  let description = [{
    The result has the input's dims, `dim` of the result type's size n. The prefill program
    keeps the last of its tokens this way for the ops after its last attention, where only
    that token's logits are read.

    ```mlir
    %y = graph.slice %x dim "seq" start 255
        : tensor<1x256x768xf32, #graph.dims<batch, seq, embed>>
        -> tensor<1x1x768xf32, #graph.dims<batch, seq, embed>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, StrAttr:$dim, I64Attr:$start);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input `dim` $dim `start` $start attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

#endif // TESSEL_GRAPH_DECODE_OPS
