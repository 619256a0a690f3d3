//===- Pretrained.h - Starting a run from pretrained weights ----*- C++ -*-===//
//
// `--init-from DIR` (or the spec's `train.init_from`) starts training from weights trained
// elsewhere, with a fresh optimizer at step 0: from a Hugging Face model folder, each
// parameter the spec initialises with `load("name")` reads its stored tensor (HfWeights.h) and
// the others are drawn from their initialisers; from a Tessel checkpoint, every parameter is
// read by its own name (Trainer.cpp). Either way each rank keeps its block of the whole
// tensor, so the same weights start a run under any layout.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_PRETRAINED_H
#define TESSEL_RUNTIME_HOST_PRETRAINED_H

#include "common/plan/PlanFile.h"

#include <string>
#include <vector>

namespace tessel::rt {

class Ranks;

/// The parameters of `plan` that the spec loads (init "load"), by index into its state.
std::vector<size_t> loadedParameters(const planfile::Plan &plan);

/// What a start from Hugging Face weights did, for the progress line.
struct PretrainedLoad {
  size_t parameters = 0;  ///< Parameters read from the weights.
  double values = 0;      ///< Their elements.
  size_t unused = 0;      ///< Stored tensors no parameter read.
  std::string firstUnused;
};

/// Sets every loaded parameter of `plan` from the Hugging Face weights at `path` (a model
/// folder or a .safetensors file). Fails, naming the parameter and the stored tensor, on a
/// tensor that is missing or does not fit.
bool loadPretrained(const planfile::Plan &plan, Ranks &ranks, const std::string &path,
                    PretrainedLoad &report, std::string &error);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_PRETRAINED_H
