//===- CudaLossAndEmbeddingKernelsTest.cpp - Cross entropy and embedding --===//
//
// The CUDA cross entropy (whole, and over a rank's block of the vocabulary) and embedding
// lookup over a rank's block of rows, with their gradients, against the CPU kernels; ids and
// targets outside the vocabulary recorded, not read.
//
// Built only where CMake found the CUDA toolkit; on a machine without a GPU every test is
// skipped with "skipped: no CUDA device" and the reason, never passed.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cuda/CudaKernels.h"
#include "test/unit/CudaKernelsTestSupport.h"
#include "test/unit/DeviceArray.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace cpu = tessel::cpu;
namespace cuda = tessel::cuda;

namespace {

using namespace tessel::test;

//===----------------------------------------------------------------------===//
// Cross entropy
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, CrossEntropyLossAndGradMatchCpu) {
  // Rows read one element at a time (1031) and in 16-byte groups (1032).
  for (const int64_t cols : {int64_t(1031), int64_t(1032)}) {
    const int64_t rows = 53;
    const Floats logits = randomFloats(rows * cols, -4, 4, 17);
    std::mt19937 rng(18);
    std::vector<int32_t> targets(rows);
    for (int32_t &t : targets)
      t = static_cast<int32_t>(rng() % cols);
    targets[5] = targets[40] = tessel::kernels::kIgnoredTarget; // rows that count nothing
    const Floats dloss = {0.75f};
    DeviceArray<float> gl(logits), gdloss(dloss), loss(1), dlogits(rows * cols),
        work(cuda::crossEntropyWorkspace(rows));
    DeviceArray<int32_t> gt(targets);
    DeviceArray<cuda::IdError> bad(1);
    for (bool scaled : {false, true}) {
      const double scale = 1.0 / 4096;
      float ref = 0;
      Floats refGrad(rows * cols);
      std::string error;
      if (scaled) {
        ASSERT_TRUE(
            cpu::crossEntropy(rows, cols, logits.data(), targets.data(), scale, &ref, error));
        ASSERT_TRUE(cpu::crossEntropyGrad(rows, cols, logits.data(), targets.data(), dloss.data(),
                                          scale, refGrad.data(), error));
      } else {
        ASSERT_TRUE(cpu::crossEntropy(rows, cols, logits.data(), targets.data(), &ref, error));
        ASSERT_TRUE(cpu::crossEntropyGrad(rows, cols, logits.data(), targets.data(), dloss.data(),
                                          refGrad.data(), error));
      }
      ASSERT_EQ(cuda::crossEntropy(rows, cols, gl.get(), gt.get(), scaled, scale, loss.get(),
                                   work.get(), bad.get(), stream),
                cudaSuccess);
      ASSERT_EQ(cuda::crossEntropyGrad(rows, cols, gl.get(), gt.get(), gdloss.get(), scaled, scale,
                                       dlogits.get(), bad.get(), stream),
                cudaSuccess);
      const std::string how = (scaled ? "scaled " : "mean ") + std::to_string(cols);
      expectClose({ref}, loss.host(), "cross_entropy " + how);
      expectClose(refGrad, dlogits.host(), "cross_entropy_grad " + how, 1e-7f);
      EXPECT_EQ(bad.host()[0].flag, 0);
    }
  }
}

TEST_F(CudaKernels, CrossEntropyRecordsAnOutOfRangeTarget) {
  const int64_t rows = 4, cols = 9;
  DeviceArray<float> logits(randomFloats(rows * cols, -1, 1, 19)), loss(1),
      work(cuda::crossEntropyWorkspace(rows));
  DeviceArray<int32_t> targets(std::vector<int32_t>{1, 2, 9, 0});
  DeviceArray<cuda::IdError> bad(1);
  ASSERT_EQ(cuda::crossEntropy(rows, cols, logits.get(), targets.get(), false, 0, loss.get(),
                               work.get(), bad.get(), stream),
            cudaSuccess);
  const cuda::IdError e = bad.host()[0];
  EXPECT_EQ(e.flag, 1);
  EXPECT_EQ(e.id, 9);
  EXPECT_EQ(e.position, 2);
  EXPECT_EQ(e.limit, 9);
  EXPECT_TRUE(std::isnan(loss.host()[0]));
}

