//===- CudaFusedKernelTest.cpp - Generated fused kernels on a GPU ---------===//
//
// The kernel generated for a fused body (kernels/cuda/FusedSource.h) and compiled with NVRTC
// for this device, as the CUDA device does at plan load, runs on random inputs of odd shapes
// read dense, broadcast, as a scalar and transposed, and is compared with the interpreter
// kernel (cuda::fusedElementwise) and the CPU kernel (cpu::fusedElementwise): within the
// interpreter's tolerance of the CPU, and the number of elements whose bits differ from the
// interpreter's is printed (the steps are kept apart, so none should). Without a GPU every
// test reports "skipped: no CUDA device"; NvrtcTest.cpp compiles without one.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/cuda/FusedCompiler.h"

#include "common/support/Float16.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/FusedSource.h"
#include "test/unit/CudaPresence.h"
#include "test/unit/DeviceArray.h"
#include "test/unit/KernelShapes.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace tessel;
using cpu::FusedStep;
using test::shapeOf;
using test::stridesOf;
using Floats = std::vector<float>;

namespace {

using tessel::test::DeviceArray;
using DeviceFloats = DeviceArray<float>;

FusedStep step(FusedStep::Kind kind, std::initializer_list<int32_t> args, float value = 0) {
  FusedStep s;
  s.kind = kind;
  int k = 0;
  for (int32_t a : args)
    s.args[k++] = a;
  s.value = value;
  return s;
}

/// Every binary operation on x0 and x1, every unary function and its gradient on a product of
/// inputs, a constant, and a where on x2: 38 steps over three inputs.
std::vector<FusedStep> everyOperation() {
  constexpr int32_t inputs = 3;
  std::vector<FusedStep> steps;
  auto last = [&] { return static_cast<int32_t>(inputs + steps.size() - 1); };
  for (int b = 0; b <= static_cast<int>(cpu::BinaryKind::Ne); ++b) {
    steps.push_back(step(FusedStep::Kind::Binary, {0, 1}));
    steps.back().binary = static_cast<cpu::BinaryKind>(b);
  }
  steps.push_back(step(FusedStep::Kind::Binary, {0, 1})); // x0 * x1, then a sum: an FMA's shape
  steps.back().binary = cpu::BinaryKind::Mul;
  const int32_t product = last();
  steps.push_back(step(FusedStep::Kind::Binary, {product, 2}));
  steps.back().binary = cpu::BinaryKind::Add;
  const int32_t sum = last();
  for (int u = 0; u <= static_cast<int>(cpu::UnaryKind::GeluErf); ++u) {
    const float exponent = u == static_cast<int>(cpu::UnaryKind::Pow) ? 2.5f : 0.0f;
    steps.push_back(step(FusedStep::Kind::Unary, {sum}, exponent));
    steps.back().unary = static_cast<cpu::UnaryKind>(u);
    const int32_t y = last();
    steps.push_back(step(FusedStep::Kind::UnaryGrad, {sum, y, 1}, exponent));
    steps.back().unary = static_cast<cpu::UnaryKind>(u);
  }
  steps.push_back(step(FusedStep::Kind::Const, {}, -0.25f));
  steps.push_back(step(FusedStep::Kind::Where, {inputs + 4 /* lt */, last(), sum}));
  return steps;
}

/// Bit-identical, or both NaN.
bool sameBits(float a, float b) {
  if (std::isnan(a) && std::isnan(b))
    return true;
  return std::memcmp(&a, &b, sizeof a) == 0;
}

class CudaFusedKernel : public ::testing::Test {
protected:
  void SetUp() override {
    const std::string why = tessel::test::noCudaDevice();
    if (!why.empty())
      GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
    std::string error;
    nvrtc_ = rt::loadNvrtc(error);
    ASSERT_TRUE(nvrtc_) << error;
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    arch_ = rt::smArch(major, minor);
  }
  void TearDown() override {
    for (cudaLibrary_t l : libraries_)
      cudaLibraryUnload(l);
  }

