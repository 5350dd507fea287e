/* The neon instruction set layer (AArch64 Advanced SIMD, ARMv8.0-A: every
 * aarch64 core): the operations of src/isa/avx512.h on four lanes. f16 is
 * widened and narrowed with fcvtl / fcvtn (FPCR's default round to nearest
 * even), bf16 by shifting. Reached only through half.h. */
#ifndef SPA_ISA_NEON_H
#define SPA_ISA_NEON_H

#ifndef SPA_HALF_H
#error "include half.h, which brings the ISA layer after the scalar conversions"
#endif
#if !defined(__aarch64__) || !defined(__ARM_NEON)
#error "ISA neon needs a compiler targeting AArch64 with Advanced SIMD"
#endif
#include <arm_neon.h>

#ifndef SPA_ISA_NAME
#define SPA_ISA_NAME "neon"
#endif
#define SPA_VL 4
#define SPA_VF_STREAM_ALIGN 0
#define SPA_ISA_INLINE static inline __attribute__((always_inline))

typedef float32x4_t spa_vf;
typedef float spa_vb; /* fmla by element: the scalar stays in lane 0 of its register */

SPA_ISA_INLINE spa_vf spa_vf_zero(void) { return vdupq_n_f32(0.0f); }
SPA_ISA_INLINE spa_vf spa_vf_set1(float x) { return vdupq_n_f32(x); }
SPA_ISA_INLINE spa_vf spa_vf_load(const float *p) { return vld1q_f32(p); }
SPA_ISA_INLINE void spa_vf_store(float *p, spa_vf v) { vst1q_f32(p, v); }
SPA_ISA_INLINE void spa_vf_scatter(float *p, int64_t s, spa_vf v)
{
    vst1q_lane_f32(p, v, 0);
    vst1q_lane_f32(p + s, v, 1);
    vst1q_lane_f32(p + 2 * s, v, 2);
    vst1q_lane_f32(p + 3 * s, v, 3);
}
SPA_ISA_INLINE spa_vf spa_vf_gather(const float *p, int64_t s)
{
    spa_vf v = vld1q_dup_f32(p);
    v = vld1q_lane_f32(p + s, v, 1);
    v = vld1q_lane_f32(p + 2 * s, v, 2);
    return vld1q_lane_f32(p + 3 * s, v, 3);
}
SPA_ISA_INLINE spa_vf spa_vf_load_n(const float *p, int64_t n)
{
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t i = 0; i < n; i++)
        t[i] = p[i];
    return vld1q_f32(t);
}
SPA_ISA_INLINE void spa_vf_store_n(float *p, spa_vf v, int64_t n)
{
    float t[4];
    vst1q_f32(t, v);
    for (int64_t i = 0; i < n; i++)
        p[i] = t[i];
}
SPA_ISA_INLINE spa_vf spa_vf_add(spa_vf a, spa_vf b) { return vaddq_f32(a, b); }
SPA_ISA_INLINE spa_vf spa_vf_sub(spa_vf a, spa_vf b) { return vsubq_f32(a, b); }
SPA_ISA_INLINE spa_vf spa_vf_mul(spa_vf a, spa_vf b) { return vmulq_f32(a, b); }
/* The x86 rule (a > b ? a : b), so that NaN lanes behave as on every ISA. */
SPA_ISA_INLINE spa_vf spa_vf_max(spa_vf a, spa_vf b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
SPA_ISA_INLINE spa_vf spa_vf_min(spa_vf a, spa_vf b) { return vbslq_f32(vcltq_f32(a, b), a, b); }
SPA_ISA_INLINE spa_vf spa_vf_fma(spa_vf c, spa_vf a, spa_vf b) { return vfmaq_f32(c, a, b); }
SPA_ISA_INLINE spa_vb spa_vb_load(const float *p) { return *p; }
SPA_ISA_INLINE spa_vb spa_vb_set(float x) { return x; }
SPA_ISA_INLINE spa_vf spa_vf_fmab(spa_vf c, spa_vf a, spa_vb x) { return vfmaq_n_f32(c, a, x); }
/* Four consecutive broadcast operands in one register, used by lane (fmla
 * by element): a macro, as the lane must be a constant expression. */
typedef float32x4_t spa_vq;
SPA_ISA_INLINE spa_vq spa_vq_load(const float *p) { return vld1q_f32(p); }
#define spa_vf_fmaq(c, a, q, i) vfmaq_laneq_f32((c), (a), (q), (i))
SPA_ISA_INLINE float spa_vf_hsum(spa_vf v)
{
    const float32x2_t s = vadd_f32(vget_low_f32(v), vget_high_f32(v));
    return vget_lane_f32(s, 0) + vget_lane_f32(s, 1);
}

SPA_ISA_INLINE spa_vf spa_vf_round(spa_vf x) { return vrndnq_f32(x); }
SPA_ISA_INLINE spa_vf spa_vf_scale2(spa_vf p, spa_vf n)
{
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(e));
}
SPA_ISA_INLINE spa_vf spa_vf_zero_below(spa_vf v, spa_vf x, spa_vf lo)
{
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(v), vcltq_f32(x, lo)));
}

