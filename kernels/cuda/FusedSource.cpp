//===- FusedSource.cpp - CUDA source of one fused elementwise body --------===//
//
// The text is built line by line from the decoded steps; nothing in it depends on anything
// but the body and the layout (no addresses, no sizes, no time), so the same call always gives
// the same source and a cache keyed by the text finds it again.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/FusedSource.h"

#include "kernels/cuda/ElementwiseOpsText.h"

#include <cstdio>
#include <cstring>

namespace tessel::cuda {

namespace {

/// The catalogue's operations by enum, in the order of UnaryKind and BinaryKind
/// (CudaKernelCalls.cpp checks that the orders agree).
struct EnumValue {
  const char *enumName, *valueName;
};
const EnumValue kEnumValues[] = {
#define TESSEL_ENUM_VALUE(Enum, Value, Word) {#Enum, #Value},
#include "common/catalogue/KernelCatalogue.def"
};

std::vector<const char *> valuesOf(const char *enumName) {
  std::vector<const char *> names;
  for (const EnumValue &v : kEnumValues)
    if (std::strcmp(v.enumName, enumName) == 0)
      names.push_back(v.valueName);
  return names;
}

const std::vector<const char *> &unaryNames() {
  static const std::vector<const char *> names = valuesOf("UnaryOp");
  return names;
}
const std::vector<const char *> &binaryNames() {
  static const std::vector<const char *> names = valuesOf("BinaryOp");
  return names;
}

/// A float with exactly its bits, opaque to the compiler (the generated `opaque`): a hex
/// literal of the bits, the value in a comment.
std::string floatLiteral(float v) {
  uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  char buf[96];
  std::snprintf(buf, sizeof buf, "opaque(__int_as_float(0x%08x) /* %.9g */)", bits,
                static_cast<double>(v));
  return buf;
}

/// The exponent argument of a unary step: only pow reads it.
std::string exponent(const FusedStep &st) {
  return st.unary == UnaryKind::Pow ? floatLiteral(st.value) : "0.0f";
}

std::string valueName(int32_t value, int inputs) {
  return value < inputs ? "x" + std::to_string(value) : "t" + std::to_string(value - inputs);
}

DType typeOf(const std::vector<DType> &types, size_t k) {
  return k < types.size() ? types[k] : DType::F32;
}

const char *typeName(DType t) {
  return t == DType::BF16 ? "bf16" : t == DType::F16 ? "f16" : "f32";
}

/// The f32 value of element `at` of operand `in` of type t.
std::string loaded(const std::string &in, const std::string &at, DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32: // not a float operand: FusedLayout's types are operandTypeOf's
    break;
  case DType::BF16:
    return "fromBf16(((const unsigned short *)" + in + ")[" + at + "])";
  case DType::F16:
    return "fromF16(((const unsigned short *)" + in + ")[" + at + "])";
  }
  return "((const float *)" + in + ")[" + at + "]";
}

/// The statement storing f32 `value` into element `at` of operand `out` of type t.
std::string stored(const std::string &out, const std::string &at, DType t,
                   const std::string &value) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    break;
  case DType::BF16:
    return "((unsigned short *)" + out + ")[" + at + "] = toBf16(" + value + ");";
  case DType::F16:
    return "((unsigned short *)" + out + ")[" + at + "] = toF16(" + value + ");";
  }
  return "((float *)" + out + ")[" + at + "] = " + value + ";";
}

std::string describe(const FusedInputAccess &a) {
  switch (a.kind) {
  case FusedInputAccess::Kind::Dense:
    return "dense";
  case FusedInputAccess::Kind::Scalar:
    return "scalar";
  case FusedInputAccess::Kind::Strided:
    break;
  }
  std::string dims;
  for (int d = 0; d < kMaxRank; ++d)
    if (a.dims & (1u << d))
      dims += (dims.empty() ? "" : ",") + std::to_string(d);
  return "strided over dims " + dims;
}

} // namespace

