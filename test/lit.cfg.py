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
config.substitutions.append(("%tessel_root", config.tessel_src_root))
config.substitutions.append(("%tessel_build", config.tessel_obj_root))
# Absolute tool paths, for programs that re-execute themselves (gtest death tests).
config.substitutions.append(("%tessel_bin", config.tessel_tools_dir))
config.substitutions.append(("%examples", os.path.join(config.tessel_src_root, "examples")))
# Debian's interpreter, which has torch and numpy (the parity tests' PyTorch reference).
config.substitutions.append(("%python", "/usr/bin/python3"))

if config.have_cuda:
    config.available_features.add("cuda-toolkit")
