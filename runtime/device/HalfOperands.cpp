//===- HalfOperands.cpp - 16-bit operands around f32 kernels --------------===//

#include "runtime/device/HalfOperands.h"

#include <algorithm>
#include <variant>

namespace tessel::rt {

SixteenBit sixteenBitOf(catalogue::KernelId id) {
  static const SixteenBit table[] = {
#define TESSEL_SIXTEEN_BIT(Id, How) SixteenBit::How,
#include "common/catalogue/KernelCatalogue.def"
  };
  static_assert(sizeof(table) / sizeof(table[0]) == catalogue::kKernelCount);
  return table[static_cast<size_t>(id)];
}

SixteenBit sixteenBitCall(const catalogue::KernelInfo &kernel,
                          const std::vector<planfile::DType> &ins,
                          const std::vector<planfile::DType> &outs, const char *device,
                          std::string &error) {
  const auto half = [](const std::vector<planfile::DType> &types) {
    return std::any_of(types.begin(), types.end(), planfile::isHalf);
  };
  if (!half(ins) && !half(outs))
    return SixteenBit::Moved;
  const SixteenBit how = sixteenBitOf(kernel.id);
  if (how == SixteenBit::Refused)
    error = std::string("a 16-bit operand of a control kernel; the ") + device +
            " device runs those on f32 and i32 buffers";
  return how;
}

bool readsOutputs(const planfile::Instr &instr) {
  const catalogue::KernelInfo *kernel = catalogue::findKernel(instr.kernel);
  if (kernel && kernel->id == catalogue::KernelId::PagedAttention)
    return true;
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
