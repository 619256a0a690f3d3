//===- HalfOperands.cpp - 16-bit operands around f32 kernels --------------===//

#include "runtime/device/HalfOperands.h"

#include <variant>

namespace tessel::rt {

bool isHalf(planfile::DType t) { return t == planfile::DType::BF16 || t == planfile::DType::F16; }

cpu::Half16 halfKind(planfile::DType t) {
  return t == planfile::DType::BF16 ? cpu::Half16::BF16 : cpu::Half16::F16;
}

bool addsIntoOutputs(const planfile::Instr &instr) {
  const planfile::Attr *a = instr.find("accumulate");
  const int64_t *flag = a ? std::get_if<int64_t>(&a->value) : nullptr;
  return flag && *flag != 0;
}

size_t inputSameAsOutput(const planfile::Instr &instr, const KernelCall &c,
                         const std::vector<void *> &in, const std::vector<void *> &out, size_t k) {
  size_t same = 0;
  while (same < in.size() &&
         !(in[same] == out[k] && instr.inputs[same].dtype == instr.outputs[k].dtype &&
           c.inElements[same] == c.outElements[k]))
    ++same;
  return same;
}

} // namespace tessel::rt
