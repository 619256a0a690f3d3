//===- NvrtcTest.cpp - Fused kernels generated and compiled, no GPU -------===//
//
// What the CUDA device does with a plan's fused_elementwise calls before anything runs: the
// source each body generates (kernels/cuda/FusedSource.h), NVRTC compiling it for sm_80 and
// sm_90 (every operation, every kind of step), and the kernel cache (hits, misses on another
// option, architecture or source, corrupt entries compiled again). None of it needs a GPU;
// the NVRTC tests skip, saying why, only where NVRTC cannot be opened. The kernels are run
// against the interpreter in CudaElementwiseKernelsTest.cpp (GPU only).
//
//===----------------------------------------------------------------------===//

#include "runtime/device/cuda/FusedCompiler.h"
#include "runtime/support/AtomicFile.h"

#include "kernels/cuda/FusedSource.h"

#include "ScratchDir.h"
#include "test/unit/KernelShapes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

using namespace tessel;
using cpu::BinaryKind;
using cpu::FusedStep;
using cpu::UnaryKind;
using test::shapeOf;
using test::stridesOf;

namespace {

FusedStep step(FusedStep::Kind kind, std::initializer_list<int32_t> args, float value = 0) {
  FusedStep s;
  s.kind = kind;
  int k = 0;
  for (int32_t a : args)
    s.args[k++] = a;
  s.value = value;
  return s;
}

/// A body with a step of every kind and every operation: inputs x0 (dense), x1 (a row
/// broadcast over dim 0), x2 (a scalar).
std::vector<FusedStep> everyOperation(int inputs) {
  std::vector<FusedStep> steps;
  auto value = [&](size_t s) { return static_cast<int32_t>(inputs + s); };
  steps.push_back(step(FusedStep::Kind::Const, {}, -std::numeric_limits<float>::infinity()));
  steps.push_back(step(FusedStep::Kind::Const, {}, std::nanf("")));
  steps.push_back(step(FusedStep::Kind::Const, {}, 0.1f));
  for (int b = 0; b <= static_cast<int>(BinaryKind::Ne); ++b) {
    FusedStep s = step(FusedStep::Kind::Binary, {0, 1});
    s.binary = static_cast<BinaryKind>(b);
    steps.push_back(s);
  }
  const int32_t someBinary = value(steps.size() - 1);
  for (int u = 0; u <= static_cast<int>(UnaryKind::GeluErf); ++u) {
    FusedStep s =
        step(FusedStep::Kind::Unary, {2}, u == static_cast<int>(UnaryKind::Pow) ? 1.5f : 0);
    s.unary = static_cast<UnaryKind>(u);
    steps.push_back(s);
    FusedStep g =
        step(FusedStep::Kind::UnaryGrad, {2, value(steps.size() - 1), someBinary}, s.value);
    g.unary = s.unary;
    steps.push_back(g);
  }
  steps.push_back(step(FusedStep::Kind::Where, {someBinary, 0, value(2)}));
  return steps;
}

/// NVRTC as `nvrtc`, else the test is skipped with the reason.
#define SKIP_WITHOUT_NVRTC(nvrtc)                                                                  \
  std::string whyNoNvrtc;                                                                          \
  const rt::Nvrtc *nvrtc = rt::loadNvrtc(whyNoNvrtc);                                              \
  if (!nvrtc)                                                                                      \
  GTEST_SKIP() << "skipped: NVRTC cannot be opened: " << whyNoNvrtc

} // namespace

TEST(FusedSource, LayoutClassifiesEachInput) {
  const cpu::Shape shape = shapeOf({4, 3, 5});
  const cuda::FusedLayout layout =
      cuda::fusedLayout(shape, {stridesOf({15, 5, 1}), stridesOf({0, 0, 1}), stridesOf({0, 0, 0}),
                                stridesOf({1, 4, 12}), stridesOf({99, 5, 1})});
  ASSERT_EQ(layout.inputs.size(), 5u);
  using Kind = cuda::FusedInputAccess::Kind;
  EXPECT_EQ(layout.inputs[0].kind, Kind::Dense);
  EXPECT_EQ(layout.inputs[1].kind, Kind::Strided);
  EXPECT_EQ(layout.inputs[1].dims, 0b100u);
  EXPECT_EQ(layout.inputs[2].kind, Kind::Scalar);
  EXPECT_EQ(layout.inputs[3].kind, Kind::Strided); // transposed
  EXPECT_EQ(layout.inputs[3].dims, 0b111u);
  EXPECT_EQ(layout.inputs[4].kind, Kind::Strided); // dim 0 not dense
  // A dim of size 1 reads one element whatever its stride: still dense.
  EXPECT_EQ(cuda::fusedLayout(shapeOf({1, 6}), {stridesOf({7, 1})}).inputs[0].kind, Kind::Dense);
}

