//===- PlanOps.td - Ops of the plan dialect ----------------*- tablegen -*-===//
#ifndef TESSEL_PLAN_OPS
#define TESSEL_PLAN_OPS

include "PlanDialect.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Plan_MeshOp : Plan_Op<"mesh", [HasParent<"::mlir::ModuleOp">]> {
  let summary = "The grid of ranks a plan runs on";
  let description = [{
    The mesh axes, outermost first, and their sizes: ranks are numbered row-major over them,
    so neighbours along the last axis have adjacent ranks. Axes of size 1 split nothing and
    are left out; a plan for one rank has no axes. A module has one.

    ```mlir
    plan.mesh ["pp", "dp", "tp"] sizes [2, 2, 2]
    ```
  }];
  let arguments = (ins StrArrayAttr:$axes, DenseI64ArrayAttr:$sizes);
  let assemblyFormat = "$axes `sizes` $sizes attr-dict";
  let hasVerifier = 1;
}

def Plan_GroupOp : Plan_Op<"group", [HasParent<"::mlir::ModuleOp">]> {
  let summary = "A communicator group: the ranks that differ only along some mesh axes";
  let description = [{
    `axes` are indices into the module's `plan.mesh`, in order. A group is named by its axes'
    names joined by "_" (`dp_tp`), outermost first, as collectives name the group they run
    over; `world` spans every axis. Each rank resolves a group to its own instance from its
    mesh coordinates.

    ```mlir
    plan.group "world" axes [0, 1, 2]
    plan.group "dp_tp" axes [1, 2]
    ```
  }];
  let arguments = (ins StrAttr:$sym_name, DenseI64ArrayAttr:$axes);
  let assemblyFormat = "$sym_name `axes` $axes attr-dict";
  let hasVerifier = 1;
}

def Plan_TensorOp : Plan_Op<"tensor", [HasParent<"::mlir::ModuleOp">]> {
  let summary = "Declares a persistent tensor of every rank";
  let description = [{
    `role` is `param`, `grad`, `adam_m`, `adam_v`, `momentum` or `working` (a parameter's 16-bit
    working copy under mixed precision); `of` names the parameter a gradient, moment or copy
    belongs to. `init` says how the runtime fills it before the first step
    (parameters from the spec; the rest start at zero); `dims` keeps the dim names for
    checkpoints and tools. On a mesh, the type is one rank's block and `split` names, per
    dim, the communicator group that splits it ("" for a whole dim). With a pipeline,
    `stages` lists the pipeline stages that hold the tensor (absent: every rank does). A
    parameter initialised `"load"` is the stored tensor `from` names in the weights the run
    starts from, or the piece `slice` = [part, parts, axis] of it.

    ```mlir
    plan.tensor "wte" role "param" init "normal"(0.0, 0.02) dims ["vocab", "embed"]
        : memref<256x128xf32>
    ```
  }];
  let arguments = (ins StrAttr:$sym_name, StrAttr:$role, DefaultValuedStrAttr<StrAttr, "">:$of,
                       StrAttr:$init, F64Attr:$init_a, F64Attr:$init_b, StrArrayAttr:$dims,
                       TypeAttrOf<AnyStaticShapeMemRef>:$type, OptionalAttr<StrArrayAttr>:$split,
                       OptionalAttr<DenseI64ArrayAttr>:$stages,
                       OptionalAttr<StrAttr>:$init_source,
                       OptionalAttr<DenseI64ArrayAttr>:$init_slice);
  let assemblyFormat = [{
    $sym_name `role` $role (`of` $of^)? `init` $init `(` $init_a `,` $init_b `)`
    (`from` $init_source^)? (`slice` $init_slice^)? `dims` $dims
    (`split` $split^)? (`stages` $stages^)? attr-dict `:` $type
  }];
}