SPA_ISA_INLINE spa_vf spa_vf_load_f16(const uint16_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}
SPA_ISA_INLINE spa_vf spa_vf_load_bf16(const uint16_t *p)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}
/* 2 * SPA_VL contiguous elements widened into two vectors: one 8 x 16-bit
 * load, then the low and high halves (fcvtl / fcvtl2, shll / shll2). */
SPA_ISA_INLINE void spa_vf_load2_f16(const uint16_t *p, spa_vf *lo, spa_vf *hi)
{
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p));
    *lo = vcvt_f32_f16(vget_low_f16(h));
    *hi = vcvt_high_f32_f16(h);
}
SPA_ISA_INLINE void spa_vf_load2_bf16(const uint16_t *p, spa_vf *lo, spa_vf *hi)
{
    const uint16x8_t h = vld1q_u16(p);
    *lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
    *hi = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
}
SPA_ISA_INLINE void spa_vf_store_f16(uint16_t *p, spa_vf v)
{
    vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(v)));
}
/* 2 * SPA_VL contiguous f32 as two vectors, and back: two adjacent
 * accesses that GCC and clang pair into one ldp / stp (ld1 / st1 of two
 * registers would tie the pair to consecutive registers: moves). The
 * narrowing forms store 2 * SPA_VL 16-bit elements with one 128-bit store
 * (fcvtn + fcvtn2, shrn + shrn2). */
SPA_ISA_INLINE void spa_vf_load2(const float *p, spa_vf *lo, spa_vf *hi)
{
    *lo = vld1q_f32(p);
    *hi = vld1q_f32(p + SPA_VL);
}
SPA_ISA_INLINE void spa_vf_store2(float *p, spa_vf lo, spa_vf hi)
{
    vst1q_f32(p, lo);
    vst1q_f32(p + SPA_VL, hi);
}
SPA_ISA_INLINE void spa_vf_store2_f16(uint16_t *p, spa_vf lo, spa_vf hi)
{
    vst1q_u16(p, vreinterpretq_u16_f16(vcvt_high_f16_f32(vcvt_f16_f32(lo), hi)));
}
SPA_ISA_INLINE spa_vf spa_vf_round_f16(spa_vf v) { return vcvt_f32_f16(vcvt_f16_f32(v)); }

/* bf16 narrowing. ARMv8.0-A has no instruction for it: RNE by integer adds.
 * The neon_bf16 layer (src/isa/neon_bf16.h, FEAT_BF16) has bfcvtn instead. */
#if defined(SPA_NEON_BFCVT)
#include "neon_bfcvt.h"
#else
/* bf16 bits in the high half of each 32-bit lane (low half garbage): RNE,
 * NaN kept NaN with the quiet bit set. */
