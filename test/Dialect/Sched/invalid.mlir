// RUN: tessel-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{unknown schedule 'gpipe'; expected one of afab, 1f1b, interleaved, zbh1}}
sched.pipeline "gpipe" stages 1 microbatches 1 virtual 1 {
  sched.rank 0 {
    sched.forward 0 chunk 0
    sched.backward 0 chunk 0
  }
}

// -----

sched.pipeline "afab" stages 1 microbatches 2 virtual 1 {
  // expected-error @+1 {{does not run the forward and backward of every micro-batch}}
  sched.rank 0 {
    sched.forward 0 chunk 0
    sched.forward 1 chunk 0
    sched.backward 0 chunk 0
  }
}

// -----

sched.pipeline "afab" stages 1 microbatches 1 virtual 1 {
  sched.rank 0 {
    sched.forward 0 chunk 0
    // expected-error @+1 {{repeats micro-batch 0 of chunk 0}}
    sched.forward 0 chunk 0
    sched.backward 0 chunk 0
  }
}

// -----

sched.pipeline "afab" stages 1 microbatches 1 virtual 1 {
  sched.rank 0 {
    // expected-error @+1 {{names a micro-batch or chunk out of range}}
    sched.forward 3 chunk 0
  }
}

// -----

// expected-error @+1 {{has 1 ranks, not 2}}
sched.pipeline "1f1b" stages 2 microbatches 1 virtual 1 {
  sched.rank 0 {
    sched.forward 0 chunk 0
    sched.backward 0 chunk 0
  }
}
