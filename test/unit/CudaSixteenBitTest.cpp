//===- CudaSixteenBitTest.cpp - The kernels' own 16-bit operands ----------===//
//
// The memory-bound CUDA launchers take each float operand at its own type (cuda::ConstFloats):
// a mixed-precision plan's calls run on them without the widening copies. Their contract is the
// widening wrapper's values: each 16-bit input widened exactly, the f32 computation, each
// 16-bit output rounded to nearest even once. So each test runs a launcher on bf16 (and f16)
// operands and the same launcher on the f32 values of those operands, rounds the f32 outputs
// on the host, and asks for the same values: within one unit in the last place of the 16-bit
// type (the two instantiations may contract multiply-adds differently), f32 outputs within
// f32 roundoff. On a machine without a GPU every test is skipped with "skipped: no CUDA
// device" and the reason.
//
//===----------------------------------------------------------------------===//

#include "common/support/Float16.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cuda/CudaKernels.h"
#include "test/unit/CudaPresence.h"
#include "test/unit/KernelShapes.h"
#include "test/unit/PagedScene.h"
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

using Values = std::vector<float>;
using tessel::test::attentionOf;
using tessel::test::describe;
using tessel::test::randomFloats;
using tessel::test::shapeOf;
using tessel::test::stridesOf;

