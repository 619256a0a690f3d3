//===- CudaKernelsTest.cpp - The CUDA kernels against the CPU kernels -----===//
//
// Each kernel of kernels/cuda runs on random inputs of odd shapes and is compared with its CPU
// counterpart of kernels/cpu on the same inputs, within f32 tolerances (the two add in
// different orders). Built only where CMake found the CUDA toolkit; on a machine without a GPU
// every test is skipped with "skipped: no CUDA device" and the reason, never passed.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/CudaKernels.h"
#include "kernels/cpu/CpuKernels.h"
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

using Floats = std::vector<float>;

/// Empty where this process can run CUDA kernels, else why not.
std::string noDevice() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
  }
  return count > 0 ? "" : "the CUDA driver sees no device";
}

using tessel::test::randomFloats;

/// A device copy of a host vector, freed with the object.
template <class T> class DeviceArray {
public:
  explicit DeviceArray(const std::vector<T> &host) : n_(host.size()) {
    EXPECT_EQ(cudaMalloc(&data_, bytes()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  explicit DeviceArray(size_t n) : DeviceArray(std::vector<T>(n, T{})) {}
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray &) = delete;
  DeviceArray &operator=(const DeviceArray &) = delete;

  T *get() const { return static_cast<T *>(data_); }
  /// Waits for the device, then copies back.
  std::vector<T> host() const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<T> out(n_);
    EXPECT_EQ(cudaMemcpy(out.data(), data_, bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

private:
  size_t bytes() const { return std::max<size_t>(n_, 1) * sizeof(T); }
  void *data_ = nullptr;
  size_t n_;
};

/// |gpu - cpu| <= atol + rtol |cpu| everywhere (f32: the kernels add in different orders).
void expectClose(const Floats &cpuValues, const Floats &gpuValues, const std::string &what,
                 float atol = 1e-5f, float rtol = 1e-4f) {
  ASSERT_EQ(cpuValues.size(), gpuValues.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < cpuValues.size(); ++i) {
    const float ref = cpuValues[i], got = gpuValues[i];
    if (std::isnan(ref) && std::isnan(got))
      continue;
    if (std::fabs(got - ref) <= atol + rtol * std::fabs(ref))
      continue;
    ADD_FAILURE() << what << ": element " << i << " is " << got << " on the GPU, " << ref
                  << " on the CPU";
    if (++reported == 5)
      return;
  }
}

class CudaKernels : public ::testing::Test {
protected:
  void SetUp() override {
    const std::string why = noDevice();
    if (!why.empty())
      GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  }
  cudaStream_t stream = nullptr; // the legacy default stream
};

cpu::Shape shapeOf(std::initializer_list<int64_t> sizes) {
  cpu::Shape s;
  for (int64_t size : sizes)
    s.size[s.rank++] = size;
  return s;
}

cpu::Strides stridesOf(std::initializer_list<int64_t> strides) {
  cpu::Strides s;
  int d = 0;
  for (int64_t stride : strides)
    s.stride[d++] = stride;
  return s;
}

const cpu::UnaryKind kUnaryKinds[] = {
    cpu::UnaryKind::Neg,    cpu::UnaryKind::Exp,     cpu::UnaryKind::Log,    cpu::UnaryKind::Sqrt,
    cpu::UnaryKind::Rsqrt,  cpu::UnaryKind::Tanh,    cpu::UnaryKind::Gelu,   cpu::UnaryKind::Silu,
    cpu::UnaryKind::Relu,   cpu::UnaryKind::Sigmoid, cpu::UnaryKind::Square, cpu::UnaryKind::Pow,
    cpu::UnaryKind::GeluErf};

/// Inputs in the function's domain: positive for log, the roots and pow.
Floats unaryInputs(cpu::UnaryKind kind, size_t n, uint32_t seed) {
  const bool positive = kind == cpu::UnaryKind::Log || kind == cpu::UnaryKind::Sqrt ||
                        kind == cpu::UnaryKind::Rsqrt || kind == cpu::UnaryKind::Pow;
  return positive ? randomFloats(n, 0.1f, 3.0f, seed) : randomFloats(n, -4.0f, 4.0f, seed);
}

TEST_F(CudaKernels, FillAndPositions) {
  const int64_t n = 1237;
  DeviceArray<float> y(n), p(n);
  ASSERT_EQ(cuda::fill(n, 2.5f, y.get(), stream), cudaSuccess);
  ASSERT_EQ(cuda::positions(n, p.get(), stream), cudaSuccess);
  Floats positions(n);
  cpu::positions(n, positions.data());
  expectClose(Floats(n, 2.5f), y.host(), "fill", 0, 0);
  expectClose(positions, p.host(), "positions", 0, 0);
}

TEST_F(CudaKernels, UnaryMatchesCpu) {
  const int64_t n = 4099;
  for (cpu::UnaryKind kind : kUnaryKinds) {
    const Floats x = unaryInputs(kind, n, 7 + static_cast<int>(kind));
    Floats ref(n);
    cpu::unary(kind, n, x.data(), ref.data(), 2.5f);
    DeviceArray<float> dx(x), dy(n);
    ASSERT_EQ(cuda::unary(kind, n, dx.get(), dy.get(), 2.5f, stream), cudaSuccess);
    expectClose(ref, dy.host(), "unary " + std::to_string(static_cast<int>(kind)));
  }
}

TEST_F(CudaKernels, UnaryGradMatchesCpu) {
  const int64_t n = 2053;
  for (cpu::UnaryKind kind : kUnaryKinds) {
    const Floats x = unaryInputs(kind, n, 11 + static_cast<int>(kind));
    const Floats dy = randomFloats(n, -1.0f, 1.0f, 3);
    Floats y(n), ref(n);
    cpu::unary(kind, n, x.data(), y.data(), 2.5f);
    cpu::unaryGrad(kind, n, x.data(), y.data(), dy.data(), ref.data(), 2.5f);
    DeviceArray<float> gx(x), gy(y), gdy(dy), gdx(n);
    ASSERT_EQ(cuda::unaryGrad(kind, n, gx.get(), gy.get(), gdy.get(), gdx.get(), 2.5f, stream),
              cudaSuccess);
    expectClose(ref, gdx.host(), "unary_grad " + std::to_string(static_cast<int>(kind)));
  }
}

TEST_F(CudaKernels, BinaryBroadcastsAndPermutesAsCpu) {
  // [3, 5, 7]: a is stored as [7, 3, 5] (permuted), b is [3, 7] broadcast along dim 1. Small
  // integers, so the comparisons meet equal values too.
  const cpu::Shape shape = shapeOf({3, 5, 7});
  const cpu::Strides sa = stridesOf({5, 1, 15}), sb = stridesOf({7, 0, 1});
  Floats a = randomFloats(105, -3, 3, 1), b = randomFloats(21, -3, 3, 2);
  for (float &v : a)
    v = std::round(v);
  for (float &v : b)
    v = std::round(v);
  const cpu::BinaryKind kinds[] = {cpu::BinaryKind::Add, cpu::BinaryKind::Sub, cpu::BinaryKind::Mul,
                                   cpu::BinaryKind::Div, cpu::BinaryKind::Lt,  cpu::BinaryKind::Le,
                                   cpu::BinaryKind::Gt,  cpu::BinaryKind::Ge,  cpu::BinaryKind::Eq,
                                   cpu::BinaryKind::Ne};
  DeviceArray<float> da(a), db(b), out(105);
  for (cpu::BinaryKind kind : kinds) {
    Floats ref(105);
    cpu::binary(kind, shape, a.data(), sa, b.data(), sb, ref.data());
    ASSERT_EQ(cuda::binary(kind, shape, da.get(), sa, db.get(), sb, out.get(), stream),
              cudaSuccess);
    expectClose(ref, out.host(), "binary " + std::to_string(static_cast<int>(kind)));
  }
}

TEST_F(CudaKernels, SelectAndStridedCopyMatchCpu) {
  const cpu::Shape shape = shapeOf({4, 9, 5});
  const cpu::Strides dense = cpu::denseStrides(shape), transposed = stridesOf({1, 20, 4});
  const cpu::Strides rowBroadcast = stridesOf({0, 5, 1});
  Floats c = randomFloats(180, -1, 1, 4), a = randomFloats(180, -1, 1, 5),
         b = randomFloats(45, -1, 1, 6);
  for (float &v : c)
    v = v > 0 ? 1.0f : 0.0f;
  Floats ref(180), refCopy(180);
  cpu::select(shape, c.data(), dense, a.data(), transposed, b.data(), rowBroadcast, ref.data());
  cpu::stridedCopy(shape, a.data(), transposed, refCopy.data());
  DeviceArray<float> dc(c), da(a), dbb(b), out(180), copied(180);
  ASSERT_EQ(cuda::select(shape, dc.get(), dense, da.get(), transposed, dbb.get(), rowBroadcast,
                         out.get(), stream),
            cudaSuccess);
  ASSERT_EQ(cuda::stridedCopy(shape, da.get(), transposed, copied.get(), stream), cudaSuccess);
  expectClose(ref, out.host(), "select", 0, 0);
  expectClose(refCopy, copied.host(), "copy", 0, 0);
}

TEST_F(CudaKernels, SoftmaxAndGradMatchCpu) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 1021}, {5, 3}, {3, 4099}}) {
    const Floats x = randomFloats(rows * cols, -5, 5, 8), dy = randomFloats(rows * cols, -1, 1, 9);
    Floats y(rows * cols), dx(rows * cols);
    cpu::softmax(rows, cols, x.data(), y.data());
    cpu::softmaxGrad(rows, cols, y.data(), dy.data(), dx.data());
    DeviceArray<float> gx(x), gy(rows * cols), gdy(dy), gdx(rows * cols), gyRef(y);
    ASSERT_EQ(cuda::softmax(rows, cols, gx.get(), gy.get(), stream), cudaSuccess);
    ASSERT_EQ(cuda::softmaxGrad(rows, cols, gyRef.get(), gdy.get(), gdx.get(), stream),
              cudaSuccess);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    expectClose(y, gy.host(), "softmax " + shape, 1e-6f);
    expectClose(dx, gdx.host(), "softmax_grad " + shape, 1e-6f);
  }
}

