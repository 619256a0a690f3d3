//===- FloatBuffer.h - Scratch floats of the attention kernels --*- C++ -*-===//
//
// Private to kernels/cpu: the per-thread scratch of the attention kernels (tiles of keys and
// values, scores, running outputs). A class of these headers' own rather than a standard
// container, because the attention files are compiled once per instruction set (Isa.h) and must
// instantiate no standard-library template that the linker could share between the copies.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_KERNELS_CPU_FLOATBUFFER_H
#define TESSEL_KERNELS_CPU_FLOATBUFFER_H

#include "kernels/cpu/Isa.h"

#include <cstdint>
#include <cstdlib>
#include <new>

namespace tessel::cpu::detail {
inline namespace TESSEL_CPU_ISA {

/// At least `n` floats, uninitialised; growing it drops what it held.
class FloatBuffer {
public:
  FloatBuffer() = default;
  explicit FloatBuffer(int64_t n) { resize(n); }
  FloatBuffer(const FloatBuffer &) = delete;
  FloatBuffer &operator=(const FloatBuffer &) = delete;
  ~FloatBuffer() { std::free(data_); }
  void resize(int64_t n) {
    if (n <= capacity_)
      return;
    std::free(data_);
    data_ = static_cast<float *>(std::malloc(static_cast<size_t>(n) * sizeof(float)));
    if (!data_)
      throw std::bad_alloc();
    capacity_ = n;
  }
  float *data() { return data_; }
  const float *data() const { return data_; }

private:
  float *data_ = nullptr;
  int64_t capacity_ = 0;
};

} // namespace TESSEL_CPU_ISA
} // namespace tessel::cpu::detail

#endif // TESSEL_KERNELS_CPU_FLOATBUFFER_H
