//===- Gemm.cu - Batched matrix products through cuBLASLt -----------------===//
//
// The plan's products are row-major (cpu::gemm, through cblas_sgemm with CblasRowMajor);
// cuBLASLt is column-major. A row-major m x n matrix with row stride ld is the column-major
// n x m matrix with leading dimension ld, its transpose, so C = op(A) op(B) is computed as
// C^T = op(B)^T op(A)^T: cuBLASLt's first operand is B (transposed where the plan's trans_b
// is set), its second A, and its result n x m.
//
// Batches whose strides are all non-zero run as one strided-batched product. A stride of 0
// (one matrix shared by every batch) is folded where it can be, as cpu::gemm does: a batch of
// row-major A blocks against one shared B, writing contiguous C blocks, is one product with
// batch * m rows. Other zero strides run the batches one product at a time, in order (with
// strideC == 0 every batch writes the same C, and the last one's product is what remains).
//
// f32 products use CUBLAS_COMPUTE_32F (no TF32) unless the context allows TF32; products of
// 16-bit A and B (gemmMixed) run on the tensor cores and accumulate in f32, into an f32 C or
// one of A's type (the f32 sum rounded once, as the CPU's widened product rounds it). The algorithm
// is cuBLASLt's first heuristic choice for the shape, the operands' alignment and the stream's
// workspace, asked once per product shape where the context keeps BlasPlans, which keep the
// shape's descriptors too: a product of a shape met before makes no cuBLASLt object. Where cuBLASLt has none (operands misaligned for every algorithm, say), an
// f32 product runs the plain tiled kernel gemmSimple instead of failing.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

#include <climits>
#include <cstdint>

