//===- Passes.td - Tessel's passes -------------------------*- tablegen -*-===//
#ifndef TESSEL_TRANSFORMS_PASSES
#define TESSEL_TRANSFORMS_PASSES

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

def PipelineSchedule : Pass<"tessel-pipeline-schedule", "mlir::ModuleOp"> {
  let summary = "Splits the layers into pipeline stages and writes the schedule";
  let description = [{
    With a `pp` axis larger than 1: the repeated layers are split into `pp * virtual` stages,
    by the spec's `stage_map` or, without one, by a cost model (multiply-adds of each layer's
    contractions and elements of its other ops, with the embedding counted on the first
    stage and the loss on the last, so those may get fewer layers; interleaving splits
    evenly). The schedule the spec names (AFAB, 1F1B, interleaved 1F1B, ZB-H1) becomes a
    `sched.pipeline` with one ordered action list per pipeline rank, checked for
    completeness and freedom from deadlock. The bubble (idle over compute time, unit costs
    forward 1, backward 2) and the peak micro-batches in flight per rank are read off the
    lists and recorded on the op and in the module's `tessel.pipeline`.
  }];
  let dependentDialects = ["::tessel::sched::SchedDialect"];
}

def PipelineSplit : Pass<"tessel-pipeline-split", "mlir::ModuleOp"> {
  let summary = "Cuts the per-rank functions into the programs of the pipeline stages";
  let description = [{
    With a `pp` axis larger than 1, after partitioning: every op of `@forward_backward` is
    placed in a virtual stage (by its `graph.layer`, through the `sched.pipeline` layer runs;
    what comes before the layers goes with its first user, what comes after with the last
    stage) and a phase (forward: what the loss depends on; backward; and for ZB-H1 the
    weight-gradient part of backward that no earlier stage waits for). Each (stage, phase)
    becomes a function `@forward.c`, `@backward.c` (or `@backward_input.c` and
    `@backward_weight.c`) whose arguments and results named `vN` are the values that cross
    between them: the activations and gradients sent between neighbouring stages and what a
    stage keeps from its forward for its backward. `@forward` and `@sample` become
    `@eval.c` and `@sample.c` likewise. Parameters live on the stages that use them; a
    parameter used on several stages (a tied embedding) gets one gradient accumulation per
    stage, summed by `graph.tied_grad_sum` in the optimizer step. `@optimizer_step` becomes
    one function per stage that updates that stage's parameters; the squared-gradient sum of
    the clipping norm is all-reduced over `pp`. The stages holding each parameter are
    recorded in the module's `tessel.stages`.
  }];
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
    and a `tessel.state` attribute with the layout of each parameter's state. A one-rank
    mesh leaves the module as it is.
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

def FoldAccumulate : Pass<"tessel-fold-accumulate", "mlir::ModuleOp"> {
  let summary = "Lets the kernel that computes a gradient add it into its accumulator";
  let description = [{
    A parameter's gradient is summed into its accumulator (`grad.NAME` state) by an
    `accumulate` kernel. When the gradient is a buffer that one `gemm` (a weight's gradient)
    or `reduce` (a bias's) writes whole and only that `accumulate` reads, the kernel adds its
    result into the accumulator itself (its `accumulate` parameter; for a GEMM, BLAS beta =
    1): the buffer, the kernel and a pass over the gradient's memory go. A program that reads
    or writes the same accumulator between the two keeps both, so sums are never reordered.
    A reduce adds its rounded sum as `accumulate` did, so the bits are the same; a GEMM adds
    its product inside BLAS, the same bits when the accumulator holds zero (one micro-batch
    per step) and within rounding otherwise.

    ```mlir
    plan.kernel "gemm" ins(%x, %dy : ...) outs(%g : memref<384x1536xf32>) {...}
    %s = plan.state "grad.w" : memref<384x1536xf32>
    plan.kernel "accumulate" ins(%g : ...) outs(%s : ...) {n = 589824 : i64}
    // becomes
    %s = plan.state "grad.w" : memref<384x1536xf32>
    plan.kernel "gemm" ins(%x, %dy : ...) outs(%s : memref<384x1536xf32>) {accumulate = 1 : i64, ...}
    ```
  }];
}

def MixedPrecision : Pass<"tessel-mixed-precision", "mlir::ModuleOp"> {
  let summary = "Stores activations and the parameters' working copies in bf16 (or f16)";
  let description = [{
    Mixed precision as the spec's `precision` says, on the plan's buffers once every kernel
    call is known (after the lowering and `-tessel-fold-accumulate`, before memory planning,
    which then sizes each buffer by its element type). Every kernel computes in f32 whatever
    its operands' types (a device widens 16-bit operands and rounds 16-bit results to nearest
    even), so the rewrite only chooses where values are stored:

    - An arena buffer (a `plan.alloc` and its views) becomes 16-bit unless something needs it
      at full width: a program result the host reads, an operand of a control kernel, an
      operand the kernel catalogue declares `F32` (losses, statistics carried between
      kernels, gradients on their way to the optimizer, the optimizer's values), one that is
      not a float type (`AnyType`), or a buffer a kernel adds into (`accumulate`).
    - A collective's operands follow their data (the catalogue's `Moved` and `Reduced`): the
      buffers one collective call ties, and the two ends of a transfer (a `send` and the
      `recv`s of its tag, in any program), narrow together, or stay f32 together when one of
      them must (an accumulator, an `F32` operand, an input). A communicator sums 16-bit
      values in f32 and rounds once. So weight gradients are computed from 16-bit
      activations into f32, reduced over the data axes in f32 and accumulated in f32, while
      activations cross tp, sp and ep in 16 bits.
    - Parameters (`plan.tensor` role `param`) stay f32: they are the master weights the
      optimizer updates. A parameter that some kernel reads as a `Float` operand gets a
      persistent 16-bit working copy, `plan.tensor "working.<name>" role "working" of
      "<name>"` (same dims, split and stages), and those reads take it instead (outside
      `optimizer_step`), as does a collective that gathers it into a 16-bit buffer (ZeRO-3).
      `optimizer_step` refreshes each copy right after its last write of the master (AdamW's
      `working` output, in the same pass, where AdamW writes the whole master; else a `copy`
      kernel), so the copies cost one rounding per weight per step, not per micro-batch, and a step that `guard_finite` ends leaves master and copy alike. A new
      program per stage, `working_copies`, makes every copy of the stage from its master; the
      runtime runs it whenever it sets the masters itself (initialisation, a checkpoint).
      Working copies are never checkpointed: they follow from the masters.
    - Program inputs and other persistent state keep their types.
    - A `fused_elementwise` call computes its whole body in f32, where its unfused kernels
      would each have stored a value: its `rounded` steps (with `narrow`, the 16-bit type)
      are those whose value an unfused kernel would store 16-bit (every step no output
      takes, and those whose output buffer is 16-bit), rounded as they compute, so fusion
      and recomputation do not change a 16-bit plan's bits.

    `precision` is the spec's word (fp32, bf16, fp16); empty reads the module's
    `tessel.train` precision. Under fp32 the pass changes nothing.

    ```mlir
    plan.tensor "working.w" role "working" of "w" ... : memref<128x512xbf16>
    plan.program "forward_backward" {
      %w16 = plan.state "working.w" : memref<128x512xbf16>
      plan.kernel "gemm" ins(%x, %w16 : memref<1024x128xbf16>, memref<128x512xbf16>) ...
    }
    plan.program "optimizer_step" {
      plan.kernel "adamw" ... outs(%w, %m, %v, %w16 : ..., memref<128x512xbf16>)
    }
    plan.program "working_copies" { ... a copy from master to working for every parameter ... }
    ```
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"\"",
           "fp32, bf16 or fp16; empty: the module's tessel.train precision">
  ];
}

def GroupOptimizer : Pass<"tessel-group-optimizer", "mlir::ModuleOp"> {
  let summary = "Merges the optimizer's per-tensor calls into multi-tensor calls";
  let description = [{
    The lowering calls `adamw` (or `sgd`) once per parameter; a GPU would launch a kernel for
    each, and a model has hundreds of small tensors (norms, biases). This pass merges the calls
    of a program that share their learning rate, clipping factor, hyperparameters and the type
    of their working copies into one call over many tensors (the catalogue's per-tensor
    operands, `n` listing each tensor's elements), which the devices run in a few launches.
    Each tensor's arithmetic is unchanged, so the bits are the same.

    Calls need not be adjacent: under ZeRO each one is preceded by the slice of its shard and
    followed by the gather of the result. The ops the merged calls depend on (through values,
    or through a buffer one writes and the other reads or writes) move before the merged call,
    the rest after it, each set in its order; collectives keep their order among themselves,
    and nothing moves across a control kernel (`guard_finite`, `wait`). A call that would have
    to move both before and after another starts a new group, as does one whose joining would
    make the ops moved before the merged call allocate more than `max-bytes` of the arena
    (default: the spec's `bucket_bytes`, 25 MiB when absent): those buffers (ZeRO's shards of
    the parameters) stay alive until the merged call, so this bounds what grouping adds to the
    program's peak. Without ZeRO nothing is allocated before the calls, and a program has one
    call per key.

    ```mlir
    plan.kernel "adamw" ins(%g1, %lr, %c : ...) outs(%p1, %m1, %v1 : ...) {n = array<i64: 8192>, ...}
    plan.kernel "adamw" ins(%g2, %lr, %c : ...) outs(%p2, %m2, %v2 : ...) {n = array<i64: 128>, ...}
    // becomes
    plan.kernel "adamw" ins(%g1, %g2, %lr, %c : ...) outs(%p1, %p2, %m1, %m2, %v1, %v2 : ...)
        {n = array<i64: 8192, 128>, ...}
    ```
  }];
  let options = [
    Option<"maxBytes", "max-bytes", "int64_t", /*default=*/"0",
           "the most arena bytes the ops moved before a merged call may allocate; 0: the spec's bucket_bytes">
  ];
}

def PlanMemory : Pass<"tessel-plan-memory", "mlir::ModuleOp"> {
  let summary = "Assigns arena offsets from liveness";
  let description = [{
    In each program, a buffer lives from its first use to its last (through views; from the
    start for program inputs, to the end for program outputs: Plan/PlanLiveness.h). Buffers are placed largest first at the lowest
    64-byte-aligned offset that overlaps no buffer live at the same time. Sets `offset` on
    every `plan.alloc` and `plan.input` and the program's `arena_bytes` (its peak).
  }];
}

#endif // TESSEL_TRANSFORMS_PASSES