def Plan_ProgramOp : Plan_Op<"program", [HasParent<"::mlir::ModuleOp">, NoTerminator,
                                         SingleBlock, IsolatedFromAbove]> {
  let summary = "A straight-line program, run by every rank it concerns";
  let description = [{
    Runs its ops in order. A program is stored once and run by every rank of its stage, each
    with its own groups (collectives name their group, which each rank resolves to its
    instance from its mesh coordinates). `arena_bytes`, set by the memory planner, is the peak
    of the arena this program needs; all programs of a rank share one arena. With a pipeline,
    `stage` says which pipeline stage's ranks run the program (absent: every rank); the
    programs of one name but different stages are the stages' versions of it.

    ```mlir
    plan.program "forward_backward" { ... }
    plan.program "forward.1" stage 1 { ... }
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<I64Attr>:$arena_bytes,
                       OptionalAttr<I64Attr>:$stage);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$name (`stage` $stage^)? attr-dict-with-keyword $body";
}

def Plan_StateOp : Plan_Op<"state", [Pure]> {
  let summary = "A persistent tensor, by name";
  let description = [{
    ```mlir
    %w = plan.state "wte" : memref<256x128xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs AnyStaticShapeMemRef:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Plan_InputOp : Plan_Op<"input"> {
  let summary = "A program argument, written into the arena by the host before the run";
  let description = [{
    ```mlir
    %t = plan.input "tokens" offset 0 : memref<16x64xi32>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<I64Attr>:$offset,
                       OptionalAttr<StrArrayAttr>:$split);
  let results = (outs AnyStaticShapeMemRef:$result);
  let assemblyFormat = "$name (`offset` $offset^)? (`split` $split^)? attr-dict `:` type($result)";
}

def Plan_AllocOp : Plan_Op<"alloc"> {
  let summary = "A byte range of the arena for one intermediate value";
  let description = [{
    The memory planner sets `offset` so that no two ranges live at the same time overlap.

    ```mlir
    %b = plan.alloc offset 4096 : memref<16x64x128xf32>
    ```
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$offset);
  let results = (outs AnyStaticShapeMemRef:$result);
  let assemblyFormat = "(`offset` $offset^)? attr-dict `:` type($result)";
}

def Plan_ViewOp : Plan_Op<"view", [Pure]> {
  let summary = "The same bytes under another shape, or a block of them";
  let description = [{
    Without `offset`, the whole source under another shape (split and merge of dims); with
    it, the result's elements starting `offset` elements into the source (the parts of a
    gradient bucket).
    ```mlir
    %v = plan.view %b : memref<16x64x128xf32> to memref<16x64x4x32xf32>
    %g = plan.view %bucket offset 128 : memref<4160xf32> to memref<32x128xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeMemRef:$source, OptionalAttr<I64Attr>:$offset);
  let results = (outs AnyStaticShapeMemRef:$result);
  let assemblyFormat =
      "$source (`offset` $offset^)? attr-dict `:` type($source) `to` type($result)";
  let hasVerifier = 1;
}

def Plan_KernelOp : Plan_Op<"kernel", [AttrSizedOperandSegments]> {
  let summary = "One kernel call";
  let description = [{
    Reads `ins`, writes `outs`. `params` holds the resolved sizes, strides and options of
    the kernel `name`. The kernel catalogue (common/catalogue/KernelCatalogue.def; `tessel kernels` and
    docs/plan-format.md list it) declares each kernel's operands, their element types and its
    parameters; the verifier checks the op against it.

    ```mlir
    plan.kernel "softmax" ins(%x : memref<1024x256xf32>) outs(%y : memref<1024x256xf32>)
        {cols = 256 : i64, rows = 1024 : i64}
    ```
  }];
  let arguments = (ins StrAttr:$name, Variadic<AnyStaticShapeMemRef>:$ins,
                       Variadic<AnyStaticShapeMemRef>:$outs, DictionaryAttr:$params);
  let assemblyFormat = [{
    $name (`ins` `(` $ins^ `:` type($ins) `)`)? (`outs` `(` $outs^ `:` type($outs) `)`)? $params
    attr-dict
  }];
  let hasVerifier = 1;
}

def Plan_OutputOp : Plan_Op<"output"> {
  let summary = "Names a program result the host reads after the run";
  let description = [{
    ```mlir
    plan.output "loss", %l : memref<f32>
    ```
  }];
  let arguments = (ins StrAttr:$name, AnyStaticShapeMemRef:$value);
  let assemblyFormat = "$name `,` $value attr-dict `:` type($value)";
}

#endif // TESSEL_PLAN_OPS
