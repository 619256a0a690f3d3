//===- WidenedCall.cpp - 16-bit operands around the f32 CPU kernels -------===//

#include "runtime/device/cpu/WidenedCall.h"

#include "runtime/device/HalfOperands.h"
#include "runtime/device/KernelArgs.h"
#include "runtime/device/cpu/CpuKernelCalls.h"

#include "kernels/cpu/CpuKernels.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace tessel::rt {

namespace {

/// Per thread (each rank runs its kernels on its own thread), one f32 buffer per operand
/// slot, grown as needed and kept: a step's calls reuse the same memory. Never initialised:
/// an input is widened into it and an output written by the kernel (or widened first).
float *scratch(size_t slot, uint64_t elements) {
  struct Buffer {
    std::unique_ptr<float[]> data;
    uint64_t elements = 0;
  };
  thread_local std::vector<Buffer> buffers;
  if (buffers.size() <= slot)
    buffers.resize(slot + 1);
  Buffer &b = buffers[slot];
  if (b.elements < elements) {
    b.data.reset(new float[elements]);
    b.elements = elements;
  }
  return b.data.get();
}

/// `n` elements of input or output `k` in f32: widened into scratch slot `slot` when 16-bit
/// (an output only when `read`), else the operand itself.
float *asF32(planfile::DType t, void *p, uint64_t n, size_t slot, bool read) {
  if (!planfile::isHalf(t))
    return static_cast<float *>(p);
  float *s = scratch(slot, n);
  if (read)
    cpu::widen(t, static_cast<int64_t>(n), static_cast<const uint16_t *>(p), s);
  return s;
}

} // namespace

bool widenedPagedAttention(KernelCall &c, const KernelArgs &args) {
  const planfile::Instr &instr = *c.instr;
  const planfile::DType kType = instr.outputs[1].dtype, vType = instr.outputs[2].dtype;
  if (!planfile::isHalf(kType) || !planfile::isHalf(vType))
    return widenedCall(c, args);
  kernels::PagedAttentionArgs a = args.as<args::PagedAttention>().a;
  const int32_t *positions = c.ids(3), *table = c.ids(4);
  // The blocks the call's sequences hold up to their last new token, renumbered in order of
  // first use; other entries of the table become -1, which the kernel never reads.
  std::vector<int32_t> compact(static_cast<size_t>(a.blocks), -1), used;
  std::vector<int32_t> compactTable(static_cast<size_t>(a.batch * a.maxBlocks), -1);
  for (int64_t b = 0; b < a.batch; ++b) {
    int32_t last = -1;
    for (int64_t s = 0; s < a.seq; ++s)
      last = std::max(last, positions[b * a.seq + s]);
    if (last < 0)
      continue;
    const int64_t blocks = std::min<int64_t>(last / a.blockSize + 1, a.maxBlocks);
    for (int64_t j = 0; j < blocks; ++j) {
      const int32_t id = table[b * a.maxBlocks + j];
      if (id < 0 || id >= a.blocks)
        continue;
      if (compact[id] < 0) {
        compact[id] = static_cast<int32_t>(used.size());
        used.push_back(id);
      }
      compactTable[b * a.maxBlocks + j] = compact[id];
    }
  }
  const int64_t blockElements = a.blockSize * a.kvHeads * a.head;
  const uint64_t held = std::max<uint64_t>(used.size(), 1) * blockElements;
  float *q = asF32(instr.inputs[0].dtype, c.in[0], c.inElements[0], 0, true);
  float *k = asF32(instr.inputs[1].dtype, c.in[1], c.inElements[1], 1, true);
  float *v = asF32(instr.inputs[2].dtype, c.in[2], c.inElements[2], 2, true);
  float *o = asF32(instr.outputs[0].dtype, c.out[0], c.outElements[0], 3, false);
  float *kCache = scratch(4, held), *vCache = scratch(5, held);
  auto *kHalf = static_cast<uint16_t *>(c.out[1]), *vHalf = static_cast<uint16_t *>(c.out[2]);
  for (size_t u = 0; u < used.size(); ++u) {
    cpu::widen(kType, blockElements, kHalf + used[u] * blockElements, kCache + u * blockElements);
    cpu::widen(vType, blockElements, vHalf + used[u] * blockElements, vCache + u * blockElements);
  }
  a.blocks = static_cast<int64_t>(std::max<size_t>(used.size(), 1));
  cpu::pagedAttention(a, q, k, v, positions, compactTable.data(), o, kCache, vCache);
  if (planfile::isHalf(instr.outputs[0].dtype))
    cpu::narrow(instr.outputs[0].dtype, static_cast<int64_t>(c.outElements[0]), o,
                static_cast<uint16_t *>(c.out[0]));
  // Only the new tokens' slots changed: they go back.
  const int64_t row = a.kvHeads * a.head;
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t s = 0; s < a.seq; ++s) {
      const int32_t p = positions[b * a.seq + s];
      if (p < 0 || p / a.blockSize >= a.maxBlocks)
        continue;
      const int32_t u = compactTable[b * a.maxBlocks + p / a.blockSize];
      if (u < 0)
        continue;
      const int64_t at = (p % a.blockSize) * row;
      cpu::narrow(kType, row, kCache + u * blockElements + at,
                  kHalf + used[u] * blockElements + at);
      cpu::narrow(vType, row, vCache + u * blockElements + at,
                  vHalf + used[u] * blockElements + at);
    }
  return true;
}

bool widenedCall(KernelCall &c, const KernelArgs &args) {
  KernelFn f32 = cpuKernel(args.id());
  const planfile::Instr &instr = *c.instr;
  std::vector<void *> in = c.in, out = c.out;
  size_t slot = 0;
  for (size_t k = 0; k < c.in.size(); ++k) {
    planfile::DType t = instr.inputs[k].dtype;
    if (!planfile::isHalf(t))
      continue;
    float *s = scratch(slot++, c.inElements[k]);
    cpu::widen(t, static_cast<int64_t>(c.inElements[k]), static_cast<const uint16_t *>(in[k]), s);
    c.in[k] = s;
  }
  for (size_t k = 0; k < c.out.size(); ++k) {
    planfile::DType t = instr.outputs[k].dtype;
    if (!planfile::isHalf(t))
      continue;
    const size_t same = inputSameAsOutput(instr, c, in, out, k);
    if (same < in.size()) {
      c.out[k] = c.in[same];
      continue;
    }
    float *s = scratch(slot++, c.outElements[k]);
    if (readsOutputs(instr))
      cpu::widen(t, static_cast<int64_t>(c.outElements[k]), static_cast<const uint16_t *>(out[k]),
                 s);
    c.out[k] = s;
  }
  bool ok = f32(c, args);
  for (size_t k = 0; k < c.out.size(); ++k)
    if (planfile::isHalf(instr.outputs[k].dtype))
      cpu::narrow(instr.outputs[k].dtype, static_cast<int64_t>(c.outElements[k]),
                  static_cast<const float *>(c.out[k]), static_cast<uint16_t *>(out[k]));
  c.in = std::move(in);
  c.out = std::move(out);
  return ok;
}

} // namespace tessel::rt
