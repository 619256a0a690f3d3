//===- AttentionDispatch.cpp - The attention kernels the CPU runs best ----===//
//
// Attention.cpp and PagedAttention.cpp are compiled for the baseline, AVX2 and AVX-512 (Isa.h);
// the copies give the same bits. The widest one the CPU supports runs, unless TESSEL_CPU_ISA
// names another (baseline, avx2, avx512: one the CPU lacks falls back to the widest it has,
// with a note on stderr). The choice is made once, at the first call.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tessel::cpu {

#define TESSEL_ATTENTION_VARIANT(Isa)                                                              \
  namespace attention_isa::Isa {                                                                   \
  void attention(const AttentionArgs &args, const float *q, const float *k, const float *v,        \
                 float *out);                                                                      \
  void attentionGrad(const AttentionArgs &args, const float *q, const float *k, const float *v,    \
                     const float *dout, float *dq, float *dk, float *dv);                          \
  void pagedAttention(const PagedAttentionArgs &args, const float *q, const float *k,              \
                      const float *v, const int32_t *positions, const int32_t *blockTable,         \
                      float *out, float *kCache, float *vCache);                                   \
  }
TESSEL_ATTENTION_VARIANT(baseline)
#ifdef TESSEL_CPU_HAVE_AVX2
TESSEL_ATTENTION_VARIANT(avx2)
#endif
#ifdef TESSEL_CPU_HAVE_AVX512
TESSEL_ATTENTION_VARIANT(avx512)
#endif
#undef TESSEL_ATTENTION_VARIANT

namespace {

struct Variant {
  const char *name;
  decltype(&attention_isa::baseline::attention) forward;
  decltype(&attention_isa::baseline::attentionGrad) backward;
  decltype(&attention_isa::baseline::pagedAttention) paged;
  bool supported;
};

const Variant &chosen() {
  static const Variant variant = [] {
    // Widest first.
    const Variant all[] = {
#ifdef TESSEL_CPU_HAVE_AVX512
        {"avx512", attention_isa::avx512::attention, attention_isa::avx512::attentionGrad,
         attention_isa::avx512::pagedAttention,
         __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("fma") != 0},
#endif
#ifdef TESSEL_CPU_HAVE_AVX2
        {"avx2", attention_isa::avx2::attention, attention_isa::avx2::attentionGrad,
         attention_isa::avx2::pagedAttention,
         __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0},
#endif
        {"baseline", attention_isa::baseline::attention, attention_isa::baseline::attentionGrad,
         attention_isa::baseline::pagedAttention, true},
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

const char *attentionVariant() { return chosen().name; }

void attention(const AttentionArgs &args, const float *q, const float *k, const float *v,
               float *out) {
  chosen().forward(args, q, k, v, out);
}

void attentionGrad(const AttentionArgs &args, const float *q, const float *k, const float *v,
                   const float *dout, float *dq, float *dk, float *dv) {
  chosen().backward(args, q, k, v, dout, dq, dk, dv);
}

void pagedAttention(const PagedAttentionArgs &args, const float *q, const float *k, const float *v,
                    const int32_t *positions, const int32_t *blockTable, float *out, float *kCache,
                    float *vCache) {
  chosen().paged(args, q, k, v, positions, blockTable, out, kCache, vCache);
}

} // namespace tessel::cpu
