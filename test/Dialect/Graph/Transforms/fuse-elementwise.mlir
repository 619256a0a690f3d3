// RUN: tessel-opt %s -tessel-fuse-elementwise -split-input-file | FileCheck %s
// What -tessel-fuse-elementwise groups, and what it must keep apart.

#bf = #graph.dims<batch, ffn>
#f = #graph.dims<ffn>
#s = #graph.dims<>

// A bias add and GELU: the bias [ffn] is an input read through strides; the add's value is
// also read by the gradient outside the group (a contraction's operand), so it is a result.
// CHECK-LABEL: func.func @bias_gelu
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32, #graph.dims<batch, ffn>>, %[[B:.*]]: tensor<16xf32, #graph.dims<ffn>>
// CHECK: %[[F:.*]]:2 = graph.fused_elementwise %[[X]], %[[B]] body "add x0 x1; gelu t0" outputs [0, 1]
// CHECK: graph.contract %[[F]]#0, %[[F]]#1
// CHECK-NOT: graph.add
// CHECK-NOT: graph.unary gelu
func.func @bias_gelu(%x: tensor<8x16xf32, #bf>, %b: tensor<16xf32, #f>) -> tensor<f32, #s> {
  %h = graph.add %x, %b : (tensor<8x16xf32, #bf>, tensor<16xf32, #f>) -> tensor<8x16xf32, #bf>
  %g = graph.unary gelu %h : tensor<8x16xf32, #bf>
  %c = graph.contract %h, %g sum ["batch", "ffn"] : (tensor<8x16xf32, #bf>, tensor<8x16xf32, #bf>) -> tensor<f32, #s>
  return %c : tensor<f32, #s>
}

// -----

#bf = #graph.dims<batch, ffn>
// A tree: two branches joined by a product, then scaled by a constant (a step, not an
// input); only the root is read outside, so the fused op has one result.
// CHECK-LABEL: func.func @tree
// CHECK-NOT: graph.constant
// CHECK: %[[F:.*]] = graph.fused_elementwise %arg0, %arg1 body "silu x0; mul t0 x1; const 0.5; mul t1 t2" outputs [3]
// CHECK-NEXT: return %[[F]]
func.func @tree(%a: tensor<8x16xf32, #bf>, %b: tensor<8x16xf32, #bf>) -> tensor<8x16xf32, #bf> {
  %s = graph.unary silu %a : tensor<8x16xf32, #bf>
  %m = graph.mul %s, %b : (tensor<8x16xf32, #bf>, tensor<8x16xf32, #bf>) -> tensor<8x16xf32, #bf>
  %c = graph.constant 5.000000e-01 : tensor<f32, #graph.dims<>>
  %y = graph.mul %m, %c : (tensor<8x16xf32, #bf>, tensor<f32, #graph.dims<>>) -> tensor<8x16xf32, #bf>
  return %y : tensor<8x16xf32, #bf>
}

// -----

#bf = #graph.dims<batch, ffn>
#f = #graph.dims<ffn>
// The gradient of GELU and of pow, with the residual sum: unary_grad steps carry their
// function (and pow's exponent).
// CHECK-LABEL: func.func @gradients
// CHECK: graph.fused_elementwise %arg0, %arg1, %arg2 body "pow x0 3; unary_grad pow x0 t0 x1 3; unary_grad gelu x0 x2 t1; add t2 x1" outputs [3]
func.func @gradients(%x: tensor<8x16xf32, #bf>, %dy: tensor<8x16xf32, #bf>, %g: tensor<8x16xf32, #bf>) -> tensor<8x16xf32, #bf> {
  %p = graph.unary pow %x exponent 3.000000e+00 : tensor<8x16xf32, #bf>
  %dp = graph.unary_grad pow %x, %p, %dy exponent 3.000000e+00 : tensor<8x16xf32, #bf>
  %dg = graph.unary_grad gelu %x, %g, %dp : tensor<8x16xf32, #bf>
  %r = graph.add %dg, %dy : (tensor<8x16xf32, #bf>, tensor<8x16xf32, #bf>) -> tensor<8x16xf32, #bf>
  return %r : tensor<8x16xf32, #bf>
}

// -----

#bf = #graph.dims<batch, ffn>
#f = #graph.dims<ffn>
// A broadcast that only the group reads is read through strides (input #1 is the [ffn]
// tensor itself); one that is read elsewhere too stays, and its result is an input.
// CHECK-LABEL: func.func @broadcasts
// CHECK: %[[KEEP:.*]] = graph.broadcast %arg2
// CHECK-NOT: graph.broadcast
// CHECK: graph.fused_elementwise %arg0, %arg1, %[[KEEP]] body "sub x0 x1; tanh t0; mul t1 x2" outputs [2]
func.func @broadcasts(%x: tensor<8x16xf32, #bf>, %b: tensor<16xf32, #f>, %c: tensor<16xf32, #f>) -> (tensor<8x16xf32, #bf>, tensor<8x16xf32, #bf>) {
  %bb = graph.broadcast %b : tensor<16xf32, #f> -> tensor<8x16xf32, #bf>
  %cb = graph.broadcast %c : tensor<16xf32, #f> -> tensor<8x16xf32, #bf>
  %d = graph.sub %x, %bb : (tensor<8x16xf32, #bf>, tensor<8x16xf32, #bf>) -> tensor<8x16xf32, #bf>
  %t = graph.unary tanh %d : tensor<8x16xf32, #bf>
  %y = graph.mul %t, %cb : (tensor<8x16xf32, #bf>, tensor<8x16xf32, #bf>) -> tensor<8x16xf32, #bf>
  return %y, %cb : tensor<8x16xf32, #bf>, tensor<8x16xf32, #bf>
}

// -----

#sk = #graph.dims<seq, seq_k>
#q = #graph.dims<seq>
#k = #graph.dims<seq_k>
// A causal mask from positions: the comparison and the select fuse; positions (sources of
// their own) are inputs.
// CHECK-LABEL: func.func @mask
// CHECK: %[[Q:.*]] = graph.positions
// CHECK: %[[K:.*]] = graph.positions
// CHECK: graph.fused_elementwise %[[Q]], %[[K]], %arg0 body "gt x0 x1; const -1e+30; where t0 t1 x2" outputs [2]
func.func @mask(%s: tensor<4x4xf32, #sk>) -> tensor<4x4xf32, #sk> {
  %q = graph.positions : tensor<4xf32, #q>
  %k = graph.positions : tensor<4xf32, #k>
  %m = graph.gt %q, %k : (tensor<4xf32, #q>, tensor<4xf32, #k>) -> tensor<4x4xf32, #sk>
  %ninf = graph.constant -1.000000e+30 : tensor<f32, #graph.dims<>>
  %y = graph.where %m, %ninf, %s : (tensor<4x4xf32, #sk>, tensor<f32, #graph.dims<>>, tensor<4x4xf32, #sk>) -> tensor<4x4xf32, #sk>
  return %y : tensor<4x4xf32, #sk>
}

// -----

#bf = #graph.dims<batch, ffn>
// Not fused: a contraction between two elementwise ops. %d reads the group {exp, neg} and the
// contraction, which reads the group: one fused op in its place would read its own result.
// CHECK-LABEL: func.func @contraction_between
// CHECK: %[[F:.*]]:2 = graph.fused_elementwise %arg0 body "exp x0; neg t0" outputs [0, 1]
// CHECK: %[[C:.*]] = graph.contract %[[F]]#0, %arg1
// CHECK: %[[R:.*]] = graph.rename %[[C]]
// CHECK: graph.add %[[F]]#1, %[[R]]
func.func @contraction_between(%x: tensor<8x16xf32, #bf>, %w: tensor<16x16xf32, #graph.dims<ffn, out>>) -> tensor<8x16xf32, #bf> {
  %e = graph.unary exp %x : tensor<8x16xf32, #bf>
  %n = graph.unary neg %e : tensor<8x16xf32, #bf>
  %c = graph.contract %e, %w sum ["ffn"] : (tensor<8x16xf32, #bf>, tensor<16x16xf32, #graph.dims<ffn, out>>) -> tensor<8x16xf32, #graph.dims<batch, out>>
  %r = graph.rename %c : tensor<8x16xf32, #graph.dims<batch, out>> -> tensor<8x16xf32, #bf>
  %d = graph.add %n, %r : (tensor<8x16xf32, #bf>, tensor<8x16xf32, #bf>) -> tensor<8x16xf32, #bf>
  return %d : tensor<8x16xf32, #bf>
}

// -----

#bf = #graph.dims<batch, ffn>
#b = #graph.dims<batch>
// Not fused: ops of other shapes that are not broadcasts of the group's (a sum over ffn,
// then ops on [batch]); each shape makes a group of its own.
// CHECK-LABEL: func.func @different_shapes
// CHECK: %[[A:.*]] = graph.fused_elementwise %arg0 body "exp x0; mul t0 t0" outputs [1]
// CHECK: %[[S:.*]] = graph.sum %[[A]]
// CHECK: graph.fused_elementwise %[[S]] body "sqrt x0; neg t0" outputs [1]
func.func @different_shapes(%x: tensor<8x16xf32, #bf>) -> tensor<8xf32, #b> {
  %a = graph.unary exp %x : tensor<8x16xf32, #bf>
  %m = graph.mul %a, %a : (tensor<8x16xf32, #bf>, tensor<8x16xf32, #bf>) -> tensor<8x16xf32, #bf>
  %s = graph.sum %m dims ["ffn"] : tensor<8x16xf32, #bf> -> tensor<8xf32, #b>
  %u = graph.unary sqrt %s : tensor<8xf32, #b>
  %v = graph.unary neg %u : tensor<8xf32, #b>
  return %v : tensor<8xf32, #b>
}

// -----

#bf = #graph.dims<batch, ffn>
#bfs = #graph.dims<batch, ffn, seq>
// Not fused: an op whose result is larger (a broadcast over seq) starts its own group, which
// reads the smaller value through strides; a group of one op is left as it is; dropout (its
// mask depends on where an element is in the whole batch) stays a kernel of its own.
// CHECK-LABEL: func.func @alone
// CHECK: graph.unary exp %arg0
// CHECK-NEXT: graph.dropout
// CHECK-NEXT: graph.fused_elementwise %{{.*}}, %arg1 body "add x0 x1; tanh t0" outputs [1]
// CHECK-NOT: graph.fused_elementwise
func.func @alone(%x: tensor<8x16xf32, #bf>, %z: tensor<4xf32, #graph.dims<seq>>) -> tensor<8x16x4xf32, #bfs> {
  %a = graph.unary exp %x : tensor<8x16xf32, #bf>
  %d = graph.dropout %a rate 1.000000e-01 : tensor<8x16xf32, #bf>
  %y = graph.add %d, %z : (tensor<8x16xf32, #bf>, tensor<4xf32, #graph.dims<seq>>) -> tensor<8x16x4xf32, #bfs>
  %t = graph.unary tanh %y : tensor<8x16x4xf32, #bfs>
  return %t : tensor<8x16x4xf32, #bfs>
}
