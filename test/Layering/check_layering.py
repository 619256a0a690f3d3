"""Checks Tessel's layering: common/ is plain C++ that the compiler and the runtime share, and
neither side reaches into the other.

Three kinds of evidence, each optional on the command line:
  --sources ROOT      the include lines of every C/C++/CUDA file under ROOT's compiler/,
                      dialects/, common/, runtime/ and kernels/ against the rules below;
  --links FILE        the libraries each tool links, directly or through other targets, as
                      CMake's target graph gives them (test/CMakeLists.txt writes FILE);
  --binary NAME=PATH  the shared libraries the built program loads (ldd).
Prints one line per violation and exits 1 when there is any; otherwise prints what it checked.

usage: check_layering.py [--sources ROOT] [--links FILE] [--binary NAME=PATH]...
"""
import argparse
import os
import re
import subprocess
import sys

# What the compiler side may not include: the runtime and its kernels.
RUNTIME_INCLUDES = ["runtime/", "kernels/"]
# What the runtime side may not include: the compiler (its headers are "tessel/...", the
# dialects' "Graph/...", "Plan/...", "Sched/..."), MLIR and LLVM.
COMPILER_INCLUDES = ["compiler/", "dialects/", "tessel/", "Graph/", "Plan/", "Sched/", "mlir/",
                     "llvm/"]

# Per top-level directory, the include prefixes its files may not use.
INCLUDE_RULES = {
    "compiler": RUNTIME_INCLUDES,
    "dialects": RUNTIME_INCLUDES,
    "runtime": COMPILER_INCLUDES,
    "kernels": COMPILER_INCLUDES + ["runtime/"],
    "common": COMPILER_INCLUDES + RUNTIME_INCLUDES + ["antlr4"],
}

# Per tool, the link libraries (matched case-insensitively as substrings of CMake's names and
# paths) it may not reach: the compiler tools no runtime, kernels, OpenMP, BLAS or MPI; the
# runner nothing of the compiler, MLIR or LLVM.
RUNTIME_LIBRARIES = ["TesselRuntime", "TesselCpuKernels", "OpenMP", "gomp", "blas", "MPI::", "libmpi"]
COMPILER_LIBRARIES = ["TesselTarget", "TesselTransforms", "TesselIRGen", "TesselFrontend",
                      "TesselShape", "Dialect", "MLIR", "LLVM", "antlr"]
LINK_RULES = {
    "tessel": RUNTIME_LIBRARIES,
    "tessel-opt": RUNTIME_LIBRARIES,
    "tessel-runner": COMPILER_LIBRARIES,
}

# Per tool, the shared libraries (substrings of ldd's names) it may not load.
LOAD_RULES = {
    "tessel": ["blas", "gomp", "libmpi", "cublas", "nccl"],
    "tessel-opt": ["blas", "gomp", "libmpi", "cublas", "nccl"],
    "tessel-runner": ["libMLIR", "libLLVM", "antlr"],
}

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')
SOURCE_SUFFIXES = (".h", ".hpp", ".inc", ".c", ".cc", ".cpp", ".cu", ".cuh", ".td", ".def")


def normalised(path):
    """An include path without leading "./" and "../" parts."""
    parts = [p for p in path.split("/") if p not in (".", "..")]
    return "/".join(parts)


def check_sources(root, problems):
    files = 0
    for top, forbidden in INCLUDE_RULES.items():
        for directory, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.join(directory, name)
                files += 1
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        included = normalised(m.group(1))
                        for prefix in forbidden:
                            if included.startswith(prefix):
                                problems.append(
                                    f"{os.path.relpath(path, root)}:{number}: {top}/ includes "
                                    f"\"{m.group(1)}\"; {top}/ may not include {prefix}")
    return files


def check_links(path, problems):
    closures = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if ":" in line:
                tool, libraries = line.split(":", 1)
                closures[tool.strip()] = [l for l in libraries.strip().split(";") if l]
    for tool, forbidden in LINK_RULES.items():
        if tool not in closures:
            problems.append(f"{path}: no link closure for {tool}")
            continue
        for library in closures[tool]:
            for name in forbidden:
                if name.lower() in library.lower():
                    problems.append(f"{tool} links {library} (through CMake's target graph); "
                                    f"{tool} may not link {name}")
    return len(closures)


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
    parser.add_argument("--binary", action="append", default=[])
    args = parser.parse_args()
    problems = []
    checked = []
    if args.sources:
        files = check_sources(args.sources, problems)
        checked.append(f"includes of {files} files")
    if args.links:
        tools = check_links(args.links, problems)
        checked.append(f"link closures of {tools} targets")
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
