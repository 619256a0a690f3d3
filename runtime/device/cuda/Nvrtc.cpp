//===- Nvrtc.cpp - NVRTC, opened at run time ------------------------------===//

#include "runtime/device/cuda/Nvrtc.h"

#include <nvrtc.h>

#include <dlfcn.h>

#include <mutex>

namespace tessel::rt {

namespace {

// The functions this file calls, resolved by name.
#define TESSEL_NVRTC_FUNCTIONS(X)                                                                  \
  X(nvrtcVersion)                                                                                  \
  X(nvrtcGetErrorString)                                                                           \
  X(nvrtcCreateProgram)                                                                            \
  X(nvrtcDestroyProgram)                                                                           \
  X(nvrtcCompileProgram)                                                                           \
  X(nvrtcGetProgramLogSize)                                                                        \
  X(nvrtcGetProgramLog)                                                                            \
  X(nvrtcGetCUBINSize)                                                                             \
  X(nvrtcGetCUBIN)

class LoadedNvrtc : public Nvrtc {
public:
#define TESSEL_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  TESSEL_NVRTC_FUNCTIONS(TESSEL_NVRTC_MEMBER)
#undef TESSEL_NVRTC_MEMBER
  std::string versionText;

  std::string version() const override { return versionText; }

  bool compile(const std::string &source, const std::string &name, const std::string &arch,
               const std::vector<std::string> &options, std::string &cubin,
               std::string &log) const override {
    nvrtcProgram program = nullptr;
    if (nvrtcResult r =
            nvrtcCreateProgram(&program, source.c_str(), name.c_str(), 0, nullptr, nullptr);
        r != NVRTC_SUCCESS) {
      log = std::string("nvrtcCreateProgram: ") + nvrtcGetErrorString(r);
      return false;
    }
    std::vector<std::string> all = {"--gpu-architecture=" + arch};
    all.insert(all.end(), options.begin(), options.end());
    std::vector<const char *> argv;
    for (const std::string &o : all)
      argv.push_back(o.c_str());
    const nvrtcResult compiled =
        nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
    size_t logSize = 0;
    log.clear();
    if (nvrtcGetProgramLogSize(program, &logSize) == NVRTC_SUCCESS && logSize > 1) {
      log.resize(logSize);
      if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS)
        log.clear();
      while (!log.empty() && (log.back() == '\0' || log.back() == '\n'))
        log.pop_back();
    }
    bool ok = compiled == NVRTC_SUCCESS;
    if (!ok && log.empty())
      log = std::string("nvrtcCompileProgram: ") + nvrtcGetErrorString(compiled);
    size_t size = 0;
    if (ok && (nvrtcGetCUBINSize(program, &size) != NVRTC_SUCCESS || size == 0)) {
      log = "NVRTC gave no cubin for " + arch;
      ok = false;
    }
    if (ok) {
      cubin.resize(size);
      ok = nvrtcGetCUBIN(program, cubin.data()) == NVRTC_SUCCESS;
    }
    nvrtcDestroyProgram(&program);
    return ok;
  }
};

const Nvrtc *open(std::string &error) {
  static constexpr const char *kNames[] = {"libnvrtc.so.13", "libnvrtc.so"};
  void *library = nullptr;
  std::string tried;
  for (const char *name : kNames) {
    if ((library = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
      break;
    tried += std::string(tried.empty() ? "" : "; ") + dlerror();
  }
  // Else the toolkit this runtime was built with, as BlasLt.cpp finds cuBLASLt.
  for (const char *name : kNames) {
    if (library)
      break;
    const std::string built = std::string(TESSEL_CUDA_LIBRARY_DIR) + "/" + name;
    if (!(library = dlopen(built.c_str(), RTLD_NOW | RTLD_LOCAL)))
      tried += std::string("; ") + dlerror();
  }
  if (!library) {
    error = "cannot load NVRTC: " + tried;
    return nullptr;
  }
  // The library stays open for the life of the process.
  auto *nvrtc = new LoadedNvrtc;
#define TESSEL_NVRTC_RESOLVE(name)                                                                 \
  nvrtc->name = reinterpret_cast<decltype(&::name)>(dlsym(library, #name));                        \
  if (!nvrtc->name) {                                                                              \
    error = "NVRTC has no " #name;                                                                 \
    delete nvrtc;                                                                                  \
    return nullptr;                                                                                \
  }
  TESSEL_NVRTC_FUNCTIONS(TESSEL_NVRTC_RESOLVE)
#undef TESSEL_NVRTC_RESOLVE
  int major = 0, minor = 0;
  if (nvrtc->nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) {
    error = "nvrtcVersion failed";
    delete nvrtc;
    return nullptr;
  }
  nvrtc->versionText = std::to_string(major) + "." + std::to_string(minor);
  return nvrtc;
}

} // namespace

const Nvrtc *loadNvrtc(std::string &error) {
  static std::once_flag once;
  static const Nvrtc *nvrtc = nullptr;
  static std::string why;
  std::call_once(once, [] { nvrtc = open(why); });
  if (!nvrtc)
    error = why;
  return nvrtc;
}

} // namespace tessel::rt
