// RUN: tessel-opt %s -tessel-fuse-linear-cross-entropy -split-input-file | FileCheck %s
// RUN: tessel-opt %s -tessel-fuse-linear-cross-entropy=chunk=5 -split-input-file | FileCheck %s --check-prefix=CHUNK
// RUN: tessel-opt %s -tessel-fuse-linear-cross-entropy=min-chunk=1 -split-input-file | FileCheck %s --check-prefix=AUTO
// What -tessel-fuse-linear-cross-entropy replaces by one op, and what it must leave alone.

#x = #graph.dims<batch, seq, embed>
#w = #graph.dims<vocab, embed>
#l = #graph.dims<batch, seq, vocab>
#t = #graph.dims<batch, seq>
#s = #graph.dims<>

// Training, a tied head [vocab, embed]: the head, the loss, its gradient and the two
// contractions reading the logits' gradient become one op where the gradient was computed.
// The chunk is at most the 16 rows; automatically, when allowed fewer than 256, Liger-Kernel's
// rule gives 6 rows (16 rows over ceil(48 / 16) = 3), raised to the 16 rows whose logits are
// as many as the weight's elements: every chunk adds into the weight's whole gradient.
// CHECK-LABEL: func.func @train_tied
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x8x16xf32, {{.*}}>, %[[W:[^:]*]]: tensor<48x16xf32, {{.*}}>, %[[T:[^:]*]]: tensor<2x8xi32
// CHECK-NEXT: %[[ONE:.*]] = graph.constant
// CHECK-NEXT: %[[LOSS:.*]], %[[DX:.*]], %[[DW:.*]] = graph.linear_cross_entropy_grad %[[X]], %[[W]], %[[T]], %[[ONE]] dim "vocab" scale 6.250000e-02 chunk 16
// CHECK-NEXT: return %[[LOSS]], %[[DX]], %[[DW]]
// CHUNK-LABEL: func.func @train_tied
// CHUNK: graph.linear_cross_entropy_grad {{.*}} chunk 5
// AUTO-LABEL: func.func @train_tied
// AUTO: graph.linear_cross_entropy_grad {{.*}} chunk 16
func.func @train_tied(%x: tensor<2x8x16xf32, #x>, %w: tensor<48x16xf32, #w>, %t: tensor<2x8xi32, #t>)
    -> (tensor<f32, #s>, tensor<2x8x16xf32, #x>, tensor<48x16xf32, #w>) {
  %l = graph.contract %x, %w sum ["embed"] : (tensor<2x8x16xf32, #x>, tensor<48x16xf32, #w>) -> tensor<2x8x48xf32, #l>
  %loss = graph.cross_entropy %l, %t dim "vocab" : (tensor<2x8x48xf32, #l>, tensor<2x8xi32, #t>) -> tensor<f32, #s>
  %one = graph.constant 1.000000e+00 : tensor<f32, #s>
  %dl = graph.cross_entropy_grad %l, %t, %one dim "vocab" : (tensor<2x8x48xf32, #l>, tensor<2x8xi32, #t>, tensor<f32, #s>) -> tensor<2x8x48xf32, #l>
  %dx = graph.contract %dl, %w sum ["vocab"] : (tensor<2x8x48xf32, #l>, tensor<48x16xf32, #w>) -> tensor<2x8x16xf32, #x>
  %dw = graph.contract %dl, %x sum ["batch", "seq"] : (tensor<2x8x48xf32, #l>, tensor<2x8x16xf32, #x>) -> tensor<48x16xf32, #w>
  return %loss, %dx, %dw : tensor<f32, #s>, tensor<2x8x16xf32, #x>, tensor<48x16xf32, #w>
}

// -----

#x = #graph.dims<batch, seq, embed>
#w = #graph.dims<vocab, embed>
#l = #graph.dims<batch, seq, vocab>
#t = #graph.dims<batch, seq>
#s = #graph.dims<>

// Many rows for the head's size: Liger-Kernel's rule itself, 128 rows over ceil(64 / 4) = 16
// gives 8 rows, more than the weight's 4 rows' worth of logits.
// AUTO-LABEL: func.func @many_rows
// AUTO: graph.linear_cross_entropy_grad {{.*}} chunk 8
func.func @many_rows(%x: tensor<4x32x4xf32, #x>, %w: tensor<64x4xf32, #w>, %t: tensor<4x32xi32, #t>)
    -> (tensor<f32, #s>, tensor<4x32x4xf32, #x>, tensor<64x4xf32, #w>) {
  %l = graph.contract %x, %w sum ["embed"] : (tensor<4x32x4xf32, #x>, tensor<64x4xf32, #w>) -> tensor<4x32x64xf32, #l>
  %loss = graph.cross_entropy %l, %t dim "vocab" : (tensor<4x32x64xf32, #l>, tensor<4x32xi32, #t>) -> tensor<f32, #s>
  %one = graph.constant 1.000000e+00 : tensor<f32, #s>
  %dl = graph.cross_entropy_grad %l, %t, %one dim "vocab" : (tensor<4x32x64xf32, #l>, tensor<4x32xi32, #t>, tensor<f32, #s>) -> tensor<4x32x64xf32, #l>
  %dx = graph.contract %dl, %w sum ["vocab"] : (tensor<4x32x64xf32, #l>, tensor<64x4xf32, #w>) -> tensor<4x32x4xf32, #x>
  %dw = graph.contract %dl, %x sum ["batch", "seq"] : (tensor<4x32x64xf32, #l>, tensor<4x32x4xf32, #x>) -> tensor<64x4xf32, #w>
  return %loss, %dx, %dw : tensor<f32, #s>, tensor<4x32x4xf32, #x>, tensor<64x4xf32, #w>
}

// -----

#x = #graph.dims<batch, seq, embed>
#w = #graph.dims<embed, vocab>
#l = #graph.dims<batch, seq, vocab>
#t = #graph.dims<batch, seq>
#s = #graph.dims<>

// An untied head [embed, vocab], the weight gradient's operands the other way round, a given scale (a rank's share of
// a split batch): the weight gradient keeps the weight's layout.
// CHECK-LABEL: func.func @train_untied
// CHECK: %[[LOSS:.*]], %[[DX:.*]], %[[DW:.*]] = graph.linear_cross_entropy_grad %arg0, %arg1, %arg2, %{{.*}} dim "vocab" scale 3.125000e-02 chunk 16 : {{.*}} -> (tensor<f32, #graph.dims<>>, tensor<2x8x16xf32, #graph.dims<batch, seq, embed>>, tensor<16x48xf32, #graph.dims<embed, vocab>>)
// CHECK-NOT: graph.contract
// CHECK: return %[[LOSS]], %[[DX]], %[[DW]]
func.func @train_untied(%x: tensor<2x8x16xf32, #x>, %w: tensor<16x48xf32, #w>, %t: tensor<2x8xi32, #t>)
    -> (tensor<f32, #s>, tensor<2x8x16xf32, #x>, tensor<16x48xf32, #w>) {
  %l = graph.contract %x, %w sum ["embed"] : (tensor<2x8x16xf32, #x>, tensor<16x48xf32, #w>) -> tensor<2x8x48xf32, #l>
  %loss = graph.cross_entropy %l, %t dim "vocab" {scale = 3.125000e-02 : f64} : (tensor<2x8x48xf32, #l>, tensor<2x8xi32, #t>) -> tensor<f32, #s>
  %one = graph.constant 5.000000e-01 : tensor<f32, #s>
  %dl = graph.cross_entropy_grad %l, %t, %one dim "vocab" {scale = 3.125000e-02 : f64} : (tensor<2x8x48xf32, #l>, tensor<2x8xi32, #t>, tensor<f32, #s>) -> tensor<2x8x48xf32, #l>
  %dw = graph.contract %x, %dl sum ["batch", "seq"] : (tensor<2x8x16xf32, #x>, tensor<2x8x48xf32, #l>) -> tensor<16x48xf32, #w>
  %dx = graph.contract %dl, %w sum ["vocab"] : (tensor<2x8x48xf32, #l>, tensor<16x48xf32, #w>) -> tensor<2x8x16xf32, #x>
  return %loss, %dx, %dw : tensor<f32, #s>, tensor<2x8x16xf32, #x>, tensor<16x48xf32, #w>
}

// -----

#x = #graph.dims<tokens, embed>
#w = #graph.dims<vocab, embed>
#l = #graph.dims<tokens, vocab>
#t = #graph.dims<tokens>
#s = #graph.dims<>

// Evaluation: only the loss, so the op without gradients, at the loss's place.
// CHECK-LABEL: func.func @eval
// CHECK-NEXT: %[[LOSS:.*]] = graph.linear_cross_entropy %arg0, %arg1, %arg2 dim "vocab" scale 6.250000e-02 chunk 16 :
// CHECK-NEXT: return %[[LOSS]]
func.func @eval(%x: tensor<16x16xf32, #x>, %w: tensor<48x16xf32, #w>, %t: tensor<16xi32, #t>) -> tensor<f32, #s> {
  %l = graph.contract %x, %w sum ["embed"] : (tensor<16x16xf32, #x>, tensor<48x16xf32, #w>) -> tensor<16x48xf32, #l>
  %loss = graph.cross_entropy %l, %t dim "vocab" : (tensor<16x48xf32, #l>, tensor<16xi32, #t>) -> tensor<f32, #s>
  return %loss : tensor<f32, #s>
}

// -----

#x = #graph.dims<batch, seq, embed>
#w = #graph.dims<vocab, embed>
#l = #graph.dims<batch, seq, vocab>
#t = #graph.dims<batch, seq>
#s = #graph.dims<>

// Vocabulary parallelism (the partition pass's form over tp): the row maxima, sums and
// target logits and the all-reduces between them go into the op, which names the axis; the
// input gradient stays a partial sum, all-reduced after it as before.
// CHECK-LABEL: func.func @train_split
// CHECK-NOT: graph.ce_
// CHECK: %[[LOSS:.*]], %[[DX:.*]], %[[DW:.*]] = graph.linear_cross_entropy_grad %arg0, %arg1, %arg2, %{{.*}} dim "vocab" axis "tp" scale 6.250000e-02 chunk 16
// CHECK-SAME: graph.sharding = [#graph.sharding<[]>, #graph.sharding<[*, *, *] partial [tp]>, #graph.sharding<[tp, *]>]
// CHECK-NEXT: %[[DXR:.*]] = shard.all_reduce %[[DX]]
// CHECK-NOT: graph.ce_
// CHECK: return %[[LOSS]], %[[DXR]], %[[DW]]
shard.grid @mesh(shape = 2)
func.func @train_split(%x: tensor<2x8x16xf32, #x>, %w: tensor<24x16xf32, #w>, %t: tensor<2x8xi32, #t>)
    -> (tensor<f32, #s>, tensor<2x8x16xf32, #x>, tensor<24x16xf32, #w>) {
  %l = graph.contract %x, %w sum ["embed"] {graph.sharding = [#graph.sharding<[*, *, tp]>]} : (tensor<2x8x16xf32, #x>, tensor<24x16xf32, #w>) -> tensor<2x8x24xf32, #l>
  %m = graph.ce_max %l dim "vocab" axis "tp" {graph.sharding = [#graph.sharding<[*, *] partial [tp]>]} : tensor<2x8x24xf32, #l> -> tensor<2x8xf32, #t>
  %mr = shard.all_reduce %m on @mesh grid_axes = [0] reduction = max {graph.sharding = [#graph.sharding<[*, *]>]} : tensor<2x8xf32, #t> -> tensor<2x8xf32, #t>
  %s, %p = graph.ce_sums %l, %t, %mr dim "vocab" axis "tp" {graph.sharding = [#graph.sharding<[*, *] partial [tp]>, #graph.sharding<[*, *] partial [tp]>]} : (tensor<2x8x24xf32, #l>, tensor<2x8xi32, #t>, tensor<2x8xf32, #t>) -> (tensor<2x8xf32, #t>, tensor<2x8xf32, #t>)
  %sr = shard.all_reduce %s on @mesh grid_axes = [0] {graph.sharding = [#graph.sharding<[*, *]>]} : tensor<2x8xf32, #t> -> tensor<2x8xf32, #t>
  %pr = shard.all_reduce %p on @mesh grid_axes = [0] {graph.sharding = [#graph.sharding<[*, *]>]} : tensor<2x8xf32, #t> -> tensor<2x8xf32, #t>
  %loss = graph.ce_loss %mr, %sr, %pr scale 6.250000e-02 {graph.sharding = [#graph.sharding<[]>]} : (tensor<2x8xf32, #t>, tensor<2x8xf32, #t>, tensor<2x8xf32, #t>) -> tensor<f32, #s>
  %one = graph.constant 1.000000e+00 {graph.sharding = [#graph.sharding<[]>]} : tensor<f32, #s>
  %dl = graph.ce_grad %l, %t, %mr, %sr, %one dim "vocab" axis "tp" scale 6.250000e-02 {graph.sharding = [#graph.sharding<[*, *, tp]>]} : (tensor<2x8x24xf32, #l>, tensor<2x8xi32, #t>, tensor<2x8xf32, #t>, tensor<2x8xf32, #t>, tensor<f32, #s>) -> tensor<2x8x24xf32, #l>
  %dx = graph.contract %dl, %w sum ["vocab"] {graph.sharding = [#graph.sharding<[*, *, *] partial [tp]>]} : (tensor<2x8x24xf32, #l>, tensor<24x16xf32, #w>) -> tensor<2x8x16xf32, #x>
  %dw = graph.contract %dl, %x sum ["batch", "seq"] {graph.sharding = [#graph.sharding<[tp, *]>]} : (tensor<2x8x24xf32, #l>, tensor<2x8x16xf32, #x>) -> tensor<24x16xf32, #w>
  %dxr = shard.all_reduce %dx on @mesh grid_axes = [0] {graph.sharding = [#graph.sharding<[*, *, *]>]} : tensor<2x8x16xf32, #x> -> tensor<2x8x16xf32, #x>
  return %loss, %dxr, %dw : tensor<f32, #s>, tensor<2x8x16xf32, #x>, tensor<24x16xf32, #w>
}

// -----

#x = #graph.dims<tokens, embed>
#w = #graph.dims<vocab, embed>
#l = #graph.dims<tokens, vocab>
#t = #graph.dims<tokens>
#s = #graph.dims<>

// Not fused: the logits are also a result (as sampling returns them).
// CHECK-LABEL: func.func @logits_returned
// CHECK-NOT: graph.linear_cross_entropy
// CHECK: graph.contract
// CHECK: graph.cross_entropy
func.func @logits_returned(%x: tensor<16x16xf32, #x>, %w: tensor<48x16xf32, #w>, %t: tensor<16xi32, #t>) -> (tensor<f32, #s>, tensor<16x48xf32, #l>) {
  %l = graph.contract %x, %w sum ["embed"] : (tensor<16x16xf32, #x>, tensor<48x16xf32, #w>) -> tensor<16x48xf32, #l>
  %loss = graph.cross_entropy %l, %t dim "vocab" : (tensor<16x48xf32, #l>, tensor<16xi32, #t>) -> tensor<f32, #s>
  return %loss, %l : tensor<f32, #s>, tensor<16x48xf32, #l>
}

// -----

#x = #graph.dims<tokens, embed>
#w = #graph.dims<vocab, embed>
#l = #graph.dims<tokens, vocab>
#t = #graph.dims<tokens>
#s = #graph.dims<>

// Not fused: a second reader of the logits (an auxiliary z-loss-like term).
// CHECK-LABEL: func.func @second_reader
// CHECK-NOT: graph.linear_cross_entropy
// CHECK: graph.contract
// CHECK: graph.cross_entropy
// CHECK: graph.softmax
func.func @second_reader(%x: tensor<16x16xf32, #x>, %w: tensor<48x16xf32, #w>, %t: tensor<16xi32, #t>) -> (tensor<f32, #s>, tensor<16x48xf32, #l>) {
  %l = graph.contract %x, %w sum ["embed"] : (tensor<16x16xf32, #x>, tensor<48x16xf32, #w>) -> tensor<16x48xf32, #l>
  %loss = graph.cross_entropy %l, %t dim "vocab" : (tensor<16x48xf32, #l>, tensor<16xi32, #t>) -> tensor<f32, #s>
  %p = graph.softmax %l dim "vocab" : tensor<16x48xf32, #l>
  return %loss, %p : tensor<f32, #s>, tensor<16x48xf32, #l>
}

// -----

#x = #graph.dims<tokens, embed>
#w = #graph.dims<vocab, embed>
#l = #graph.dims<tokens, vocab>
#t = #graph.dims<tokens>
#s = #graph.dims<>

// Not fused: the logits' gradient is read by more than the two gradient contractions, so
// it must exist whole; nor is the loss alone fused, since the gradient reads the logits.
// CHECK-LABEL: func.func @gradient_read_elsewhere
// CHECK-NOT: graph.linear_cross_entropy
// CHECK: graph.cross_entropy_grad
// CHECK-COUNT-2: graph.contract %{{.*}}
func.func @gradient_read_elsewhere(%x: tensor<16x16xf32, #x>, %w: tensor<48x16xf32, #w>, %t: tensor<16xi32, #t>)
    -> (tensor<f32, #s>, tensor<16x16xf32, #x>, tensor<48x16xf32, #w>, tensor<16x48xf32, #l>) {
  %l = graph.contract %x, %w sum ["embed"] : (tensor<16x16xf32, #x>, tensor<48x16xf32, #w>) -> tensor<16x48xf32, #l>
  %loss = graph.cross_entropy %l, %t dim "vocab" : (tensor<16x48xf32, #l>, tensor<16xi32, #t>) -> tensor<f32, #s>
  %one = graph.constant 1.000000e+00 : tensor<f32, #s>
  %dl = graph.cross_entropy_grad %l, %t, %one dim "vocab" : (tensor<16x48xf32, #l>, tensor<16xi32, #t>, tensor<f32, #s>) -> tensor<16x48xf32, #l>
  %dx = graph.contract %dl, %w sum ["vocab"] : (tensor<16x48xf32, #l>, tensor<48x16xf32, #w>) -> tensor<16x16xf32, #x>
  %dw = graph.contract %dl, %x sum ["tokens"] : (tensor<16x48xf32, #l>, tensor<16x16xf32, #x>) -> tensor<48x16xf32, #w>
  return %loss, %dx, %dw, %dl : tensor<f32, #s>, tensor<16x16xf32, #x>, tensor<48x16xf32, #w>, tensor<16x48xf32, #l>
}

// -----

#x = #graph.dims<tokens, embed>
#w = #graph.dims<vocab, embed>
#l = #graph.dims<tokens, vocab>
#t = #graph.dims<tokens>
#s = #graph.dims<>

// Not fused: the classes are not the logits' last dim (the plan's chunks are rows of x).
// CHECK-LABEL: func.func @classes_first
// CHECK-NOT: graph.linear_cross_entropy
// CHECK: graph.cross_entropy
func.func @classes_first(%x: tensor<16x16xf32, #x>, %w: tensor<48x16xf32, #w>, %t: tensor<16xi32, #t>) -> tensor<f32, #s> {
  %l = graph.contract %w, %x sum ["embed"] : (tensor<48x16xf32, #w>, tensor<16x16xf32, #x>) -> tensor<48x16xf32, #graph.dims<vocab, tokens>>
  %loss = graph.cross_entropy %l, %t dim "vocab" : (tensor<48x16xf32, #graph.dims<vocab, tokens>>, tensor<16xi32, #t>) -> tensor<f32, #s>
  return %loss : tensor<f32, #s>
}

// -----

#x = #graph.dims<tokens, embed>
#w = #graph.dims<vocab, embed>
#l = #graph.dims<tokens, vocab>
#t = #graph.dims<tokens>
#s = #graph.dims<>

// ZeRO-3: the backward pass gathers the table again for the input gradient; the fused op
// reads the forward pass's gather, and the second gather, read by nothing else, goes.
// CHECK-LABEL: func.func @zero3_regather
// CHECK: %[[G:.*]] = shard.all_gather %arg1
// CHECK-NEXT: graph.constant
// CHECK-NEXT: graph.linear_cross_entropy_grad %arg0, %[[G]], %arg2
// CHECK-NOT: shard.all_gather
// CHECK: return
shard.grid @mesh(shape = 2)
func.func @zero3_regather(%x: tensor<16x16xf32, #x>, %ws: tensor<24x16xf32, #w>, %t: tensor<16xi32, #t>)
    -> (tensor<f32, #s>, tensor<16x16xf32, #x>, tensor<48x16xf32, #w>) {
  %w = shard.all_gather %ws on @mesh grid_axes = [0] gather_axis = 0 : tensor<24x16xf32, #w> -> tensor<48x16xf32, #w>
  %l = graph.contract %x, %w sum ["embed"] : (tensor<16x16xf32, #x>, tensor<48x16xf32, #w>) -> tensor<16x48xf32, #l>
  %loss = graph.cross_entropy %l, %t dim "vocab" : (tensor<16x48xf32, #l>, tensor<16xi32, #t>) -> tensor<f32, #s>
  %one = graph.constant 1.000000e+00 : tensor<f32, #s>
  %dl = graph.cross_entropy_grad %l, %t, %one dim "vocab" : (tensor<16x48xf32, #l>, tensor<16xi32, #t>, tensor<f32, #s>) -> tensor<16x48xf32, #l>
  %w2 = shard.all_gather %ws on @mesh grid_axes = [0] gather_axis = 0 : tensor<24x16xf32, #w> -> tensor<48x16xf32, #w>
  %dx = graph.contract %dl, %w2 sum ["vocab"] : (tensor<16x48xf32, #l>, tensor<48x16xf32, #w>) -> tensor<16x16xf32, #x>
  %dw = graph.contract %dl, %x sum ["tokens"] : (tensor<16x48xf32, #l>, tensor<16x16xf32, #x>) -> tensor<48x16xf32, #w>
  return %loss, %dx, %dw : tensor<f32, #s>, tensor<16x16xf32, #x>, tensor<48x16xf32, #w>
}
