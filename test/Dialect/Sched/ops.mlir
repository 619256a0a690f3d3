// RUN: tessel-opt %s -split-input-file | tessel-opt -split-input-file | FileCheck %s
// The sched dialect round-trips. Each rank's action list is common/schedule's for these sizes;
// `tessel estimate --trace` draws it (Transforms/schedules.test).

// CHECK: sched.pipeline "1f1b" stages 2 microbatches 2 virtual 1
sched.pipeline "1f1b" stages 2 microbatches 2 virtual 1

// -----

// CHECK: sched.pipeline "interleaved" stages 2 microbatches 4 virtual 2 attributes {bubble = 2.500000e-01 : f64, in_flight = array<i64: 4, 3>, layers = array<i64: 0, 1, 1, 1, 2, 1, 3, 1>}
sched.pipeline "interleaved" stages 2 microbatches 4 virtual 2
    attributes {layers = array<i64: 0, 1, 1, 1, 2, 1, 3, 1>, bubble = 0.25, in_flight = array<i64: 4, 3>}
