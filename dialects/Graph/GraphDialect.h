//===- GraphDialect.h - The graph dialect -----------------------*- C++ -*-===//
#ifndef TESSEL_DIALECT_GRAPH_GRAPHDIALECT_H
#define TESSEL_DIALECT_GRAPH_GRAPHDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"

#include "Graph/GraphOpsDialect.h.inc"

#include "Graph/GraphEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "Graph/GraphAttrs.h.inc"

#endif // TESSEL_DIALECT_GRAPH_GRAPHDIALECT_H
