//===- NvrtcMain.cpp - tessel-nvrtc: a plan's fused kernels, compiled -----===//
//
// Generates the kernel of every `fused_elementwise` call in the plans given (plan files or
// compiled models) and compiles each distinct one with NVRTC for the architectures asked for,
// as the CUDA device does at plan load, but without a GPU: CI runs it on the example plans so
// that a body the generator or NVRTC gets wrong fails there, not on a GPU machine. With
// --cache it fills the kernel cache a CUDA device then reads (for the same NVRTC). Sources
// (--print-source) go to stdout, the summary of each plan to stderr.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/KernelArgs.h"
#include "runtime/device/cuda/FusedCompiler.h"
#include "runtime/support/AtomicFile.h"
#include "runtime/support/CommandLine.h"

#include "common/catalogue/KernelCatalogue.h"
#include "common/plan/Executable.h"
#include "common/plan/PlanFile.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace tessel;

namespace {

std::vector<std::string> splitComma(const std::string &s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    size_t end = s.find(',', at);
    if (end == std::string::npos)
      end = s.size();
    if (end > at)
      out.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

/// The plan of a plan file or a compiled model; false with an error naming the file.
bool readPlan(const std::string &path, planfile::Plan &plan, std::string &error) {
  std::string text;
  if (!rt::readWholeFile(path, planfile::kMaxPlanFileBytes, text, error))
    return false;
  std::vector<uint8_t> bytes(text.begin(), text.end());
  if (text.compare(0, 8, "TESSPLAN") != 0) {
    bool found = false;
    if (!planfile::readEmbeddedPlan(path, bytes, found, error))
      return false;
    if (!found)
      return error = path + " is neither a plan file nor a compiled model", false;
  }
  if (!planfile::parsePlan(bytes.data(), bytes.size(), plan, error))
    return error = path + ": " + error, false;
  return true;
}

/// The sources of the plan's fused calls, each once, in plan order; false with the call's
/// error (a call the runtime would refuse).
bool fusedSources(const planfile::Plan &plan, std::vector<std::string> &sources, int &calls,
                  std::string &error) {
  std::set<std::string> seen;
  const catalogue::KernelInfo *kernel = catalogue::findKernel("fused_elementwise");
  for (const planfile::Program &p : plan.programs)
    for (size_t n = 0; n < p.instrs.size(); ++n) {
      const planfile::Instr &instr = p.instrs[n];
      if (instr.kernel != "fused_elementwise")
        continue;
      const std::string where = "instruction " + std::to_string(n) + " of program '" + p.name + "'";
      catalogue::KernelParams params;
      if (!catalogue::decodeParams(*kernel, instr.attrs, params, error))
        return error = where + ": " + error, false;
      // The operands' sizes as the executor gives them; no memory behind them.
      rt::KernelCall call;
      call.instr = &instr;
      for (const planfile::BufferRef &b : instr.inputs) {
        call.in.push_back(nullptr);
        call.inElements.push_back(b.bytes / planfile::dtypeBytes(b.dtype));
      }
      for (const planfile::BufferRef &b : instr.outputs) {
        call.out.push_back(nullptr);
        call.outElements.push_back(b.bytes / planfile::dtypeBytes(b.dtype));
      }
      rt::KernelArgs args;
      std::string source;
      if (!rt::checkKernelCall(call, params, args))
        return error = where + ": " + call.error, false;
      if (!rt::fusedCallSource(call, args.as<rt::args::FusedElementwise>(), source, error))
        return error = where + ": " + error, false;
      ++calls;
      if (seen.insert(source).second)
        sources.push_back(source);
    }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> archs = {"sm_80", "sm_90"}, plans;
  std::string cacheDir;
  bool printSource = false, nvrtcVersion = false;
  rt::cli::Parser parser(argv[0], "[options] PLAN...",
                         "Compiles the generated kernel of every fused_elementwise call of each "
                         "PLAN (a plan file or a compiled model) with NVRTC for each "
                         "architecture; without --cache nothing is kept.");
  parser.custom("arch", "SM,...", "the architectures to compile for (default sm_80,sm_90)",
                [&](const std::string &v, std::string &why) {
                  archs = splitComma(v);
                  if (archs.empty())
                    return why = "expected architectures such as sm_90", false;
                  return true;
                });
  parser.text("cache", cacheDir, "DIR", "keep the compiled kernels in DIR");
  parser.flag("print-source", printSource, "print each kernel's generated source");
  parser.flag("nvrtc-version", nvrtcVersion,
              "print the version of the NVRTC this runtime opens and exit, or say why none "
              "opens (exit 1)");
  parser.positional("PLAN", [&](const std::string &v, std::string &) {
    plans.push_back(v);
    return true;
  });
  parser.versionDetails([] {
    std::string why;
    const rt::Nvrtc *nvrtc = rt::loadNvrtc(why);
    return nvrtc ? "NVRTC " + nvrtc->version() + "\n" : "NVRTC: none (" + why + ")\n";
  });
  if (std::optional<int> exit = parser.parse(argc, argv))
    return *exit;
  if (nvrtcVersion) {
    // Which NVRTC this runtime opens, or why none (lit's 'nvrtc' feature asks this).
    std::string why;
    const rt::Nvrtc *nvrtc = rt::loadNvrtc(why);
    if (!nvrtc) {
      std::fprintf(stderr, "%s\n", why.c_str());
      return 1;
    }
    std::printf("NVRTC %s\n", nvrtc->version().c_str());
    return 0;
  }
  if (plans.empty())
    return parser.usageError("no PLAN given");
  std::string error;
  const rt::Nvrtc *nvrtc = rt::loadNvrtc(error);
  if (!nvrtc) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], error.c_str());
    return 1;
  }
  rt::FusedCompiler compiler(*nvrtc, rt::KernelCache(cacheDir));
  int failures = 0;
  for (const std::string &path : plans) {
    planfile::Plan plan;
    std::vector<std::string> sources;
    int calls = 0;
    if (!readPlan(path, plan, error)) {
      std::fprintf(stderr, "%s: error: %s\n", argv[0], error.c_str());
      ++failures;
      continue;
    }
    if (!fusedSources(plan, sources, calls, error)) {
      std::fprintf(stderr, "%s: error: %s: %s\n", argv[0], path.c_str(), error.c_str());
      ++failures;
      continue;
    }
    const auto start = std::chrono::steady_clock::now();
    const int before = compiler.kernels();
    int compiled = 0;
    for (const std::string &source : sources) {
      if (printSource)
        std::printf("%s\n", source.c_str());
      for (const std::string &arch : archs) {
        rt::FusedCompiler::Result result;
        std::string warning;
        if (!compiler.compile(source, arch, result, warning, error)) {
          std::fprintf(stderr, "%s: error: %s: %s\n--- the source:\n%s\n", argv[0], path.c_str(),
                       error.c_str(), source.c_str());
          ++failures;
          continue;
        }
        if (!warning.empty())
          std::fprintf(stderr, "%s: warning: %s\n", argv[0], warning.c_str());
        ++compiled;
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string archList;
    for (const std::string &a : archs)
      archList += (archList.empty() ? "" : " ") + a;
    // Kernels another plan given here already has are not made again.
    std::fprintf(stderr,
                 "%s: %d fused calls, %zu kernels; %d cubins for %s by NVRTC %s (%d new) in "
                 "%.2f s\n",
                 path.c_str(), calls, sources.size(), compiled, archList.c_str(),
                 nvrtc->version().c_str(), compiler.kernels() - before, seconds);
  }
  return failures ? 1 : 0;
}
