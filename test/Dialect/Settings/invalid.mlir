// RUN: tessel-opt %s -split-input-file -verify-diagnostics
// Settings the settings dialect refuses: every `tessel.*` attribute is verified once, here,
// rather than read as its default by whichever pass reads it.

// expected-error @+1 {{'tessel.parallel' holds #tessel.parallel<...>, not {mesh = {tp = 2 : i64}}}}
module attributes {tessel.parallel = {mesh = {tp = 2 : i64}}} {
}

// -----

module {
  // expected-error @+1 {{'tessel.train' is a module's setting}}
  func.func @f() attributes {tessel.train = #tessel.train<>} {
    return
  }
}

// -----

// expected-error @+1 {{'tessel.paralel' is not a setting Tessel knows}}
module attributes {tessel.paralel = #tessel.parallel<>} {
}

// -----

// expected-error @+1 {{mesh axis 'xp' is not one of pp, dp, ep, cp, tp}}
module attributes {tessel.parallel = #tessel.parallel<mesh = {xp = 2 : i64}>} {
}

// -----

// expected-error @+1 {{mesh axis 'tp' needs a size of 1 or more, not 0 : i64}}
module attributes {tessel.parallel = #tessel.parallel<mesh = {tp = 0 : i64}>} {
}

// -----

// expected-error @+1 {{dim 'heads' is mapped to "mp", not one of pp, dp, ep, cp, tp}}
module attributes {tessel.parallel = #tessel.parallel<shard = {heads = ["mp"]}>} {
}

// -----

// expected-error @+1 {{ZeRO stage 4 is not 0, 1, 2 or 3}}
module attributes {tessel.parallel = #tessel.parallel<zero = 4>} {
}

// -----

// expected-error @+2 {{unknown pipeline schedule 'gpipe'; expected afab, 1f1b, interleaved, zbh1}}
// expected-error @+1 {{failed to parse Settings_ParallelAttr parameter 'schedule'}}
module attributes {tessel.parallel = #tessel.parallel<schedule = gpipe>} {
}

// -----

// expected-error @+1 {{needs batch, micro_batch, accumulation and steps of 1 or more}}
module attributes {tessel.train = #tessel.train<batch = 0>} {
}

// -----

// expected-error @+1 {{precision 'fp8' is not fp32, bf16 or fp16}}
module attributes {tessel.train = #tessel.train<precision = "fp8">} {
}

// -----

// expected-error @+2 {{needs beta1 and beta2 in [0, 1)}}
// expected-error @+1 {{failed to parse Settings_TrainAttr parameter 'optimizer'}}
module attributes {tessel.train = #tessel.train<optimizer = <beta2 = 1.0>>} {
}

// -----

// expected-error @+1 {{'tessel.dims' holds each dim's size (a positive integer), not {batch = 0 : i64}}}
module attributes {tessel.dims = {batch = 0 : i64}} {
}
