//===- KernelCatalogue.h - The plan's kernels, from one declaration -*- C++ -*-===//
//
// What KernelCatalogue.def declares, as C++: an id per kernel, an enum per enumerated
// parameter type, a struct per kernel holding its decoded parameters, and a table describing
// every kernel (operands, parameters, documentation). The plan dialect checks `plan.kernel`
// against the table; the runtime decodes each instruction's parameters once, at load, into
// its kernel's struct, so a kernel call reads fields and never looks a parameter up by name;
// `tessel kernels` prints the table that docs/plan-format.md holds.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_CATALOGUE_KERNELCATALOGUE_H
#define TESSEL_COMMON_CATALOGUE_KERNELCATALOGUE_H

#include "common/catalogue/KernelOps.h"
#include "common/plan/PlanFile.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tessel::catalogue {

enum class KernelId : uint16_t {
#define TESSEL_KERNEL(Id, Name, Family, Doc) Id,
#include "common/catalogue/KernelCatalogue.def"
};

constexpr size_t kKernelCount = 0
#define TESSEL_KERNEL(Id, Name, Family, Doc) +1
#include "common/catalogue/KernelCatalogue.def"
    ;

// The enumerated parameter types (BinaryOp, UnaryOp, ...) are in common/catalogue/KernelOps.h.

//===----------------------------------------------------------------------===//
// The body of a fused elementwise kernel
//===----------------------------------------------------------------------===//

/// An operand of a body step: input `index` of the kernel, or the value of step `index`.
struct BodyReg {
  bool input = true;
  int32_t index = 0;
};

/// One step of a fused elementwise body; each computes one value per element.
struct BodyStep {
  enum class Kind : uint8_t { Const, Unary, UnaryGrad, Binary, Where };
  Kind kind = Kind::Const;
  UnaryOp unary{};   ///< Unary, UnaryGrad: the function.
  BinaryOp binary{}; ///< Binary.
  BodyReg args[3];   ///< Unary: x; UnaryGrad: x, y, dy; Binary: a, b; Where: cond, a, b.
  double value = 0;  ///< Const: the value; Unary and UnaryGrad of pow: the exponent.
};

/// The program `fused_elementwise` runs per element (its `body` parameter): steps in order,
/// each reading the kernel's inputs and earlier steps. In a plan it is text, one step per
/// `;`: `const V`, a `unary` word and its operand (`pow x0 2`), a `binary` word and two
/// operands (`mul x0 t1`), `unary_grad FN X Y DY` (pow: then the exponent) or
/// `where C A B`, where `xK` is input K and `tK` the value of step K (an earlier one).
struct ElementwiseBody {
  std::vector<BodyStep> steps;
  int32_t inputs = 0; ///< One more than the highest input a step reads.
};

/// At most this many steps in a body (the runtime keeps a tile of every step's values).
constexpr size_t kMaxBodySteps = 64;

/// Parses a body; false with the reason in `error` ("step 3: t5 is not an earlier step").
bool parseElementwiseBody(std::string_view text, ElementwiseBody &body, std::string &error);
/// The text of a body, which parseElementwiseBody reads back to the same steps.
std::string formatElementwiseBody(const ElementwiseBody &body);

//===----------------------------------------------------------------------===//
// Parameter structs
//===----------------------------------------------------------------------===//

/// The C++ type of each parameter type the .def names.
using I64 = int64_t;
using F64 = double;
using Str = std::string;
using I64List = std::vector<int64_t>;
using Flag = bool;
// ElementwiseBody (above) is a parameter type too: text in the plan, parsed when decoded.
template <class T> using Required = T;
template <class T> using Optional = std::optional<T>;

#define TESSEL_KERNEL(Id, Name, Family, Doc) struct Id {
#define TESSEL_PARAM(Id, Name, Type, Presence, Doc) Presence<Type> Name{};
#define TESSEL_KERNEL_END(Id)                                                                      \
  }                                                                                                \
  ;
#include "common/catalogue/KernelCatalogue.def"