  /// The generated kernel of `steps` for this layout, compiled and loaded; null on failure.
  cudaKernel_t load(const std::vector<FusedStep> &steps, const cuda::FusedLayout &layout,
                    const std::vector<int32_t> &outSteps) {
    std::string source, error, warning;
    EXPECT_TRUE(cuda::fusedKernelSource(steps, layout, outSteps, source, error)) << error;
    rt::FusedCompiler compiler(*nvrtc_, rt::KernelCache(""));
    rt::FusedCompiler::Result r;
    EXPECT_TRUE(compiler.compile(source, arch_, r, warning, error)) << error;
    cudaLibrary_t library = nullptr;
    cudaKernel_t kernel = nullptr;
    EXPECT_EQ(
        cudaLibraryLoadData(&library, r.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
        cudaSuccess);
    if (!library)
      return nullptr;
    libraries_.push_back(library);
    EXPECT_EQ(cudaLibraryGetKernel(&kernel, library, cuda::kFusedKernelName), cudaSuccess);
    return kernel;
  }

  const rt::Nvrtc *nvrtc_ = nullptr;
  std::string arch_;
  std::vector<cudaLibrary_t> libraries_;
};

struct Case {
  std::string name;
  cpu::Shape shape;
  std::vector<cpu::Strides> strides; ///< x0, x1, x2
  std::vector<size_t> sizes;         ///< Elements each input holds.
};

} // namespace

TEST_F(CudaFusedKernel, MatchesInterpreterAndCpuOnOddShapes) {
  const std::vector<Case> cases = {
      // x0 dense, x1 a row broadcast over the first two dims, x2 a scalar.
      {"dense, row, scalar [7, 13, 5]",
       shapeOf({7, 13, 5}),
       {stridesOf({65, 5, 1}), stridesOf({0, 0, 1}), stridesOf({0, 0, 0})},
       {455, 5, 1}},
      // x0 transposed, x1 a column, x2 dense; a size-1 dim in the middle.
      {"transposed, column, dense [11, 1, 9]",
       shapeOf({11, 1, 9}),
       {stridesOf({1, 99, 11}), stridesOf({1, 0, 0}), stridesOf({9, 9, 1})},
       {99, 11, 99}},
      // Many elements, one dim: more than one grid-stride pass.
      {"dense [1000003]",
       shapeOf({1000003}),
       {stridesOf({1}), stridesOf({1}), stridesOf({1})},
       {1000003, 1000003, 1000003}},
  };
  const std::vector<FusedStep> steps = everyOperation();
  const int32_t n = static_cast<int32_t>(steps.size());
  // Six outputs spread over the body: comparisons, the FMA-shaped sum, gelu's gradient, the
  // where.
  const std::vector<int32_t> outSteps = {4, 11, 12 + 2 * 6 + 1, 12 + 2 * 12, n - 3, n - 1};
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    const size_t elements = static_cast<size_t>(c.shape.numElements());
    std::vector<Floats> x;
    for (size_t k = 0; k < 3; ++k)
      x.push_back(tessel::test::randomFloats(c.sizes[k], -2, 2, 700 + static_cast<uint32_t>(k)));
    std::vector<Floats> ref(outSteps.size(), Floats(elements));
    std::vector<float *> refPtrs;
    for (Floats &r : ref)
      refPtrs.push_back(r.data());
    cpu::fusedElementwise(c.shape, steps, {x[0].data(), x[1].data(), x[2].data()}, c.strides,
                          refPtrs, outSteps);

    DeviceFloats g0(x[0]), g1(x[1]), g2(x[2]);
    std::vector<std::unique_ptr<DeviceFloats>> interp, gen;
    std::vector<float *> interpPtrs, genPtrs;
    for (size_t o = 0; o < outSteps.size(); ++o) {
      interp.push_back(std::make_unique<DeviceFloats>(Floats(elements)));
      gen.push_back(std::make_unique<DeviceFloats>(Floats(elements)));
      interpPtrs.push_back(interp.back()->get());
      genPtrs.push_back(gen.back()->get());
    }
    ASSERT_EQ(cuda::fusedElementwise(c.shape, steps, {g0.get(), g1.get(), g2.get()}, c.strides,
                                     interpPtrs, outSteps, nullptr),
              cudaSuccess);
    cudaKernel_t kernel = load(steps, cuda::fusedLayout(c.shape, c.strides), outSteps);
    ASSERT_NE(kernel, nullptr);
    cuda::FusedKernelArgs args;
    ASSERT_TRUE(
        cuda::fusedKernelArgs(c.shape, c.strides, {g0.get(), g1.get(), g2.get()}, genPtrs, args));
    ASSERT_EQ(cuda::launchFusedKernel(kernel, c.shape, args, nullptr), cudaSuccess);

    for (size_t o = 0; o < outSteps.size(); ++o) {
      const Floats a = interp[o]->host(), b = gen[o]->host();
      size_t differ = 0, reported = 0;
      for (size_t i = 0; i < elements; ++i) {
        differ += !sameBits(a[i], b[i]);
        // The interpreter's tolerance against the CPU (CudaKernelsTestSupport.h's expectClose).
        const float r = ref[o][i];
        const bool close = (std::isnan(r) && std::isnan(b[i])) || r == b[i] ||
                           std::fabs(b[i] - r) <= 1e-5f + 1e-4f * std::fabs(r);
        if (!close && reported++ < 5)
          ADD_FAILURE() << "output " << o << " (step " << outSteps[o] << ") element " << i
                        << ": generated " << b[i] << ", interpreter " << a[i] << ", CPU " << r;
      }
      std::printf("[ fused    ] %s, output %zu (step %d): %zu of %zu elements differ in bits "
                  "from the interpreter\n",
                  c.name.c_str(), o, outSteps[o], differ, elements);
      EXPECT_EQ(differ, 0u) << "output " << o << ": the generated kernel should compute each "
                            << "step as the interpreter does";
    }
  }
}

