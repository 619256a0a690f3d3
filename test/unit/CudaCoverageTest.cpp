//===- CudaCoverageTest.cpp - The CUDA device's launch tables -------------===//
//
// The CUDA device's tables come from the catalogue: a launch for every kernel (a missing one
// fails to compile), and a 16-bit launch exactly for the kernels whose TESSEL_SIXTEEN_BIT column
// says CudaNative; every other kernel's 16-bit calls run between widening copies. No GPU is
// needed to look the launches up, so this runs wherever the CUDA toolkit is.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/HalfOperands.h"
#include "runtime/device/cuda/CudaLaunch.h"

#include "common/catalogue/KernelCatalogue.h"
#include "kernels/cuda/CudaKernels.h"
#include "test/unit/KernelShapes.h"

#include <gtest/gtest.h>

using namespace tessel;
using planfile::DType;

TEST(CudaCoverage, EveryKernelHasALaunch) {
  int kernels = 0;
  for (const catalogue::KernelInfo &k : catalogue::kernels()) {
    ++kernels;
    EXPECT_NE(rt::cudaKernel(k.id), nullptr) << "the cuda device has no launch for " << k.name;
  }
  EXPECT_GE(kernels, 40); // the catalogue is read, not an empty list
}

TEST(CudaCoverage, SixteenBitLaunchesAreTheCataloguesNativeKernels) {
  int native = 0;
  for (const catalogue::KernelInfo &k : catalogue::kernels()) {
    // A product's 16-bit launch needs a and b of one type (its f32 result: a weight gradient).
    const bool gemm = k.id == catalogue::KernelId::Gemm;
    const std::vector<DType> ins = gemm ? std::vector<DType>{DType::BF16, DType::BF16}
                                        : std::vector<DType>{DType::BF16};
    const std::vector<DType> outs = {gemm ? DType::F32 : DType::BF16};
    const bool expected = rt::sixteenBitOf(k.id) == rt::SixteenBit::CudaNative;
    native += expected;
    EXPECT_EQ(rt::cudaSixteenBitKernel(k.id, ins, outs) != nullptr, expected) << k.name;
  }
  EXPECT_GE(native, 20);
  // A product of two different 16-bit types has no such launch: it is widened.
  EXPECT_EQ(rt::cudaSixteenBitKernel(catalogue::KernelId::Gemm, {DType::BF16, DType::F16},
                                     {DType::F32}),
            nullptr);
  // paged_attention reads and writes its caches at their own type: a 16-bit cache is never
  // widened whole for a call that stores a few tokens in it.
  EXPECT_NE(
      rt::cudaSixteenBitKernel(catalogue::KernelId::PagedAttention,
                               {DType::BF16, DType::BF16, DType::BF16, DType::I32, DType::I32},
                               {DType::BF16, DType::BF16, DType::BF16}),
      nullptr);
}

/// The sizes the tensor-core attention takes (its other calls run the widened f32 kernels).
TEST(CudaCoverage, TensorCoreAttentionTakesOnlyItsSizes) {
  using test::attentionOf;
  EXPECT_TRUE(cuda::flashAttentionTakes(attentionOf(2, 1024, 12, 1024, 12, 64, true)));
  EXPECT_FALSE(cuda::flashAttentionTakes(attentionOf(2, 64, 2, 64, 2, 48, true)));
  EXPECT_FALSE(cuda::flashAttentionTakes(attentionOf(2, 64, 2, 64, 2, 256, true)));
  cuda::AttentionArgs headTail = attentionOf(2, 24, 2, 48, 1, 64, true);
  headTail.headStart = 12;
  headTail.tailStart = 24;
  EXPECT_FALSE(cuda::flashAttentionTakes(headTail));
}