TEST_F(CudaKernels, LayerNormForwardAndBackwardMatchCpu) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{67, 771}, {3, 5}, {301, 33}}) {
    const int64_t n = rows * cols;
    const Floats x = randomFloats(n, -2, 3, 10), g = randomFloats(cols, 0.5f, 1.5f, 11),
                 b = randomFloats(cols, -0.5f, 0.5f, 12), dy = randomFloats(n, -1, 1, 13);
    const float eps = 1e-5f;
    Floats y(n), dx(n), dg(cols), db(cols);
    cpu::layerNorm(rows, cols, x.data(), g.data(), b.data(), eps, y.data());
    cpu::layerNormGrad(rows, cols, x.data(), g.data(), dy.data(), eps, dx.data(), dg.data(),
                       db.data());
    DeviceArray<float> gx(x), gg(g), gb(b), gdy(dy), gy(n), gdx(n), gdg(cols), gdb(cols),
        work(cuda::normGradWorkspace(rows));
    ASSERT_EQ(cuda::layerNorm(rows, cols, gx.get(), gg.get(), gb.get(), eps, gy.get(), stream),
              cudaSuccess);
    ASSERT_EQ(cuda::layerNormGrad(rows, cols, gx.get(), gg.get(), gdy.get(), eps, gdx.get(),
                                  gdg.get(), gdb.get(), work.get(), stream),
              cudaSuccess);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    expectClose(y, gy.host(), "layernorm " + shape);
    expectClose(dx, gdx.host(), "layernorm_grad dx " + shape, 1e-4f);
    expectClose(dg, gdg.host(), "layernorm_grad dg " + shape, 1e-4f);
    expectClose(db, gdb.host(), "layernorm_grad db " + shape, 1e-4f);
  }
}