/// One instruction's decoded parameters: the struct of its kernel.
using KernelParams = std::variant<std::monostate
#define TESSEL_KERNEL(Id, Name, Family, Doc) , Id
#include "common/catalogue/KernelCatalogue.def"
                                  >;

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

enum class Family : uint8_t { Compute, Collective, Control };
enum class Direction : uint8_t { In, Out };
/// The element types an operand accepts: Float is f32, bf16 or f16; F32 is f32 alone (a loss,
/// a statistic carried from one kernel to another, a gradient on its way to the optimizer, the
/// optimizer's state: what mixed precision keeps at full width); Index is i32. A collective's
/// operands follow their data: Moved takes any type and Reduced a float type, the same type
/// as every other Moved (or Reduced) operand of the call (the bits move as they are; a
/// reduction sums in f32 and rounds to that type once).
enum class OperandTypes : uint8_t { Float, F32, Index, AnyType, Moved, Reduced };
/// How many operands a declaration stands for: One; OneOrMore and ZeroOrMore (the last operand
/// of its direction, taking what the others leave); Optional (zero or one, after the direction's
/// other operands: a call gives the optional ones in declaration order, a later one only with
/// those before it); Each and EachOrNone, one per tensor of a
/// multi-tensor call (an optimizer updating many tensors in one launch): the call's tensors are
/// as many as its inputs declared Each have operands, and an EachOrNone output has one per
/// tensor or none. Operands are laid out in declaration order, a per-tensor declaration's k
/// operands together; such a kernel lists its tensors' elements in its I64List parameter `n`.
enum class OperandCount : uint8_t { One, OneOrMore, ZeroOrMore, Optional, Each, EachOrNone };
enum class ParamPresence : uint8_t { Required, Optional };
enum class ParamType : uint8_t { I64, F64, Str, I64List, Flag, Body, Enum };

struct OperandInfo {
  const char *role;
  OperandTypes types;
  OperandCount count;
};

struct ParamInfo {
  const char *name;
  ParamType type;
  ParamPresence presence;
  const char *enumName;                ///< For ParamType::Enum.
  std::vector<std::string_view> words; ///< For ParamType::Enum: the words, by value.
  const char *doc;
};

struct KernelInfo {
  KernelId id;
  const char *name;
  Family family;
  const char *doc;
  std::vector<OperandInfo> ins, outs;
  std::vector<ParamInfo> params;
};

/// Every kernel, in declaration order (indexed by KernelId).
const std::vector<KernelInfo> &kernels();
const KernelInfo &kernelInfo(KernelId id);
/// The kernel called `name` in a plan, or null.
const KernelInfo *findKernel(std::string_view name);

/// The tensors of a multi-tensor call with `ins` inputs (0 for a kernel without per-tensor
/// operands, or when `ins` fits no count of tensors).
size_t tensorsOf(const KernelInfo &kernel, size_t ins);

/// Checks an instruction's operand count and element types against `kernel`; false with the
/// reason in `error` ("input 2 (`ids`) is f32; it takes i32").
bool checkOperands(const KernelInfo &kernel, const std::vector<planfile::DType> &ins,
                   const std::vector<planfile::DType> &outs, std::string &error);

/// Decodes an instruction's parameters into its kernel's struct: a required parameter that is
/// missing, one of the wrong type, an enum word the kernel does not know, or a parameter the
/// kernel does not take is refused with the reason in `error`.
bool decodeParams(const KernelInfo &kernel, const std::vector<planfile::Attr> &attrs,
                  KernelParams &params, std::string &error);

/// A multi-tensor call lists its tensors' elements in its parameter `n`: checks that it lists
/// as many as the call has operands for (after checkOperands and decodeParams).
bool checkTensors(const KernelInfo &kernel, const KernelParams &params, size_t ins,
                  std::string &error);

/// The kernel table of docs/plan-format.md, in Markdown.
std::string markdownTable();
/// One line per kernel: its name, operands and parameters (`tessel kernels`).
std::string textTable();

} // namespace tessel::catalogue

#endif // TESSEL_COMMON_CATALOGUE_KERNELCATALOGUE_H