SPA_ISA_INLINE uint32x4_t spa_neon_bf16_hi(spa_vf v)
{
    const uint32x4_t u = vreinterpretq_u32_f32(v);
    const uint32x4_t odd = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    const uint32x4_t rounded = vaddq_u32(vaddq_u32(u, vdupq_n_u32(0x7FFF)), odd);
    return vbslq_u32(vceqq_f32(v, v), rounded, vorrq_u32(u, vdupq_n_u32(0x400000)));
}
SPA_ISA_INLINE void spa_vf_store_bf16(uint16_t *p, spa_vf v)
{
    vst1_u16(p, vshrn_n_u32(spa_neon_bf16_hi(v), 16));
}
SPA_ISA_INLINE void spa_vf_store2_bf16(uint16_t *p, spa_vf lo, spa_vf hi)
{
    vst1q_u16(p, vshrn_high_n_u32(vshrn_n_u32(spa_neon_bf16_hi(lo), 16), spa_neon_bf16_hi(hi), 16));
}
/* The _num narrowings: exact for lanes that are not NaN (RNE as
 * (u + 0x7fff + lsb) >> 16, lsb from one bit test), for runs that track NaN
 * (spa_vf_nan_seen: FMAX, NaN when either operand is; spa_vf_any_nan: FMAXV)
 * and narrow again with the exact form when one was met: about half the
 * instructions of spa_neon_bf16_hi, which fixes NaN lanes per vector. */
SPA_ISA_INLINE uint32x4_t spa_neon_bf16_num_hi(spa_vf v)
{
    const uint32x4_t u = vreinterpretq_u32_f32(v);
    const uint32x4_t minus_lsb = vtstq_u32(u, vdupq_n_u32(0x10000));
    return vaddq_u32(vsubq_u32(u, minus_lsb), vdupq_n_u32(0x7FFF));
}
SPA_ISA_INLINE void spa_vf_store_bf16_num(uint16_t *p, spa_vf v)
{
    vst1_u16(p, vshrn_n_u32(spa_neon_bf16_num_hi(v), 16));
}
SPA_ISA_INLINE void spa_vf_store2_bf16_num(uint16_t *p, spa_vf lo, spa_vf hi)
{
    vst1q_u16(p, vshrn_high_n_u32(vshrn_n_u32(spa_neon_bf16_num_hi(lo), 16), spa_neon_bf16_num_hi(hi), 16));
}
/* fcvtn is exact at the same cost: the f16 _num forms are the exact ones */
SPA_ISA_INLINE void spa_vf_store_f16_num(uint16_t *p, spa_vf v) { spa_vf_store_f16(p, v); }
SPA_ISA_INLINE void spa_vf_store2_f16_num(uint16_t *p, spa_vf lo, spa_vf hi) { spa_vf_store2_f16(p, lo, hi); }
SPA_ISA_INLINE spa_vf spa_vf_nan_seen(spa_vf seen, spa_vf v) { return vmaxq_f32(seen, v); }
SPA_ISA_INLINE int spa_vf_any_nan(spa_vf seen)
{
    const float m = vmaxvq_f32(seen);
    return m != m;
}
SPA_ISA_INLINE spa_vf spa_vf_round_bf16(spa_vf v)
{
    return vreinterpretq_f32_u32(vandq_u32(spa_neon_bf16_hi(v), vdupq_n_u32(0xFFFF0000u)));
}
#endif

SPA_ISA_INLINE void spa_vf_stream(float *p, spa_vf v) { vst1q_f32(p, v); }
SPA_ISA_INLINE void spa_vf_stream_f16(uint16_t *p, spa_vf v) { spa_vf_store_f16(p, v); }
SPA_ISA_INLINE void spa_vf_stream_bf16(uint16_t *p, spa_vf v) { spa_vf_store_bf16(p, v); }
SPA_ISA_INLINE void spa_isa_stream_fence(void) {}