TEST_F(CudaKernels, RmsNormForwardAndBackwardMatchCpu) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{67, 771}, {3, 5}, {301, 33}}) {
    const int64_t n = rows * cols;
    const Floats x = randomFloats(n, -2, 3, 14), g = randomFloats(cols, 0.5f, 1.5f, 15),
                 dy = randomFloats(n, -1, 1, 16);
    const float eps = 1e-6f;
    Floats y(n), dx(n), dg(cols);
    cpu::rmsNorm(rows, cols, x.data(), g.data(), eps, y.data());
    cpu::rmsNormGrad(rows, cols, x.data(), g.data(), dy.data(), eps, dx.data(), dg.data());
    DeviceArray<float> gx(x), gg(g), gdy(dy), gy(n), gdx(n), gdg(cols),
        work(cuda::normGradWorkspace(rows));
    ASSERT_EQ(cuda::rmsNorm(rows, cols, gx.get(), gg.get(), eps, gy.get(), stream), cudaSuccess);
    ASSERT_EQ(cuda::rmsNormGrad(rows, cols, gx.get(), gg.get(), gdy.get(), eps, gdx.get(),
                                gdg.get(), work.get(), stream),
              cudaSuccess);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    expectClose(y, gy.host(), "rmsnorm " + shape);
    expectClose(dx, gdx.host(), "rmsnorm_grad dx " + shape, 1e-4f);
    expectClose(dg, gdg.host(), "rmsnorm_grad dg " + shape, 1e-4f);
  }
}

