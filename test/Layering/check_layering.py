"""Checks Tessel's layering: common/ is plain C++ that the compiler and the runtime share,
neither side reaches into the other, and the runtime's folders depend one way.

Three kinds of evidence, each optional on the command line:
  --sources ROOT      the include lines of every C/C++/CUDA file under ROOT's compiler/,
                      common/, runtime/ and kernels/ against the rules below;
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
# dialects' "tessel/Dialect/..."), MLIR and LLVM.
COMPILER_INCLUDES = ["compiler/", "tessel/", "mlir/", "llvm/"]

# Per top-level directory, the include prefixes its files may not use.
INCLUDE_RULES = {
    "compiler": RUNTIME_INCLUDES,
    "runtime": COMPILER_INCLUDES,
    "kernels": COMPILER_INCLUDES + ["runtime/"],
    "common": COMPILER_INCLUDES + RUNTIME_INCLUDES + ["antlr4"],
}

# Per tool, the link libraries (matched case-insensitively as substrings of CMake's names and
# paths) it may not reach: the compiler tools no runtime, kernels, OpenMP, BLAS or MPI; the
# runner nothing of the compiler, MLIR or LLVM.
RUNTIME_LIBRARIES = ["TesselRuntime", "TesselCpuKernels", "OpenMP", "gomp", "blas", "MPI::", "libmpi"]
COMPILER_LIBRARIES = ["TesselTarget", "TesselAnalysis", "Transforms", "TesselIRGen", "TesselFrontend",
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

# The runtime's folders depend one way, each on those after it: the runner and side tools on
# the host loop, the host on the pipeline walk and checkpoints, those on the executor (core),
# the executor on the devices and their kernel-call contract (device), devices on the
# communicators (comm), and everything on support. A folder includes its own headers and
# those of folders after it; nothing includes upward.
RUNTIME_ORDER = [["runner", "tools"], ["host"], ["pipeline", "checkpoint"], ["core"],
                 ["device"], ["comm"], ["support"]]

# Per folder (a path under the root), include prefixes it may not use beyond its top-level
# directory's: neither backend's kernels reach into the other's, neither device into the other,
# and the device-neutral contract (files directly in runtime/device) into no backend.
FOLDER_RULES = {
    "kernels/cpu": ["kernels/cuda/"],
    "kernels/cuda": ["kernels/cpu/"],
    "runtime/device/cpu": ["runtime/device/cuda/", "kernels/cuda/"],
    "runtime/device/cuda": ["runtime/device/cpu/", "kernels/cpu/"],
}
DEVICE_NEUTRAL = ("runtime/device", ["runtime/device/cpu/", "runtime/device/cuda/",
                                     "kernels/cpu/", "kernels/cuda/"])


def runtime_level(folder):
    """The index in RUNTIME_ORDER of runtime/FOLDER, or None for a folder it does not name."""
    for level, names in enumerate(RUNTIME_ORDER):
        if folder in names:
            return level
    return None


def folder_problems(relpath, included):
    """The rules beyond the top-level ones that `relpath` (relative to the root) breaks by
    including `included`."""
    found = []
    directory = os.path.dirname(relpath)
    parts = relpath.split("/")
    if parts[0] == "runtime" and len(parts) > 2 and included.startswith("runtime/"):
        mine, theirs = parts[1], included.split("/")[1]
        a, b = runtime_level(mine), runtime_level(theirs)
        if a is None:
            found.append(f"runtime/{mine}/ is not in the runtime's order; add it to RUNTIME_ORDER")
        elif b is not None and mine != theirs and b <= a:
            found.append(f"runtime/{mine}/ may not include runtime/{theirs}/, which comes before "
                         f"it in the runtime's order")
    for folder, forbidden in FOLDER_RULES.items():
        if directory == folder or directory.startswith(folder + "/"):
            for prefix in forbidden:
                if included.startswith(prefix):
                    found.append(f"{folder}/ may not include {prefix}")
    if directory == DEVICE_NEUTRAL[0]:
        for prefix in DEVICE_NEUTRAL[1]:
            if included.startswith(prefix):
                found.append(f"the device-neutral {DEVICE_NEUTRAL[0]}/ may not include {prefix}")
    return found


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
                        relpath = os.path.relpath(path, root)
                        for prefix in forbidden:
                            if included.startswith(prefix):
                                problems.append(
                                    f"{relpath}:{number}: {top}/ includes "
                                    f"\"{m.group(1)}\"; {top}/ may not include {prefix}")
                        for why in folder_problems(relpath, included):
                            problems.append(f"{relpath}:{number}: includes \"{m.group(1)}\"; {why}")
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
