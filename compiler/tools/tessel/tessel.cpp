//===- tessel.cpp - The Tessel driver -------------------------------------===//
//
//   tessel check model.model              report every error, or a summary
//   tessel compile model.model --emit=graph
//
// Exit codes: 0 success, 1 errors in the input, 2 usage or I/O errors.
//
//===----------------------------------------------------------------------===//

#include "tessel/Frontend/Sema.h"
#include "tessel/IRGen/GraphGen.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <iostream>
#include <sstream>
#include <new>

using namespace llvm;
using namespace tessel;

namespace {

cl::OptionCategory category("Tessel options");

cl::SubCommand checkCommand("check", "Check a .model file and report every error in it");
cl::SubCommand compileCommand("compile", "Compile a .model file (--emit chooses the stage)");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<file.model>"), cl::Required,
                               cl::sub(checkCommand), cl::sub(compileCommand), cl::cat(category));
cl::list<std::string> importDirs("I", cl::desc("Add a directory to search for imports"),
                                 cl::value_desc("dir"), cl::Prefix, cl::sub(checkCommand),
                                 cl::sub(compileCommand), cl::cat(category));
cl::opt<int64_t> ranks("ranks",
                       cl::desc("Number of ranks the run will have; the mesh must match it"),
                       cl::init(0), cl::sub(checkCommand), cl::sub(compileCommand),
                       cl::cat(category));

enum class Emit { Ast, Graph };
cl::opt<Emit> emit("emit", cl::desc("What to produce"), cl::init(Emit::Graph),
                   cl::values(clEnumValN(Emit::Ast, "ast", "the syntax tree of the file"),
                              clEnumValN(Emit::Graph, "graph",
                                         "the forward computation in the graph dialect")),
                   cl::sub(compileCommand), cl::cat(category));
cl::opt<std::string> outputFile("o", cl::desc("Write the output here (default: stdout)"),
                                cl::value_desc("file"), cl::init("-"), cl::sub(compileCommand),
                                cl::cat(category));

/// Where `std/` lives: beside an installed binary, else the source tree it was built from.
std::string libraryRoot(const char *argv0) {
  std::string exe = sys::fs::getMainExecutable(argv0, reinterpret_cast<void *>(&libraryRoot));
  SmallString<256> installed(sys::path::parent_path(sys::path::parent_path(exe)));
  sys::path::append(installed, "share", "tessel");
  if (sys::fs::is_directory(installed + "/std"))
    return std::string(installed);
  return TESSEL_LIBRARY_ROOT;
}

struct Frontend {
  SourceManager sources;
  DiagnosticEngine diags{sources};
  FrontendOptions options;
  std::unique_ptr<ParsedModule> module;
};

/// Parses the input and its imports; prints diagnostics. Returns false on errors.
bool load(Frontend &fe, const char *argv0) {
  fe.options.importPaths.assign(importDirs.begin(), importDirs.end());
  fe.options.importPaths.push_back(libraryRoot(argv0));
  fe.options.ranks = ranks;
  fe.module = loadModule(inputFile, fe.sources, fe.diags, fe.options);
  return fe.module != nullptr;
}

int finish(Frontend &fe) {
  fe.diags.print(std::cerr);
  return fe.diags.hasErrors() ? 1 : 0;
}

std::string humanCount(double n) {
  const char *units[] = {"", "K", "M", "B", "T"};
  int u = 0;
  while (n >= 1000 && u < 4) {
    n /= 1000;
    ++u;
  }
  char buf[32];
  snprintf(buf, sizeof buf, u ? "%.2f%s" : "%.0f%s", n, units[u]);
  return buf;
}

int runCheck(const char *argv0) {
  Frontend fe;
  if (!load(fe, argv0)) { // The file could not be read: an I/O error, not one in the input.
    finish(fe);
    return 2;
  }
  auto program = analyze(*fe.module, fe.sources, fe.diags, fe.options);
  if (!program)
    return finish(fe);
  finish(fe); // Warnings.
  double params = 0;
  size_t paramCount = 0;
  for (const Op &op : program->forward.ops) {
    if (op.name != "param")
      continue;
    double n = 1;
    for (const NamedDim &d : op.type.dims)
      n *= static_cast<double>(d.size);
    params += n;
    ++paramCount;
  }
  outs() << inputFile << ": ok: model " << program->modelName << ", "
         << humanCount(params) << " parameters in " << paramCount << " tensors, "
         << program->forward.ops.size() << " ops, " << program->layers << " layers, "
         << program->parallel.worldSize() << " rank"
         << (program->parallel.worldSize() == 1 ? "" : "s") << ", accumulation "
         << program->train.accumulation << "\n";
  return 0;
}

int runCompile(const char *argv0) {
  Frontend fe;
  if (!load(fe, argv0)) { // The file could not be read: an I/O error, not one in the input.
    finish(fe);
    return 2;
  }
  std::string error;
  auto output = mlir::openOutputFile(outputFile, &error);
  if (emit == Emit::Ast) {
    if (fe.diags.hasErrors())
      return finish(fe);
    if (!output) {
      errs() << "tessel: error: cannot write '" << outputFile << "': " << error << "\n";
      return 2;
    }
    std::ostringstream text;
    for (const auto &file : fe.module->files)
      printAst(*file, fe.sources, text);
    output->os() << text.str();
    output->keep();
    return finish(fe);
  }
  auto program = analyze(*fe.module, fe.sources, fe.diags, fe.options);
  if (!program)
    return finish(fe);
  finish(fe);
  mlir::MLIRContext context;
  auto module = emitGraphModule(context, *program, fe.sources);
  if (failed(mlir::verify(*module))) {
    errs() << "tessel: internal error: the emitted graph IR does not verify\n";
    return 2;
  }
  if (!output) {
    errs() << "tessel: error: cannot write '" << outputFile << "': " << error << "\n";
    return 2;
  }
  module->print(output->os());
  output->keep();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter([](raw_ostream &os) { os << "tessel 0.1\n"; });
  // With an error stream given, a bad command line returns false instead of exiting with 1,
  // which is the code for errors in the input.
  if (!cl::ParseCommandLineOptions(
      argc, argv,
      "Tessel: parallel transformer training from one .model file\n\n"
      "  tessel check FILE.model               check a model and its parallel layout\n"
      "  tessel compile FILE.model --emit=ast  print the syntax tree\n"
      "  tessel compile FILE.model --emit=graph  print the forward graph IR\n\n"
      "  tessel <command> --help shows a command's options.\n",
          &errs()))
    return 2;
  try {
    if (checkCommand)
      return runCheck(argv[0]);
    if (compileCommand)
      return runCompile(argv[0]);
  } catch (const std::bad_alloc &) {
    errs() << "tessel: out of memory\n";
    return 2;
  }
  errs() << "tessel: no command given; try 'tessel --help'\n";
  return 2;
}