namespace tessel::cuda {

namespace {

/// The largest power of two (up to 256) that divides the byte address of every batch's
/// matrix: cuBLASLt assumes 256-byte aligned operands unless told otherwise.
uint32_t alignmentOf(const void *base, int64_t strideElements, size_t elementBytes) {
  uint64_t bits = reinterpret_cast<uintptr_t>(base) | 256u;
  if (strideElements != 0)
    bits |=
        static_cast<uint64_t>(strideElements < 0 ? -strideElements : strideElements) * elementBytes;
  return static_cast<uint32_t>(bits & (~bits + 1)); // the lowest set bit
}

bool fitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

/// Tile of the plain product kernel: kSimpleTile x kSimpleTile outputs per block, one per
/// thread, over k in steps of kSimpleTile through shared memory.
constexpr int kSimpleTile = 16;

/// C[b] = alpha op(A[b]) op(B[b]) + beta C[b], row-major as cpu::gemm; grid (column tiles, row
/// tiles, batches), each output summing its k terms in order.
__global__ void simpleGemmKernel(GemmArgs g, int64_t batchBase, const float *a, const float *b,
                                 float *c) {
  __shared__ float as[kSimpleTile][kSimpleTile + 1], bs[kSimpleTile][kSimpleTile + 1];
  const int64_t batch = batchBase + blockIdx.z;
  const int64_t row = int64_t(blockIdx.y) * kSimpleTile + threadIdx.y;
  const int64_t col = int64_t(blockIdx.x) * kSimpleTile + threadIdx.x;
  const float *ab = a + batch * g.strideA, *bb = b + batch * g.strideB;
  float sum = 0.0f;
  for (int64_t k0 = 0; k0 < g.k; k0 += kSimpleTile) {
    // as[y][x] = op(A)[row, k0 + x]; bs[y][x] = op(B)[k0 + y, col].
    const int64_t ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] =
        row < g.m && ka < g.k ? (g.transA ? ab[ka * g.lda + row] : ab[row * g.lda + ka]) : 0.0f;
    bs[threadIdx.y][threadIdx.x] =
        col < g.n && kb < g.k ? (g.transB ? bb[col * g.ldb + kb] : bb[kb * g.ldb + col]) : 0.0f;
    __syncthreads();
    for (int t = 0; t < kSimpleTile; ++t)
      sum += as[threadIdx.y][t] * bs[t][threadIdx.x];
    __syncthreads();
  }
  if (row < g.m && col < g.n) {
    float &out = c[batch * g.strideC + row * g.ldc + col];
    out = g.alpha * sum + (g.beta == 0.0f ? 0.0f : g.beta * out);
  }
}

/// The descriptors of one product shape: destroyed with this object unless `keep` hands them
/// to a BlasPlans::Choice.
struct Descriptors {
  explicit Descriptors(const BlasLt &lt) : lt(lt) {}
  const BlasLt &lt;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  /// Points `choice` at these descriptors, which stay this object's.
  void lend(BlasPlans::Choice &choice) const {
    choice.op = op;
    choice.a = a;
    choice.b = b;
    choice.c = c;
  }
  /// Hands them to `choice` for good.
  void keep(BlasPlans::Choice &choice) {
    lend(choice);
    op = nullptr;
    a = b = c = nullptr;
  }
  ~Descriptors() {
    if (preference)
      lt.cublasLtMatmulPreferenceDestroy(preference);
    destroyDescriptors(lt, op, a, b, c);
  }
  static void destroyDescriptors(const BlasLt &lt, cublasLtMatmulDesc_t op,
                                 cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                 cublasLtMatrixLayout_t c) {
    if (c)
      lt.cublasLtMatrixLayoutDestroy(c);
    if (b)
      lt.cublasLtMatrixLayoutDestroy(b);
    if (a)
      lt.cublasLtMatrixLayoutDestroy(a);
    if (op)
      lt.cublasLtMatmulDescDestroy(op);
  }
};

#define TESSEL_BLAS_TRY(expr)                                                                      \
  do {                                                                                             \
    cublasStatus_t status_ = (expr);                                                               \
    if (status_ != CUBLAS_STATUS_SUCCESS)                                                          \
      return status_;                                                                              \
  } while (0)

/// A column-major layout of rows x cols with leading dimension ld, `batch` matrices `stride`
/// elements apart.
cublasStatus_t makeLayout(const BlasLt &lt, cublasLtMatrixLayout_t &layout, cudaDataType_t type,
                          int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  TESSEL_BLAS_TRY(lt.cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(rows),
                                                static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    TESSEL_BLAS_TRY(lt.cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                        &count, sizeof count));
    TESSEL_BLAS_TRY(lt.cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  }
  return CUBLAS_STATUS_SUCCESS;
}

/// The element types of one product: A and B share one, C (and D, the same buffer) has its own.
struct Types {
  cudaDataType_t ab = CUDA_R_32F, c = CUDA_R_32F;
  size_t abBytes = 4, cBytes = 4;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};

cudaDataType_t cudaTypeOf(DType t) {
  return t == DType::BF16 ? CUDA_R_16BF : t == DType::F16 ? CUDA_R_16F : CUDA_R_32F;
}

/// Makes the descriptors of one product shape into `d` and asks cuBLASLt for its first
/// algorithm given the operands' alignments and the workspace.
cublasStatus_t describe(const BlasContext &blas, const GemmArgs &g, int64_t m, int64_t batch,
                        int64_t strideA, int64_t strideB, int64_t strideC, const Types &types,
                        const uint32_t align[3], Descriptors &d, BlasPlans::Choice &choice) {
  const BlasLt &lt = *blas.lt;
  TESSEL_BLAS_TRY(lt.cublasLtMatmulDescCreate(&d.op, types.compute, CUDA_R_32F));
  // cuBLASLt's first operand is the plan's B, its second the plan's A (see the top).
  const cublasOperation_t opFirst = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opSecond = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  TESSEL_BLAS_TRY(lt.cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &opFirst,
                                                    sizeof opFirst));
  TESSEL_BLAS_TRY(lt.cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &opSecond,
                                                    sizeof opSecond));
  // Stored (column-major) shapes: B is n x k (k x n when transposed), A is k x m (m x k).
  TESSEL_BLAS_TRY(makeLayout(lt, d.a, types.ab, g.transB ? g.k : g.n, g.transB ? g.n : g.k, g.ldb,
                             batch, strideB));
  TESSEL_BLAS_TRY(
      makeLayout(lt, d.b, types.ab, g.transA ? m : g.k, g.transA ? g.k : m, g.lda, batch, strideA));
  TESSEL_BLAS_TRY(makeLayout(lt, d.c, types.c, g.n, m, g.ldc, batch, strideC));

  TESSEL_BLAS_TRY(lt.cublasLtMatmulPreferenceCreate(&d.preference));
  const uint64_t workspace = blas.workspaceBytes;
  TESSEL_BLAS_TRY(lt.cublasLtMatmulPreferenceSetAttribute(
      d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
  const cublasLtMatmulPreferenceAttributes_t alignments[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    TESSEL_BLAS_TRY(lt.cublasLtMatmulPreferenceSetAttribute(d.preference, alignments[i],
                                                            &align[std::min(i, 2)],
                                                            sizeof align[0]));
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int count = 0;
  TESSEL_BLAS_TRY(lt.cublasLtMatmulAlgoGetHeuristic(blas.handle, d.op, d.a, d.b, d.c, d.c,
                                                    d.preference, 1, &heuristic, &count));
  choice.found = count > 0;
  choice.algo = heuristic.algo;
  return CUBLAS_STATUS_SUCCESS;
}

/// One cuBLASLt call: `batch` products of m rows (the plan's view) with the given strides.
cublasStatus_t matmul(const BlasContext &blas, const GemmArgs &g, int64_t m, int64_t batch,
                      int64_t strideA, int64_t strideB, int64_t strideC, const Types &types,
                      const void *a, const void *b, void *c, cudaStream_t stream) {
  if (!fitsInt(m) || !fitsInt(g.n) || !fitsInt(g.k) || !fitsInt(batch))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!blas.lt || !blas.handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  const BlasLt &lt = *blas.lt;
  // cuBLASLt's operands in its order (the plan's B, A, then C), each's alignment.
  const uint32_t align[3] = {alignmentOf(b, strideB, types.abBytes),
                             alignmentOf(a, strideA, types.abBytes),
                             alignmentOf(c, strideC, types.cBytes)};
  const BlasPlans::Key key = {m,
                              g.n,
                              g.k,
                              batch,
                              strideA,
                              strideB,
                              strideC,
                              g.lda,
                              g.ldb,
                              g.ldc,
                              g.transA,
                              g.transB,
                              types.ab,
                              types.c,
                              types.compute,
                              align[0],
                              align[1],
                              align[2],
                              static_cast<int64_t>(blas.workspaceBytes)};
  Descriptors made(lt);
  BlasPlans::Choice fresh;
  const BlasPlans::Choice *choice = nullptr;
  if (blas.plans)
    if (auto it = blas.plans->choices.find(key); it != blas.plans->choices.end())
      choice = &it->second;
  if (!choice) {
    TESSEL_BLAS_TRY(describe(blas, g, m, batch, strideA, strideB, strideC, types, align, made,
                             fresh));
    if (blas.plans) {
      // The plans keep the descriptors for the shape's later calls.
      made.keep(fresh);
      blas.plans->lt = &lt;
      choice = &(blas.plans->choices[key] = fresh);
    } else {
      made.lend(fresh);
      choice = &fresh;
    }
  }
  if (!choice->found) {
    // No cuBLASLt algorithm for this shape and alignment: f32 products take the plain kernel.
    if (types.ab != CUDA_R_32F || types.c != CUDA_R_32F)
      return CUBLAS_STATUS_NOT_SUPPORTED;
    GemmArgs one = g;
    one.m = m;
    one.batch = batch;
    one.strideA = strideA;
    one.strideB = strideB;
    one.strideC = strideC;
    return gemmSimple(one, static_cast<const float *>(a), static_cast<const float *>(b),
                      static_cast<float *>(c), stream) == cudaSuccess
               ? CUBLAS_STATUS_SUCCESS
               : CUBLAS_STATUS_EXECUTION_FAILED;
  }
  const float alpha = g.alpha, beta = g.beta;
  return lt.cublasLtMatmul(blas.handle, choice->op, &alpha, b, choice->a, a, choice->b, &beta, c,
                           choice->c, c, choice->c, &choice->algo, blas.workspace,
                           blas.workspaceBytes, stream);
}

/// cpu::gemm's batching (see the top) over matmul.
cublasStatus_t batched(const BlasContext &blas, const GemmArgs &g, const Types &types,
                       const void *a, const void *b, void *c, cudaStream_t stream) {
  if (g.batch <= 0 || g.m <= 0 || g.n <= 0 || g.k <= 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (g.batch == 1)
    return matmul(blas, g, g.m, 1, 0, 0, 0, types, a, b, c, stream);
  if (g.strideB == 0 && !g.transA && g.strideA == g.m * g.lda && g.strideC == g.m * g.ldc)
    return matmul(blas, g, g.batch * g.m, 1, 0, 0, 0, types, a, b, c, stream);
  if (g.strideA != 0 && g.strideB != 0 && g.strideC != 0)
    return matmul(blas, g, g.m, g.batch, g.strideA, g.strideB, g.strideC, types, a, b, c, stream);
  const char *ab = static_cast<const char *>(a), *bb = static_cast<const char *>(b);
  char *cb = static_cast<char *>(c);
  const int64_t abBytes = static_cast<int64_t>(types.abBytes),
                cBytes = static_cast<int64_t>(types.cBytes);
  for (int64_t i = 0; i < g.batch; ++i)
    TESSEL_BLAS_TRY(matmul(blas, g, g.m, 1, 0, 0, 0, types, ab + i * g.strideA * abBytes,
                           bb + i * g.strideB * abBytes, cb + i * g.strideC * cBytes, stream));
  return CUBLAS_STATUS_SUCCESS;
}

} // namespace

BlasPlans &BlasPlans::operator=(BlasPlans &&other) noexcept {
  if (this != &other) {
    release();
    choices = std::move(other.choices);
    lt = other.lt;
    other.choices.clear();
    other.lt = nullptr;
  }
  return *this;
}

BlasPlans::~BlasPlans() { release(); }

void BlasPlans::release() {
  if (lt)
    for (auto &[key, choice] : choices)
      Descriptors::destroyDescriptors(*lt, choice.op, choice.a, choice.b, choice.c);
  choices.clear();
  lt = nullptr;
}

cudaError_t gemmSimple(const GemmArgs &g, const float *a, const float *b, float *c,
                       cudaStream_t stream) {
  if (g.batch <= 0 || g.m <= 0 || g.n <= 0 || g.k <= 0)
    return cudaErrorInvalidValue;
  const dim3 threads(kSimpleTile, kSimpleTile);
  const int64_t colTiles = (g.n + kSimpleTile - 1) / kSimpleTile;
  const int64_t rowTiles = (g.m + kSimpleTile - 1) / kSimpleTile;
  if (rowTiles > 65535)
    return cudaErrorInvalidValue;
  // Batches in order, at most 65535 a launch; with strideC == 0 the last one's product stays.
  const int64_t perLaunch = g.strideC == 0 ? 1 : 65535;
  for (int64_t first = 0; first < g.batch; first += perLaunch) {
    const int64_t count = std::min(perLaunch, g.batch - first);
    const dim3 grid(static_cast<unsigned>(colTiles), static_cast<unsigned>(rowTiles),
                    static_cast<unsigned>(count));
    simpleGemmKernel<<<grid, threads, 0, stream>>>(g, first, a, b, c);
    if (cudaError_t e = detail::launched(); e != cudaSuccess)
      return e;
  }
  return cudaSuccess;
}

cublasStatus_t gemm(const BlasContext &blas, const GemmArgs &args, const float *a, const float *b,
                    float *c, cudaStream_t stream) {
  Types types;
  if (blas.allowTf32)
    types.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  return batched(blas, args, types, a, b, c, stream);
}

cublasStatus_t gemmMixed(const BlasContext &blas, const GemmArgs &args, DType ab, const void *a,
                         const void *b, DType c, void *out, cudaStream_t stream) {
  if (ab == DType::F32 || (c != DType::F32 && c != ab))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  Types types;
  types.ab = cudaTypeOf(ab);
  types.abBytes = elementBytes(ab);
  types.c = cudaTypeOf(c);
  types.cBytes = elementBytes(c);
  return batched(blas, args, types, a, b, out, stream);
}

cudaError_t toBf16(int64_t n, const float *x, __nv_bfloat16 *y, cudaStream_t stream) {
  return narrow(DType::BF16, n, x, reinterpret_cast<uint16_t *>(y), stream);
}

} // namespace tessel::cuda
