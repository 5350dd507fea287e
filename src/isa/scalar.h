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
#include <math.h>

#define SPA_ISA_NAME "scalar"
#define SPA_VL 1
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
/* Lanes SPA_VL apart in memory: lane i at p[i * s]. */
SPA_ISA_INLINE void spa_vf_scatter(float *p, int64_t s, spa_vf v)
{
    (void)s;
    *p = v;
}
SPA_ISA_INLINE spa_vf spa_vf_gather(const float *p, int64_t s)
{
    (void)s;
    return *p;
}
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
SPA_ISA_INLINE spa_vb spa_vb_set(float x) { return x; }
SPA_ISA_INLINE spa_vf spa_vf_fmab(spa_vf c, spa_vf a, spa_vb x) { return c + x * a; }
/* Four consecutive broadcast operands: their address here; spa_vf_fmaq(c,
 * a, q, i) is spa_vf_fmab(c, a, q[i]) (i a constant 0..3). */
typedef const float *spa_vq;
SPA_ISA_INLINE spa_vq spa_vq_load(const float *p) { return p; }
SPA_ISA_INLINE spa_vf spa_vf_fmaq(spa_vf c, spa_vf a, spa_vq q, int i) { return c + q[i] * a; }
SPA_ISA_INLINE float spa_vf_hsum(spa_vf v) { return v; }

/* Adding and removing 1.5 * 2^23 rounds |x| < 2^22 to an integer, ties even. */
SPA_ISA_INLINE spa_vf spa_vf_round(spa_vf x) { return (x + 12582912.0f) - 12582912.0f; }
/* n NaN (an exp of NaN): p is NaN too, and the conversion of NaN to an
 * integer is undefined in C, so that lane takes 2^0. */
SPA_ISA_INLINE spa_vf spa_vf_scale2(spa_vf p, spa_vf n)
{
    return p * spa_bits_f32((uint32_t)((n == n ? (int32_t)n : 0) + 127) << 23);
}
SPA_ISA_INLINE spa_vf spa_vf_zero_below(spa_vf v, spa_vf x, spa_vf lo) { return x < lo ? 0.0f : v; }

SPA_ISA_INLINE spa_vf spa_vf_load_f16(const uint16_t *p) { return spa_f16_to_f32(*p); }
SPA_ISA_INLINE spa_vf spa_vf_load_bf16(const uint16_t *p) { return spa_bf16_to_f32(*p); }
/* 2 * SPA_VL contiguous elements widened into two vectors */
SPA_ISA_INLINE void spa_vf_load2_f16(const uint16_t *p, spa_vf *lo, spa_vf *hi)
{
    *lo = spa_vf_load_f16(p);
    *hi = spa_vf_load_f16(p + SPA_VL);
}
SPA_ISA_INLINE void spa_vf_load2_bf16(const uint16_t *p, spa_vf *lo, spa_vf *hi)
{
    *lo = spa_vf_load_bf16(p);
    *hi = spa_vf_load_bf16(p + SPA_VL);
}
SPA_ISA_INLINE void spa_vf_store_f16(uint16_t *p, spa_vf v) { *p = spa_f32_to_f16(v); }
SPA_ISA_INLINE void spa_vf_store_bf16(uint16_t *p, spa_vf v) { *p = spa_f32_to_bf16(v); }
#include "compose_pairs.h"
#include "compose_untracked.h"
SPA_ISA_INLINE spa_vf spa_vf_round_f16(spa_vf v) { return spa_f16_to_f32(spa_f32_to_f16(v)); }
SPA_ISA_INLINE spa_vf spa_vf_round_bf16(spa_vf v) { return spa_bf16_to_f32(spa_f32_to_bf16(v)); }

SPA_ISA_INLINE void spa_vf_stream(float *p, spa_vf v) { *p = v; }
SPA_ISA_INLINE void spa_vf_stream_f16(uint16_t *p, spa_vf v) { spa_vf_store_f16(p, v); }
SPA_ISA_INLINE void spa_vf_stream_bf16(uint16_t *p, spa_vf v) { spa_vf_store_bf16(p, v); }
SPA_ISA_INLINE void spa_isa_stream_fence(void) {}

