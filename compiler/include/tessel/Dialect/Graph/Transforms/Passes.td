//===- Passes.td - The graph dialect's passes --------------*- tablegen -*-===//
#ifndef TESSEL_DIALECT_GRAPH_TRANSFORMS_PASSES
#define TESSEL_DIALECT_GRAPH_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"tessel-autodiff", "mlir::ModuleOp"> {
  let summary = "Derives the forward-backward function from @forward";
  let description = [{
    Clones `@forward` into `@forward_backward`, which computes the loss, then the gradient of
    every parameter by walking the ops in reverse and asking each for its gradient rule
    (DifferentiableOpInterface), and adds each parameter's gradient into its accumulator with
    `graph.accumulate_grad`. The loss gradient is seeded with 1 / accumulation, so that the
    gradients summed over a step's micro-batches are those of the mean loss over the whole
    step batch.

    Each dropout gets a mask number shared by its forward and backward uses. `@forward` stays
    as the evaluation function, with dropout removed (evaluation does not drop).
  }];
  let dependentDialects = ["::tessel::graph::GraphDialect", "::mlir::func::FuncDialect"];
}

def RecognizeAttention : Pass<"tessel-recognize-attention", "mlir::ModuleOp"> {
  let summary = "Replaces attention written from primitives by the attention op";
  let description = [{
    `contract(softmax(where(mask, contract(q, k, over head) * scale, -big), seq_k), v, over
    seq_k)` (the scaling written as a division or product by a constant, or absent; the
    mask absent or the causal one, key position <= query position) computes what
    `graph.attention` computes without ever holding the seq x seq scores, and its backward
    recomputes them. Where q is [..., seq, heads, head], k and v [..., seq_k, heads, head] with
    the same leading dims and the result is in q's layout, the pattern becomes that op; the
    ops it replaced go where nothing else reads them. Other masks, dropout on the
    probabilities and other layouts are left as written.
  }];
  let dependentDialects = ["::tessel::graph::GraphDialect"];
}

def BuildOptimizer : Pass<"tessel-optimizer", "mlir::ModuleOp"> {
  let summary = "Builds @optimizer_step: clipping, learning-rate schedule, AdamW or SGD";
  let description = [{
    From the module's `tessel.train` settings and the parameters that `@forward_backward`
    accumulates gradients for, emits `@optimizer_step() -> (grad_norm, lr)`: the global
    gradient norm, a `graph.guard_finite` that ends the step before any update when the norm
    is not finite, the clipping coefficient, the learning rate of the current step, one
    `graph.adamw` per parameter and the clearing of every accumulator. Weight decay falls on
    the parameter classes the recipe's `decay` names (ParameterClasses.h: weights,
    embeddings, gains, biases, judged by how `@forward` uses each parameter); the others
    get none.
  }];
  let dependentDialects = ["::tessel::graph::GraphDialect", "::mlir::func::FuncDialect"];
}

def DeriveSampler : Pass<"tessel-derive-sampler", "mlir::ModuleOp"> {
  let summary = "Derives @sample: the logits of one sequence, for text generation";
  let description = [{
    Clones `@forward` (already free of dropout) into `@sample(tokens) -> logits`: the batch
    dim becomes 1 wherever it appears, and the function returns the logits that the final
    cross-entropy read instead of the loss. Types carry dim names, so the batch dim is found
    by name in every value.
  }];
  let dependentDialects = ["::tessel::graph::GraphDialect", "::mlir::func::FuncDialect"];
}

def DeriveDecoder : Pass<"tessel-derive-decoder", "mlir::ModuleOp"> {
  let summary = "Derives the decode programs: the forward graph on new tokens over a KV cache";
  let description = [{
    Clones `@forward` (without its loss, as `-tessel-derive-sampler`) into `@prefill`, which
    runs one sequence's `prefill` new tokens, and `@decode_b<B>`, which runs one new token of
    each of B sequences, for each B of `batches`. Each takes `tokens` [batch, seq] and two
    more arguments: `positions` [batch, seq], each new token's position in its sequence
    (negative for a padding slot), and `block_table` [batch, table_blocks], the blocks of the
    KV cache each sequence holds. The rewrites that make the graph run on new tokens only:

    - every `attention` (causal) becomes `paged_attention` over a pair of `kv_cache` tensors
      of its own, `[cache_blocks, block_slot, kv_heads, head]`: the cache keeps the key/value
      heads as the keys have them, so grouped-query and multi-query attention keep their
      saving; a sliding window keeps its mask;
    - `rope` becomes `rope_at` the tokens' positions;
    - a parameter along the sequence (learned positions) is looked up at the positions.

    Values flow along the sequence one token at a time everywhere else: an op that reads the
    sequence dim and does not keep it in its result mixes positions, which a cache of keys and
    values does not cover (positions(seq), a sum over seq, MoE capacity counts), and a bidirectional
    attention sees later tokens. Such a model, and a layout whose pipeline or context
    parallelism the decode programs do not follow, gets no decode programs: the module is left
    with none and `tessel.decode_refused` says why, at the spec's location; generation then
    recomputes the window with @sample.
  }];
  let options = [
    ListOption<"batches", "batches", "int64_t",
               "The batch sizes of the decode programs, one program each">,
    Option<"prefill", "prefill", "int64_t", /*default=*/"256",
           "New tokens per prefill call (at most the model's seq)">,
    Option<"block", "block", "int64_t", /*default=*/"16", "Positions per cache block">,
    Option<"cacheBlocks", "cache-blocks", "int64_t", /*default=*/"0",
           "Blocks in each cache (0: enough for the largest batch at the model's full seq)">
  ];
  let dependentDialects = ["::tessel::graph::GraphDialect", "::mlir::func::FuncDialect"];
}

