"""Checks Tessel's layering against an allow-list: for every folder of the source tree, what
its files may include; for every program, what it may link and load; and that no runtime
target has MLIR's or LLVM's headers on its include path.

The rules, stated once here:
- common/ is plain C++ the compiler and the runtime share, in folders by concern that
  depend as ALLOWED says; it includes nothing of either side, and no MLIR, LLVM, OpenMP, MPI
  or CUDA.
- The compiler (compiler/) includes common/ and MLIR/LLVM, never runtime/ or kernels/; its
  folders depend as ALLOWED says (a dialect's passes on its IR, the lowering on both dialects,
  the tools on the libraries).
- The runtime's folders depend one way (RUNTIME_ORDER): runner and side tools on the host
  loop, the host on the pipeline walk and checkpoints, those on the executor (core), the
  executor on the device-neutral kernel-call contract (device), that on the communicators
  (comm), everything on support. The CPU and CUDA devices each reach only their own kernels.
- kernels/ holds the kernels of each backend, neither reaching into the other.
- benchmarks/ and the side tools (tessel-calibrate, tessel-nvrtc, tessel-rendezvous) are
  covered like the rest.

An include resolves to a component: a project folder (the compiler's public headers,
spelled "tessel/...", belong to the folder of their sources: compiler/include/tessel/X and
compiler/lib/X are both compiler/X), the file's own folder, or an outside library (std,
posix, mlir, llvm, cuda, ...). A folder without a rule, or an include no rule allows, is a
violation: a new folder or dependency is added here, deliberately.

Four kinds of evidence, each optional on the command line:
  --sources ROOT      the include lines of every C/C++/CUDA file under ROOT's common/,
                      compiler/, kernels/, runtime/ and benchmarks/;
  --links FILE        the libraries each program links, directly or through other targets,
                      as CMake's target graph gives them (test/CMakeLists.txt writes FILE);
  --include-dirs FILE the include directories of the runtime's targets (same);
  --binary NAME=PATH  the shared libraries the built program loads (ldd).
Prints one line per violation and exits 1 when there is any; otherwise prints what it checked.

usage: check_layering.py [--sources ROOT] [--links FILE] [--include-dirs FILE]
                         [--binary NAME=PATH]...
"""
import argparse
import os
import re
import subprocess
import sys

SOURCE_TOPS = ["common", "compiler", "kernels", "runtime", "benchmarks"]
SOURCE_SUFFIXES = (".h", ".hpp", ".inc", ".c", ".cc", ".cpp", ".cu", ".cuh", ".td", ".def")

# Outside libraries, by the headers that name them. A header in none of these is "unknown",
# which no rule allows.
POSIX = {"unistd.h", "fcntl.h", "dlfcn.h", "poll.h", "netdb.h", "glob.h", "sys/stat.h",
         "sys/mman.h", "sys/socket.h", "sys/resource.h", "netinet/in.h", "netinet/tcp.h",
         "arpa/inet.h"}
LIBRARY_HEADERS = {"omp.h": "openmp", "mpi.h": "mpi", "nccl.h": "nccl", "cblas.h": "blas",
                   "xxhash.h": "xxhash", "pcre2.h": "pcre2", "nvrtc.h": "nvrtc",
                   "sentencepiece_processor.h": "sentencepiece", "immintrin.h": "simd",
                   "antlr4-runtime.h": "antlr"}
LIBRARY_PREFIXES = [("mlir/", "mlir"), ("llvm/", "llvm"), ("cuda", "cuda"), ("cublas", "cuda"),
                    ("cub/", "cuda"), ("gtest/", "gtest"), ("Tessel", "grammar")]

# The runtime's folders, each on those after it.
RUNTIME_ORDER = [["runner", "tools"], ["host"], ["pipeline", "checkpoint"], ["core"],
                 ["device"], ["comm"], ["support"]]

COMMON = ["common/*"]
STD = ["std", "posix"]