SPA_ISA_INLINE float spa_isa_f16_to_f32(uint16_t h) { return spa_f16_to_f32(h); }

/* Sample staging and reductions (deformable attention; see avx512.h). */
SPA_ISA_INLINE spa_vf spa_vf_mulb(spa_vf a, spa_vb x) { return x * a; }
SPA_ISA_INLINE spa_vf spa_vf_floor(spa_vf x) { return floorf(x); }
SPA_ISA_INLINE void spa_vf_zip(spa_vf a, spa_vf b, spa_vf *lo, spa_vf *hi)
{
    *lo = a;
    *hi = b;
}
SPA_ISA_INLINE void spa_vf_unzip(spa_vf a, spa_vf b, spa_vf *even, spa_vf *odd)
{
    *even = a;
    *odd = b;
}
/* 2 * SPA_VL contiguous f32 deinterleaved: spa_vf_unzip of the two vectors */
SPA_ISA_INLINE void spa_vf_load_unzip(const float *p, spa_vf *even, spa_vf *odd)
{
    spa_vf_unzip(spa_vf_load(p), spa_vf_load(p + SPA_VL), even, odd);
}
typedef uint32_t spa_vm; /* 1: the lane's test holds */
typedef uint32_t spa_vi;
SPA_ISA_INLINE spa_vm spa_vf_gt(spa_vf a, spa_vf b) { return a > b; }
SPA_ISA_INLINE spa_vm spa_vf_lt(spa_vf a, spa_vf b) { return a < b; }
SPA_ISA_INLINE spa_vm spa_vm_and(spa_vm a, spa_vm b) { return a & b; }
SPA_ISA_INLINE uint32_t spa_vm_bits(spa_vm m) { return m; }
SPA_ISA_INLINE spa_vi spa_vi_set1(int32_t x) { return (uint32_t)x; }
SPA_ISA_INLINE spa_vi spa_vi_load(const int32_t *p) { return (uint32_t)*p; }
/* Out of the int32 range (NaN included) the result is 0x80000000, as the
 * vector ISAs give, never undefined behaviour. */
SPA_ISA_INLINE spa_vi spa_vi_from_vf(spa_vf x)
{
    return x >= -2147483648.0f && x < 2147483648.0f ? (uint32_t)(int32_t)x : 0x80000000u;
}
SPA_ISA_INLINE spa_vi spa_vi_add(spa_vi a, spa_vi b) { return a + b; }
SPA_ISA_INLINE spa_vi spa_vi_mul(spa_vi a, spa_vi b) { return a * b; }
SPA_ISA_INLINE spa_vm spa_vi_ltu(spa_vi a, spa_vi b) { return a < b; }
SPA_ISA_INLINE void spa_vi_rows(uintptr_t *dst, spa_vi key, spa_vm in, const void *base, uint32_t row_bytes,
                                const void *other)
{
    *dst = in ? (uintptr_t)base + (uintptr_t)key * row_bytes : (uintptr_t)other;
}
SPA_ISA_INLINE void spa_isa_fold16(const float *v, float *out)
{
    for (int k = 0; k < 16; k++) {
        float s[16];
        for (int j = 0; j < 16; j++)
            s[j] = v[16 * k + j];
        for (int half = 8; half > 0; half /= 2)
            for (int j = 0; j < half; j++)
                s[j] += s[j + half];
        out[k] = s[0];
    }
}

/* Index of the lowest set bit of x != 0 (de Bruijn: no compiler helper). */
SPA_ISA_INLINE int spa_isa_ctz32(uint32_t x)
{
    static const unsigned char pos[32] = {0,  1,  28, 2,  29, 14, 24, 3,  30, 22, 20, 15, 25, 17, 4,  8,
                                          31, 27, 13, 23, 21, 19, 16, 7,  26, 12, 18, 6,  11, 5,  10, 9};
    return pos[((x & (0u - x)) * 0x077CB531u) >> 27];
}

/* float64 lanes (spa_vd) for the float64 kernels. */
#include "f64_scalar.h"

#endif