SPA_ISA_INLINE float spa_isa_f16_to_f32(uint16_t h)
{
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* Sample staging and reductions (deformable attention; see avx512.h). */
SPA_ISA_INLINE spa_vf spa_vf_mulb(spa_vf a, spa_vb x) { return vmulq_n_f32(a, x); }
SPA_ISA_INLINE spa_vf spa_vf_floor(spa_vf x) { return vrndmq_f32(x); }
SPA_ISA_INLINE void spa_vf_zip(spa_vf a, spa_vf b, spa_vf *lo, spa_vf *hi)
{
    *lo = vzip1q_f32(a, b);
    *hi = vzip2q_f32(a, b);
}
SPA_ISA_INLINE void spa_vf_unzip(spa_vf a, spa_vf b, spa_vf *even, spa_vf *odd)
{
    *even = vuzp1q_f32(a, b);
    *odd = vuzp2q_f32(a, b);
}
/* 2 * SPA_VL contiguous f32 deinterleaved as they load (vld2q: no
 * round trip of two vectors through memory, or permutes) */
SPA_ISA_INLINE void spa_vf_load_unzip(const float *p, spa_vf *even, spa_vf *odd)
{
    const float32x4x2_t v = vld2q_f32(p);
    *even = v.val[0];
    *odd = v.val[1];
}
typedef uint32x4_t spa_vm; /* all ones where the test holds */
typedef uint32x4_t spa_vi;
SPA_ISA_INLINE spa_vm spa_vf_gt(spa_vf a, spa_vf b) { return vcgtq_f32(a, b); }
SPA_ISA_INLINE spa_vm spa_vf_lt(spa_vf a, spa_vf b) { return vcltq_f32(a, b); }
SPA_ISA_INLINE spa_vm spa_vm_and(spa_vm a, spa_vm b) { return vandq_u32(a, b); }
SPA_ISA_INLINE uint32_t spa_vm_bits(spa_vm m)
{
    const uint32x4_t bit = {1u, 2u, 4u, 8u};
    return vaddvq_u32(vandq_u32(m, bit));
}
SPA_ISA_INLINE spa_vi spa_vi_set1(int32_t x) { return vdupq_n_u32((uint32_t)x); }
SPA_ISA_INLINE spa_vi spa_vi_load(const int32_t *p) { return vreinterpretq_u32_s32(vld1q_s32(p)); }
SPA_ISA_INLINE spa_vi spa_vi_from_vf(spa_vf x) { return vreinterpretq_u32_s32(vcvtq_s32_f32(x)); }
SPA_ISA_INLINE spa_vi spa_vi_add(spa_vi a, spa_vi b) { return vaddq_u32(a, b); }
SPA_ISA_INLINE spa_vi spa_vi_mul(spa_vi a, spa_vi b) { return vmulq_u32(a, b); }
SPA_ISA_INLINE spa_vm spa_vi_ltu(spa_vi a, spa_vi b) { return vcltq_u32(a, b); }
SPA_ISA_INLINE void spa_vi_rows(uintptr_t *dst, spa_vi key, spa_vm in, const void *base, uint32_t row_bytes,
                                const void *other)
{
    const uint64x2_t vb = vdupq_n_u64((uint64_t)(uintptr_t)base), vo = vdupq_n_u64((uint64_t)(uintptr_t)other);
    const uint64x2_t lo = vmlal_u32(vb, vget_low_u32(key), vdup_n_u32(row_bytes));
    const uint64x2_t hi = vmlal_high_u32(vb, key, vdupq_n_u32(row_bytes));
    const uint64x2_t mlo = vreinterpretq_u64_s64(vmovl_s32(vreinterpret_s32_u32(vget_low_u32(in))));
    const uint64x2_t mhi = vreinterpretq_u64_s64(vmovl_high_s32(vreinterpretq_s32_u32(in)));
    vst1q_u64((uint64_t *)dst, vbslq_u64(mlo, lo, vo));
    vst1q_u64((uint64_t *)dst + 2, vbslq_u64(mhi, hi, vo));
}
SPA_ISA_INLINE void spa_isa_fold16(const float *v, float *out)
{
    for (int k = 0; k < 16; k++) {
        const float *r = v + 16 * k;
        const spa_vf s = vaddq_f32(vaddq_f32(vld1q_f32(r), vld1q_f32(r + 8)), vaddq_f32(vld1q_f32(r + 4), vld1q_f32(r + 12)));
        out[k] = spa_vf_hsum(s);
    }
}

SPA_ISA_INLINE int spa_isa_ctz32(uint32_t x) { return __builtin_ctz(x); }

/* float64 lanes (spa_vd) for the float64 kernels. */
#include "f64_neon.h"

#endif
