// RUN: tessel-opt %s -split-input-file -verify-diagnostics
// The sched dialect's verifier errors.

// expected-error @+1 {{unknown schedule 'gpipe'; expected one of afab, 1f1b, interleaved, zbh1}}
sched.pipeline "gpipe" stages 2 microbatches 4 virtual 1

// -----

// expected-error @+1 {{needs stages, microbatches and virtual of at least 1}}
sched.pipeline "1f1b" stages 2 microbatches 0 virtual 1

// -----

// expected-error @+1 {{the interleaved schedule cannot run:}}
sched.pipeline "interleaved" stages 4 microbatches 6 virtual 2

// -----

// expected-error @+1 {{lists 2 layer numbers; two per virtual stage are 4}}
sched.pipeline "1f1b" stages 2 microbatches 4 virtual 1 attributes {layers = array<i64: 0, 2>}

// -----

// expected-error @+1 {{gives 1 ranks micro-batches in flight, not 2}}
sched.pipeline "1f1b" stages 2 microbatches 4 virtual 1 attributes {in_flight = array<i64: 2>}