def ordered(top, order, extra):
    """Rules for top/FOLDER from an order: each folder may include itself and the folders of
    later levels, plus its entry in `extra`."""
    rules = {}
    for level, names in enumerate(order):
        below = [f"{top}/{n}" for later in order[level + 1:] for n in later]
        for name in names:
            rules[f"{top}/{name}"] = below + extra.get(name, [])
    return rules


# common/: the memory profile walks a plan's pipeline, the pipeline layout reads plans and
# schedules, the kernel catalogue checks plan instructions; the plan format, the schedules,
# clusters, token files and tokenizers stand on support alone; the mesh's axes on nothing.
ALLOWED = {
    "common/support": STD + ["xxhash"],
    "common/mesh": STD,
    "common/plan": ["common/support"] + STD,
    "common/schedule": ["common/support"] + STD,
    "common/catalogue": ["common/plan", "common/support"] + STD,
    "common/layout": ["common/plan", "common/schedule", "common/support"] + STD,
    "common/memory": ["common/layout", "common/plan", "common/schedule", "common/support"] + STD,
    "common/cluster": ["common/support"] + STD,
    "common/data": ["common/support"] + STD,
    "common/tokenizer": ["common/support"] + STD + ["pcre2", "sentencepiece"],
}
ALLOWED.update(ordered("runtime", RUNTIME_ORDER, {
    "support": COMMON + STD,
    "comm": COMMON + STD + ["mpi", "nccl", "cuda"],
    "device": COMMON + STD + ["kernels"],
    "core": COMMON + STD + ["kernels", "openmp"],
    "checkpoint": COMMON + STD,
    "pipeline": COMMON + STD,
    "host": COMMON + STD + ["kernels"],
    "runner": COMMON + STD,
    # The side tools: tessel-rendezvous (the torchrun rendezvous) and tessel-nvrtc (compiles
    # the CUDA device's fused kernels without a GPU).
    "tools": COMMON + STD + ["runtime/device/cuda"],
}))
ALLOWED.update({
    # Each device reaches the device-neutral contract below it and its own kernels only.
    "runtime/device/cpu": ALLOWED["runtime/device"] + ["runtime/device", "kernels/cpu", "openmp"],
    "runtime/device/cuda": ALLOWED["runtime/device"] + ["runtime/device", "kernels/cuda", "cuda",
                                                        "nvrtc"],
    # The kernels: shared operand types (kernels/), each backend on those only.
    "kernels": ["common/catalogue", "common/support"] + STD,
    "kernels/cpu": ["kernels"] + COMMON + STD + ["simd", "openmp", "blas"],
    "kernels/cuda": ["kernels"] + COMMON + STD + ["cuda"],
    # The compiler.
    "compiler/Shape": STD + ["llvm"],
    # The front end links nothing of common/; it reads the element types, the schedule kinds',
    # the mesh axes' and the elementwise functions' words from their header-only lists
    # (support/DType.h, schedule/ScheduleKind.h, mesh/MeshAxes.h, catalogue/KernelOps.h).
    "compiler/Frontend": ["compiler/Shape", "common/catalogue", "common/schedule", "common/mesh",
                          "common/support", "grammar", "antlr", "llvm"] + STD,
    # The module's settings stand on common/'s header-only lists alone; the other dialects
    # may read them.
    "compiler/Dialect/Settings/IR": ["common/schedule", "common/mesh"] + STD + ["mlir", "llvm"],
    "compiler/Dialect/*/IR": ["compiler/Shape", "compiler/Dialect/Settings/IR"] + COMMON + STD
    + ["mlir", "llvm"],
    "compiler/Dialect/Graph/Transforms": ["compiler/Dialect/Graph/IR",
                                          "compiler/Dialect/Settings/IR"] + COMMON + STD
    + ["mlir", "llvm"],
    "compiler/Dialect/Sched/Transforms": ["compiler/Dialect/Sched/IR", "compiler/Dialect/Graph/IR",
                                          "compiler/Dialect/Graph/Transforms",
                                          "compiler/Dialect/Settings/IR"]
    + COMMON + STD + ["mlir", "llvm"],
    "compiler/Dialect/Plan/Transforms": ["compiler/Dialect/Plan/IR", "compiler/Dialect/Settings/IR",
                                         "compiler/Analysis"] + COMMON + STD + ["mlir", "llvm"],
    "compiler/Analysis": ["compiler/Dialect/Plan/IR"] + COMMON + STD + ["mlir", "llvm"],
    "compiler/Conversion": ["compiler/Dialect/Graph/IR", "compiler/Dialect/Plan/IR"] + STD
    + ["mlir", "llvm"],
    "compiler/Conversion/*": ["compiler/Conversion", "compiler/Dialect/Graph/IR",
                              "compiler/Dialect/Plan/IR", "compiler/Dialect/Settings/IR"]
    + COMMON + STD + ["mlir", "llvm"],
    "compiler/IRGen": ["compiler/Frontend", "compiler/Shape", "compiler/Dialect/Graph/IR",
                       "compiler/Dialect/Settings/IR"] + COMMON + STD + ["mlir", "llvm"],
    "compiler/Pipelines": ["compiler/Conversion", "compiler/Dialect/*/IR",
                           "compiler/Dialect/*/Transforms"] + STD + ["mlir", "llvm"],
    # The plan writer reads the plan dialect (its mesh and groups included) and the module's
    # settings.
    "compiler/Target": ["compiler/Analysis", "compiler/Dialect/Plan/IR",
                        "compiler/Dialect/Settings/IR"] + COMMON + STD + ["mlir", "llvm"],
    "compiler/tools/tessel": ["compiler/Frontend", "compiler/Shape", "compiler/IRGen",
                              "compiler/Pipelines", "compiler/Target", "compiler/Analysis",
                              "compiler/Dialect/*/IR"] + COMMON + STD + ["mlir", "llvm"],
    "compiler/tools/tessel-opt": ["compiler/Pipelines", "compiler/Conversion",
                                  "compiler/Dialect/*/IR", "compiler/Dialect/*/Transforms"]
    + STD + ["mlir", "llvm"],
    # Benchmarks: the kernels' rates (CPU attention, the CUDA kernels through the CUDA
    # device's launch helpers) and tessel-calibrate (the CPU device, as training runs it).
    "benchmarks/kernels": ["kernels", "kernels/cpu", "kernels/cuda", "runtime/device/cuda",
                           "runtime/support"] + COMMON + STD + ["cuda", "openmp"],
    "benchmarks/calibrate": ["kernels", "kernels/cpu", "runtime/core", "runtime/device",
                             "runtime/device/cpu", "runtime/comm", "runtime/support"]
    + COMMON + STD,
})