TEST_F(CudaKernels, CrossEntropyLossAndGradMatchCpu) {
  const int64_t rows = 53, cols = 1031;
  const Floats logits = randomFloats(rows * cols, -4, 4, 17);
  std::mt19937 rng(18);
  std::vector<int32_t> targets(rows);
  for (int32_t &t : targets)
    t = static_cast<int32_t>(rng() % cols);
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
      ASSERT_TRUE(cpu::crossEntropy(rows, cols, logits.data(), targets.data(), scale, &ref, error));
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
    const std::string how = scaled ? "scaled" : "mean";
    expectClose({ref}, loss.host(), "cross_entropy " + how);
    expectClose(refGrad, dlogits.host(), "cross_entropy_grad " + how, 1e-7f);
    EXPECT_EQ(bad.host()[0].flag, 0);
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

TEST_F(CudaKernels, AdamWMatchesCpuOverSteps) {
  const int64_t n = 3001;
  Floats param = randomFloats(n, -1, 1, 20), m(n, 0.0f), v(n, 0.0f);
  DeviceArray<float> gp(param), gm(m), gv(v), lr(Floats{3e-3f}), scale(Floats{0.5f});
  for (int64_t step = 1; step <= 3; ++step) {
    const Floats grad = randomFloats(n, -1, 1, 20 + static_cast<uint32_t>(step));
    cpu::AdamWArgs a;
    a.lr = 3e-3f;
    a.beta1 = 0.9f;
    a.beta2 = 0.95f;
    a.eps = 1e-8f;
    a.weightDecay = 0.1f;
    a.step = step;
    a.gradScale = 0.5f;
    cpu::adamw(a, n, param.data(), grad.data(), m.data(), v.data());
    cuda::AdamWArgs b;
    b.beta1 = a.beta1;
    b.beta2 = a.beta2;
    b.eps = a.eps;
    b.weightDecay = a.weightDecay;
    b.step = step;
    b.lr = lr.get();
    b.gradScale = scale.get();
    DeviceArray<float> gg(grad);
    ASSERT_EQ(cuda::adamw(b, n, gp.get(), gg.get(), gm.get(), gv.get(), stream), cudaSuccess);
    const std::string at = " after step " + std::to_string(step);
    expectClose(param, gp.host(), "adamw param" + at, 1e-6f);
    expectClose(m, gm.host(), "adamw m" + at, 1e-7f);
    expectClose(v, gv.host(), "adamw v" + at, 1e-8f);
  }
}

TEST_F(CudaKernels, LaunchersRefuseBadShapes) {
  DeviceArray<float> x(4), y(4);
  EXPECT_EQ(cuda::softmax(0, 4, x.get(), y.get(), stream), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::layerNormGrad(2, 2, x.get(), x.get(), x.get(), 1e-5f, y.get(), y.get(), y.get(),
                                nullptr, stream),
            cudaErrorInvalidValue);
  cpu::Shape tooDeep;
  tooDeep.rank = cpu::kMaxRank + 1;
  EXPECT_EQ(cuda::stridedCopy(tooDeep, x.get(), cpu::Strides{}, y.get(), stream),
            cudaErrorInvalidValue);
}

} // namespace
