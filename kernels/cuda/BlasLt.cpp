//===- BlasLt.cpp - cuBLASLt, loaded when a device first needs it ---------===//

#include "kernels/cuda/BlasLt.h"

#include <dlfcn.h>

#include <mutex>

namespace tessel::cuda {

namespace {

#define TESSEL_STRING(x) #x
#define TESSEL_EXPAND_STRING(x) TESSEL_STRING(x)

/// The library's file name: the soname of the toolkit this runtime was built with.
constexpr const char *kLibrary = "libcublasLt.so." TESSEL_EXPAND_STRING(CUBLAS_VER_MAJOR);

struct Loaded {
  BlasLt functions;
  std::string error;
  bool ok = false;
};

Loaded load() {
  Loaded l;
  // Where the loader finds it (ld.so.conf, LD_LIBRARY_PATH), else in the toolkit this runtime
  // was built with.
  void *library = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const std::string first = dlerror();
    const std::string built = std::string(TESSEL_CUDA_LIBRARY_DIR) + "/" + kLibrary;
    library = dlopen(built.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      l.error = std::string("cannot load cuBLASLt: ") + first + "; nor " + built;
      return l;
    }
  }
  // The library stays open for the life of the process.
#define TESSEL_BLASLT_RESOLVE(name)                                                                \
  l.functions.name = reinterpret_cast<decltype(&::name)>(dlsym(library, #name));                   \
  if (!l.functions.name) {                                                                         \
    l.error = std::string(kLibrary) + " has no " #name;                                            \
    return l;                                                                                      \
  }
  TESSEL_BLASLT_FUNCTIONS(TESSEL_BLASLT_RESOLVE)
#undef TESSEL_BLASLT_RESOLVE
  l.ok = true;
  return l;
}

} // namespace

const BlasLt *loadBlasLt(std::string &error) {
  static const Loaded loaded = load();
  if (!loaded.ok) {
    error = loaded.error;
    return nullptr;
  }
  return &loaded.functions;
}

} // namespace tessel::cuda