# Per program, the libraries it may link (a CMake target or imported name, exactly or as a
# prefix, or a library file whose name starts with "lib" and the entry): the compiler tools MLIR, LLVM, ANTLR and the compiler's libraries, never
# the runtime, its kernels, OpenMP, BLAS or MPI; the runtime's programs the runtime and its
# kernels, never the compiler, MLIR or LLVM.
SYSTEM_LIBRARIES = ["pthread", "rt", "Threads::", "dl"]
COMPILER_LIBRARIES = ["TesselTarget", "TesselAnalysis", "TesselPipelines", "TesselGraphToPlan",
                      "TesselGraphTransforms", "TesselSchedTransforms", "TesselPlanTransforms",
                      "TesselGraphDialect", "TesselSchedDialect", "TesselPlanDialect",
                      "TesselSettingsDialect",
                      "TesselIRGen", "TesselFrontend", "TesselGrammar", "TesselShape",
                      "TesselCommon", "TesselTokenizer", "MLIR", "LLVM", "antlr4", "pcre2",
                      "sentencepiece"] + SYSTEM_LIBRARIES
RUNTIME_LIBRARIES = ["TesselRuntime", "TesselCpuKernels", "TesselCudaKernels", "TesselCommon",
                     "TesselTokenizer", "OpenMP::", "gomp", "openblas", "MPI::", "mpi",
                     "CUDA::cudart", "pcre2", "sentencepiece"] + SYSTEM_LIBRARIES
