//===- BlasLt.h - cuBLASLt, loaded when a device first needs it -*- C++ -*-===//
//
// cuBLASLt's shared library maps hundreds of MiB of code. Linked into every runner, it would
// cost each process that address space at start, on the CPU device too (a runner under a
// `ulimit -v` fails to start). So it is opened with dlopen when a CUDA device is created, and
// its entry points are called through this table, typed by the toolkit's own prototypes.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_KERNELS_CUDA_BLASLT_H
#define TESSEL_KERNELS_CUDA_BLASLT_H

#include <cublasLt.h>

#include <string>

namespace tessel::cuda {

/// The cuBLASLt functions the products use.
#define TESSEL_BLASLT_FUNCTIONS(X)                                                                 \
  X(cublasLtCreate)                                                                                \
  X(cublasLtDestroy)                                                                               \
  X(cublasLtGetStatusString)                                                                       \
  X(cublasLtMatmul)                                                                                \
  X(cublasLtMatmulAlgoGetHeuristic)                                                                \
  X(cublasLtMatmulDescCreate)                                                                      \
  X(cublasLtMatmulDescDestroy)                                                                     \
  X(cublasLtMatmulDescSetAttribute)                                                                \
  X(cublasLtMatmulPreferenceCreate)                                                                \
  X(cublasLtMatmulPreferenceDestroy)                                                               \
  X(cublasLtMatmulPreferenceSetAttribute)                                                          \
  X(cublasLtMatrixLayoutCreate)                                                                    \
  X(cublasLtMatrixLayoutDestroy)                                                                   \
  X(cublasLtMatrixLayoutSetAttribute)

struct BlasLt {
#define TESSEL_BLASLT_POINTER(name) decltype(&::name) name = nullptr;
  TESSEL_BLASLT_FUNCTIONS(TESSEL_BLASLT_POINTER)
#undef TESSEL_BLASLT_POINTER
};

/// The library of this build's cuBLAS major version (libcublasLt.so.13 for CUDA 13), opened
/// once per process; null, with the reason, where it cannot be opened or lacks a function.
const BlasLt *loadBlasLt(std::string &error);

} // namespace tessel::cuda

#endif // TESSEL_KERNELS_CUDA_BLASLT_H
