//===- GraphDialect.h - The graph dialect -----------------------*- C++ -*-===//
#ifndef TESSEL_DIALECT_GRAPH_IR_GRAPHDIALECT_H
#define TESSEL_DIALECT_GRAPH_IR_GRAPHDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"

#include "tessel/Dialect/Settings/IR/SettingsDialect.h"

#include "common/catalogue/KernelOps.h"

#include "tessel/Dialect/Graph/IR/GraphOpsDialect.h.inc"

namespace tessel::graph {
/// The elementwise functions: the kernel catalogue's list, not restated by the dialect.
using UnaryFn = ::tessel::catalogue::UnaryOp;
} // namespace tessel::graph

#define GET_ATTRDEF_CLASSES
#include "tessel/Dialect/Graph/IR/GraphAttrs.h.inc"

#endif // TESSEL_DIALECT_GRAPH_IR_GRAPHDIALECT_H
