# lit configuration for Tessel's compiler tests.
import os
import lit.formats

config.name = "Tessel"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".model", ".test"]
config.excludes = ["Inputs", "fuzz", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tessel_obj_root, "test")

config.environment["PATH"] = os.pathsep.join(
    [config.tessel_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
# glibc fills every allocation and every freed block with this byte, so code that reads
# memory it never wrote (or after freeing it) fails the same way on every machine instead of
# only where the allocator happens to hand out dirty memory.
config.environment["MALLOC_PERTURB_"] = "165"
config.substitutions.append(("%tessel_root", config.tessel_src_root))
config.substitutions.append(("%tessel_build", config.tessel_obj_root))
# Absolute tool paths, for programs that re-execute themselves (gtest death tests).
config.substitutions.append(("%tessel_bin", config.tessel_tools_dir))
config.substitutions.append(("%examples", os.path.join(config.tessel_src_root, "examples")))
# Debian's interpreter, which has torch and numpy (the parity tests' PyTorch reference).
config.substitutions.append(("%python", "/usr/bin/python3"))
# MPI jobs on this machine: more processes than cores, and CI runs as root. OpenMPI's launcher
# itself reads memory it never wrote (it crashes with MALLOC_PERTURB_ set), so only the ranks,
# Tessel's code, get the filled allocations.
config.substitutions.append(
    ("%mpirun", "env -u MALLOC_PERTURB_ mpirun --allow-run-as-root --oversubscribe "
                "-x MALLOC_PERTURB_=" + config.environment["MALLOC_PERTURB_"]))
lit_config.parallelism_groups["mpi"] = 1

# CUDA: 'cuda-toolkit' where the build has the CUDA backend (tessel-cuda-tests exists), 'cuda'
# where this machine also has a GPU its driver can open. Without one, the GPU tests are reported
# UNSUPPORTED, the reason is printed here, and cuda-skipped.test checks that each of them says
# "skipped: no CUDA device" rather than passing.
import subprocess

def cuda_devices():
    """The number of CUDA devices the driver sees, and why there are none."""
    import ctypes
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        return 0, "no NVIDIA driver (%s)" % error
    if driver.cuInit(0) != 0:
        return 0, "the driver did not initialise (no device, or a stub library)"
    count = ctypes.c_int(0)
    if driver.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return 0, "the driver sees no device"
    return count.value, ""

if config.have_cuda:
    config.available_features.add("cuda-toolkit")
    gpus, why = cuda_devices()
    if gpus:
        config.available_features.add("cuda")
        # One process per GPU over NCCL (test/Integration/MultiProcess/torchrun-nccl.test) needs two.
        if gpus >= 2:
            config.available_features.add("cuda-2gpus")
        else:
            lit_config.note("skipped: NCCL between processes needs two CUDA devices, and this "
                            "machine has one: the tests that REQUIRES: cuda-2gpus are unsupported")
    else:
        lit_config.note("skipped: no CUDA device (%s): the GPU tests (REQUIRES: cuda) are "
                        "unsupported here; on a GPU machine run scripts/gpu-window.sh (prepared by scripts/gpu-prepare.sh)" % why)
    # 'nvrtc' where the runtime can open NVRTC (no GPU needed): the fused elementwise kernels
    # are compiled here (test/Integration/Runtime/nvrtc-*.test); tessel-nvrtc says why it cannot.
    try:
        probe = subprocess.run([os.path.join(config.tessel_tools_dir, "tessel-nvrtc"),
                                "--nvrtc-version"], capture_output=True, text=True)
        nvrtc_ok, nvrtc_why = probe.returncode == 0, probe.stderr.strip()
    except OSError as error:
        nvrtc_ok, nvrtc_why = False, "tessel-nvrtc is not built: %s" % error
    if nvrtc_ok:
        config.available_features.add("nvrtc")
    else:
        lit_config.note("skipped: NVRTC cannot be opened (%s): the fused-kernel compile tests "
                        "(REQUIRES: nvrtc) are unsupported here" % nvrtc_why)
else:
    lit_config.note("skipped: no CUDA backend in this build (CMake found no CUDA toolkit): "
                    "the GPU tests are neither built nor run")

# MPI tests (test/Integration/MPI: ranks as processes; test/Integration/MultiHost: MPI jobs across "hosts" made as
# network namespaces by scripts/netns-hosts.sh). Where OpenMPI is missing, the runtime was built
# without it, or namespaces cannot be made (no privilege, no iproute2), the tests are reported
# UNSUPPORTED and the reason is printed here, never hidden.
import shutil
import subprocess

netns_hosts = os.path.join(config.tessel_src_root, "scripts", "netns-hosts.sh")
config.substitutions.append(("%netns_hosts", "env -u MALLOC_PERTURB_ " + netns_hosts))
missing_mpi = [tool for tool in ("mpirun", "mpicc") if shutil.which(tool) is None]
if missing_mpi:
    lit_config.note("skipped: MPI tests need OpenMPI (%s not found; Debian: openmpi-bin, "
                    "libopenmpi-dev)" % ", ".join(missing_mpi))
elif not config.have_mpi:
    lit_config.note("skipped: MPI tests need a runtime built with MPI (CMake found no MPI for "
                    "C++ when this build was configured; Debian: libopenmpi-dev)")
else:
    config.available_features.add("mpi")
    try:
        probe = subprocess.run([netns_hosts, "check"], capture_output=True, text=True, timeout=30)
        reason = ""
        if probe.returncode:
            reason = (probe.stdout.strip() or probe.stderr.strip()
                      or "scripts/netns-hosts.sh check exited with %d" % probe.returncode)
    except (OSError, subprocess.TimeoutExpired) as error:
        reason = "scripts/netns-hosts.sh check did not run: %s" % error
    if reason:
        lit_config.note("skipped: multi-host tests need network namespaces as hosts, "
                        "which cannot be made here: " + reason)
    else:
        config.available_features.add("netns")

# Tokenizers (test/Integration/Tokenizer): the parity test against Hugging Face's tokenizers runs its Node
# binding, which scripts/install-tokenizer-reference.sh installs from the npm registry (the test
# installs it when it is missing: a machine with npm but no registry fails the test, it does not
# skip it); 'node' where Node.js and npm are installed. The SentencePiece tests train a model with
# spm_train and compare with Python's sentencepiece ('sentencepiece'; Debian: sentencepiece,
# python3-sentencepiece).
if shutil.which("node") and shutil.which("npm"):
    config.available_features.add("node")
else:
    lit_config.note("skipped: the tokenizer parity test (test/Integration/Tokenizer/parity.test) needs "
                    "Node.js and npm to run Hugging Face's tokenizers, and this machine has "
                    "neither (or not both)")
try:
    spm_probe = subprocess.run(["/usr/bin/python3", "-c", "import sentencepiece"],
                               capture_output=True, text=True)
    spm_python = spm_probe.returncode == 0
except OSError:
    spm_python = False
if shutil.which("spm_train") and spm_python:
    config.available_features.add("sentencepiece")
else:
    lit_config.note("skipped: the SentencePiece tests need spm_train and Python's sentencepiece "
                    "(Debian: sentencepiece, python3-sentencepiece)")