LINKS = {
    "tessel": COMPILER_LIBRARIES,
    "tessel-opt": COMPILER_LIBRARIES,
    "tessel-runner": RUNTIME_LIBRARIES,
    "tessel-rendezvous": RUNTIME_LIBRARIES,
    "tessel-nvrtc": RUNTIME_LIBRARIES,
    "tessel-calibrate": RUNTIME_LIBRARIES,
    "tessel-attention-rate": RUNTIME_LIBRARIES,
    "tessel-cuda-rate": RUNTIME_LIBRARIES,
    "tessel-cuda-fused-rate": RUNTIME_LIBRARIES,
}

# Per program, the shared libraries (substrings of ldd's names) it may not load.
LOAD_RULES = {
    "tessel": ["blas", "gomp", "libmpi", "cublas", "nccl"],
    "tessel-opt": ["blas", "gomp", "libmpi", "cublas", "nccl"],
    "tessel-runner": ["libMLIR", "libLLVM", "antlr"],
}

# The runtime's targets, whose include path may not hold MLIR's or LLVM's headers (the
# compiler's global include directories are added after the runtime's folders).
RUNTIME_TARGETS_FORBIDDEN_DIRS = ["llvm", "mlir"]


def pattern_regex(pattern):
    """A rule's component pattern as a regex: '*' is one path segment."""
    return re.compile("^" + "[^/]+".join(re.escape(p) for p in pattern.split("*")) + "$")


RULES = [(pattern_regex(folder), folder, [pattern_regex(a) for a in allowed])
         for folder, allowed in ALLOWED.items()]


def rule_for(component):
    """The rule of a folder: the exact one, or the pattern that matches it."""
    for regex, folder, allowed in RULES:
        if folder == component:
            return folder, allowed
    for regex, folder, allowed in RULES:
        if regex.match(component):
            return folder, allowed
    return None, None


def component_of_path(path):
    """The component a root-relative file path belongs to: its folder, with the compiler's
    include/tessel/X and lib/X both compiler/X."""
    folder = os.path.dirname(path)
    for prefix in ("compiler/include/tessel/", "compiler/lib/"):
        if folder.startswith(prefix):
            return "compiler/" + folder[len(prefix):]
    if folder in ("compiler/include/tessel", "compiler/lib"):
        return "compiler"
    return folder


def normalised(path):
    parts = []
    for p in path.split("/"):
        if p == "..":
            if parts:
                parts.pop()
        elif p not in (".", ""):
            parts.append(p)
    return "/".join(parts)


def component_of_include(root, relpath, quote, included):
    """What an include line names: a project folder or an outside library."""
    if quote == '"':
        here = os.path.dirname(relpath)
        local = normalised(os.path.join(here, included))
        if os.path.exists(os.path.join(root, local)) or included.startswith("../"):
            return component_of_path(local)
        for top in SOURCE_TOPS + ["test"]:
            if included.startswith(top + "/"):
                return component_of_path(normalised(included))
        if included.startswith("tessel/"):
            return component_of_path("compiler/include/" + normalised(included))
        if "/" not in included and not included.startswith("Tessel") \
                and included not in LIBRARY_HEADERS:
            return component_of_path(relpath)  # a generated file beside the including one
    if quote == "<" and included in POSIX:
        return "posix"
    if quote == "<" and "/" not in included and "." not in included:
        return "std"
    if included in LIBRARY_HEADERS:
        return LIBRARY_HEADERS[included]
    for prefix, name in LIBRARY_PREFIXES:
        if included.startswith(prefix):
            return name
    return f"unknown <{included}>"


INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def check_sources(root, problems):
    files = 0
    for top in SOURCE_TOPS:
        for directory, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.join(directory, name)
                relpath = os.path.relpath(path, root)
                files += 1
                mine = component_of_path(relpath)
                folder, allowed = rule_for(mine)
                if folder is None:
                    problems.append(f"{relpath}: {mine}/ has no rule; state what it may include "
                                    f"in ALLOWED (test/Layering/check_layering.py)")
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        theirs = component_of_include(root, relpath, m.group(1), m.group(2))
                        if theirs == mine or any(a.match(theirs) for a in allowed):
                            continue
                        problems.append(f"{relpath}:{number}: includes \"{m.group(2)}\" "
                                        f"({theirs}); {mine}/ may not include it{why(mine, theirs)}")
    return files


def why(mine, theirs):
    """The rule an include breaks, where an order states it."""
    level = {f"runtime/{n}": i for i, names in enumerate(RUNTIME_ORDER) for n in names}
    if mine in level and theirs in level and level[theirs] <= level[mine]:
        return f" ({theirs}/ comes before it in the runtime's order)"
    if mine.split("/")[0] == "common" and theirs.split("/")[0] != "common":
        return " (common/ is plain C++ both sides share)"
    return ""


def read_lines(path):
    table = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if ":" in line:
                name, values = line.split(":", 1)
                table[name.strip()] = [v for v in values.strip().split(";") if v]
    return table


def links_as(entry, library):
    """Whether a library of a link closure is the one an allow-list entry names."""
    if library == entry or (entry.endswith("::") or entry.startswith("CUDA::")) \
            and library.startswith(entry):
        return True
    return os.path.basename(library).startswith("lib" + entry)


def check_links(path, problems):
    closures = read_lines(path)
    for program, allowed in LINKS.items():
        if program not in closures:
            continue  # not built in this configuration (the CUDA benchmarks)
        for library in closures[program]:
            if not any(links_as(entry, library) for entry in allowed):
                problems.append(f"{program} links {library} (through CMake's target graph), "
                                f"which its entry in LINKS does not allow")
    for program in closures:
        if program not in LINKS:
            problems.append(f"{path}: {program} has no link rule; add it to LINKS")
    return len(closures)


def check_include_dirs(path, problems):
    targets = read_lines(path)
    for target, dirs in targets.items():
        for d in sorted(set(dirs)):
            if any(f in d.lower() for f in RUNTIME_TARGETS_FORBIDDEN_DIRS):
                problems.append(f"{target} has {d} on its include path; the runtime may not "
                                f"see MLIR's or LLVM's headers")
    return len(targets)


def check_binary(tool, path, problems):
    result = subprocess.run(["ldd", path], capture_output=True, text=True)
    if result.returncode != 0:
        problems.append(f"ldd {path} failed: {result.stderr.strip()}")
        return
    for line in result.stdout.splitlines():
        loaded = line.strip().split(" ")[0]
        for name in LOAD_RULES.get(tool, []):
            if name.lower() in loaded.lower():
                problems.append(f"{tool} ({path}) loads {loaded}; {tool} may not load {name}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sources")
    parser.add_argument("--links")
    parser.add_argument("--include-dirs")
    parser.add_argument("--binary", action="append", default=[])
    args = parser.parse_args()
    problems = []
    checked = []
    if args.sources:
        files = check_sources(args.sources, problems)
        checked.append(f"includes of {files} files")
    if args.links:
        programs = check_links(args.links, problems)
        checked.append(f"link closures of {programs} programs")
    if args.include_dirs:
        targets = check_include_dirs(args.include_dirs, problems)
        checked.append(f"include paths of {targets} runtime targets")
    for binary in args.binary:
        tool, path = binary.split("=", 1)
        check_binary(tool, path, problems)
        checked.append(f"libraries {tool} loads")
    for p in problems:
        print("layering violation: " + p)
    if problems:
        sys.exit(1)
    print("layering ok: " + ", ".join(checked))


main()