TEST(FusedSource, StepsAreStraightLineCodeAndTheTextIsDeterministic) {
  const cpu::Shape shape = shapeOf({2, 3, 4});
  const cuda::FusedLayout layout =
      cuda::fusedLayout(shape, {stridesOf({12, 4, 1}), stridesOf({0, 0, 1})});
  std::vector<FusedStep> steps = {step(FusedStep::Kind::Binary, {0, 1}),
                                  step(FusedStep::Kind::Unary, {2})};
  steps[1].unary = UnaryKind::Gelu;
  std::string a, b, error;
  ASSERT_TRUE(cuda::fusedKernelSource(steps, layout, {0, 1}, a, error)) << error;
  ASSERT_TRUE(cuda::fusedKernelSource(steps, layout, {0, 1}, b, error)) << error;
  EXPECT_EQ(a, b);
  // The operations' definitions come first, then the kernel.
  EXPECT_LT(a.find("__device__ inline float applyUnary"), a.find("void tessel_fused"));
  EXPECT_NE(a.find("const float x0 = ((const float *)a.in[0])[e];"), std::string::npos) << a;
  EXPECT_NE(a.find("const float x1 = ((const float *)a.in[1])[i2 * a.stride[1][2]];"),
            std::string::npos)
      << a;
  // The digit a strided input needs, by its size as a constant; no other digit.
  EXPECT_NE(a.find("const long long i2 = (long long)(rest % 4ULL);"), std::string::npos) << a;
  EXPECT_EQ(a.find("const long long i1"), std::string::npos) << a;
  EXPECT_NE(a.find("const float t0 = rounded(applyBinary(BinaryKind::Add, x0, x1));"),
            std::string::npos)
      << a;
  EXPECT_NE(a.find("const float t1 = rounded(applyUnary(UnaryKind::Gelu, t0, 0.0f));"),
            std::string::npos)
      << a;
  EXPECT_NE(a.find("((float *)a.out[1])[e] = t1;"), std::string::npos) << a;
  // Another body, another text.
  steps[1].unary = UnaryKind::Silu;
  ASSERT_TRUE(cuda::fusedKernelSource(steps, layout, {0, 1}, b, error)) << error;
  EXPECT_NE(a, b);
}