/// A device buffer of `n` elements of `type`, holding `values` rounded to that type.
class Buffer {
public:
  Buffer(cuda::DType type, const Values &values) : type_(type), n_(values.size()) {
    EXPECT_EQ(cudaMalloc(&data_, bytes()), cudaSuccess);
    if (type == cuda::DType::F32) {
      EXPECT_EQ(cudaMemcpy(data_, values.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
      return;
    }
    std::vector<uint16_t> bits(n_);
    for (size_t i = 0; i < n_; ++i)
      bits[i] = type == cuda::DType::BF16 ? tessel::floatToBf16(values[i])
                                          : tessel::floatToHalf(values[i]);
    EXPECT_EQ(cudaMemcpy(data_, bits.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  Buffer(cuda::DType type, size_t n) : Buffer(type, Values(n, 0.0f)) {}
  ~Buffer() { cudaFree(data_); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;

  cuda::ConstFloats in() const { return {data_, type_}; }
  cuda::Floats out() { return {data_, type_}; }
  /// Waits for the device, then reads the values back, widened.
  Values host() const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    Values out(n_);
    if (type_ == cuda::DType::F32) {
      EXPECT_EQ(cudaMemcpy(out.data(), data_, bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
      return out;
    }
    std::vector<uint16_t> bits(n_);
    EXPECT_EQ(cudaMemcpy(bits.data(), data_, bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < n_; ++i)
      out[i] =
          type_ == cuda::DType::BF16 ? tessel::bf16ToFloat(bits[i]) : tessel::halfToFloat(bits[i]);
    return out;
  }

private:
  size_t bytes() const {
    return std::max<size_t>(n_, 1) * static_cast<size_t>(cuda::elementBytes(type_));
  }
  cuda::DType type_;
  size_t n_;
  void *data_ = nullptr;
};

/// `values` as a buffer of `type` holds them.
Values rounded(cuda::DType type, const Values &values) {
  Values out(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    out[i] = type == cuda::DType::BF16  ? tessel::bf16ToFloat(tessel::floatToBf16(values[i]))
             : type == cuda::DType::F16 ? tessel::halfToFloat(tessel::floatToHalf(values[i]))
                                        : values[i];
  return out;
}

/// One unit in the last place of `type` at v (f32: 2^-16 relative, room for sums whose
/// multiply-adds the two instantiations contract differently).
float ulp(cuda::DType type, float v) {
  const int bits = type == cuda::DType::BF16 ? 8 : type == cuda::DType::F16 ? 11 : 16;
  int exponent = 0;
  std::frexp(v == 0.0f ? 1e-30f : v, &exponent);
  const float smallest = type == cuda::DType::F16 ? std::ldexp(1.0f, -24) : 0.0f;
  return std::max(std::ldexp(1.0f, exponent - bits), smallest);
}

/// `got` (an output of `type`) is `want` (the f32 launch's output, rounded to `type`) within
/// one unit in its last place.
void expectSame(cuda::DType type, const Values &want, const Values &got, const std::string &what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  const Values target = rounded(type, want);
  int reported = 0;
  for (size_t i = 0; i < target.size(); ++i) {
    if (std::isnan(target[i]) && std::isnan(got[i]))
      continue;
    if (std::fabs(got[i] - target[i]) <= ulp(type, target[i]))
      continue;
    ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", the f32 launch rounded "
                  << target[i];
    if (++reported == 5)
      return;
  }
}

const cuda::DType kHalfTypes[] = {cuda::DType::BF16, cuda::DType::F16};

std::string nameOf(cuda::DType t) {
  return t == cuda::DType::BF16 ? "bf16" : t == cuda::DType::F16 ? "f16" : "f32";
}

class CudaSixteenBit : public ::testing::Test {
protected:
  void SetUp() override {
    const std::string why = tessel::test::noCudaDevice();
    if (!why.empty())
      GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  }
  cudaStream_t stream = nullptr;
};

TEST_F(CudaSixteenBit, MapsAndCopiesRoundTheF32Values) {
  constexpr auto F32 = cuda::DType::F32;
  const int64_t n = 2053;
  for (cuda::DType t : kHalfTypes) {
    const Values x = rounded(t, randomFloats(n, 0.1f, 3.0f, 1)),
                 y = rounded(t, randomFloats(n, -2.0f, 2.0f, 2));
    Buffer hx(t, x), hy(t, y), hout(t, n), fx(F32, x), fy(F32, y), fout(F32, n);
    for (cpu::UnaryKind kind :
         {cpu::UnaryKind::Exp, cpu::UnaryKind::Gelu, cpu::UnaryKind::Silu, cpu::UnaryKind::Rsqrt}) {
      ASSERT_EQ(cuda::unary(kind, n, hx.in(), hout.out(), 2.0f, stream), cudaSuccess);
      ASSERT_EQ(cuda::unary(kind, n, fx.in(), fout.out(), 2.0f, stream), cudaSuccess);
      expectSame(t, fout.host(), hout.host(),
                 nameOf(t) + " unary " + std::to_string(static_cast<int>(kind)));
      ASSERT_EQ(cuda::unaryGrad(kind, n, hx.in(), hy.in(), hy.in(), hout.out(), 2.0f, stream),
                cudaSuccess);
      ASSERT_EQ(cuda::unaryGrad(kind, n, fx.in(), fy.in(), fy.in(), fout.out(), 2.0f, stream),
                cudaSuccess);
      expectSame(t, fout.host(), hout.host(),
                 nameOf(t) + " unary_grad " + std::to_string(static_cast<int>(kind)));
    }
    // [3, 5, 7] with x permuted and y broadcast, as the f32 test lays them out.
    const cpu::Shape shape = shapeOf({3, 5, 7});
    const cpu::Strides sa = stridesOf({5, 1, 15}), sb = stridesOf({7, 0, 1});
    ASSERT_EQ(
        cuda::binary(cpu::BinaryKind::Mul, shape, hx.in(), sa, hy.in(), sb, hout.out(), stream),
        cudaSuccess);
    ASSERT_EQ(
        cuda::binary(cpu::BinaryKind::Mul, shape, fx.in(), sa, fy.in(), sb, fout.out(), stream),
        cudaSuccess);
    expectSame(t, fout.host(), hout.host(), nameOf(t) + " binary");
    ASSERT_EQ(cuda::select(shape, hy.in(), sb, hx.in(), sa, hy.in(), sa, hout.out(), stream),
              cudaSuccess);
    ASSERT_EQ(cuda::select(shape, fy.in(), sb, fx.in(), sa, fy.in(), sa, fout.out(), stream),
              cudaSuccess);
    expectSame(t, fout.host(), hout.host(), nameOf(t) + " where");
    // Dense operands: groups of eight, 16 bytes at a time.
    const cpu::Shape flat = shapeOf({n});
    const cpu::Strides flatDense = cpu::denseStrides(flat);
    ASSERT_EQ(cuda::binary(cpu::BinaryKind::Sub, flat, hx.in(), flatDense, hy.in(), flatDense,
                           hout.out(), stream),
              cudaSuccess);
    ASSERT_EQ(cuda::binary(cpu::BinaryKind::Sub, flat, fx.in(), flatDense, fy.in(), flatDense,
                           fout.out(), stream),
              cudaSuccess);
    expectSame(t, fout.host(), hout.host(), nameOf(t) + " dense binary");
    ASSERT_EQ(cuda::select(flat, hy.in(), flatDense, hx.in(), flatDense, hy.in(), flatDense,
                           hout.out(), stream),
              cudaSuccess);
    ASSERT_EQ(cuda::select(flat, fy.in(), flatDense, fx.in(), flatDense, fy.in(), flatDense,
                           fout.out(), stream),
              cudaSuccess);
    expectSame(t, fout.host(), hout.host(), nameOf(t) + " dense where");
    ASSERT_EQ(cuda::fill(n, 0.3f, hout.out(), stream), cudaSuccess);
    expectSame(t, Values(n, 0.3f), hout.host(), nameOf(t) + " fill");
    // Copies: 16-bit to 16-bit moves bits, f32 to 16-bit rounds, 16-bit to f32 widens.
    const Values wide = randomFloats(105, -3.0f, 3.0f, 3);
    Buffer w(F32, wide), narrow(t, 105), back(F32, 105);
    ASSERT_EQ(cuda::stridedCopy(shape, w.in(), sa, narrow.out(), stream), cudaSuccess);
    ASSERT_EQ(cuda::stridedCopy(shape, w.in(), sa, fout.out(), stream), cudaSuccess);
    const Values permuted = fout.host();
    expectSame(t, Values(permuted.begin(), permuted.begin() + 105), narrow.host(),
               nameOf(t) + " copy from f32");
    ASSERT_EQ(cuda::stridedCopy(shape, narrow.in(), cpu::denseStrides(shape), back.out(), stream),
              cudaSuccess);
    expectSame(F32, narrow.host(), back.host(), nameOf(t) + " copy to f32");
    ASSERT_EQ(cuda::stridedCopy(shape, narrow.in(), cpu::denseStrides(shape), hout.out(), stream),
              cudaSuccess);
    const Values moved = hout.host();
    expectSame(t, narrow.host(), Values(moved.begin(), moved.begin() + 105),
               nameOf(t) + " copy between 16-bit buffers");
  }
}

TEST_F(CudaSixteenBit, RowKernelsRoundTheF32Values) {
  constexpr auto F32 = cuda::DType::F32;
  for (cuda::DType t : kHalfTypes)
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{67, 771}, {3, 5}, {9, 2048}}) {
      const int64_t n = rows * cols;
      const std::string what = nameOf(t) + " " + std::to_string(rows) + "x" + std::to_string(cols);
      const Values x = rounded(t, randomFloats(n, -2, 3, 10)),
                   g = rounded(t, randomFloats(cols, 0.5f, 1.5f, 11)),
                   b = rounded(t, randomFloats(cols, -0.5f, 0.5f, 12)),
                   dy = rounded(t, randomFloats(n, -1, 1, 13));
      // Activations and working weights 16-bit, parameter gradients f32: a bf16 plan's norms.
      Buffer hx(t, x), hg(t, g), hb(t, b), hdy(t, dy), hy(t, n), hdx(t, n), hdg(F32, cols),
          hdb(F32, cols);
      Buffer fx(F32, x), fg(F32, g), fb(F32, b), fdy(F32, dy), fy(F32, n), fdx(F32, n),
          fdg(F32, cols), fdb(F32, cols), work(F32, cuda::normGradWorkspace(rows, cols));
      float *ws = static_cast<float *>(const_cast<void *>(work.in().data));
      ASSERT_EQ(cuda::layerNorm(rows, cols, hx.in(), hg.in(), hb.in(), 1e-5f, hy.out(), stream),
                cudaSuccess);
      ASSERT_EQ(cuda::layerNorm(rows, cols, fx.in(), fg.in(), fb.in(), 1e-5f, fy.out(), stream),
                cudaSuccess);
      expectSame(t, fy.host(), hy.host(), what + " layernorm");
      ASSERT_EQ(cuda::layerNormGrad(rows, cols, hx.in(), hg.in(), hdy.in(), 1e-5f, hdx.out(),
                                    hdg.out(), hdb.out(), ws, stream),
                cudaSuccess);
      ASSERT_EQ(cuda::layerNormGrad(rows, cols, fx.in(), fg.in(), fdy.in(), 1e-5f, fdx.out(),
                                    fdg.out(), fdb.out(), ws, stream),
                cudaSuccess);
      expectSame(t, fdx.host(), hdx.host(), what + " layernorm_grad dx");
      expectSame(F32, fdg.host(), hdg.host(), what + " layernorm_grad dg");
      expectSame(F32, fdb.host(), hdb.host(), what + " layernorm_grad db");
      ASSERT_EQ(cuda::rmsNorm(rows, cols, hx.in(), hg.in(), 1e-5f, hy.out(), stream), cudaSuccess);
      ASSERT_EQ(cuda::rmsNorm(rows, cols, fx.in(), fg.in(), 1e-5f, fy.out(), stream), cudaSuccess);
      expectSame(t, fy.host(), hy.host(), what + " rmsnorm");
      ASSERT_EQ(cuda::rmsNormGrad(rows, cols, hx.in(), hg.in(), hdy.in(), 1e-5f, hdx.out(),
                                  hdg.out(), ws, stream),
                cudaSuccess);
      ASSERT_EQ(cuda::rmsNormGrad(rows, cols, fx.in(), fg.in(), fdy.in(), 1e-5f, fdx.out(),
                                  fdg.out(), ws, stream),
                cudaSuccess);
      expectSame(t, fdx.host(), hdx.host(), what + " rmsnorm_grad dx");
      expectSame(F32, fdg.host(), hdg.host(), what + " rmsnorm_grad dg");
      ASSERT_EQ(cuda::softmax(rows, cols, hx.in(), hy.out(), stream), cudaSuccess);
      ASSERT_EQ(cuda::softmax(rows, cols, fx.in(), fy.out(), stream), cudaSuccess);
      expectSame(t, fy.host(), hy.host(), what + " softmax");
      ASSERT_EQ(cuda::softmaxGrad(rows, cols, hy.in(), hdy.in(), hdx.out(), stream), cudaSuccess);
      Buffer fy16(F32, hy.host());
      ASSERT_EQ(cuda::softmaxGrad(rows, cols, fy16.in(), fdy.in(), fdx.out(), stream), cudaSuccess);
      expectSame(t, fdx.host(), hdx.host(), what + " softmax_grad");
      // Cross entropy: 16-bit logits, an f32 loss; the logits' gradient 16-bit.
      std::vector<int32_t> targets(rows);
      std::mt19937 rng(14);
      for (int32_t &v : targets)
        v = static_cast<int32_t>(rng() % cols);
      int32_t *dTargets = nullptr;
      cuda::IdError *bad = nullptr;
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&dTargets), rows * sizeof(int32_t)),
                cudaSuccess);
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&bad), sizeof(cuda::IdError)), cudaSuccess);
      ASSERT_EQ(
          cudaMemcpy(dTargets, targets.data(), rows * sizeof(int32_t), cudaMemcpyHostToDevice),
          cudaSuccess);
      ASSERT_EQ(cudaMemset(bad, 0, sizeof(cuda::IdError)), cudaSuccess);
      Buffer hloss(F32, 1), floss(F32, 1), ceWork(F32, cuda::crossEntropyWorkspace(rows)),
          dloss(F32, Values{0.75f});
      float *cw = static_cast<float *>(const_cast<void *>(ceWork.in().data));
      auto f32Out = [](Buffer &b) { return static_cast<float *>(b.out().data); };
      const float *dl = static_cast<const float *>(dloss.in().data);
      ASSERT_EQ(cuda::crossEntropy(rows, cols, hx.in(), dTargets, false, 0.0, f32Out(hloss), cw,
                                   bad, stream),
                cudaSuccess);
      ASSERT_EQ(cuda::crossEntropy(rows, cols, fx.in(), dTargets, false, 0.0, f32Out(floss), cw,
                                   bad, stream),
                cudaSuccess);
      expectSame(F32, floss.host(), hloss.host(), what + " cross_entropy");
      ASSERT_EQ(cuda::crossEntropyGrad(rows, cols, hx.in(), dTargets, dl, false, 0.0, hdx.out(),
                                       bad, stream),
                cudaSuccess);
      ASSERT_EQ(cuda::crossEntropyGrad(rows, cols, fx.in(), dTargets, dl, false, 0.0, fdx.out(),
                                       bad, stream),
                cudaSuccess);
      expectSame(t, fdx.host(), hdx.host(), what + " cross_entropy_grad");
      cudaFree(dTargets);
      cudaFree(bad);
    }
}

TEST_F(CudaSixteenBit, EmbeddingRopeAndReduceRoundTheF32Values) {
  constexpr auto F32 = cuda::DType::F32;
  for (cuda::DType t : kHalfTypes) {
    const int64_t n = 211, rows = 7, cols = 45, first = 14, vocab = 35;
    std::mt19937 rng(400);
    std::vector<int32_t> ids(n);
    for (int32_t &id : ids)
      id = static_cast<int32_t>(rng() % vocab);
    int32_t *dIds = nullptr;
    cuda::IdError *bad = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&dIds), n * sizeof(int32_t)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&bad), sizeof(cuda::IdError)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dIds, ids.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemset(bad, 0, sizeof(cuda::IdError)), cudaSuccess);
    const Values table = rounded(t, randomFloats(rows * cols, -1, 1, 401)),
                 dout = rounded(t, randomFloats(n * cols, -1, 1, 402));
    Buffer htable(t, table), hout(t, n * cols), hdout(t, dout), hdtable(F32, rows * cols);
    Buffer ftable(F32, table), fout(F32, n * cols), fdout(F32, dout), fdtable(F32, rows * cols);
    const size_t bytes = cuda::embeddingGradWorkspace(n, rows);
    void *work = nullptr;
    ASSERT_EQ(cudaMalloc(&work, bytes), cudaSuccess);
    ASSERT_EQ(
        cuda::embedding(n, rows, cols, first, vocab, htable.in(), dIds, hout.out(), bad, stream),
        cudaSuccess);
    ASSERT_EQ(
        cuda::embedding(n, rows, cols, first, vocab, ftable.in(), dIds, fout.out(), bad, stream),
        cudaSuccess);
    expectSame(t, fout.host(), hout.host(), nameOf(t) + " embedding");
    ASSERT_EQ(cuda::embeddingGrad(n, rows, cols, first, vocab, hdout.in(), dIds, hdtable.out(),
                                  work, bytes, bad, stream),
              cudaSuccess);
    ASSERT_EQ(cuda::embeddingGrad(n, rows, cols, first, vocab, fdout.in(), dIds, fdtable.out(),
                                  work, bytes, bad, stream),
              cudaSuccess);
    expectSame(F32, fdtable.host(), hdtable.host(), nameOf(t) + " embedding_grad");
    cudaFree(work);
    cudaFree(dIds);
    cudaFree(bad);

    // Rotary embedding of [2, 5, 3, 8], forward and inverse.
    const int64_t elements = 2 * 5 * 3 * 8;
    const Values x = rounded(t, randomFloats(elements, -2, 2, 403));
    Buffer hx(t, x), hy(t, elements), fx(F32, x), fy(F32, elements);
    for (bool inverse : {false, true}) {
      ASSERT_EQ(cuda::rope(2, 5, 3, 8, 10000.0f, inverse, hx.in(), hy.out(), stream), cudaSuccess);
      ASSERT_EQ(cuda::rope(2, 5, 3, 8, 10000.0f, inverse, fx.in(), fy.out(), stream), cudaSuccess);
      expectSame(t, fy.host(), hy.host(), nameOf(t) + (inverse ? " rope inverse" : " rope"));
    }

    // A sum over dims 0 and 2 of [3, 5, 7] into f32 (a bias's gradient) and, added into what
    // is there, into 16-bit.
    const cpu::Shape shape = shapeOf({3, 5, 7});
    const cpu::Strides kept = stridesOf({0, 1, 0});
    const Values r = rounded(t, randomFloats(105, -1, 1, 404)), start = rounded(t, Values(5, 0.5f));
    Buffer hr(t, r), fr(F32, r), hsum(F32, 5), fsum(F32, 5), hacc(t, start), facc(F32, start);
    ASSERT_EQ(cuda::reduceSum(shape, hr.in(), kept, 0.5f, hsum.out(), stream), cudaSuccess);
    ASSERT_EQ(cuda::reduceSum(shape, fr.in(), kept, 0.5f, fsum.out(), stream), cudaSuccess);
    expectSame(F32, fsum.host(), hsum.host(), nameOf(t) + " reduce");
    ASSERT_EQ(cuda::reduceSum(shape, hr.in(), kept, 0.5f, hacc.out(), stream, true), cudaSuccess);
    ASSERT_EQ(cuda::reduceSum(shape, fr.in(), kept, 0.5f, facc.out(), stream, true), cudaSuccess);
    expectSame(t, facc.host(), hacc.host(), nameOf(t) + " reduce, accumulated");
  }
}

