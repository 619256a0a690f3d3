//===- IsaDispatch.cpp - The widest copy of the kernels the CPU runs -----===//
//
// Attention.cpp, PagedAttention.cpp and SkinnyGemm.cpp are compiled for the baseline, AVX2 and
// AVX-512 (Isa.h); the copies give the same bits. The widest one the CPU supports runs, unless TESSEL_CPU_ISA
// names another (baseline, avx2, avx512: one the CPU lacks falls back to the widest it has,
// with a note on stderr). The choice is made once, at the first call.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tessel::cpu {

#define TESSEL_ISA_COPY(Isa)                                                              \
  namespace isa_copy::Isa {                                                                   \
  void attention(const AttentionArgs &args, const float *q, const float *k, const float *v,        \
                 float *out, float *lse);                                                          \
  void attentionGrad(const AttentionArgs &args, const float *q, const float *k, const float *v,    \
                     const float *dout, float *dq, float *dk, float *dv, const float *out,         \
                     const float *lse);                                                            \
  void pagedAttention(const PagedAttentionArgs &args, const float *q, const float *k,              \
                      const float *v, const int32_t *positions, const int32_t *blockTable,         \
                      float *out, float *kCache, float *vCache);                                   \
  void skinnyGemm(const GemmArgs &g, int64_t m, const float *a, const float *b, float *c);         \
  void skinnyGemmTransB(const GemmArgs &g, int64_t m, const float *a, const float *b, float *c);   \
  }
TESSEL_ISA_COPY(baseline)
#ifdef TESSEL_CPU_HAVE_AVX2
TESSEL_ISA_COPY(avx2)
#endif
#ifdef TESSEL_CPU_HAVE_AVX512
TESSEL_ISA_COPY(avx512)
#endif
#undef TESSEL_ISA_COPY

namespace {

struct Variant {
  const char *name;
  decltype(&isa_copy::baseline::attention) forward;
  decltype(&isa_copy::baseline::attentionGrad) backward;
  decltype(&isa_copy::baseline::pagedAttention) paged;
  decltype(&isa_copy::baseline::skinnyGemm) skinny;
  decltype(&isa_copy::baseline::skinnyGemmTransB) skinnyTransB;
  bool supported;
};

const Variant &chosen() {
  static const Variant variant = [] {
    // Widest first.
    const Variant all[] = {
#ifdef TESSEL_CPU_HAVE_AVX512
        {"avx512", isa_copy::avx512::attention, isa_copy::avx512::attentionGrad,
         isa_copy::avx512::pagedAttention, isa_copy::avx512::skinnyGemm,
         isa_copy::avx512::skinnyGemmTransB,
         __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("fma") != 0},
#endif
#ifdef TESSEL_CPU_HAVE_AVX2
        {"avx2", isa_copy::avx2::attention, isa_copy::avx2::attentionGrad,
         isa_copy::avx2::pagedAttention, isa_copy::avx2::skinnyGemm,
         isa_copy::avx2::skinnyGemmTransB,
         __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0},
#endif
        {"baseline", isa_copy::baseline::attention, isa_copy::baseline::attentionGrad,
         isa_copy::baseline::pagedAttention, isa_copy::baseline::skinnyGemm,
         isa_copy::baseline::skinnyGemmTransB, true},
    };
    const char *wanted = std::getenv("TESSEL_CPU_ISA");
    if (wanted && *wanted) {
      for (const Variant &v : all)
        if (std::strcmp(v.name, wanted) == 0) {
          if (v.supported)
            return v;
          std::fprintf(stderr,
                       "tessel: note: TESSEL_CPU_ISA=%s: this CPU or build lacks it; "
                       "using the widest it has\n",
                       wanted);
          break;
        }
    }
    for (const Variant &v : all)
      if (v.supported)
        return v;
    return all[sizeof all / sizeof all[0] - 1];
  }();
  return variant;
}

} // namespace

const char *isaVariant() { return chosen().name; }

void attention(const AttentionArgs &args, const float *q, const float *k, const float *v,
               float *out, float *lse) {
  chosen().forward(args, q, k, v, out, lse);
}

void attentionGrad(const AttentionArgs &args, const float *q, const float *k, const float *v,
                   const float *dout, float *dq, float *dk, float *dv, const float *out,
                   const float *lse) {
  chosen().backward(args, q, k, v, dout, dq, dk, dv, out, lse);
}

void pagedAttention(const PagedAttentionArgs &args, const float *q, const float *k, const float *v,
                    const int32_t *positions, const int32_t *blockTable, float *out, float *kCache,
                    float *vCache) {
  chosen().paged(args, q, k, v, positions, blockTable, out, kCache, vCache);
}

void skinnyGemm(const GemmArgs &g, int64_t m, const float *a, const float *b, float *c) {
  chosen().skinny(g, m, a, b, c);
}

void skinnyGemmTransB(const GemmArgs &g, int64_t m, const float *a, const float *b, float *c) {
  chosen().skinnyTransB(g, m, a, b, c);
}

} // namespace tessel::cpu
