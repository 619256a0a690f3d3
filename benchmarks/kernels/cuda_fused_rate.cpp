//===- cuda_fused_rate.cpp - Generated fused kernels against the interpreter ===//
//
// Times, on GPU 0, a few fused elementwise bodies of the shapes GPT-2 small's training step
// has (8 x 1024 tokens, 3072 MLP features), each run by the interpreter kernel
// (cuda::fusedElementwise) and by the kernel generated for it and compiled with NVRTC, as the
// CUDA device runs them (docs/nvrtc.md). Rates are the bytes each kernel must move (each input
// once, broadcast ones at their own size, each output once) over the best of several runs,
// measured with CUDA events; the outputs of the two kernels are also compared bit for bit.
//
//   tessel-cuda-fused-rate [--rows 8192] [--cols 3072]
//
//===----------------------------------------------------------------------===//

#include "runtime/device/cuda/FusedCompiler.h"
#include "runtime/support/CommandLine.h"

#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/FusedSource.h"

#include "benchmarks/kernels/CudaBench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace tessel;
using cuda::FusedStep;

namespace {

float *randomDevice(int64_t n, unsigned seed) {
  return bench::randomDevice("tessel-cuda-fused-rate", n, seed);
}
template <class F> float bestMs(F f, int repeats = 10) {
  return bench::bestMs("tessel-cuda-fused-rate", f, repeats);
}

FusedStep step(FusedStep::Kind kind, std::initializer_list<int32_t> args) {
  FusedStep s;
  s.kind = kind;
  int k = 0;
  for (int32_t a : args)
    s.args[k++] = a;
  return s;
}

struct Body {
  std::string name;
  std::vector<FusedStep> steps;
  std::vector<bool> rowBroadcast; ///< Per input: a [cols] row read by every row.
  std::vector<int32_t> outSteps;
};

std::vector<Body> bodies() {
  std::vector<Body> out;
  {
    // The MLP's bias and GELU in training: both values are kept for the backward pass.
    Body b{"add x0 x1; gelu t0 (bias row)", {}, {false, true}, {0, 1}};
    b.steps.push_back(step(FusedStep::Kind::Binary, {0, 1}));
    b.steps.push_back(step(FusedStep::Kind::Unary, {2}));
    b.steps.back().unary = cuda::UnaryKind::Gelu;
    out.push_back(b);
  }
  {
    Body b{"unary_grad gelu x0 x1 x2", {}, {false, false, false}, {0}};
    b.steps.push_back(step(FusedStep::Kind::UnaryGrad, {0, 1, 2}));
    b.steps.back().unary = cuda::UnaryKind::Gelu;
    out.push_back(b);
  }
  {
    Body b{"add x0 x1; add t0 x2; mul t1 x3", {}, {false, false, false, false}, {2}};
    b.steps.push_back(step(FusedStep::Kind::Binary, {0, 1}));
    b.steps.push_back(step(FusedStep::Kind::Binary, {4, 2}));
    b.steps.push_back(step(FusedStep::Kind::Binary, {5, 3}));
    b.steps.back().binary = cuda::BinaryKind::Mul;
    out.push_back(b);
  }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  int64_t rows = 8192, cols = 3072;
  rt::cli::Parser parser(argv[0], "[options]",
                         "Times, on GPU 0, the fused elementwise kernels NVRTC compiles against "
                         "the interpreter, on a rows x cols tensor.");
  parser.integer("rows", rows, 1, int64_t(1) << 24, "N", "rows (default 8192)");
  parser.integer("cols", cols, 1, int64_t(1) << 24, "N", "columns (default 3072)");
  if (std::optional<int> exit = parser.parse(argc, argv))
    return *exit;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("tessel-cuda-fused-rate: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::string error;
  const rt::Nvrtc *nvrtc = rt::loadNvrtc(error);
  if (!nvrtc) {
    std::printf("tessel-cuda-fused-rate: %s\n", error.c_str());
    return 1;
  }
  const std::string arch = rt::smArch(prop.major, prop.minor);
  std::printf("device: %s (%s), NVRTC %s, fused bodies over [%lld, %lld]\n", prop.name,
              arch.c_str(), nvrtc->version().c_str(), static_cast<long long>(rows),
              static_cast<long long>(cols));
  rt::FusedCompiler compiler(*nvrtc, rt::KernelCache(""));

  cuda::Shape shape;
  shape.rank = 2;
  shape.size[0] = rows;
  shape.size[1] = cols;
  const int64_t n = rows * cols;
  int failures = 0;
  for (const Body &b : bodies()) {
    std::vector<cuda::Strides> strides;
    std::vector<const float *> ins;
    std::vector<float *> interp, generated;
    double bytes = 0;
    for (size_t k = 0; k < b.rowBroadcast.size(); ++k) {
      cuda::Strides s;
      s.stride[0] = b.rowBroadcast[k] ? 0 : cols;
      s.stride[1] = 1;
      strides.push_back(s);
      const int64_t size = b.rowBroadcast[k] ? cols : n;
      ins.push_back(randomDevice(size, 10 + static_cast<unsigned>(k)));
      bytes += 4.0 * static_cast<double>(size);
    }
    for (size_t o = 0; o < b.outSteps.size(); ++o) {
      interp.push_back(randomDevice(n, 50));
      generated.push_back(randomDevice(n, 60));
      bytes += 4.0 * static_cast<double>(n);
    }
    std::string source, warning;
    rt::FusedCompiler::Result compiled;
    cudaLibrary_t library = nullptr;
    cudaKernel_t kernel = nullptr;
    cuda::FusedKernelArgs args;
    if (!cuda::fusedKernelSource(b.steps, cuda::fusedLayout(shape, strides), b.outSteps, source,
                                 error) ||
        !compiler.compile(source, arch, compiled, warning, error) ||
        cudaLibraryLoadData(&library, compiled.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr,
                            0) != cudaSuccess ||
        cudaLibraryGetKernel(&kernel, library, cuda::kFusedKernelName) != cudaSuccess ||
        !cuda::fusedKernelArgs(shape, strides, ins, generated, args)) {
      std::printf("%-36s cannot generate: %s\n", b.name.c_str(), error.c_str());
      ++failures;
      continue;
    }
    const float mi = bestMs(
        [&] { cuda::fusedElementwise(shape, b.steps, ins, strides, interp, b.outSteps, nullptr); });
    const float mg = bestMs([&] { cuda::launchFusedKernel(kernel, shape, args, nullptr); });
    size_t differ = 0;
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (size_t o = 0; o < b.outSteps.size(); ++o) {
      cudaMemcpy(x.data(), interp[o], x.size() * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(y.data(), generated[o], y.size() * 4, cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < x.size(); ++i)
        differ += std::memcmp(&x[i], &y[i], 4) != 0;
    }
    std::printf("%-36s interpreter %8.3f ms %7.1f GB/s  generated %8.3f ms %7.1f GB/s  x%.2f  "
                "%zu elements differ\n",
                b.name.c_str(), mi, bytes / (mi * 1e-3) / 1e9, mg, bytes / (mg * 1e-3) / 1e9,
                mi / mg, differ);
    failures += differ != 0;
    cudaLibraryUnload(library);
    for (const float *p : ins)
      cudaFree(const_cast<float *>(p));
    for (float *p : interp)
      cudaFree(p);
    for (float *p : generated)
      cudaFree(p);
  }
  return failures ? 1 : 0;
}