//===----------------------------------------------------------------------===//
// Attention over paged caches, rope at given positions
//===----------------------------------------------------------------------===//

/// paged_attention on operands of `type` (the caches `cacheType`) against the f32 launch on the
/// same values: the caches are moved as they are, the output rounded once.
void checkPagedTypes(cuda::DType type, cuda::DType cacheType, const tessel::test::PagedSpec &spec,
                     uint32_t seed) {
  constexpr auto F32 = cuda::DType::F32;
  tessel::test::PagedScene x = tessel::test::pagedScene(spec, seed);
  // Values both 16-bit types hold, so that a key stored in a cache of another type keeps its
  // value.
  for (Values *v : {&x.q, &x.k, &x.v, &x.kCache, &x.vCache})
    *v = rounded(cuda::DType::BF16, rounded(cuda::DType::F16, *v));
  const cpu::PagedAttentionArgs &a = x.args;
  int32_t *ids = nullptr;
  float *work = nullptr;
  const size_t idBytes = (x.positions.size() + x.table.size()) * sizeof(int32_t);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&ids), idBytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(ids, x.positions.data(), x.positions.size() * sizeof(int32_t),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(ids + x.positions.size(), x.table.data(), x.table.size() * sizeof(int32_t),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  const int64_t workFloats = std::max<int64_t>(1, cuda::pagedAttentionWorkspace(a));
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&work), workFloats * sizeof(float)), cudaSuccess);
  Buffer hq(type, x.q), hk(type, x.k), hv(type, x.v), hout(type, x.q.size()),
      hkCache(cacheType, x.kCache), hvCache(cacheType, x.vCache);
  Buffer fq(F32, x.q), fk(F32, x.k), fv(F32, x.v), fout(F32, x.q.size()), fkCache(F32, x.kCache),
      fvCache(F32, x.vCache);
  const int32_t *positions = ids, *table = ids + x.positions.size();
  const std::string what =
      nameOf(type) + " with " + nameOf(cacheType) + " caches, " + tessel::test::describe(spec);
  ASSERT_EQ(cuda::pagedAttention(a, hq.in(), hk.in(), hv.in(), positions, table, hout.out(),
                                 hkCache.out(), hvCache.out(), work, nullptr),
            cudaSuccess)
      << what;
  ASSERT_EQ(cuda::pagedAttention(a, fq.in(), fk.in(), fv.in(), positions, table, fout.out(),
                                 fkCache.out(), fvCache.out(), work, nullptr),
            cudaSuccess)
      << what;
  expectSame(type, fout.host(), hout.host(), "out of " + what);
  expectSame(cacheType, fkCache.host(), hkCache.host(), "key cache of " + what);
  expectSame(cacheType, fvCache.host(), hvCache.host(), "value cache of " + what);
  cudaFree(ids);
  cudaFree(work);
}

