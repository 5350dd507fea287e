/* The scalar instruction set layer: the operations of src/isa/avx512.h on
 * one lane, in plain C. It is the readable reference and what every target
 * without a vector layer builds (x86-64 baseline, rv64gc, Cortex-M7).
 * spa_vf_fma is a multiply then an add, two roundings (contraction is off:
 * GCC's ISO C modes do not contract, and clang is told so below), so the
 * results do not depend on whether the core has an FMA instruction.
 * Reached only through half.h. */
#ifndef SPA_ISA_SCALAR_H
#define SPA_ISA_SCALAR_H

#ifndef SPA_HALF_H
#error "include half.h, which brings the ISA layer after the scalar conversions"
#endif
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define SPA_ISA_NAME "scalar"
#define SPA_VL 1
/* 1: the msda kernels stage sixteen samples per instruction (msda_stage16.h) */
#define SPA_ISA_MSDA_STAGE16 0
#define SPA_VF_STREAM_ALIGN 0
#if defined(__GNUC__)
#define SPA_ISA_INLINE static inline __attribute__((always_inline))
#else
#define SPA_ISA_INLINE static inline
#endif

typedef float spa_vf;
typedef float spa_vb;

SPA_ISA_INLINE spa_vf spa_vf_zero(void) { return 0.0f; }
SPA_ISA_INLINE spa_vf spa_vf_set1(float x) { return x; }
SPA_ISA_INLINE spa_vf spa_vf_load(const float *p) { return *p; }
SPA_ISA_INLINE void spa_vf_store(float *p, spa_vf v) { *p = v; }
SPA_ISA_INLINE spa_vf spa_vf_load_n(const float *p, int64_t n) { return n > 0 ? *p : 0.0f; }
SPA_ISA_INLINE void spa_vf_store_n(float *p, spa_vf v, int64_t n)
{
    if (n > 0)
        *p = v;
}
SPA_ISA_INLINE spa_vf spa_vf_add(spa_vf a, spa_vf b) { return a + b; }
SPA_ISA_INLINE spa_vf spa_vf_sub(spa_vf a, spa_vf b) { return a - b; }
SPA_ISA_INLINE spa_vf spa_vf_mul(spa_vf a, spa_vf b) { return a * b; }
SPA_ISA_INLINE spa_vf spa_vf_max(spa_vf a, spa_vf b) { return a > b ? a : b; }
SPA_ISA_INLINE spa_vf spa_vf_min(spa_vf a, spa_vf b) { return a < b ? a : b; }
SPA_ISA_INLINE spa_vf spa_vf_fma(spa_vf c, spa_vf a, spa_vf b) { return c + a * b; }
SPA_ISA_INLINE spa_vb spa_vb_load(const float *p) { return *p; }
SPA_ISA_INLINE spa_vf spa_vf_fmab(spa_vf c, spa_vf a, spa_vb x) { return c + x * a; }
SPA_ISA_INLINE float spa_vf_hsum(spa_vf v) { return v; }

/* Adding and removing 1.5 * 2^23 rounds |x| < 2^22 to an integer, ties even. */
SPA_ISA_INLINE spa_vf spa_vf_round(spa_vf x) { return (x + 12582912.0f) - 12582912.0f; }
SPA_ISA_INLINE spa_vf spa_vf_scale2(spa_vf p, spa_vf n)
{
    return p * spa_bits_f32((uint32_t)((int32_t)n + 127) << 23);
}
SPA_ISA_INLINE spa_vf spa_vf_keep_ge(spa_vf v, spa_vf x, spa_vf lo) { return x >= lo ? v : 0.0f; }

SPA_ISA_INLINE spa_vf spa_vf_load_f16(const uint16_t *p) { return spa_f16_to_f32(*p); }
SPA_ISA_INLINE spa_vf spa_vf_load_bf16(const uint16_t *p) { return spa_bf16_to_f32(*p); }
SPA_ISA_INLINE void spa_vf_store_f16(uint16_t *p, spa_vf v) { *p = spa_f32_to_f16(v); }
SPA_ISA_INLINE void spa_vf_store_bf16(uint16_t *p, spa_vf v) { *p = spa_f32_to_bf16(v); }
SPA_ISA_INLINE spa_vf spa_vf_round_f16(spa_vf v) { return spa_f16_to_f32(spa_f32_to_f16(v)); }
SPA_ISA_INLINE spa_vf spa_vf_round_bf16(spa_vf v) { return spa_bf16_to_f32(spa_f32_to_bf16(v)); }

SPA_ISA_INLINE void spa_vf_stream(float *p, spa_vf v) { *p = v; }
SPA_ISA_INLINE void spa_vf_stream_f16(uint16_t *p, spa_vf v) { spa_vf_store_f16(p, v); }
SPA_ISA_INLINE void spa_vf_stream_bf16(uint16_t *p, spa_vf v) { spa_vf_store_bf16(p, v); }
SPA_ISA_INLINE void spa_isa_stream_fence(void) {}

SPA_ISA_INLINE float spa_isa_f16_to_f32(uint16_t h) { return spa_f16_to_f32(h); }

#endif