TEST_F(CudaKernels, ShardedCrossEntropyMatchesCpu) {
  // This rank holds classes [40, 77) of 101; targets fall here and elsewhere.
  const int64_t rows = 29, cols = 37, first = 40, classes = 101;
  const Floats logits = randomFloats(rows * cols, -4, 4, 660);
  std::mt19937 rng(661);
  std::vector<int32_t> targets(rows);
  for (int32_t &t : targets)
    t = static_cast<int32_t>(rng() % classes);
  targets[0] = 40;
  targets[1] = 76;
  targets[7] = tessel::kernels::kIgnoredTarget; // a row that counts nothing
  const Floats dloss = {0.5f};
  const double scale = 1.0 / 512;
  Floats m(rows), s(rows), t(rows), dlogits(rows * cols);
  float loss = 0;
  std::string error;
  cpu::ceMax(rows, cols, logits.data(), m.data());
  ASSERT_TRUE(cpu::ceSums(rows, cols, first, classes, logits.data(), targets.data(), m.data(),
                          s.data(), t.data(), error));
  cpu::ceLoss(rows, m.data(), s.data(), t.data(), scale, &loss);
  ASSERT_TRUE(cpu::ceGrad(rows, cols, first, classes, logits.data(), targets.data(), m.data(),
                          s.data(), dloss.data(), scale, dlogits.data(), error));
  DeviceArray<float> gl(logits), gm(rows), gs(rows), gt(rows), gloss(1), gd(rows * cols),
      gdloss(dloss);
  DeviceArray<int32_t> gtargets(targets);
  DeviceArray<cuda::IdError> bad(1);
  ASSERT_EQ(cuda::ceMax(rows, cols, gl.get(), gm.get(), stream), cudaSuccess);
  ASSERT_EQ(cuda::ceSums(rows, cols, first, classes, gl.get(), gtargets.get(), gm.get(), gs.get(),
                         gt.get(), bad.get(), stream),
            cudaSuccess);
  ASSERT_EQ(cuda::ceLoss(rows, gm.get(), gs.get(), gt.get(), scale, gloss.get(), stream),
            cudaSuccess);
  ASSERT_EQ(cuda::ceGrad(rows, cols, first, classes, gl.get(), gtargets.get(), gm.get(), gs.get(),
                         gdloss.get(), scale, gd.get(), bad.get(), stream),
            cudaSuccess);
  expectClose(m, gm.host(), "ce_max", 0, 0);
  expectClose(s, gs.host(), "ce_sums s", 1e-6f, 1e-5f);
  expectClose(t, gt.host(), "ce_sums t", 0, 0);
  expectClose({loss}, gloss.host(), "ce_loss", 1e-6f, 1e-5f);
  expectClose(dlogits, gd.host(), "ce_grad", 1e-8f, 1e-5f);
  EXPECT_EQ(bad.host()[0].flag, 0);
}

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, EmbeddingAndGradMatchCpuOnARowBlock) {
  // This rank holds rows [14, 21) of a table of 35; ids repeat and fall on every rank's rows.
  const int64_t n = 211, rows = 7, cols = 45, first = 14, vocab = 35;
  std::mt19937 rng(400);
  std::vector<int32_t> ids(n);
  for (int32_t &id : ids)
    id = static_cast<int32_t>(rng() % vocab);
  ids[3] = 14;
  ids[4] = 20; // this rank's first and last rows
  const Floats table = randomFloats(rows * cols, -1, 1, 401),
               dout = randomFloats(n * cols, -1, 1, 402);
  Floats out(n * cols), dtable(rows * cols);
  std::string error;
  ASSERT_TRUE(
      cpu::embeddingRows(n, rows, cols, first, vocab, table.data(), ids.data(), out.data(), error));
  ASSERT_TRUE(cpu::embeddingGradRows(n, rows, cols, first, vocab, dout.data(), ids.data(),
                                     dtable.data(), error));
  DeviceArray<float> gt(table), gdout(dout), gout(n * cols), gdtable(Floats(rows * cols, 7.0f));
  DeviceArray<int32_t> gids(ids);
  DeviceArray<cuda::IdError> bad(1);
  const size_t bytes = cuda::embeddingGradWorkspace(n, rows);
  DeviceArray<char> work(bytes);
  ASSERT_EQ(cuda::embedding(n, rows, cols, first, vocab, gt.get(), gids.get(), gout.get(),
                            bad.get(), stream),
            cudaSuccess);
  ASSERT_EQ(cuda::embeddingGrad(n, rows, cols, first, vocab, gdout.get(), gids.get(), gdtable.get(),
                                work.get(), bytes, bad.get(), stream),
            cudaSuccess);
  expectClose(out, gout.host(), "embedding", 0, 0);
  // Each row sums its positions in increasing order in f64, as the CPU: the same bits.
  expectClose(dtable, gdtable.host(), "embedding_grad", 0, 0);
  EXPECT_EQ(bad.host()[0].flag, 0);
}

TEST_F(CudaKernels, EmbeddingRecordsAnOutOfRangeId) {
  const int64_t n = 4, rows = 5, cols = 3;
  DeviceArray<float> table(randomFloats(rows * cols, -1, 1, 410)), out(n * cols),
      dtable(rows * cols), dout(randomFloats(n * cols, -1, 1, 411));
  // The lookup takes a negative id for a padding slot (a zero row, as the CPU) and reports an
  // id at or past the vocabulary; the gradient reports both.
  DeviceArray<int32_t> ids(std::vector<int32_t>{1, 4, -2, 0});
  DeviceArray<cuda::IdError> padding(1);
  ASSERT_EQ(cuda::embedding(n, rows, cols, 0, rows, table.get(), ids.get(), out.get(),
                            padding.get(), stream),
            cudaSuccess);
  EXPECT_EQ(padding.host()[0].flag, 0);
  const Floats got = out.host();
  for (int64_t j = 0; j < cols; ++j)
    EXPECT_EQ(got[2 * cols + j], 0.0f);
  DeviceArray<int32_t> pastEnd(std::vector<int32_t>{1, 4, 0, 7});
  DeviceArray<cuda::IdError> bad(1);
  ASSERT_EQ(cuda::embedding(n, rows, cols, 0, rows, table.get(), pastEnd.get(), out.get(),
                            bad.get(), stream),
            cudaSuccess);
  cuda::IdError e = bad.host()[0];
  EXPECT_EQ(e.flag, 1);
  EXPECT_EQ(e.id, 7);
  EXPECT_EQ(e.position, 3);
  EXPECT_EQ(e.limit, rows);
  const Floats past = out.host();
  for (int64_t j = 0; j < cols; ++j)
    EXPECT_EQ(past[3 * cols + j], 0.0f);
  DeviceArray<cuda::IdError> bad2(1);
  const size_t bytes = cuda::embeddingGradWorkspace(n, rows);
  DeviceArray<char> work(bytes);
  ASSERT_EQ(cuda::embeddingGrad(n, rows, cols, 0, rows, dout.get(), ids.get(), dtable.get(),
                                work.get(), bytes, bad2.get(), stream),
            cudaSuccess);
  EXPECT_EQ(bad2.host()[0].id, -2);
}

} // namespace