TEST_F(CudaSixteenBit, PagedAttentionRoundsTheF32Values) {
  constexpr auto F32 = cuda::DType::F32;
  const std::vector<tessel::test::PagedSpec> specs = tessel::test::pagedSpecs();
  uint32_t seed = 760;
  for (cuda::DType t : kHalfTypes) {
    // Every operand 16-bit, on caches split over several blocks and not.
    checkPagedTypes(t, t, specs[2], seed += 10);
    checkPagedTypes(t, t, specs[6], seed += 10);
    // f32 new tokens and output over 16-bit caches: each operand read at its own type.
    checkPagedTypes(F32, t, specs[1], seed += 10);
  }
}

TEST_F(CudaSixteenBit, RopeAtGivenPositionsRoundsTheF32Values) {
  constexpr auto F32 = cuda::DType::F32;
  const int64_t batch = 2, seq = 5, heads = 3, head = 8, elements = batch * seq * heads * head;
  const std::vector<int32_t> positions = {7, 8, -1, 9, 10, 0, 3, 100, 2, 1};
  int32_t *dPositions = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&dPositions), positions.size() * sizeof(int32_t)),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dPositions, positions.data(), positions.size() * sizeof(int32_t),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  for (cuda::DType t : kHalfTypes) {
    const Values x = rounded(t, randomFloats(elements, -2, 2, 790));
    Buffer hx(t, x), hy(t, elements), fx(F32, x), fy(F32, elements);
    for (bool inverse : {false, true}) {
      ASSERT_EQ(cuda::rope(batch, seq, heads, head, 10000.0f, inverse, hx.in(), hy.out(), stream,
                           -1, -1, {}, dPositions),
                cudaSuccess);
      ASSERT_EQ(cuda::rope(batch, seq, heads, head, 10000.0f, inverse, fx.in(), fy.out(), stream,
                           -1, -1, {}, dPositions),
                cudaSuccess);
      expectSame(t, fy.host(), hy.host(),
                 nameOf(t) + (inverse ? " rope at positions, inverse" : " rope at positions"));
    }
  }
  cudaFree(dPositions);
}

