//===- CudaKernelCalls.cpp - Plan kernels on the CUDA backend -------------===//
//
// One handler per plan kernel the CUDA backend runs so far: the same operand checks as
// device/cpu/CpuKernelCalls.cpp (docs/plan-format.md lists the parameters), then a launch of
// kernels/cuda on the stream of the launch in progress (CudaLaunch.h). A kernel without a
// handler here is refused when a plan is loaded (CudaDevice::kernel).
//
//===----------------------------------------------------------------------===//

#include "runtime/device/KernelOperands.h"
#include "runtime/device/cuda/CudaLaunch.h"

#include "kernels/cuda/CudaKernels.h"

#include <cmath>
#include <optional>

namespace tessel::rt {

namespace {

// The catalogue's operation words and the kernels' kinds list the same operations in the same
// order, so one converts to the other by value.
static_assert(static_cast<int>(catalogue::UnaryOp::GeluErf) ==
              static_cast<int>(cuda::UnaryKind::GeluErf));
static_assert(static_cast<int>(catalogue::UnaryOp::Pow) == static_cast<int>(cuda::UnaryKind::Pow));
static_assert(static_cast<int>(catalogue::UnaryOp::Gelu) ==
              static_cast<int>(cuda::UnaryKind::Gelu));
static_assert(static_cast<int>(catalogue::BinaryOp::Ne) == static_cast<int>(cuda::BinaryKind::Ne));
static_assert(static_cast<int>(catalogue::BinaryOp::Div) ==
              static_cast<int>(cuda::BinaryKind::Div));
static_assert(static_cast<int>(catalogue::BinaryOp::Lt) == static_cast<int>(cuda::BinaryKind::Lt));

cuda::UnaryKind unaryKind(catalogue::UnaryOp op) { return static_cast<cuda::UnaryKind>(op); }
cuda::BinaryKind binaryKind(catalogue::BinaryOp op) { return static_cast<cuda::BinaryKind>(op); }

/// The end of a handler: the launch's error as the call's.
bool launched(KernelCall &c, cudaError_t e) {
  if (e == cudaSuccess)
    return true;
  return c.fail(std::string("CUDA launch failed: ") + cudaGetErrorString(e));
}

cudaStream_t stream() { return currentCudaLaunch()->stream(); }

bool run(KernelCall &c, const catalogue::Fill &p) {
  if (!c.needOut(0, p.n) || c.validating)
    return c.error.empty();
  return launched(c, cuda::fill(p.n, static_cast<float>(p.value), c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::Positions &p) {
  if (!c.needOut(0, p.n) || c.validating)
    return c.error.empty();
  return launched(c, cuda::positions(p.n, c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::Binary &p) {
  const auto &sizes = p.shape;
  cuda::Shape shape;
  cuda::Strides a, b;
  if (!toShape(c, sizes, shape) || !toStrides(c, p.a_strides, sizes.size(), a) ||
      !toStrides(c, p.b_strides, sizes.size(), b))
    return false;
  if (!c.needIn(0, reach(sizes, p.a_strides)) || !c.needIn(1, reach(sizes, p.b_strides)) ||
      !c.needOut(0, product(sizes)) || c.validating)
    return c.error.empty();
  return launched(
      c, cuda::binary(binaryKind(p.op), shape, c.fin(0), a, c.fin(1), b, c.fout(0), stream()));
}

/// pow's exponent, which it requires; 0 for the functions that have none.
bool exponentOf(KernelCall &c, catalogue::UnaryOp op, const std::optional<double> &exponent,
                float &out) {
  out = static_cast<float>(exponent.value_or(0.0));
  if (op == catalogue::UnaryOp::Pow && !exponent)
    return c.fail("pow needs an exponent");
  return true;
}

bool run(KernelCall &c, const catalogue::Unary &p) {
  float exponent = 0.0f;
  if (!exponentOf(c, p.op, p.exponent, exponent) || !c.needIn(0, p.n) || !c.needOut(0, p.n) ||
      c.validating)
    return c.error.empty();
  return launched(c, cuda::unary(unaryKind(p.op), p.n, c.fin(0), c.fout(0), exponent, stream()));
}

bool run(KernelCall &c, const catalogue::UnaryGrad &p) {
  float exponent = 0.0f;
  if (!exponentOf(c, p.op, p.exponent, exponent) || !c.needIn(0, p.n) || !c.needIn(1, p.n) ||
      !c.needIn(2, p.n) || !c.needOut(0, p.n) || c.validating)
    return c.error.empty();
  return launched(c, cuda::unaryGrad(unaryKind(p.op), p.n, c.fin(0), c.fin(1), c.fin(2), c.fout(0),
                                     exponent, stream()));
}

bool run(KernelCall &c, const catalogue::Where &p) {
  const auto &sizes = p.shape;
  cuda::Shape shape;
  cuda::Strides sc, sa, sb;
  if (!toShape(c, sizes, shape) || !toStrides(c, p.cond_strides, sizes.size(), sc) ||
      !toStrides(c, p.a_strides, sizes.size(), sa) || !toStrides(c, p.b_strides, sizes.size(), sb))
    return false;
  if (!c.needIn(0, reach(sizes, p.cond_strides)) || !c.needIn(1, reach(sizes, p.a_strides)) ||
      !c.needIn(2, reach(sizes, p.b_strides)) || !c.needOut(0, product(sizes)) || c.validating)
    return c.error.empty();
  return launched(
      c, cuda::select(shape, c.fin(0), sc, c.fin(1), sa, c.fin(2), sb, c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::Copy &p) {
  const auto &sizes = p.shape;
  cuda::Shape shape;
  cuda::Strides x;
  if (!toShape(c, sizes, shape) || !toStrides(c, p.x_strides, sizes.size(), x) ||
      !c.needIn(0, reach(sizes, p.x_strides)) || !c.needOut(0, product(sizes)) || c.validating)
    return c.error.empty();
  return launched(c, cuda::stridedCopy(shape, c.fin(0), x, c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::Accumulate &p) {
  if (!c.needIn(0, p.n) || !c.needOut(0, p.n) || c.validating)
    return c.error.empty();
  if (p.n == 0)
    return true;
  cuda::Shape shape;
  shape.rank = 1;
  shape.size[0] = p.n;
  const cuda::Strides dense = cpu::denseStrides(shape);
  return launched(c, cuda::binary(cuda::BinaryKind::Add, shape, c.fout(0), dense, c.fin(0), dense,
                                  c.fout(0), stream()));
}

/// Reads the `rows` and `cols` of a row-wise kernel, which must be positive.
template <class P> bool rowsCols(KernelCall &c, const P &p, int64_t &rows, int64_t &cols) {
  rows = p.rows;
  cols = p.cols;
  if (rows <= 0 || cols <= 0)
    return c.fail("has non-positive rows or cols");
  return true;
}

/// `floats` f32 elements of the launch's scratch memory; null with the call's error.
float *scratchFloats(KernelCall &c, int64_t floats) {
  std::string why;
  void *p = currentCudaLaunch()->scratch(static_cast<uint64_t>(floats) * sizeof(float), why);
  if (!p)
    c.fail("scratch memory: " + why);
  return static_cast<float *>(p);
}

bool run(KernelCall &c, const catalogue::Softmax &p) {
  int64_t rows, cols;
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needOut(0, rows * cols) ||
      c.validating)
    return c.error.empty();
  return launched(c, cuda::softmax(rows, cols, c.fin(0), c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::SoftmaxGrad &p) {
  int64_t rows, cols;
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needIn(1, rows * cols) ||
      !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  return launched(c, cuda::softmaxGrad(rows, cols, c.fin(0), c.fin(1), c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::LayerNorm &p) {
  int64_t rows, cols;
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needIn(1, cols) ||
      !c.needIn(2, cols) || !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  return launched(c, cuda::layerNorm(rows, cols, c.fin(0), c.fin(1), c.fin(2),
                                     static_cast<float>(p.eps), c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::LayerNormGrad &p) {
  int64_t rows, cols;
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needIn(1, cols) ||
      !c.needIn(2, rows * cols) || !c.needOut(0, rows * cols) || !c.needOut(1, cols) ||
      !c.needOut(2, cols) || c.validating)
    return c.error.empty();
  float *workspace = scratchFloats(c, cuda::normGradWorkspace(rows));
  if (!workspace)
    return false;
  return launched(c, cuda::layerNormGrad(rows, cols, c.fin(0), c.fin(1), c.fin(2),
                                         static_cast<float>(p.eps), c.fout(0), c.fout(1), c.fout(2),
                                         workspace, stream()));
}

bool run(KernelCall &c, const catalogue::RmsNorm &p) {
  int64_t rows, cols;
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needIn(1, cols) ||
      !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  return launched(c, cuda::rmsNorm(rows, cols, c.fin(0), c.fin(1), static_cast<float>(p.eps),
                                   c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::RmsNormGrad &p) {
  int64_t rows, cols;
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needIn(1, cols) ||
      !c.needIn(2, rows * cols) || !c.needOut(0, rows * cols) || !c.needOut(1, cols) ||
      c.validating)
    return c.error.empty();
  float *workspace = scratchFloats(c, cuda::normGradWorkspace(rows));
  if (!workspace)
    return false;
  return launched(c, cuda::rmsNormGrad(rows, cols, c.fin(0), c.fin(1), c.fin(2),
                                       static_cast<float>(p.eps), c.fout(0), c.fout(1), workspace,
                                       stream()));
}

/// The optional `scale` of a loss: absent, the loss is the mean over rows.
template <class P> bool lossScale(KernelCall &c, const P &p, bool &scaled, double &scale) {
  scaled = p.scale.has_value();
  scale = p.scale.value_or(0.0);
  if (scaled && !std::isfinite(scale))
    return c.fail("has a non-finite scale");
  return true;
}

bool run(KernelCall &c, const catalogue::CrossEntropy &p) {
  int64_t rows, cols;
  bool scaled;
  double scale;
  if (!rowsCols(c, p, rows, cols) || !lossScale(c, p, scaled, scale) || !c.needIn(0, rows * cols) ||
      !c.needIn(1, rows) || !c.needOut(0, 1) || c.validating)
    return c.error.empty();
  float *workspace = scratchFloats(c, cuda::crossEntropyWorkspace(rows));
  if (!workspace)
    return false;
  return launched(c, cuda::crossEntropy(rows, cols, c.fin(0), c.ids(1), scaled, scale, c.fout(0),
                                        workspace, currentCudaLaunch()->idError(), stream()));
}

bool run(KernelCall &c, const catalogue::CrossEntropyGrad &p) {
  int64_t rows, cols;
  bool scaled;
  double scale;
  if (!rowsCols(c, p, rows, cols) || !lossScale(c, p, scaled, scale) || !c.needIn(0, rows * cols) ||
      !c.needIn(1, rows) || !c.needIn(2, 1) || !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  return launched(c, cuda::crossEntropyGrad(rows, cols, c.fin(0), c.ids(1), c.fin(2), scaled, scale,
                                            c.fout(0), currentCudaLaunch()->idError(), stream()));
}

bool run(KernelCall &c, const catalogue::AdamW &p) {
  const int64_t n = p.n;
  if (!c.needIn(0, n) || !c.needIn(1, 1) || !c.needIn(2, 1) || !c.needOut(0, n) ||
      !c.needOut(1, n) || !c.needOut(2, n) || c.validating)
    return c.error.empty();
  cuda::AdamWArgs a;
  a.beta1 = static_cast<float>(p.beta1);
  a.beta2 = static_cast<float>(p.beta2);
  a.eps = static_cast<float>(p.eps);
  a.weightDecay = static_cast<float>(p.weight_decay);
  a.step = c.ctx->step;
  a.lr = c.fin(1);
  a.gradScale = c.fin(2);
  return launched(c, cuda::adamw(a, n, c.fout(0), c.fin(0), c.fout(1), c.fout(2), stream()));
}

/// Calls the handler of the kernel whose parameters are P.
template <class P> bool dispatch(KernelCall &c, const catalogue::KernelParams &params) {
  return run(c, *std::get_if<P>(&params));
}

} // namespace

KernelFn cudaKernel(catalogue::KernelId id) {
  switch (id) {
#define TESSEL_CUDA_KERNEL(Id)                                                                     \
  case catalogue::KernelId::Id:                                                                    \
    return &dispatch<catalogue::Id>;
    TESSEL_CUDA_KERNEL(Fill)
    TESSEL_CUDA_KERNEL(Positions)
    TESSEL_CUDA_KERNEL(Binary)
    TESSEL_CUDA_KERNEL(Unary)
    TESSEL_CUDA_KERNEL(UnaryGrad)
    TESSEL_CUDA_KERNEL(Where)
    TESSEL_CUDA_KERNEL(Copy)
    TESSEL_CUDA_KERNEL(Accumulate)
    TESSEL_CUDA_KERNEL(Softmax)
    TESSEL_CUDA_KERNEL(SoftmaxGrad)
    TESSEL_CUDA_KERNEL(LayerNorm)
    TESSEL_CUDA_KERNEL(LayerNormGrad)
    TESSEL_CUDA_KERNEL(RmsNorm)
    TESSEL_CUDA_KERNEL(RmsNormGrad)
    TESSEL_CUDA_KERNEL(CrossEntropy)
    TESSEL_CUDA_KERNEL(CrossEntropyGrad)
    TESSEL_CUDA_KERNEL(AdamW)
#undef TESSEL_CUDA_KERNEL
  default:
    return nullptr;
  }
}

} // namespace tessel::rt
