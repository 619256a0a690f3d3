// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// The sched dialect round-trips: a 1F1B schedule of two stages and two micro-batches.

// CHECK-LABEL: sched.pipeline "1f1b" stages 2 microbatches 2 virtual 1
// CHECK:       sched.rank 0 {
// CHECK-NEXT:    sched.forward 0 chunk 0
// CHECK-NEXT:    sched.send "activation" 0 chunk 0 to 1
// CHECK:       sched.rank 1 {
// CHECK-NEXT:    sched.recv "activation" 0 chunk 0 from 0
sched.pipeline "1f1b" stages 2 microbatches 2 virtual 1 {
  sched.rank 0 {
    sched.forward 0 chunk 0
    sched.send "activation" 0 chunk 0 to 1
    sched.forward 1 chunk 0
    sched.send "activation" 1 chunk 0 to 1
    sched.recv "gradient" 0 chunk 0 from 1
    sched.backward 0 chunk 0
    sched.recv "gradient" 1 chunk 0 from 1
    sched.backward 1 chunk 0
  }
  sched.rank 1 {
    sched.recv "activation" 0 chunk 0 from 0
    sched.forward 0 chunk 0
    sched.backward 0 chunk 0
    sched.send "gradient" 0 chunk 0 to 0
    sched.recv "activation" 1 chunk 0 from 0
    sched.forward 1 chunk 0
    sched.backward 1 chunk 0
    sched.send "gradient" 1 chunk 0 to 0
  }
}
