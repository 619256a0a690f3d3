//===- FuzzTargets.h - What each fuzzer feeds its bytes to ------*- C++ -*-===//
//
// The readers of input from outside (files a user or another tool writes), each as one
// function of the bytes: libFuzzer drives them (FormatFuzzer.cpp, built by scripts/fuzz.sh with
// clang), and the unit tests replay the seeds and every input that once crashed one
// (test/fuzz/inputs/<target>/, FuzzRegressionTest.cpp). A target returns normally on any
// input; a reader that accepts its input must also read back what it writes of it (a round
// trip), else the target aborts, which the fuzzer reports as a crash.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TEST_FUZZ_FUZZTARGETS_H
#define TESSEL_TEST_FUZZ_FUZZTARGETS_H

#include <cstddef>
#include <cstdint>

namespace tessel::fuzz {

/// runtime/support/Json.h: a metrics line, a manifest, a run directory's files.
void json(const uint8_t *data, size_t size);
/// runtime/checkpoint/Safetensors.h: a checkpoint shard or a Hugging Face weights file.
void safetensors(const uint8_t *data, size_t size);
/// common/plan/PlanFile.h: a plan file (--plan) or the plan an executable carries.
void plan(const uint8_t *data, size_t size);
/// common/cluster/Cluster.h: a cluster file (tessel estimate --cluster, tune).
void cluster(const uint8_t *data, size_t size);
/// runtime/host/Data.h: pre-tokenized data, with or without llm.c's header.
void tokens(const uint8_t *data, size_t size);
/// common/catalogue/KernelCatalogue.h: the body of a fused elementwise call, as a plan carries it.
void elementwiseBody(const uint8_t *data, size_t size);

/// The targets by name (the directory names under test/fuzz/inputs/).
struct Target {
  const char *name;
  void (*run)(const uint8_t *, size_t);
};
extern const Target kTargets[];
extern const size_t kTargetCount;

} // namespace tessel::fuzz

#endif // TESSEL_TEST_FUZZ_FUZZTARGETS_H
