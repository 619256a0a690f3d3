//===- GraphDialect.cpp - The graph dialect and its attributes ------------===//

#include "tessel/Dialect/Graph/IR/GraphDialect.h"
#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/DialectImplementation.h"

#include <set>

using namespace mlir;
using namespace tessel::graph;

#include "tessel/Dialect/Graph/IR/GraphOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "tessel/Dialect/Graph/IR/GraphAttrs.cpp.inc"

void GraphDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "tessel/Dialect/Graph/IR/GraphOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tessel/Dialect/Graph/IR/GraphAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// UnaryFnAttr: #graph<unary_fn gelu>, bare `gelu` inside an op
//===----------------------------------------------------------------------===//

Attribute UnaryFnAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  std::string word;
  if (failed(parser.parseKeywordOrString(&word)))
    return {};
  if (std::optional<UnaryFn> fn = tessel::catalogue::enumOf<UnaryFn>(word))
    return UnaryFnAttr::get(parser.getContext(), *fn);
  InFlightDiagnostic diag = parser.emitError(loc)
                            << "unknown elementwise function '" << word << "'; the functions are ";
  llvm::interleaveComma(tessel::catalogue::EnumWords<UnaryFn>::words, diag,
                        [&](std::string_view w) { diag << StringRef(w.data(), w.size()); });
  return {};
}

void UnaryFnAttr::print(AsmPrinter &printer) const {
  std::string_view word = tessel::catalogue::wordOf(getValue());
  printer << ' ' << StringRef(word.data(), word.size());
}

//===----------------------------------------------------------------------===//
// DimsAttr: #graph.dims<batch, seq, embed>
//===----------------------------------------------------------------------===//

Attribute DimsAttr::parse(AsmParser &parser, Type) {
  SmallVector<StringAttr> names;
  if (parser.parseLess())
    return {};
  if (succeeded(parser.parseOptionalGreater()))
    return DimsAttr::get(parser.getContext(), names);
  do {
    std::string name;
    if (parser.parseKeywordOrString(&name))
      return {};
    names.push_back(StringAttr::get(parser.getContext(), name));
  } while (succeeded(parser.parseOptionalComma()));
  if (parser.parseGreater())
    return {};
  return DimsAttr::getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                              parser.getContext(), names);
}

void DimsAttr::print(AsmPrinter &printer) const {
  printer << "<";
  llvm::interleaveComma(getNames(), printer,
                        [&](StringAttr name) { printer.printKeywordOrString(name.getValue()); });
  printer << ">";
}

LogicalResult DimsAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<StringAttr> names) {
  std::set<StringRef> seen;
  for (StringAttr name : names) {
    if (name.getValue().empty())
      return emitError() << "dim names cannot be empty";
    if (!seen.insert(name.getValue()).second)
      return emitError() << "dim '" << name.getValue() << "' appears twice";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// InitAttr: #graph.init<normal(0.0, 0.02)>
//===----------------------------------------------------------------------===//

static int initArity(StringRef kind) {
  return llvm::StringSwitch<int>(kind)
      .Cases({"normal", "uniform"}, 2)
      .Case("constant", 1)
      .Cases({"zeros", "ones", "load"}, 0)
      .Default(-1);
}

Attribute InitAttr::parse(AsmParser &parser, Type) {
  std::string kind;
  double args[2] = {0.0, 0.0};
  if (parser.parseLess() || parser.parseKeywordOrString(&kind))
    return {};
  if (kind == "load") {
    std::string source;
    SmallVector<int64_t> slice;
    if (parser.parseLParen() || parser.parseString(&source))
      return {};
    if (succeeded(parser.parseOptionalComma()) &&
        parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
          return parser.parseInteger(slice.emplace_back());
        }))
      return {};
    if (parser.parseRParen() || parser.parseGreater())
      return {};
    return InitAttr::getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                                parser.getContext(), kind, APFloat(0.0), APFloat(0.0), source,
                                slice);
  }
  int arity = initArity(kind);
  if (arity > 0) {
    if (parser.parseLParen())
      return {};
    for (int i = 0; i < arity; ++i)
      if ((i && parser.parseComma()) || parser.parseFloat(args[i]))
        return {};
    if (parser.parseRParen())
      return {};
  }
  if (parser.parseGreater())
    return {};
  return InitAttr::getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                              parser.getContext(), kind, APFloat(args[0]), APFloat(args[1]),
                              StringRef(), ArrayRef<int64_t>());
}

void InitAttr::print(AsmPrinter &printer) const {
  printer << "<" << getKind();
  if (getKind() == "load") {
    printer << "(\"";
    llvm::printEscapedString(getSource(), printer.getStream());
    printer << "\"";
    if (!getSlice().empty()) {
      printer << ", [";
      llvm::interleaveComma(getSlice(), printer);
      printer << "]";
    }
    printer << ")>";
    return;
  }
  int arity = initArity(getKind());
  if (arity > 0) {
    printer << "(";
    printer.printFloat(getA());
    if (arity > 1) {
      printer << ", ";
      printer.printFloat(getB());
    }
    printer << ")";
  }
  printer << ">";
}

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef kind,
                               APFloat first, APFloat second, StringRef source,
                               ArrayRef<int64_t> slice) {
  double a = first.convertToDouble(), b = second.convertToDouble();
  if (initArity(kind) < 0)
    return emitError() << "unknown initialiser '" << kind
                       << "'; expected normal, uniform, zeros, ones, constant or load";
  if ((kind == "load") != !source.empty())
    return emitError() << (source.empty() ? "load names no stored tensor"
                                          : "only load names a stored tensor");
  if (!slice.empty() && (kind != "load" || slice.size() != 4 || slice[1] < 1 || slice[0] < 0 ||
                         slice[0] >= slice[1] || slice[3] == 0 || slice[3] < -1))
    return emitError() << "a load's slice is [part, parts, axis, rows] with 0 <= part < parts "
                          "and rows -1 (all) or positive";
  if (kind == "normal" && b < 0)
    return emitError() << "normal initialiser with negative standard deviation " << b;
  if (kind == "uniform" && a > b)
    return emitError() << "uniform initialiser with low " << a << " above high " << b;
  return success();
}
