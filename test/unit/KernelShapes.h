//===- KernelShapes.h - Shapes and strides for kernel tests -----*- C++ -*-===//
#ifndef TESSEL_TEST_UNIT_KERNELSHAPES_H
#define TESSEL_TEST_UNIT_KERNELSHAPES_H

#include "kernels/cpu/CpuKernels.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace tessel::test {

/// A kernel shape from its sizes, outermost first.
inline cpu::Shape shapeOf(std::initializer_list<int64_t> sizes) {
  cpu::Shape s;
  for (int64_t n : sizes)
    s.size[s.rank++] = n;
  return s;
}

/// Element strides, one per dim of the shape they go with (0 broadcasts).
inline cpu::Strides stridesOf(std::initializer_list<int64_t> strides) {
  cpu::Strides s;
  int d = 0;
  for (int64_t v : strides)
    s.stride[d++] = v;
  return s;
}

/// Attention's sizes, scaled by 1 / sqrt(head); `window` with `causal` slides.
inline cpu::AttentionArgs attentionOf(int64_t batch, int64_t seq, int64_t heads, int64_t kvSeq,
                                      int64_t kvHeads, int64_t head, bool causal,
                                      int64_t window = 0) {
  cpu::AttentionArgs a;
  a.batch = batch;
  a.seq = seq;
  a.heads = heads;
  a.kvSeq = kvSeq;
  a.kvHeads = kvHeads;
  a.head = head;
  a.causal = causal;
  a.window = window;
  a.scale = 1.0f / std::sqrt(static_cast<float>(head));
  return a;
}

/// The sizes of an attention call, for a failure's message.
inline std::string describe(const cpu::AttentionArgs &a) {
  return "attention b" + std::to_string(a.batch) + " s" + std::to_string(a.seq) + " h" +
         std::to_string(a.heads) + " t" + std::to_string(a.kvSeq) + " kvh" +
         std::to_string(a.kvHeads) + " d" + std::to_string(a.head) + (a.causal ? " causal" : "") +
         " window " + std::to_string(a.window) + " first head " + std::to_string(a.firstHead) +
         " group " + std::to_string(a.group);
}

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_KERNELSHAPES_H
