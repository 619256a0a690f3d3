//===- GraphTrainOps.td - Training state and optimizer ops -*- tablegen -*-===//
//
// The training step needs state that outlives one call: accumulated gradients, optimizer
// moments and the step counter. These ops name that state by parameter path; the plan
// lowering gives each name its persistent buffers.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_GRAPH_TRAIN_OPS
#define TESSEL_GRAPH_TRAIN_OPS

def Graph_AccumulateGradOp : Graph_Op<"accumulate_grad", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, MemoryEffects<[MemWrite]>]> {
  let summary = "Adds a parameter's gradient into its accumulator";
  let description = [{
    The accumulator starts at zero and sums over the micro-batches of one step;
    `graph.zero_grad` clears it after the update.

    ```mlir
    graph.accumulate_grad %dw to "wte" : tensor<256x128xf32, #graph.dims<vocab, embed>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$grad, StrAttr:$name);
  let assemblyFormat = "$grad `to` $name attr-dict `:` type($grad)";
  let hasVerifier = 1;
}

def Graph_GradOp : Graph_Op<"grad", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, MemoryEffects<[MemRead]>]> {
  let summary = "Reads a parameter's accumulated gradient";
  let description = [{
    ```mlir
    %g = graph.grad "wte" : tensor<256x128xf32, #graph.dims<vocab, embed>>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Graph_GlobalNormOp : Graph_Op<"global_norm", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface, ["partition"]>, Pure]> {
  let summary = "The L2 norm of all operands taken together";
  let description = [{
    ```mlir
    %n = graph.global_norm %g0, %g1 : tensor<128xf32, #graph.dims<embed>>,
        tensor<256x128xf32, #graph.dims<vocab, embed>> -> tensor<f32, #graph.dims<>>
    ```
  }];
  let arguments = (ins Variadic<Graph_FloatTensor>:$inputs);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($result)";
  let hasVerifier = 1;
}

def Graph_GuardFiniteOp : Graph_Op<"guard_finite", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Ends the program here when a value is not finite";
  let description = [{
    When any element of `value` is an infinity or NaN, nothing after this op runs. The
    optimizer step guards its updates with the global gradient norm: a non-finite gradient
    anywhere makes the norm non-finite on every rank alike (the norm is reduced over the
    mesh), so every rank stops before any parameter, moment or gradient accumulator changes,
    and the host, which reads the norm, reports the step with the state as it was.

    ```mlir
    graph.guard_finite %norm : tensor<f32, #graph.dims<>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

def Graph_ClipCoefficientOp : Graph_Op<"clip_coefficient", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, Pure, SameOperandsAndResultType]> {
  let summary = "The factor that scales gradients to a norm of at most `max`";
  let description = [{
    `min(1, max / (norm + 1e-6))`, as PyTorch's clip_grad_norm_.

    ```mlir
    %c = graph.clip_coefficient %n max 1.000000e+00 : tensor<f32, #graph.dims<>>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$norm, F64Attr:$max);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$norm `max` $max attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Graph_LearningRateOp : Graph_Op<"learning_rate", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, MemoryEffects<[MemRead]>]> {
  let summary = "The learning rate at the current optimizer step";
  let description = [{
    Reads the step counter s (from 1). `constant`: `lr`. `cosine` and `linear` rise as
    `lr * s / warmup` while s <= warmup; then, with p = (s - warmup) / (steps - warmup),
    `cosine` gives `min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2` and `linear`
    `lr + (min_lr - lr) * p`.

    ```mlir
    %lr = graph.learning_rate cosine lr 3.000000e-03 min_lr 3.000000e-04 warmup 50 steps 600
        : tensor<f32, #graph.dims<>>
    ```
  }];
  let arguments = (ins Settings_LrScheduleAttr:$schedule, F64Attr:$lr, F64Attr:$min_lr, I64Attr:$warmup,
                       I64Attr:$steps);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $schedule `lr` $lr `min_lr` $min_lr `warmup` $warmup `steps` $steps attr-dict `:`
    type($result)
  }];
  let hasVerifier = 1;
}

def Graph_AdamWOp : Graph_Op<"adamw", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface, ["partition"]>, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Updates a parameter and its moments by one AdamW step";
  let description = [{
    Decoupled weight decay and bias correction, as torch.optim.AdamW, on the gradient
    `grad * coefficient` at learning rate `lr`. The moments are state named after the
    parameter; the step counter gives the bias correction.

    Under ZeRO stages 1 and 2 each data-parallel rank updates only its slice of the
    parameter: the slice is passed as `param` and the updated slice returned, for the
    partition pass to all-gather back into the parameter (`graph.assign_param`).

    ```mlir
    graph.adamw "wte", %g, %lr, %c beta1 9.000000e-01 beta2 9.990000e-01 eps 1.000000e-08
        weight_decay 1.000000e-02 : tensor<256x128xf32, #graph.dims<vocab, embed>>,
        tensor<f32, #graph.dims<>>, tensor<f32, #graph.dims<>>
    ```
  }];
  let arguments = (ins StrAttr:$name, Graph_FloatTensor:$grad, Graph_FloatTensor:$lr,
                       Graph_FloatTensor:$coefficient, F64Attr:$beta1, F64Attr:$beta2,
                       F64Attr:$eps, F64Attr:$weight_decay,
                       Optional<Graph_FloatTensor>:$param);
  let results = (outs Optional<Graph_FloatTensor>:$updated);
  let assemblyFormat = [{
    $name `,` $grad `,` $lr `,` $coefficient (`param` $param^)? `beta1` $beta1 `beta2` $beta2
    `eps` $eps `weight_decay` $weight_decay attr-dict `:` type($grad) `,` type($lr) `,`
    type($coefficient) (`,` type($param)^)? (`->` type($updated)^)?
  }];
  let hasVerifier = 1;
}