//===----------------------------------------------------------------------===//
// The tensor-core attention
//===----------------------------------------------------------------------===//

/// `got` is `want` within tol times the largest magnitude of `want`: the probabilities and
/// their gradients are rounded to the operand type before their products, so the error is
/// bounded relative to the output's scale, not per element. A fragment laid out wrong is off
/// by the output's own magnitude.
void expectNear(const Values &want, const Values &got, float tol, const std::string &what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  float largest = 0.0f, worst = 0.0f;
  size_t at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    largest = std::max(largest, std::fabs(want[i]));
    const float e = std::isfinite(got[i]) ? std::fabs(got[i] - want[i]) : INFINITY;
    if (e > worst) {
      worst = e;
      at = i;
    }
  }
  EXPECT_LE(worst, tol * std::max(largest, 1e-6f))
      << what << ": element " << at << " is " << got[at] << ", the f32 kernel gives " << want[at]
      << " (largest magnitude " << largest << ")";
}

/// Forward and backward of the tensor-core kernels against the CPU's f32 kernels on the same
/// rounded q, k, v and dout; the backward pass twice, for the same bits.
void checkFlashAttention(cuda::DType t, const cpu::AttentionArgs &a, uint32_t seed) {
  ASSERT_TRUE(cuda::flashAttentionTakes(a)) << describe(a);
  const float tol = t == cuda::DType::BF16 ? 2e-2f : 4e-3f;
  const cuda::DType type = t == cuda::DType::BF16 ? cuda::DType::BF16 : cuda::DType::F16;
  const int64_t nq = a.batch * a.seq * a.heads * a.head;
  const int64_t nkv = a.batch * a.kvSeq * a.kvHeads * a.head;
  const Values q = rounded(t, randomFloats(nq, -1, 1, seed)),
               k = rounded(t, randomFloats(nkv, -1, 1, seed + 1)),
               v = rounded(t, randomFloats(nkv, -1, 1, seed + 2)),
               dout = rounded(t, randomFloats(nq, -1, 1, seed + 3));
  const int64_t rows = a.batch * a.seq * a.heads;
  Values out(nq), lse(rows), dq(nq), dk(nkv), dv(nkv);
  cpu::attention(a, q.data(), k.data(), v.data(), out.data(), lse.data());
  cpu::attentionGrad(a, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data());
  Buffer hq(t, q), hk(t, k), hv(t, v), hdout(t, dout), hout(t, nq), hdq(t, Values(nq, 5.0f)),
      hdk(t, Values(nkv, 5.0f)), hdv(t, Values(nkv, 5.0f));
  auto bits = [](const Buffer &b) { return static_cast<const uint16_t *>(b.in().data); };
  auto mut = [](Buffer &b) { return static_cast<uint16_t *>(b.out().data); };
  void *work = nullptr;
  ASSERT_EQ(cudaMalloc(&work, cuda::flashAttentionGradWorkspaceBytes(a, /*saved=*/false)), cudaSuccess);
  const std::string what = nameOf(t) + " tensor-core " + describe(a);
  Buffer hlse(cuda::DType::F32, rows);
  float *lseBits = static_cast<float *>(hlse.out().data);
  ASSERT_EQ(cuda::flashAttention(type, a, bits(hq), bits(hk), bits(hv), mut(hout), lseBits,
                                 nullptr),
            cudaSuccess)
      << what;
  ASSERT_EQ(cuda::flashAttentionGrad(type, a, bits(hq), bits(hk), bits(hv), bits(hdout), nullptr,
                                     nullptr, mut(hdq), mut(hdk), mut(hdv), work, nullptr),
            cudaSuccess)
      << what;
  expectNear(out, hout.host(), tol, "out of " + what);
  expectNear(lse, hlse.host(), 1e-3f, "lse of " + what);
  const Values gq = hdq.host(), gk = hdk.host(), gv = hdv.host();
  expectNear(dq, gq, tol, "dq of " + what);
  expectNear(dk, gk, tol, "dk of " + what);
  expectNear(dv, gv, tol, "dv of " + what);
  ASSERT_EQ(cuda::flashAttentionGrad(type, a, bits(hq), bits(hk), bits(hv), bits(hdout), nullptr,
                                     nullptr, mut(hdq), mut(hdk), mut(hdv), work, nullptr),
            cudaSuccess);
  EXPECT_TRUE(gq == hdq.host() && gk == hdk.host() && gv == hdv.host())
      << what << ": a second backward pass gave other bits";
  // From the forward call's output and lse the forward pass is not run again; those are the
  // bits it would recompute, so the gradients are the same bits. Its workspace holds only the
  // rows' statistics.
  void *savedWork = nullptr;
  ASSERT_EQ(cudaMalloc(&savedWork, cuda::flashAttentionGradWorkspaceBytes(a, /*saved=*/true)),
            cudaSuccess);
  ASSERT_EQ(cuda::flashAttentionGrad(type, a, bits(hq), bits(hk), bits(hv), bits(hdout),
                                     bits(hout), lseBits, mut(hdq), mut(hdk), mut(hdv), savedWork,
                                     nullptr),
            cudaSuccess);
  cudaFree(savedWork);
  EXPECT_TRUE(gq == hdq.host() && gk == hdk.host() && gv == hdv.host())
      << what << ": the gradients from the saved lse differ from the recomputed ones";
  cudaFree(work);
}

TEST_F(CudaSixteenBit, FlashAttentionMatchesTheF32Kernels) {
  for (cuda::DType t : kHalfTypes) {
    // Causal over several tiles with a ragged last one, two query heads per kv head.
    checkFlashAttention(t, attentionOf(2, 130, 4, 130, 2, 64, true, 0), 700);
    // Full attention over more keys than queries, one kv head for both (MQA), head 128.
    checkFlashAttention(t, attentionOf(1, 77, 2, 100, 1, 128, false, 0), 710);
    // A sliding window at head 32.
    checkFlashAttention(t, attentionOf(1, 200, 2, 200, 2, 32, true, 37), 720);
    // One query and one key.
    checkFlashAttention(t, attentionOf(1, 1, 1, 1, 1, 64, true, 0), 730);
    // Heads 3 and 4 of 8 over 2 kv heads of 4 query heads each (tensor parallelism): they
    // straddle the two kv heads.
    cpu::AttentionArgs block = attentionOf(2, 70, 2, 70, 2, 64, true, 0);
    block.firstHead = 3;
    block.group = 4;
    checkFlashAttention(t, block, 740);
  }
}

} // namespace
