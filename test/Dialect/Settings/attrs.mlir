// RUN: tessel-opt %s -split-input-file | FileCheck %s
// RUN: tessel-opt %s -split-input-file | tessel-opt -split-input-file | FileCheck %s
// The module's settings print as they are read, with every field at its default left out.

// CHECK: module attributes {
// CHECK-SAME: tessel.dims = {batch = 8 : i64, heads = 4 : i64}
// CHECK-SAME: tessel.layers = 2 : i64
// CHECK-SAME: tessel.parallel = #tessel.parallel<mesh = {dp = 2 : i64, tp = 2 : i64}, shard = {batch = ["dp"], heads = ["tp"]}, sequence_parallel = true, zero = 1, schedule = interleaved, microbatches = 4, recompute = selective, context_attention = ring, overlap = false>
// CHECK-SAME: tessel.pipeline = #tessel.pipeline<schedule = zbh1, stages = 2, microbatches = 4, bubble = 2.500000e-01, in_flight = 2, bubble_formula = 2.000000e-01>
// CHECK-SAME: tessel.train = #tessel.train<batch = 16, micro_batch = 4, accumulation = 2, optimizer = <kind = sgd, lr = 1.000000e-01, momentum = 9.000000e-01>, lr_schedule = <kind = cosine, warmup = 5>, precision = "bf16">
module attributes {
  tessel.dims = {batch = 8 : i64, heads = 4 : i64},
  tessel.layers = 2 : i64,
  tessel.parallel = #tessel.parallel<shard = {heads = ["tp"], batch = ["dp"]},
                                     mesh = {tp = 2 : i64, dp = 2 : i64}, zero = 1,
                                     sequence_parallel = true, schedule = interleaved,
                                     microbatches = 4, virtual_stages = 1,
                                     recompute = selective, context_attention = ring,
                                     overlap = false>,
  tessel.pipeline = #tessel.pipeline<schedule = "zbh1", stages = 2, microbatches = 4,
                                     bubble = 0.25, in_flight = 2, bubble_formula = 0.2>,
  tessel.train = #tessel.train<batch = 16, micro_batch = 4, accumulation = 2, steps = 1000,
                               optimizer = <kind = sgd, lr = 0.1, momentum = 0.9>,
                               lr_schedule = <kind = cosine, warmup = 5>, precision = "bf16">
} {
}

// -----

// Defaults throughout: nothing is printed but the attribute's name.
// CHECK: tessel.parallel = #tessel.parallel<>, tessel.train = #tessel.train<>
module attributes {tessel.parallel = #tessel.parallel<>, tessel.train = #tessel.train<>} {
}