FusedLayout fusedLayout(const Shape &shape, const std::vector<Strides> &strides) {
  FusedLayout layout;
  layout.rank = shape.rank;
  for (int d = 0; d < shape.rank; ++d)
    layout.size[d] = shape.size[d];
  for (const Strides &s : strides) {
    FusedInputAccess a;
    int64_t dense = 1;
    bool isDense = true;
    for (int d = shape.rank - 1; d >= 0; --d) {
      if (s.stride[d] != 0)
        a.dims |= 1u << d;
      // A dim of size 1 is never stepped over: any stride reads the same element.
      if (shape.size[d] != 1 && s.stride[d] != dense)
        isDense = false;
      dense *= shape.size[d];
    }
    a.kind = isDense       ? FusedInputAccess::Kind::Dense
             : a.dims == 0 ? FusedInputAccess::Kind::Scalar
                           : FusedInputAccess::Kind::Strided;
    if (a.kind != FusedInputAccess::Kind::Strided)
      a.dims = 0;
    layout.inputs.push_back(a);
  }
  return layout;
}

bool fusedKernelArgs(const Shape &shape, const std::vector<Strides> &strides,
                     const std::vector<const float *> &inputs, const std::vector<float *> &outputs,
                     FusedKernelArgs &args) {
  if (inputs.size() > static_cast<size_t>(kMaxFusedInputs) ||
      outputs.size() > static_cast<size_t>(kMaxFusedOutputs) || strides.size() != inputs.size() ||
      shape.rank < 0 || shape.rank > kMaxRank)
    return false;
  args = FusedKernelArgs();
  for (size_t k = 0; k < inputs.size(); ++k) {
    args.in[k] = inputs[k];
    for (int d = 0; d < shape.rank; ++d)
      args.stride[k][d] = strides[k].stride[d];
  }
  for (size_t o = 0; o < outputs.size(); ++o)
    args.out[o] = outputs[o];
  for (int d = 0; d < shape.rank; ++d)
    args.size[d] = shape.size[d];
  return true;
}

const std::string &fusedSourcePrelude() {
  static const std::string prelude = [] {
    std::string s = "// The kinds of tessel::cuda (kernels/KernelTypes.h), in their order.\n"
                    "namespace tessel::cuda {\nenum class BinaryKind {";
    for (size_t k = 0; k < binaryNames().size(); ++k)
      s += std::string(k ? ", " : " ") + binaryNames()[k];
    s += " };\nenum class UnaryKind {";
    for (size_t k = 0; k < unaryNames().size(); ++k)
      s += std::string(k ? ", " : " ") + unaryNames()[k];
    s += " };\n} // namespace tessel::cuda\n\n";
    s += kElementwiseOpsText;
    return s;
  }();
  return prelude;
}

