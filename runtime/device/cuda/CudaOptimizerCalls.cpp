//===- CudaOptimizerCalls.cpp - Optimizer, control, collectives -----------===//
//
// The CUDA launches of the optimizer's kernels (norms, clipping, the learning rate, AdamW and
// SGD), the control kernels (guard_finite) and the collectives, ordered after the kernels that
// write their inputs.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/CollectiveCalls.h"
#include "runtime/device/HalfOperands.h"
#include "runtime/device/KernelArgs.h"
#include "runtime/device/cuda/CudaCalls.h"
#include "runtime/device/cuda/CudaLaunch.h"

#include "kernels/cuda/CudaKernels.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace tessel::rt::cudacalls {

//===----------------------------------------------------------------------===//
// Optimizer and control
//===----------------------------------------------------------------------===//

/// global_norm and sum_squares: the sum of squares of every input, in input order.
bool sumOfSquares(KernelCall &c, bool root) {
  std::vector<const float *> inputs;
  std::vector<int64_t> sizes;
  for (size_t k = 0; k < c.in.size(); ++k) {
    inputs.push_back(c.fin(k));
    sizes.push_back(static_cast<int64_t>(c.inElements[k]));
  }
  const int64_t count = static_cast<int64_t>(inputs.size());
  auto *workspace = static_cast<double *>(scratchBytes(
      c, static_cast<uint64_t>(cuda::sumOfSquaresWorkspace(count, sizes.data())) * sizeof(double)));
  return workspace && launched(c, cuda::sumOfSquares(count, inputs.data(), sizes.data(), root,
                                                     c.fout(0), workspace, stream(c)));
}

bool launch(KernelCall &c, const args::GlobalNorm &) { return sumOfSquares(c, true); }
bool launch(KernelCall &c, const args::SumSquares &) { return sumOfSquares(c, false); }

/// Ends the program when an input holds a value that is not finite. The executor decides
/// before it launches the next kernel, so this waits for the stream: one synchronisation per
/// step, where the plan checks the reduced gradient norm.
bool launch(KernelCall &c, const args::GuardFinite &) {
  auto *flag = static_cast<int *>(scratchBytes(c, sizeof(int)));
  if (!flag || !launched(c, cudaMemsetAsync(flag, 0, sizeof(int), stream(c))))
    return false;
  for (size_t k = 0; k < c.in.size(); ++k)
    if (!launched(c, cuda::findNonFinite(static_cast<int64_t>(c.inElements[k]), c.fin(k), flag,
                                         stream(c))))
      return false;
  int found = 0;
  if (!launched(c,
                cudaMemcpyAsync(&found, flag, sizeof found, cudaMemcpyDeviceToHost, stream(c))) ||
      !launched(c, cudaStreamSynchronize(stream(c))))
    return false;
  c.stop = found != 0;
  return true;
}

bool launch(KernelCall &c, const args::ClipCoefficient &a) {
  return launched(c, cuda::clipCoefficient(c.fin(0), a.max, c.fout(0), stream(c)));
}

bool launch(KernelCall &c, const args::LearningRate &a) {
  // A function of the step alone: computed here, as on the CPU, and written by a fill.
  return launched(c,
                  cuda::fill(1, static_cast<float>(scheduledLearningRate(a.schedule, c.ctx->step)),
                             c.fout(0), stream(c)));
}

bool launch(KernelCall &c, const args::AdamW &a) {
  const size_t k = a.n.size();
  cuda::AdamWArgs h;
  static_cast<kernels::AdamWHyper &>(h) = a.hyper;
  h.step = c.ctx->step;
  h.lr = c.fin(k);
  h.gradScale = c.fin(k + 1);
  // The working copies, written by the same pass in their own type (the 16-bit table below
  // sends 16-bit ones here, not through the widening wrapper); the catalogue gives every
  // working copy of a call one type.
  if (a.working)
    h.workingType = operandTypeOf(c.instr->outputs[3 * k].dtype);
  std::vector<cuda::AdamWTensor> tensors(k);
  for (size_t t = 0; t < k; ++t)
    tensors[t] = {a.n[t],        c.fout(t),         c.fin(t),
                  c.fout(k + t), c.fout(2 * k + t), a.working ? c.out[3 * k + t] : nullptr};
  return launched(c, cuda::adamw(h, tensors.data(), k, stream(c)));
}

bool launch(KernelCall &c, const args::Sgd &a) {
  const size_t k = a.n.size();
  cuda::SgdArgs h;
  h.momentum = a.momentum;
  h.weightDecay = a.weightDecay;
  h.lr = c.fin(k);
  h.gradScale = c.fin(k + 1);
  std::vector<cuda::SgdTensor> tensors(k);
  for (size_t t = 0; t < k; ++t)
    tensors[t] = {a.n[t], c.fout(t), c.fin(t), c.fout(k + t)};
  return launched(c, cuda::sgd(h, tensors.data(), k, stream(c)));
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// Orders a collective's work after the kernels launched before it on this launch's stream,
/// which write its input. A communicator that enqueues on a GPU stream (NCCL) waits for them
/// there, and so does this thread's stream, on which the kernel's own copies go (a group of
/// one, a head-tail reordering; CudaCommMemory). Otherwise, ranks as threads, the host waits
/// for them: the communicator's copies are issued by another thread.
bool orderCollective(KernelCall &c) {
  cudaStream_t s = stream(c);
  cudaError_t e;
  if (c.comm && c.comm->orderAfter(s)) {
    cudaEvent_t ready = cudaLaunchOf(c).collectiveEvent();
    e = cudaEventRecord(ready, s);
    if (e == cudaSuccess)
      e = cudaStreamWaitEvent(cudaStreamPerThread, ready, 0);
  } else {
    e = cudaStreamSynchronize(s);
  }
  if (e == cudaSuccess)
    return true;
  return c.fail(std::string("waiting for the kernels before it failed: ") + cudaGetErrorName(e) +
                ": " + cudaGetErrorString(e));
}

bool launch(KernelCall &c, const args::Collective &a) {
  return orderCollective(c) && launchCollective(c, a);
}

/// `wait`: the shared launch. The operation it ends wrote its output before the host learns it
/// is done, so the kernels after it, launched later, see it.
bool launch(KernelCall &c, const args::Wait &a) { return launchWait(c, a); }

} // namespace tessel::rt::cudacalls
