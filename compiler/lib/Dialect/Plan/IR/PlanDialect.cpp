//===- PlanDialect.cpp - The plan dialect ---------------------------------===//

#include "tessel/Dialect/Plan/IR/PlanDialect.h"

#include "common/catalogue/KernelCatalogue.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace tessel::plan;

#include "tessel/Dialect/Plan/IR/PlanOpsDialect.cpp.inc"

void PlanDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "tessel/Dialect/Plan/IR/PlanOps.cpp.inc"
      >();
}

// One mesh per module, its axes named once each and of at least two ranks.
LogicalResult MeshOp::verify() {
  if (getAxes().size() != getSizes().size())
    return emitOpError() << "has " << getAxes().size() << " axes and " << getSizes().size()
                         << " sizes";
  llvm::StringSet<> seen;
  for (auto [axis, size] : llvm::zip(getAxes().getAsValueRange<StringAttr>(), getSizes())) {
    if (axis.empty() || !seen.insert(axis).second)
      return emitOpError() << "names axis '" << axis << "' twice or empty";
    if (size < 2)
      return emitOpError() << "gives axis '" << axis << "' " << size
                           << " ranks; an axis of one rank splits nothing and is left out";
  }
  auto module = (*this)->getParentOfType<ModuleOp>();
  if (module && meshOf(module) != *this)
    return emitOpError("is the module's second mesh");
  return success();
}

MeshOp tessel::plan::meshOf(ModuleOp module) {
  auto meshes = module.getOps<MeshOp>();
  return meshes.empty() ? MeshOp() : *meshes.begin();
}

// A group's axes are the mesh's, in order, and its name is theirs (or `world`, all of them).
LogicalResult GroupOp::verify() {
  MeshOp mesh = meshOf((*this)->getParentOfType<ModuleOp>());
  if (!mesh)
    return emitOpError("needs the module's plan.mesh");
  ArrayRef<int64_t> axes = getAxes();
  const int64_t count = static_cast<int64_t>(mesh.getAxes().size());
  std::string name;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= count || (i > 0 && axes[i] <= axes[i - 1]))
      return emitOpError() << "axes must be increasing indices into the mesh's " << count
                           << " axes";
    name += (name.empty() ? "" : "_") +
            cast<StringAttr>(mesh.getAxes()[axes[i]]).getValue().str();
  }
  if (getSymName() == "world" ? static_cast<int64_t>(axes.size()) != count
                              : getSymName() != name)
    return emitOpError() << "is named '" << getSymName() << "' but spans "
                         << (name.empty() ? std::string("no axes") : "'" + name + "'");
  return success();
}

LogicalResult ViewOp::verify() {
  auto from = getSource().getType(), to = getResult().getType();
  if (auto offset = getOffset()) {
    int64_t at = static_cast<int64_t>(*offset);
    if (from.getElementType() != to.getElementType() || at < 0 ||
        at + to.getNumElements() > from.getNumElements())
      return emitOpError() << "cannot view " << to.getNumElements() << " elements at offset "
                           << *offset << " of " << from;
    return success();
  }
  if (from.getElementType() != to.getElementType() || from.getNumElements() != to.getNumElements())
    return emitOpError() << "cannot view " << from << " as " << to
                         << ": a view keeps the element type and count";
  return success();
}

FailureOr<tessel::planfile::DType> tessel::plan::planDType(Operation *op, MemRefType type) {
  Type e = type.getElementType();
  if (e.isF32())
    return planfile::DType::F32;
  if (e.isBF16())
    return planfile::DType::BF16;
  if (e.isF16())
    return planfile::DType::F16;
  if (e.isInteger(32))
    return planfile::DType::I32;
  return op->emitOpError() << "has element type " << e
                           << "; plans hold f32, bf16, f16 and i32 buffers";
}

FailureOr<tessel::planfile::Attr> tessel::plan::planParam(Operation *op, NamedAttribute param) {
  std::string name = param.getName().str();
  Attribute a = param.getValue();
  if (auto i = dyn_cast<IntegerAttr>(a))
    return planfile::Attr{name, i.getValue().getSExtValue()};
  if (auto f = dyn_cast<FloatAttr>(a))
    return planfile::Attr{name, f.getValueAsDouble()};
  if (auto s = dyn_cast<StringAttr>(a))
    return planfile::Attr{name, s.str()};
  if (auto l = dyn_cast<DenseI64ArrayAttr>(a))
    return planfile::Attr{name, std::vector<int64_t>(l.asArrayRef().begin(), l.asArrayRef().end())};
  return op->emitOpError() << "parameter '" << name << "' has an unsupported kind " << a;
}

/// The kernel must be in the catalogue (common/catalogue/KernelCatalogue.def), with the operands and
/// parameters it declares: the same check, from the same declaration, as the runtime's at load.
LogicalResult KernelOp::verify() {
  namespace cat = tessel::catalogue;
  const cat::KernelInfo *kernel = cat::findKernel(getName().str());
  if (!kernel)
    return emitOpError() << "calls '" << getName()
                         << "', which is not in the kernel catalogue (`tessel kernels` lists it)";
  std::vector<planfile::DType> ins, outs;
  for (Value v : getIns()) {
    auto t = planDType(*this, cast<MemRefType>(v.getType()));
    if (failed(t))
      return failure();
    ins.push_back(*t);
  }
  for (Value v : getOuts()) {
    auto t = planDType(*this, cast<MemRefType>(v.getType()));
    if (failed(t))
      return failure();
    outs.push_back(*t);
  }
  std::vector<planfile::Attr> attrs;
  for (NamedAttribute na : getParams()) {
    auto a = planParam(*this, na);
    if (failed(a))
      return failure();
    attrs.push_back(std::move(*a));
  }
  std::string why;
  cat::KernelParams decoded;
  if (!cat::checkOperands(*kernel, ins, outs, why) ||
      !cat::decodeParams(*kernel, attrs, decoded, why) ||
      !cat::checkTensors(*kernel, decoded, ins.size(), why))
    return emitOpError() << "'" << getName() << "' " << why;
  return success();
}

#define GET_OP_CLASSES
#include "tessel/Dialect/Plan/IR/PlanOps.cpp.inc"