TEST_F(CudaFusedKernel, SixteenBitOperandsAreLoadedAndStoredInTheirOwnType) {
  // What the widening wrapper computes (16-bit inputs widened exactly, the interpreter in f32,
  // 16-bit outputs rounded to nearest even) is what a kernel generated for the operands' types
  // computes on their own bytes: the same bits.
  const cpu::Shape shape = shapeOf({7, 13, 5});
  const std::vector<cpu::Strides> strides = {stridesOf({65, 5, 1}), stridesOf({0, 0, 1}),
                                             stridesOf({0, 0, 0})};
  const std::vector<size_t> sizes = {455, 5, 1};
  const size_t elements = static_cast<size_t>(shape.numElements());
  using planfile::DType;
  const std::vector<DType> inTypes = {DType::BF16, DType::F16, DType::F32};
  // Every third step rounded to a 16-bit type, as a mixed-precision plan marks the values its
  // unfused kernels would store 16-bit, alternately bf16 and f16.
  std::vector<FusedStep> steps = everyOperation();
  for (size_t i = 0; i < steps.size(); i += 3) {
    steps[i].rounded = true;
    steps[i].narrow = i % 2 ? cpu::DType::F16 : cpu::DType::BF16;
  }
  const int32_t n = static_cast<int32_t>(steps.size());
  const std::vector<int32_t> outSteps = {4, 11, 12 + 2 * 6 + 1, 12 + 2 * 12, n - 3, n - 1};
  const std::vector<DType> outTypes = {DType::BF16, DType::F32, DType::F16,
                                       DType::BF16, DType::F16, DType::F32};
  auto narrow = [](DType t, float v) { return t == DType::BF16 ? floatToBf16(v) : floatToHalf(v); };
  auto widen = [](DType t, uint16_t h) {
    return t == DType::BF16 ? bf16ToFloat(h) : halfToFloat(h);
  };

  // Inputs: the 16-bit ones as their bits, and widened for the interpreter.
  std::vector<Floats> wide;
  std::vector<std::unique_ptr<DeviceArray<uint16_t>>> halves;
  std::vector<std::unique_ptr<DeviceFloats>> wideOnDevice, fullOnDevice;
  std::vector<const float *> genIns;
  for (size_t k = 0; k < 3; ++k) {
    Floats x = tessel::test::randomFloats(sizes[k], -2, 2, 900 + static_cast<uint32_t>(k));
    if (inTypes[k] == DType::F32) {
      fullOnDevice.push_back(std::make_unique<DeviceFloats>(x));
      genIns.push_back(fullOnDevice.back()->get());
    } else {
      std::vector<uint16_t> bits;
      for (float &v : x) {
        bits.push_back(narrow(inTypes[k], v));
        v = widen(inTypes[k], bits.back());
      }
      halves.push_back(std::make_unique<DeviceArray<uint16_t>>(bits));
      genIns.push_back(reinterpret_cast<const float *>(halves.back()->get()));
    }
    wide.push_back(x);
    wideOnDevice.push_back(std::make_unique<DeviceFloats>(x));
  }
  std::vector<std::unique_ptr<DeviceFloats>> interp, genFull;
  std::vector<std::unique_ptr<DeviceArray<uint16_t>>> genHalf;
  std::vector<float *> interpPtrs, genOuts;
  for (size_t o = 0; o < outSteps.size(); ++o) {
    interp.push_back(std::make_unique<DeviceFloats>(Floats(elements)));
    interpPtrs.push_back(interp.back()->get());
    if (outTypes[o] == DType::F32) {
      genFull.push_back(std::make_unique<DeviceFloats>(Floats(elements)));
      genOuts.push_back(genFull.back()->get());
    } else {
      genHalf.push_back(
          std::make_unique<DeviceArray<uint16_t>>(std::vector<uint16_t>(elements, 0)));
      genOuts.push_back(reinterpret_cast<float *>(genHalf.back()->get()));
    }
  }
  ASSERT_EQ(cuda::fusedElementwise(
                shape, steps,
                {wideOnDevice[0]->get(), wideOnDevice[1]->get(), wideOnDevice[2]->get()}, strides,
                interpPtrs, outSteps, nullptr),
            cudaSuccess);
  cuda::FusedLayout layout = cuda::fusedLayout(shape, strides);
  layout.inTypes = inTypes;
  layout.outTypes = outTypes;
  cudaKernel_t kernel = load(steps, layout, outSteps);
  ASSERT_NE(kernel, nullptr);
  cuda::FusedKernelArgs args;
  ASSERT_TRUE(cuda::fusedKernelArgs(shape, strides, genIns, genOuts, args));
  ASSERT_EQ(cuda::launchFusedKernel(kernel, shape, args, nullptr), cudaSuccess);

  size_t full = 0, half = 0;
  for (size_t o = 0; o < outSteps.size(); ++o) {
    const Floats expected = interp[o]->host();
    size_t differ = 0;
    if (outTypes[o] == DType::F32) {
      const Floats got = genFull[full++]->host();
      for (size_t i = 0; i < elements; ++i)
        differ += !sameBits(expected[i], got[i]);
    } else {
      const std::vector<uint16_t> got = genHalf[half++]->host();
      for (size_t i = 0; i < elements; ++i) {
        const uint16_t want = narrow(outTypes[o], expected[i]);
        const bool bothNan = std::isnan(expected[i]) && std::isnan(widen(outTypes[o], got[i]));
        differ += !bothNan && got[i] != want;
      }
    }
    EXPECT_EQ(differ, 0u) << "output " << o << " (step " << outSteps[o] << ") differs from the "
                          << "widened interpreter in " << differ << " of " << elements
                          << " elements";
  }
}
