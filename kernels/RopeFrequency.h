//===- RopeFrequency.h - The frequencies of rotary embeddings ------*- C++ -*-===//
//
// The one definition of the rate at which each feature pair of a rotary embedding turns, for
// the CPU kernel (kernels/cpu/Rope.cpp) and the CUDA kernel (kernels/cuda/Rope.cu) alike:
// feature pair i of a head of `head` features turns by pos * theta^(-2i/head), and Llama 3's
// scaling (RopeScaling, factor > 0) slows the low frequencies for a longer context. Computed in
// f64 on both devices, so both turn by the same angles.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_KERNELS_ROPEFREQUENCY_H
#define TESSEL_KERNELS_ROPEFREQUENCY_H

#include "kernels/KernelTypes.h"

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define TESSEL_HOST_DEVICE __host__ __device__
#else
#define TESSEL_HOST_DEVICE
#endif

namespace tessel::kernels {

/// The angle per position of feature pair `i`. With scaling, a pair whose wavelength
/// (2 pi / frequency) is shorter than originalContext / highFreqFactor keeps its frequency, one
/// longer than originalContext / lowFreqFactor turns `factor` times slower, and those between
/// blend the two linearly in originalContext / wavelength: Llama 3.1's rope_scaling
/// ("rope_type": "llama3").
TESSEL_HOST_DEVICE inline double ropeFrequency(int64_t i, int64_t head, double theta,
                                               const RopeScaling &scaling) {
  const double f = pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head));
  if (!(scaling.factor > 0))
    return f;
  const double wavelength = 2.0 * 3.14159265358979323846 / f;
  if (wavelength < scaling.originalContext / scaling.highFreqFactor)
    return f;
  if (wavelength > scaling.originalContext / scaling.lowFreqFactor)
    return f / scaling.factor;
  const double smooth = (scaling.originalContext / wavelength - scaling.lowFreqFactor) /
                        (scaling.highFreqFactor - scaling.lowFreqFactor);
  return (1.0 - smooth) * f / scaling.factor + smooth * f;
}

} // namespace tessel::kernels

#undef TESSEL_HOST_DEVICE

#endif // TESSEL_KERNELS_ROPEFREQUENCY_H