def ShardPropagate : Pass<"tessel-shard-propagate", "mlir::ModuleOp"> {
  let summary = "Records the sharding of every value from the mesh and the dim rules";
  let description = [{
    Walks each function in order. Arguments and parameters are laid out by the spec's
    `shard` rules (and the ZeRO stage, for persistent state); every op then states, through
    ShardableOpInterface, the shardings it needs its operands in and those of its results.
    Each op's results get a `graph.sharding` attribute (`#graph.sharding<[dp, *, tp]>`,
    possibly `partial [tp]`); nothing else changes. `-tessel-partition` makes the same
    decisions and applies them.
  }];
  let dependentDialects = ["::tessel::graph::GraphDialect"];
}

def Partition : Pass<"tessel-partition", "mlir::ModuleOp"> {
  let summary = "Splits every function over the mesh: per-rank shapes and collectives";
  let description = [{
    With the decisions of `-tessel-shard-propagate`, rewrites each function into the
    program every rank runs: values get their per-rank types, and where a value's sharding
    differs from the one its user needs, upstream `shard` collectives convert it (partial
    sums: `shard.reduce_scatter` onto the dim the user splits, else `shard.all_reduce`;
    splits the user lacks: `shard.all_gather`; splits it adds: `shard.all_slice`, which
    needs no communication). Conversions of one value are made once and reused, except
    ZeRO-3 parameter gathers, which are made once in the forward pass and again in the
    backward pass, so that no gathered parameter lives across the two. Function results are made whole on every rank. The module
    gets a `shard.grid @mesh` (axes pp, dp, cp, tp: those larger than 1, outermost first)
    and a `tessel.state` attribute with the layout of each parameter's state. Where
    attention's query heads have a rule and its key/value heads none, the rule carries over to
    them (attention reads each key/value head with a group of query heads) and is written
    into the module's `#tessel.parallel`. A one-rank mesh leaves the module as it is.
  }];
  let dependentDialects = ["::tessel::graph::GraphDialect", "::mlir::shard::ShardDialect"];
}

def Recompute : Pass<"tessel-recompute", "mlir::ModuleOp"> {
  let summary = "Recomputes activations in the backward pass instead of storing them";
  let description = [{
    In `@forward_backward` (after partitioning, so that collectives are recomputed with what
    they gather): with `full`, only each layer's input (a value read by another layer or by
    what follows the layers) is kept for the backward pass; with `selective`, also the
    results of contractions, attention, all-reduces and reduce-scatters (all-gathers are
    recomputed: their shards are what is kept). Every other forward value of a layer that a
    backward op reads is recomputed right before its first backward use by clones of the ops
    that made it (same attributes: layer, sharding, dropout mask numbers, so the same bits),
    and the backward ops read the copies. `none` changes nothing. The mode is the spec's
    `recompute` (the module's `tessel.parallel`) unless the `mode` option names one.
  }];
  let options = [
    Option<"mode", "mode", "::tessel::RecomputeMode", /*default=*/"::tessel::RecomputeMode::Spec",
           "What to keep for the backward pass (default: the spec's `recompute`)", [{
             ::llvm::cl::values(
               clEnumValN(::tessel::RecomputeMode::Spec, "spec", "the spec's recompute mode"),
               clEnumValN(::tessel::RecomputeMode::None, "none", "keep every activation"),
               clEnumValN(::tessel::RecomputeMode::Selective, "selective",
                          "keep layer inputs and contraction and attention results"),
               clEnumValN(::tessel::RecomputeMode::Full, "full", "keep only layer inputs"))
           }]>
  ];
  let dependentDialects = ["::tessel::graph::GraphDialect"];
}