bool fusedKernelSource(const std::vector<FusedStep> &steps, const FusedLayout &layout,
                       const std::vector<int32_t> &outSteps, std::string &source,
                       std::string &error) {
  const int inputs = static_cast<int>(layout.inputs.size());
  const int rank = layout.rank;
  if (rank < 0 || rank > kMaxRank)
    return error = "the shape has " + std::to_string(rank) + " dims; at most " +
                   std::to_string(kMaxRank) + " are supported",
           false;
  if (inputs > kMaxFusedInputs || outSteps.empty() ||
      outSteps.size() > static_cast<size_t>(kMaxFusedOutputs) || steps.empty())
    return error = "a fused kernel takes 1 to " + std::to_string(kMaxFusedOutputs) +
                   " outputs, at most " + std::to_string(kMaxFusedInputs) +
                   " inputs and at least one step",
           false;

  // Which values are read: only those inputs are loaded, only those dims' indices computed.
  std::vector<bool> inputRead(inputs, false);
  for (size_t s = 0; s < steps.size(); ++s) {
    const FusedStep &st = steps[s];
    if (static_cast<size_t>(st.unary) >= unaryNames().size() ||
        static_cast<size_t>(st.binary) >= binaryNames().size())
      return error = "step " + std::to_string(s) + " has an unknown operation", false;
    for (int k = 0; k < FusedStep::operandsOf(st.kind); ++k) {
      const int32_t v = st.args[k];
      if (v < 0 || v >= inputs + static_cast<int32_t>(s))
        return error = "step " + std::to_string(s) + " reads value " + std::to_string(v) +
                       ", which is neither an input nor an earlier step",
               false;
      if (v < inputs)
        inputRead[v] = true;
    }
  }
  for (int32_t o : outSteps)
    if (o < 0 || o >= static_cast<int32_t>(steps.size()))
      return error = "output step " + std::to_string(o) + " is not a step of the body", false;
  uint32_t dimsRead = 0;
  for (int k = 0; k < inputs; ++k)
    if (inputRead[k] && layout.inputs[k].kind == FusedInputAccess::Kind::Strided)
      dimsRead |= layout.inputs[k].dims;

  std::string s =
      "// A fused elementwise body, generated by Tessel (kernels/cuda/FusedSource.cpp).\n";
  s += "// Shape of " + std::to_string(rank) + " dims; inputs:";
  for (int k = 0; k < inputs; ++k)
    s += " x" + std::to_string(k) + " " + typeName(typeOf(layout.inTypes, size_t(k))) + " " +
         describe(layout.inputs[k]) + (k + 1 < inputs ? ";" : "");
  s += "; outputs:";
  for (size_t o = 0; o < outSteps.size(); ++o)
    s += std::string(" ") + typeName(typeOf(layout.outTypes, o));
  s += "\n\n" + fusedSourcePrelude();
  s +=
      "\nnamespace tessel::cuda::fused {\n\n"
      "// kernels/cuda/FusedSource.h: FusedKernelArgs.\n"
      "struct FusedKernelArgs {\n"
      "  const void *in[" +
      std::to_string(kMaxFusedInputs) + "];\n  void *out[" + std::to_string(kMaxFusedOutputs) +
      "];\n  long long size[" + std::to_string(kMaxRank) + "];\n  long long stride[" +
      std::to_string(kMaxFusedInputs) + "][" + std::to_string(kMaxRank) +
      "];\n};\n\n"
      "// A step's value rounded to f32 before a later step reads it, as when the steps run one\n"
      "// at a time (the interpreter, the unfused kernels). The kernel is compiled without FMA\n"
      "// contraction (--fmad=false), as they are.\n"
      "__device__ __forceinline__ float rounded(float v) { return __fmul_rn(v, 1.0f); }\n"
      "// A constant as the interpreter has it, known only at run time: the compiler cannot\n"
      "// specialise an operation to it (powf(x, 2) as x * x, expf of a constant folded on the\n"
      "// host) into bits the device's own functions would not give.\n"
      "__device__ __forceinline__ float opaque(float v) {\n"
      "  asm(\"\" : \"+f\"(v));\n"
      "  return v;\n"
      "}\n"
      "// 16-bit operands: widened exactly, rounded to nearest even (as kernels/cuda/Convert.cu).\n"
      "__device__ __forceinline__ float fromBf16(unsigned short h) {\n"
      "  return __uint_as_float((unsigned)h << 16);\n"
      "}\n"
      "__device__ __forceinline__ unsigned short toBf16(float v) {\n"
      "  unsigned short h;\n"
      "  asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(v));\n"
      "  return h;\n"
      "}\n"
      "__device__ __forceinline__ float fromF16(unsigned short h) {\n"
      "  float v;\n"
      "  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(v) : \"h\"(h));\n"
      "  return v;\n"
      "}\n"
      "__device__ __forceinline__ unsigned short toF16(float v) {\n"
      "  unsigned short h;\n"
      "  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(v));\n"
      "  return h;\n"
      "}\n\n"
      "} // namespace tessel::cuda::fused\n\n";
  s += "extern \"C\" __global__ void " + std::string(kFusedKernelName) +
       "(long long n, tessel::cuda::fused::FusedKernelArgs a) {\n"
       "  using namespace tessel::cuda;\n"
       "  using namespace tessel::cuda::detail;\n"
       "  using namespace tessel::cuda::fused;\n"
       "  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;\n"
       "       e += (long long)gridDim.x * blockDim.x) {\n";
  if (dimsRead) {
    // Row-major digits of e, from the last dim down to the first one a strided input reads,
    // by the sizes as constants.
    s += "    unsigned long long rest = e;\n";
    int lowest = 0;
    while (!(dimsRead & (1u << lowest)))
      ++lowest;
    for (int d = rank - 1; d >= lowest; --d) {
      const std::string i = "i" + std::to_string(d), size = std::to_string(layout.size[d]) + "ULL";
      if (d == 0) {
        s += "    const long long i0 = (long long)rest;\n";
        break;
      }
      if (dimsRead & (1u << d))
        s += "    const long long " + i + " = (long long)(rest % " + size + ");\n";
      if (d > lowest)
        s += "    rest /= " + size + ";\n";
    }
  }
  for (int k = 0; k < inputs; ++k) {
    if (!inputRead[k])
      continue;
    const std::string in = "a.in[" + std::to_string(k) + "]";
    std::string at;
    switch (layout.inputs[k].kind) {
    case FusedInputAccess::Kind::Dense:
      at = "e";
      break;
    case FusedInputAccess::Kind::Scalar:
      at = "0";
      break;
    case FusedInputAccess::Kind::Strided:
      for (int d = 0; d < rank; ++d)
        if (layout.inputs[k].dims & (1u << d))
          at += (at.empty() ? "" : " + ") + std::string("i") + std::to_string(d) + " * a.stride[" +
                std::to_string(k) + "][" + std::to_string(d) + "]";
      break;
    }
    s += "    const float x" + std::to_string(k) + " = " +
         loaded(in, at, typeOf(layout.inTypes, size_t(k))) + ";\n";
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    const FusedStep &st = steps[i];
    auto arg = [&](int k) { return valueName(st.args[k], inputs); };
    std::string v;
    switch (st.kind) {
    case FusedStep::Kind::Const:
      v = floatLiteral(st.value);
      break;
    case FusedStep::Kind::Unary:
      v = "rounded(applyUnary(UnaryKind::" + std::string(unaryNames()[int(st.unary)]) + ", " +
          arg(0) + ", " + exponent(st) + "))";
      break;
    case FusedStep::Kind::UnaryGrad:
      v = "rounded(applyUnaryGrad(UnaryKind::" + std::string(unaryNames()[int(st.unary)]) + ", " +
          arg(0) + ", " + arg(1) + ", " + arg(2) + ", " + exponent(st) + "))";
      break;
    case FusedStep::Kind::Binary:
      v = "rounded(applyBinary(BinaryKind::" + std::string(binaryNames()[int(st.binary)]) + ", " +
          arg(0) + ", " + arg(1) + "))";
      break;
    case FusedStep::Kind::Where:
      v = arg(0) + " != 0.0f ? " + arg(1) + " : " + arg(2);
      break;
    }
    if (st.rounded)
      v = st.narrow == DType::BF16 ? "fromBf16(toBf16(" + v + "))" : "fromF16(toF16(" + v + "))";
    s += "    const float t" + std::to_string(i) + " = " + v + ";\n";
  }
  for (size_t o = 0; o < outSteps.size(); ++o)
    s += "    " +
         stored("a.out[" + std::to_string(o) + "]", "e", typeOf(layout.outTypes, o),
                "t" + std::to_string(outSteps[o])) +
         "\n";
  s += "  }\n}\n";
  source = std::move(s);
  return true;
}

} // namespace tessel::cuda