def Graph_SGDOp : Graph_Op<"sgd", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface, ["partition"]>, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Updates a parameter by one step of SGD with momentum";
  let description = [{
    As torch.optim.SGD without dampening or Nesterov: the gradient `grad * coefficient`
    plus `weight_decay * param` (L2, coupled) feeds a momentum buffer
    `buf = momentum * buf + g` (state named after the parameter, zero at first), and
    `param -= lr * buf`. Momentum 0 is plain SGD. `param` and the result: as `graph.adamw`.

    ```mlir
    graph.sgd "wte", %g, %lr, %c momentum 9.000000e-01 weight_decay 0.000000e+00
        : tensor<256x128xf32, #graph.dims<vocab, embed>>, tensor<f32, #graph.dims<>>,
          tensor<f32, #graph.dims<>>
    ```
  }];
  let arguments = (ins StrAttr:$name, Graph_FloatTensor:$grad, Graph_FloatTensor:$lr,
                       Graph_FloatTensor:$coefficient, F64Attr:$momentum,
                       F64Attr:$weight_decay, Optional<Graph_FloatTensor>:$param);
  let results = (outs Optional<Graph_FloatTensor>:$updated);
  let assemblyFormat = [{
    $name `,` $grad `,` $lr `,` $coefficient (`param` $param^)? `momentum` $momentum
    `weight_decay` $weight_decay attr-dict `:` type($grad) `,` type($lr) `,` type($coefficient)
    (`,` type($param)^)? (`->` type($updated)^)?
  }];
  let hasVerifier = 1;
}

def Graph_ZeroGradOp : Graph_Op<"zero_grad", [DeclareOpInterfaceMethods<Graph_ShardableOpInterface>, MemoryEffects<[MemWrite]>]> {
  let summary = "Clears a parameter's gradient accumulator";
  let arguments = (ins StrAttr:$name);
  let assemblyFormat = "$name attr-dict";
  let hasVerifier = 1;
}

#endif // TESSEL_GRAPH_TRAIN_OPS