def SaveAttentionStatistics : Pass<"tessel-save-attention-statistics", "mlir::ModuleOp"> {
  let summary = "Hands each attention's output and log-sum-exp to its gradient";
  let description = [{
    A `graph.attention_grad` without them needs each query row's log-sum-exp and the
    attention's output, and so computes the forward pass again. Where the forward
    `graph.attention` of the same query, key, value and options is in the same function, it
    gains its `lse` result (recorded with the query's sharding, less `head`) and the gradient
    reads it and the output (`saved`). Run after partitioning and before recomputation, so
    that recomputation keeps or recomputes the attention with both results: `selective` keeps
    them (f32, one value per query row and head: 1/head of the output's elements), `full`
    recomputes the attention once, where the gradient used to compute it twice.
  }];
  let dependentDialects = ["::tessel::graph::GraphDialect"];
}

def VerifySharding : Pass<"tessel-verify-sharding", "mlir::ModuleOp"> {
  let summary = "Checks that a partitioned module uses every value as it is laid out";
  let description = [{
    After `-tessel-partition`: every value has a sharding; operands of one op that share a
    dim name split it the same way, as do results; no partial sum reaches an op that is not
    linear in it (only `graph.add`/`graph.sub` of equally partial values, accumulation into
    ZeRO-1 gradients, bucket packing and the collectives that reduce it take one); and each
    collective's operand and result shardings are the ones it converts between.
  }];
}

def BucketGradients : Pass<"tessel-bucket-gradients", "mlir::ModuleOp"> {
  let summary = "Groups data-parallel gradient reductions into buckets";
  let description = [{
    In `@forward_backward`, the reductions over dp of gradients on their way to their
    accumulators are taken in the order the backward pass finishes them and packed into
    buckets of at most `bucket_bytes` (from the spec): one `graph.pack`, one collective and one
    `graph.unpack` per bucket, placed right after the bucket's last gradient is computed, so
    that it runs while the rest of the backward pass computes. All-reduces (ZeRO 0) and
    reduce-scatters (ZeRO 2 and 3) are bucketed alike.
  }];
  let dependentDialects = ["::tessel::graph::GraphDialect", "::mlir::shard::ShardDialect"];
}

def FuseElementwise : Pass<"tessel-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "Groups chains and trees of elementwise ops into fused ops";
  let description = [{
    In every function (per-rank and final: after partitioning, recomputation and the pipeline
    split), maximal connected groups of elementwise ops with one result type — add, sub, mul,
    div, the comparisons, where, the unary functions, pow and unary_grad — become one
    `graph.fused_elementwise` whose body lists them as steps. Operands from outside are its
    inputs (a broadcast read only by the group is read through strides; scalar constants
    become steps); every value read outside the group is one of its results. An op joins a
    group only if no value of the group is read outside it before the op, so an op between
    them (a contraction, a norm) keeps two chains apart. Groups of one op are left alone.
  }];
  let dependentDialects = ["::tessel::graph::GraphDialect"];
}

def FuseLinearCrossEntropy : Pass<"tessel-fuse-linear-cross-entropy", "mlir::ModuleOp"> {
  let summary = "Fuses the output head's contraction with cross-entropy, chunked over rows";
  let description = [{
    In every function (per-rank and final, as `-tessel-fuse-elementwise` sees them), a
    contraction `logits = contract(x, w, sum [K])` — x [rows..., K], w holding K and the class
    dim, logits [rows..., classes] — whose only readers are the cross-entropy that takes it
    (`graph.cross_entropy` and `graph.cross_entropy_grad`, or under vocabulary parallelism
    `graph.ce_max`, `graph.ce_sums`, `graph.ce_grad` and the all-reduces between them) is
    replaced: by `graph.linear_cross_entropy` where only the loss is computed (evaluation), by
    `graph.linear_cross_entropy_grad` where the logits' gradient is read by exactly the two
    contractions that give x's and w's gradients (training), which that op then computes (the
    input gradient's contraction may read the backward pass's own all-gather of w under ZeRO-3;
    that gather then goes). The plan runs it `chunk` rows at a time, so neither the logits nor
    their gradient ever exist whole. Logits read by anything else (sampling, a second head) are
    left alone, as are functions where the forward and backward halves are apart (a pipeline's
    last stage).
  }];
  let options = [
    Option<"chunk", "chunk", "int64_t", /*default=*/"0",
           "rows of logits computed at a time (0: about the input's size in logits, "
           "Liger-Kernel's rule, and at least min-chunk rows)">,
    Option<"minChunk", "min-chunk", "int64_t", /*default=*/"256",
           "the fewest rows an automatic chunk has, so its GEMMs stay efficient">
  ];
  let dependentDialects = ["::tessel::graph::GraphDialect"];
}

#endif // TESSEL_DIALECT_GRAPH_TRANSFORMS_PASSES