TEST(FusedSource, SixteenBitOperandsAreWidenedOnLoadAndRoundedOnStore) {
  cuda::FusedLayout layout =
      cuda::fusedLayout(shapeOf({2, 3, 4}), {stridesOf({12, 4, 1}), stridesOf({0, 0, 1})});
  const std::vector<FusedStep> steps = {step(FusedStep::Kind::Binary, {0, 1})};
  std::string f32, mixed, error;
  ASSERT_TRUE(cuda::fusedKernelSource(steps, layout, {0, 0}, f32, error)) << error;
  layout.inTypes = {planfile::DType::BF16, planfile::DType::F16};
  layout.outTypes = {planfile::DType::F32, planfile::DType::BF16};
  ASSERT_TRUE(cuda::fusedKernelSource(steps, layout, {0, 0}, mixed, error)) << error;
  // The types are part of the text, so of the kernel cache's key.
  EXPECT_NE(f32, mixed);
  EXPECT_NE(mixed.find("inputs: x0 bf16 dense; x1 f16 strided over dims 2; outputs: f32 bf16"),
            std::string::npos)
      << mixed;
  EXPECT_NE(mixed.find("const float x0 = fromBf16(((const unsigned short *)a.in[0])[e]);"),
            std::string::npos)
      << mixed;
  EXPECT_NE(mixed.find("const float x1 = fromF16(((const unsigned short *)a.in[1])[i2 * "
                       "a.stride[1][2]]);"),
            std::string::npos)
      << mixed;
  EXPECT_NE(mixed.find("((float *)a.out[0])[e] = t0;"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("((unsigned short *)a.out[1])[e] = toBf16(t0);"), std::string::npos)
      << mixed;
}

// In a mixed-precision plan a step whose unfused kernel would store its value 16-bit is
// rounded so before a later step reads it: the bits of the unfused kernels.
TEST(FusedSource, RoundedStepsTakeTheirSixteenBitValue) {
  const cuda::FusedLayout layout =
      cuda::fusedLayout(shapeOf({8}), {stridesOf({1}), stridesOf({1})});
  std::vector<FusedStep> steps = {step(FusedStep::Kind::Binary, {0, 1}),
                                  step(FusedStep::Kind::Unary, {2}),
                                  step(FusedStep::Kind::Unary, {3})};
  steps[1].unary = steps[2].unary = UnaryKind::Gelu;
  steps[0].rounded = true;
  steps[1].rounded = true;
  steps[1].narrow = cpu::DType::F16;
  std::string source, error;
  ASSERT_TRUE(cuda::fusedKernelSource(steps, layout, {2}, source, error)) << error;
  EXPECT_NE(source.find("const float t0 = fromBf16(toBf16(rounded(applyBinary(BinaryKind::Add, "
                        "x0, x1))));"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("const float t1 = fromF16(toF16(rounded(applyUnary(UnaryKind::Gelu, t0, "
                        "0.0f))));"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("const float t2 = rounded(applyUnary(UnaryKind::Gelu, t1, 0.0f));"),
            std::string::npos)
      << source;
}

TEST(FusedSource, OnlyStridedKernelsDependOnTheSizes) {
  std::vector<FusedStep> steps = {step(FusedStep::Kind::Binary, {0, 1})};
  auto source = [&](const cpu::Shape &shape, std::vector<cpu::Strides> strides) {
    std::string s, error;
    EXPECT_TRUE(cuda::fusedKernelSource(steps, cuda::fusedLayout(shape, strides), {0}, s, error))
        << error;
    return s;
  };
  // Dense and scalar inputs: one kernel for every size.
  EXPECT_EQ(source(shapeOf({3, 4}), {stridesOf({4, 1}), stridesOf({0, 0})}),
            source(shapeOf({5, 6}), {stridesOf({6, 1}), stridesOf({0, 0})}));
  // A broadcast row: the row's length is in the code.
  EXPECT_NE(source(shapeOf({3, 4}), {stridesOf({4, 1}), stridesOf({0, 1})}),
            source(shapeOf({3, 6}), {stridesOf({6, 1}), stridesOf({0, 1})}));
}

TEST(FusedSource, RefusesBodiesItCannotRun) {
  const cuda::FusedLayout layout = cuda::fusedLayout(shapeOf({8}), {stridesOf({1})});
  std::string source, error;
  EXPECT_FALSE(
      cuda::fusedKernelSource({step(FusedStep::Kind::Unary, {1})}, layout, {0}, source, error));
  EXPECT_NE(error.find("step 0 reads value 1"), std::string::npos) << error;
  EXPECT_FALSE(
      cuda::fusedKernelSource({step(FusedStep::Kind::Unary, {0})}, layout, {1}, source, error));
  EXPECT_NE(error.find("output step 1"), std::string::npos) << error;
}

TEST(Nvrtc, CompilesEveryOperationForSm80AndSm90) {
  SKIP_WITHOUT_NVRTC(nvrtc);
  const cpu::Shape shape = shapeOf({3, 5, 7});
  cuda::FusedLayout layout =
      cuda::fusedLayout(shape, {stridesOf({35, 7, 1}), stridesOf({0, 7, 1}), stridesOf({0, 0, 0})});
  std::vector<FusedStep> steps = everyOperation(3);
  // f32 operands, and every 16-bit load and store and every step rounded in turn to each type.
  for (bool half : {false, true}) {
    if (half) {
      layout.inTypes = {planfile::DType::BF16, planfile::DType::F16, planfile::DType::F32};
      layout.outTypes = {planfile::DType::F16, planfile::DType::BF16};
      for (size_t i = 0; i < steps.size(); ++i) {
        steps[i].rounded = true;
        steps[i].narrow = i % 2 ? cpu::DType::F16 : cpu::DType::BF16;
      }
    }
    std::string source, error;
    ASSERT_TRUE(cuda::fusedKernelSource(steps, layout, {0, static_cast<int32_t>(steps.size() - 1)},
                                        source, error))
        << error;
    for (const char *arch : {"sm_80", "sm_90"}) {
      std::string cubin, log;
      EXPECT_TRUE(nvrtc->compile(source, "every.cu", arch, rt::fusedKernelOptions(), cubin, log))
          << arch << (half ? " (16-bit operands)" : "") << ": " << log;
      // An ELF image.
      EXPECT_EQ(cubin.compare(0, 4,
                              "\x7f"
                              "ELF"),
                0)
          << arch;
    }
  }
}

TEST(Nvrtc, ReportsTheLogOfASourceItCannotCompile) {
  SKIP_WITHOUT_NVRTC(nvrtc);
  std::string cubin, log;
  EXPECT_FALSE(nvrtc->compile("extern \"C\" __global__ void k() { undeclared(); }", "bad.cu",
                              "sm_90", rt::fusedKernelOptions(), cubin, log));
  EXPECT_NE(log.find("undeclared"), std::string::npos) << log;
}

TEST(KernelCache, KeyCoversSourceOptionsArchitectureAndVersion) {
  const std::vector<std::string> options = {"--std=c++17"};
  const std::string key = rt::kernelCacheKey("src", options, "sm_90", "13.0");
  EXPECT_EQ(key, rt::kernelCacheKey("src", options, "sm_90", "13.0"));
  EXPECT_EQ(key.size(), 16u);
  EXPECT_NE(key, rt::kernelCacheKey("src2", options, "sm_90", "13.0"));
  EXPECT_NE(key, rt::kernelCacheKey("src", {"--std=c++20"}, "sm_90", "13.0"));
  EXPECT_NE(key, rt::kernelCacheKey("src", {}, "sm_90", "13.0"));
  EXPECT_NE(key, rt::kernelCacheKey("src", options, "sm_80", "13.0"));
  EXPECT_NE(key, rt::kernelCacheKey("src", options, "sm_90", "13.1"));
  // Parts are length-prefixed: moving a byte from one part to the next is another key.
  EXPECT_NE(rt::kernelCacheKey("ab", {"c"}, "sm_90", "13.0"),
            rt::kernelCacheKey("a", {"bc"}, "sm_90", "13.0"));
}

TEST(KernelCache, StoresFindsAndDetectsCorruptEntries) {
  test::ScratchDir dir;
  const rt::KernelCache cache(dir / "nested/cache");
  std::string binary, error;
  EXPECT_EQ(cache.get("0123456789abcdef", binary), rt::KernelCache::Lookup::Miss);
  const std::string cubin("\x7f"
                          "ELF and some bytes\0 with a zero",
                          31);
  ASSERT_TRUE(cache.put("0123456789abcdef", cubin, error)) << error;
  ASSERT_EQ(cache.get("0123456789abcdef", binary), rt::KernelCache::Lookup::Hit);
  EXPECT_EQ(binary, cubin);
  // No temporary file is left beside the entry.
  int files = 0;
  for ([[maybe_unused]] const auto &e : std::filesystem::directory_iterator(cache.dir()))
    ++files;
  EXPECT_EQ(files, 1);

  const std::string path = cache.path("0123456789abcdef");
  std::string whole;
  ASSERT_TRUE(rt::readWholeFile(path, 1 << 30, whole, error));
  // Truncated.
  test::writeFile(path, whole.substr(0, whole.size() - 3));
  EXPECT_EQ(cache.get("0123456789abcdef", binary), rt::KernelCache::Lookup::Corrupt);
  // A byte of the cubin changed.
  std::string flipped = whole;
  flipped[flipped.size() - 5] ^= 0x20;
  test::writeFile(path, flipped);
  EXPECT_EQ(cache.get("0123456789abcdef", binary), rt::KernelCache::Lookup::Corrupt);
  // Shorter than a header.
  test::writeFile(path, "TESSELKC");
  EXPECT_EQ(cache.get("0123456789abcdef", binary), rt::KernelCache::Lookup::Corrupt);
  // No directory: nothing is kept, nothing fails.
  const rt::KernelCache none("");
  EXPECT_TRUE(none.put("0123456789abcdef", cubin, error));
  EXPECT_EQ(none.get("0123456789abcdef", binary), rt::KernelCache::Lookup::Miss);
}

TEST(KernelCache, DefaultDirectoryFollowsTheEnvironment) {
  const char *saved[] = {std::getenv("TESSEL_NVRTC_CACHE"), std::getenv("XDG_CACHE_HOME"),
                         std::getenv("HOME")};
  const std::string keep[] = {saved[0] ? saved[0] : "", saved[1] ? saved[1] : "",
                              saved[2] ? saved[2] : ""};
  ::setenv("HOME", "/home/u", 1);
  ::unsetenv("XDG_CACHE_HOME");
  ::unsetenv("TESSEL_NVRTC_CACHE");
  EXPECT_EQ(rt::defaultKernelCacheDir(), "/home/u/.cache/tessel/nvrtc");
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(rt::defaultKernelCacheDir(), "/xdg/tessel/nvrtc");
  ::setenv("TESSEL_NVRTC_CACHE", "/elsewhere", 1);
  EXPECT_EQ(rt::defaultKernelCacheDir(), "/elsewhere");
  ::setenv("TESSEL_NVRTC_CACHE", "off", 1);
  EXPECT_EQ(rt::defaultKernelCacheDir(), "");
  const char *names[] = {"TESSEL_NVRTC_CACHE", "XDG_CACHE_HOME", "HOME"};
  for (int i = 0; i < 3; ++i)
    saved[i] ? (void)::setenv(names[i], keep[i].c_str(), 1) : (void)::unsetenv(names[i]);
}

TEST(FusedCompiler, CompilesOnceThenHitsTheCacheAndRecompilesACorruptEntry) {
  SKIP_WITHOUT_NVRTC(nvrtc);
  test::ScratchDir dir;
  const cuda::FusedLayout layout = cuda::fusedLayout(shapeOf({9}), {stridesOf({1})});
  std::vector<FusedStep> steps = {step(FusedStep::Kind::Unary, {0})};
  steps[0].unary = UnaryKind::Tanh;
  std::string source, error, warning;
  ASSERT_TRUE(cuda::fusedKernelSource(steps, layout, {0}, source, error)) << error;

  // What a killed writer left (a process id that cannot run: above pid_max's 2^22) goes
  // when a compiler opens the cache.
  test::writeFile(dir / "0123456789abcdef.cubin.tmp-9999999", "partial");
  rt::FusedCompiler::Result r;
  {
    rt::FusedCompiler first(*nvrtc, rt::KernelCache(dir.path()));
    EXPECT_FALSE(std::filesystem::exists(dir / "0123456789abcdef.cubin.tmp-9999999"));
    ASSERT_TRUE(first.compile(source, "sm_90", r, warning, error)) << error;
    EXPECT_FALSE(r.fromCache);
    EXPECT_TRUE(warning.empty()) << warning;
    // The same source again in the same compiler: made once.
    ASSERT_TRUE(first.compile(source, "sm_90", r, warning, error)) << error;
    EXPECT_EQ(first.kernels(), 1);
    // Another architecture is another kernel, compiled.
    ASSERT_TRUE(first.compile(source, "sm_80", r, warning, error)) << error;
    EXPECT_FALSE(r.fromCache);
    EXPECT_EQ(first.kernels(), 2);
    EXPECT_EQ(first.cached(), 0);
  }
  const std::string compiled = r.cubin;
  {
    // A new process (compiler): both from the cache, the same bytes.
    rt::FusedCompiler second(*nvrtc, rt::KernelCache(dir.path()));
    ASSERT_TRUE(second.compile(source, "sm_80", r, warning, error)) << error;
    EXPECT_TRUE(r.fromCache);
    EXPECT_EQ(r.cubin, compiled);
    ASSERT_TRUE(second.compile(source, "sm_90", r, warning, error)) << error;
    EXPECT_TRUE(r.fromCache);
    EXPECT_EQ(second.cached(), 2);
  }
  // A corrupt entry is compiled again and replaced by a whole one.
  const rt::KernelCache cache(dir.path());
  const std::string key =
      rt::kernelCacheKey(source, rt::fusedKernelOptions(), "sm_80", nvrtc->version());
  std::string whole;
  ASSERT_TRUE(rt::readWholeFile(cache.path(key), 1 << 30, whole, error)) << error;
  test::writeFile(cache.path(key), whole.substr(0, whole.size() / 2));
  {
    rt::FusedCompiler third(*nvrtc, rt::KernelCache(dir.path()));
    ASSERT_TRUE(third.compile(source, "sm_80", r, warning, error)) << error;
    EXPECT_FALSE(r.fromCache);
    EXPECT_TRUE(r.recompiled);
    EXPECT_EQ(r.cubin, compiled);
  }
  std::string binary;
  EXPECT_EQ(cache.get(key, binary), rt::KernelCache::Lookup::Hit);
  EXPECT_EQ(binary, compiled);
}
