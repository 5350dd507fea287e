/* The mve instruction set layer (Armv8.1-M Helium with floating point,
 * MVE-F: Cortex-M55 and later, GCC's arm_mve.h): the operations of
 * src/isa/avx512.h on four f32 lanes in eight Q registers. Tails are
 * predicated (vctp32q with zeroing loads and predicated stores), the
 * broadcast operand of spa_vf_fmab stays in a core register (vfma.f32 q, q,
 * r: no Q register spent on it), lane masks are the VPR predicate, f16 is
 * widened and narrowed with vcvtb, bf16 by shifting.
 *
 * MVE floating-point arithmetic runs with the architecture's standard FPSCR
 * value: f32 subnormal inputs and results of vector add / multiply / FMA are
 * flushed to zero, and NaN results are the default NaN. So this path agrees
 * with the others except where values fall under FLT_MIN (2^-126), which
 * the tolerances of the tests cover. The conversions keep what half.h does:
 * vcvtb is exact on widening and RNE with f16 subnormals on narrowing; the
 * NaN lanes of a narrowing, which vcvtb would make the default NaN, are
 * rebuilt as half.h builds them (sign and payload kept, quiet bit set), so
 * every narrowing equals half.h's bit for bit. A widened f16 NaN is a NaN
 * (payload not kept, as on the other vector layers' hardware converts).
 * Reached only through half.h. */
#ifndef SPA_ISA_MVE_H
#define SPA_ISA_MVE_H

#ifndef SPA_HALF_H
#error "include half.h, which brings the ISA layer after the scalar conversions"
#endif
#if !defined(__ARM_FEATURE_MVE) || (__ARM_FEATURE_MVE & 2) == 0
#error "ISA mve needs a compiler targeting MVE with floating point (-mcpu=cortex-m55 -mfloat-abi=hard)"
#endif
#include <arm_mve.h>

#define SPA_ISA_NAME "mve"
#define SPA_VL 4
#define SPA_VF_STREAM_ALIGN 0
/* No software prefetch: a Cortex-M runs from TCM, or through a small cache
 * with its own streaming; each hint would be an instruction issued. */
#define SPA_ISA_PREFETCH 0
#define SPA_ISA_INLINE static inline __attribute__((always_inline))

typedef float32x4_t spa_vf;
typedef float spa_vb; /* vfma.f32 q, q, r: the scalar comes from a core register */

SPA_ISA_INLINE spa_vf spa_vf_zero(void) { return vdupq_n_f32(0.0f); }
SPA_ISA_INLINE spa_vf spa_vf_set1(float x) { return vdupq_n_f32(x); }
SPA_ISA_INLINE spa_vf spa_vf_load(const float *p) { return vld1q_f32(p); }
SPA_ISA_INLINE void spa_vf_store(float *p, spa_vf v) { vst1q_f32(p, v); }
/* Lane i at p[i * s]: the scatter / gather stores and loads with offsets
 * s * {0, 1, 2, 3} in words (vidup makes 0, 1, 2, 3). */
SPA_ISA_INLINE uint32x4_t spa_mve_offsets(int64_t s) { return vmulq_n_u32(vidupq_n_u32(0, 1), (uint32_t)s); }
SPA_ISA_INLINE void spa_vf_scatter(float *p, int64_t s, spa_vf v)
{
    vstrwq_scatter_shifted_offset_f32(p, spa_mve_offsets(s), v);
}
SPA_ISA_INLINE spa_vf spa_vf_gather(const float *p, int64_t s)
{
    return vldrwq_gather_shifted_offset_f32(p, spa_mve_offsets(s));
}
/* The first n lanes (n <= 0: none, n >= 4: all): vctp32q's predicate. */
SPA_ISA_INLINE mve_pred16_t spa_mve_first(int64_t n) { return vctp32q((uint32_t)(n < 0 ? 0 : n > 4 ? 4 : n)); }
SPA_ISA_INLINE spa_vf spa_vf_load_n(const float *p, int64_t n) { return vldrwq_z_f32(p, spa_mve_first(n)); }
/* GCC (12 at least) describes the predicated store as setting all 16 bytes
 * at p, so its dead-store elimination deletes an earlier full store to p
 * whose lanes past n the predicated store keeps: a later full load of p then
 * reads in those lanes whatever the memory held before (stack garbage, which
 * depends on what ran earlier). The empty asm reads the 16 bytes first, so
 * that earlier store stays; it emits no instruction. */
SPA_ISA_INLINE void spa_vf_store_n(float *p, spa_vf v, int64_t n)
{
    __asm__("" : : "m"(*(const float(*)[4])p));
    vstrwq_p_f32(p, v, spa_mve_first(n));
}
SPA_ISA_INLINE spa_vf spa_vf_add(spa_vf a, spa_vf b) { return vaddq_f32(a, b); }
SPA_ISA_INLINE spa_vf spa_vf_sub(spa_vf a, spa_vf b) { return vsubq_f32(a, b); }
SPA_ISA_INLINE spa_vf spa_vf_mul(spa_vf a, spa_vf b) { return vmulq_f32(a, b); }
/* The x86 rule (a > b ? a : b), so that NaN lanes behave as on every ISA
 * (vmaxnm would return the number). */
SPA_ISA_INLINE spa_vf spa_vf_max(spa_vf a, spa_vf b) { return vpselq_f32(a, b, vcmpgtq_f32(a, b)); }
/* MVE's float compares LT and LE hold where an operand is NaN (the Arm
 * condition codes after an unordered compare); GT and GE do not. The
 * ordered a < b is therefore b > a, here and in spa_vf_lt. */
SPA_ISA_INLINE spa_vf spa_vf_min(spa_vf a, spa_vf b) { return vpselq_f32(a, b, vcmpgtq_f32(b, a)); }
SPA_ISA_INLINE spa_vf spa_vf_fma(spa_vf c, spa_vf a, spa_vf b) { return vfmaq_f32(c, a, b); }
/* The broadcast operand read straight into a core register: GCC 12 loads
 * a float into an S register (vldr) and then moves it to the core register
 * vfma needs, through the stack when registers run short; ldr does it in
 * one instruction. */
typedef uint32_t spa_mve_word __attribute__((may_alias));
SPA_ISA_INLINE spa_vb spa_vb_load(const float *p)
{
    /* the operand as a word: a float memory operand is limited to vldr's
     * reach (offsets below 1 KiB), a word to ldr's (4 KiB) */
    float x;
    __asm__("ldr %0, %1" : "=r"(x) : "m"(*(const spa_mve_word *)(const void *)p));
    return x;
}
/* Two consecutive broadcast operands p[0], p[1] in one ldrd (word
 * alignment suffices; its reach is 1 KiB either side of the base). */
typedef uint64_t spa_mve_dword __attribute__((may_alias, aligned(4)));
SPA_ISA_INLINE void spa_vb_load2(const float *p, spa_vb *x0, spa_vb *x1)
{
    float a, b;
    __asm__("ldrd %0, %1, %2" : "=r"(a), "=r"(b) : "m"(*(const spa_mve_dword *)(const void *)p));
    *x0 = a;
    *x1 = b;
}
/* spa_vb_load2 at *p, then *p += step: one ldrd with writeback where step is
 * a constant within its reach (at most 255 words), else the load and an add. */
SPA_ISA_INLINE void spa_vb_load2_post(const float **p, ptrdiff_t step, spa_vb *x0, spa_vb *x1)
{
    if (__builtin_constant_p(step) && step >= -255 && step <= 255) {
        float a, b;
        __asm__("ldrd %0, %1, [%2], %3" : "=r"(a), "=r"(b), "+r"(*p) : "n"(step * 4), "m"(*(const spa_mve_dword *)(const void *)*p));
        *x0 = a;
        *x1 = b;
    } else {
        spa_vb_load2(*p, x0, x1);
        *p += step;
    }
}
SPA_ISA_INLINE spa_vb spa_vb_set(float x) { return x; }
SPA_ISA_INLINE spa_vf spa_vf_fmab(spa_vf c, spa_vf a, spa_vb x) { return vfmaq_n_f32(c, a, x); }
/* Four consecutive broadcast operands: their address, each one read into a
 * core register where it is used (vfma by a core register; MVE has no FMA
 * by lane). Four core registers held across a tile's steps cost more in
 * spills than the loads. */
typedef const float *spa_vq;
SPA_ISA_INLINE spa_vq spa_vq_load(const float *p) { return p; }
SPA_ISA_INLINE spa_vf spa_vf_fmaq(spa_vf c, spa_vf a, spa_vq q, int i) { return vfmaq_n_f32(c, a, spa_vb_load(q + i)); }
/* By halves, as every layer: (v0 + v2) + (v1 + v3), three scalar adds of
 * the FPU (IEEE, as the C expression would round them) on the lanes as S
 * registers: Q0 is S0-S3, the sum comes out in S4 (GCC 12 moves each lane
 * through a core register otherwise). */
SPA_ISA_INLINE float spa_vf_hsum(spa_vf v)
{
    register spa_vf q0 __asm__("q0") = v;
    register float s4 __asm__("s4");
    __asm__("vadd.f32 s4, s0, s2\n\tvadd.f32 s5, s1, s3\n\tvadd.f32 s4, s4, s5" : "=&t"(s4) : "w"(q0) : "s5");
    return s4;
}

SPA_ISA_INLINE spa_vf spa_vf_round(spa_vf x) { return vrndnq_f32(x); }
SPA_ISA_INLINE spa_vf spa_vf_scale2(spa_vf p, spa_vf n)
{
    const int32x4_t e = vshlq_n_s32(vaddq_n_s32(vcvtq_s32_f32(n), 127), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

/* Arithmetic with a broadcast operand in a core register (vadd by r): the
 * exp of selected attention with its constants in core registers. */
SPA_ISA_INLINE spa_vf spa_vf_addb(spa_vf a, spa_vb x) { return vaddq_n_f32(a, x); }
/* x < lo ? +0 : v, the compare and the select written out (GCC 12 moves
 * the predicate through a core register between them otherwise). The bound
 * is a vector: the ordered x < lo is lo > x (see spa_vf_min), and the
 * compare by a core register takes the register as its second operand. */
SPA_ISA_INLINE spa_vf spa_vf_zero_below(spa_vf v, spa_vf x, spa_vf lo)
{
    spa_vf r = vdupq_n_f32(0.0f);
    __asm__("vcmp.f32 gt, %q2, %q3\n\tvpsel %q0, %q0, %q1" : "+w"(r) : "w"(v), "w"(lo), "w"(x) : "p0");
    return r;
}

/* The f16 <-> f32 conversions (vcvtb / vcvtt between half and single) by
 * their encodings: GNU as 2.40 (gcc-arm-none-eabi 12 in Debian 12) encodes
 * these instructions with twice the Q register numbers (any register but Q0
 * comes out wrong). The assembler macro spa_mve_cvt below writes the word
 * itself, the register numbers (as the compiler chose them: %q operands)
 * placed in the Qd (bits 15:13) and Qm (bits 3:1) fields, so the operands
 * stay free registers (no moves to and from fixed ones). Every asm statement
 * carries the definitions, guarded, as the compiler may emit its statements
 * in any order. */
#define SPA_MVE_CVT_MACROS                                                          \
    ".ifndef .Lspa_mve_cvt_macros\n"                                                \
    ".set .Lspa_mve_cvt_macros, 1\n"                                                \
    ".macro spa_mve_qnum sym, q\n"                                                  \
    ".irp i, 0, 1, 2, 3, 4, 5, 6, 7\n"                                              \
    ".ifc \\q, q\\i\n"                                                              \
    ".set \\sym, \\i\n"                                                             \
    ".endif\n"                                                                      \
    ".endr\n"                                                                       \
    ".endm\n"                                                                       \
    ".macro spa_mve_cvt word, qd, qm\n"                                             \
    ".set .Lspa_mve_qd, -1\n"                                                       \
    ".set .Lspa_mve_qm, -1\n"                                                       \
    "spa_mve_qnum .Lspa_mve_qd, \\qd\n"                                             \
    "spa_mve_qnum .Lspa_mve_qm, \\qm\n"                                             \
    ".if .Lspa_mve_qd < 0 || .Lspa_mve_qm < 0\n"                                    \
    ".error \"spa_mve_cvt: operands must be q0..q7\"\n"                             \
    ".endif\n"                                                                      \
    ".inst.w \\word | (.Lspa_mve_qd << 13) | (.Lspa_mve_qm << 1)\n"                 \
    ".endm\n"                                                                       \
    ".endif\n"
#define SPA_MVE_VCVTB_F32_F16 "0xfe3f0e01" /* vcvtb.f32.f16 qd, qm: bottom halves widened */
#define SPA_MVE_VCVTT_F32_F16 "0xfe3f1e01" /* vcvtt.f32.f16 qd, qm: top halves widened */
#define SPA_MVE_VCVTB_F16_F32 "0xee3f0e01" /* vcvtb.f16.f32 qd, qm: into the bottom halves */
#define SPA_MVE_VCVTT_F16_F32 "0xee3f1e01" /* vcvtt.f16.f32 qd, qm: into the top halves */
/* out = conversion(in); for the narrowings the other halves of out are
 * left as they were (SPA_MVE_CVT_INTO: out read and written) */
#define SPA_MVE_CVT(word, out, in) __asm__(SPA_MVE_CVT_MACROS "spa_mve_cvt " word ", %q0, %q1" : "=w"(out) : "w"(in))
#define SPA_MVE_CVT_INTO(word, out, in)                                             \
    __asm__(SPA_MVE_CVT_MACROS "spa_mve_cvt " word ", %q0, %q1" : "+w"(out) : "w"(in))

/* f16 in the low half of each 32-bit lane -> f32, exactly (a NaN gives the
 * default NaN: MVE converts with the standard FPSCR value). */
SPA_ISA_INLINE spa_vf spa_mve_widen_f16(uint32x4_t h)
{
    spa_vf r;
    SPA_MVE_CVT(SPA_MVE_VCVTB_F32_F16, r, h);
    return r;
}
/* f32 -> f16, RNE, in the low half of each 32-bit lane (high half garbage);
 * NaN lanes the default NaN. */
SPA_ISA_INLINE uint32x4_t spa_mve_narrow_f16(spa_vf v)
{
    uint32x4_t r;
    SPA_MVE_CVT(SPA_MVE_VCVTB_F16_F32, r, v);
    return r;
}
/* 2 x 4 f16 -> f32: a the even elements of p[0..8), b the odd ones. */
SPA_ISA_INLINE void spa_mve_widen2_f16(uint16x8_t h, spa_vf *a, spa_vf *b)
{
    spa_vf even, odd;
    SPA_MVE_CVT(SPA_MVE_VCVTB_F32_F16, even, h);
    SPA_MVE_CVT(SPA_MVE_VCVTT_F32_F16, odd, h);
    *a = even;
    *b = odd;
}
/* The inverse: a to the even elements, b to the odd ones; NaN lanes the
 * default NaN. */
SPA_ISA_INLINE uint16x8_t spa_mve_narrow2_f16(spa_vf a, spa_vf b)
{
    uint16x8_t r;
    SPA_MVE_CVT(SPA_MVE_VCVTB_F16_F32, r, a);
    SPA_MVE_CVT_INTO(SPA_MVE_VCVTT_F16_F32, r, b);
    return r;
}
/* half.h's f16 NaN from the f32 bits u, in the low half of each lane:
 * sign | 0x7E00 | mantissa >> 13. */
SPA_ISA_INLINE uint32x4_t spa_mve_f16_nan(uint32x4_t u)
{
    return vsliq_n_u32(vorrq_n_u32(vshrq_n_u32(u, 13), 0x200), vshrq_n_u32(u, 31), 15);
}
/* f32 -> f16 bits in the low half of each 32-bit lane (high half garbage):
 * RNE; NaN lanes as half.h makes them. */
SPA_ISA_INLINE uint32x4_t spa_mve_f16_bits(spa_vf v)
{
    const mve_pred16_t num = vcmpeqq_f32(v, v);
    if (num == 0xFFFF) /* no NaN: the conversion alone */
        return spa_mve_narrow_f16(v);
    return vpselq_u32(spa_mve_narrow_f16(v), spa_mve_f16_nan(vreinterpretq_u32_f32(v)), num);
}
/* bf16 bits in the high half of each 32-bit lane (low half garbage): RNE,
 * NaN kept NaN with the quiet bit set (half.h's values). */
SPA_ISA_INLINE uint32x4_t spa_mve_bf16_rne(spa_vf v) /* NaN lanes not handled */
{
    const uint32x4_t u = vreinterpretq_u32_f32(v);
    return vaddq_u32(vaddq_n_u32(u, 0x7FFFu), vshrq_n_u32(vshlq_n_u32(u, 15), 31));
}
SPA_ISA_INLINE uint32x4_t spa_mve_bf16_hi(spa_vf v)
{
    const mve_pred16_t num = vcmpeqq_f32(v, v);
    if (num == 0xFFFF) /* no NaN: the rounding alone */
        return spa_mve_bf16_rne(v);
    return vpselq_u32(spa_mve_bf16_rne(v), vorrq_n_u32(vreinterpretq_u32_f32(v), 0x400000u), num);
}

SPA_ISA_INLINE spa_vf spa_vf_load_f16(const uint16_t *p) { return spa_mve_widen_f16(vldrhq_u32(p)); }
SPA_ISA_INLINE spa_vf spa_vf_load_bf16(const uint16_t *p)
{
    return vreinterpretq_f32_u32(vshlq_n_u32(vldrhq_u32(p), 16));
}
/* 2 * SPA_VL contiguous elements widened into two vectors: two widening
 * loads (vldrh.u32), the cheapest MVE form for lanes in memory order */
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
/* Eight contiguous elements widened into two vectors, the even elements
 * (p[0], p[2], p[4], p[6]) in *even and the odd ones in *odd: one load and a
 * conversion per vector (vcvtb / vcvtt; vshllb / vshllt for bf16). The
 * inverse stores (RNE, NaN lanes as half.h makes them) write
 * p[2i] = even[i], p[2i + 1] = odd[i] with one store, and for f32 through
 * vst2. Generation fact SPA_VF_EVEN_ODD: the mve layer only. */
#define SPA_ISA_EVEN_ODD 1 /* for the tests: the layer has the forms below */
SPA_ISA_INLINE void spa_vf_load_eo_f16(const uint16_t *p, spa_vf *even, spa_vf *odd)
{
    spa_mve_widen2_f16(vldrhq_u16(p), even, odd);
}
SPA_ISA_INLINE void spa_vf_load_eo_bf16(const uint16_t *p, spa_vf *even, spa_vf *odd)
{
    const uint16x8_t h = vldrhq_u16(p);
    *even = vreinterpretq_f32_u32(vshllbq_n_u16(h, 16));
    *odd = vreinterpretq_f32_u32(vshlltq_n_u16(h, 16));
}
SPA_ISA_INLINE void spa_vf_store_eo(float *p, spa_vf even, spa_vf odd)
{
    const float32x4x2_t v = {{even, odd}};
    vst2q_f32(p, v);
}
SPA_ISA_INLINE void spa_vf_store_eo_f16(uint16_t *p, spa_vf even, spa_vf odd)
{
    if ((mve_pred16_t)(vcmpeqq_f32(even, even) & vcmpeqq_f32(odd, odd)) == 0xFFFF) { /* no NaN */
        vstrhq_u16(p, spa_mve_narrow2_f16(even, odd));
        return;
    }
    const uint32x4_t e = spa_mve_f16_bits(even), o = spa_mve_f16_bits(odd);
    vstrhq_u16(p, vreinterpretq_u16_u32(vsliq_n_u32(e, o, 16)));
}
SPA_ISA_INLINE void spa_vf_store_eo_bf16(uint16_t *p, spa_vf even, spa_vf odd)
{
    uint32x4_t e, o;
    if ((mve_pred16_t)(vcmpeqq_f32(even, even) & vcmpeqq_f32(odd, odd)) == 0xFFFF) { /* no NaN */
        e = spa_mve_bf16_rne(even);
        o = spa_mve_bf16_rne(odd);
    } else {
        e = spa_mve_bf16_hi(even);
        o = spa_mve_bf16_hi(odd);
    }
    vstrhq_u16(p, vreinterpretq_u16_u32(vsriq_n_u32(o, e, 16)));
}
SPA_ISA_INLINE void spa_vf_store_f16(uint16_t *p, spa_vf v) { vstrhq_u32(p, spa_mve_f16_bits(v)); }
SPA_ISA_INLINE void spa_vf_store_bf16(uint16_t *p, spa_vf v) { vstrhq_u32(p, vshrq_n_u32(spa_mve_bf16_hi(v), 16)); }
#include "compose_pairs.h"
/* The _num narrowings: the conversion or rounding alone, no NaN test per
 * vector, for runs that track NaN: spa_vf_nan_seen adds v * 0 (one vfma by a
 * core register; NaN where v is NaN or infinite, an infinity only sending
 * the run through the exact form again), spa_vf_any_nan tests the sum once. */
SPA_ISA_INLINE void spa_vf_store_f16_num(uint16_t *p, spa_vf v) { vstrhq_u32(p, spa_mve_narrow_f16(v)); }
SPA_ISA_INLINE void spa_vf_store2_f16_num(uint16_t *p, spa_vf lo, spa_vf hi)
{
    spa_vf_store_f16_num(p, lo);
    spa_vf_store_f16_num(p + SPA_VL, hi);
}
SPA_ISA_INLINE void spa_vf_store_bf16_num(uint16_t *p, spa_vf v)
{
    vstrhq_u32(p, vshrq_n_u32(spa_mve_bf16_rne(v), 16));
}
SPA_ISA_INLINE void spa_vf_store2_bf16_num(uint16_t *p, spa_vf lo, spa_vf hi)
{
    spa_vf_store_bf16_num(p, lo);
    spa_vf_store_bf16_num(p + SPA_VL, hi);
}
SPA_ISA_INLINE spa_vf spa_vf_nan_seen(spa_vf seen, spa_vf v) { return vfmaq_n_f32(seen, v, 0.0f); }
SPA_ISA_INLINE int spa_vf_any_nan(spa_vf seen) { return vcmpeqq_f32(seen, seen) != 0xFFFF; }
/* In place: a NaN stays a NaN (the default one, as widening makes it). */
SPA_ISA_INLINE spa_vf spa_vf_round_f16(spa_vf v)
{
    return spa_mve_widen_f16(spa_mve_narrow_f16(v));
}
SPA_ISA_INLINE spa_vf spa_vf_round_bf16(spa_vf v)
{
    return vreinterpretq_f32_u32(vshlq_n_u32(vshrq_n_u32(spa_mve_bf16_hi(v), 16), 16));
}

SPA_ISA_INLINE void spa_vf_stream(float *p, spa_vf v) { vst1q_f32(p, v); }
SPA_ISA_INLINE void spa_vf_stream_f16(uint16_t *p, spa_vf v) { spa_vf_store_f16(p, v); }
SPA_ISA_INLINE void spa_vf_stream_bf16(uint16_t *p, spa_vf v) { spa_vf_store_bf16(p, v); }
SPA_ISA_INLINE void spa_isa_stream_fence(void) {}

/* One element: the FPU's scalar vcvtb.f32.f16 (exact, NaN payload kept). */
SPA_ISA_INLINE float spa_isa_f16_to_f32(uint16_t h)
{
    _Float16 f;
    memcpy(&f, &h, sizeof f);
    return (float)f;
}

/* Sample staging and reductions (deformable attention; see avx512.h). */
SPA_ISA_INLINE spa_vf spa_vf_mulb(spa_vf a, spa_vb x) { return vmulq_n_f32(a, x); }
SPA_ISA_INLINE spa_vf spa_vf_floor(spa_vf x) { return vrndmq_f32(x); }
/* MVE permutes 32-bit lanes only through memory (vst2 / vld2 interleave
 * and de-interleave): a round trip through eight words of the stack. */
SPA_ISA_INLINE void spa_vf_zip(spa_vf a, spa_vf b, spa_vf *lo, spa_vf *hi)
{
    float t[8];
    const float32x4x2_t v = {{a, b}};
    vst2q_f32(t, v);
    *lo = vld1q_f32(t);
    *hi = vld1q_f32(t + 4);
}
SPA_ISA_INLINE void spa_vf_unzip(spa_vf a, spa_vf b, spa_vf *even, spa_vf *odd)
{
    float t[8];
    vst1q_f32(t, a);
    vst1q_f32(t + 4, b);
    const float32x4x2_t v = vld2q_f32(t);
    *even = v.val[0];
    *odd = v.val[1];
}
/* 2 * SPA_VL contiguous f32 deinterleaved as they load (vld2q: no
 * round trip of two vectors through memory, or permutes) */
SPA_ISA_INLINE void spa_vf_load_unzip(const float *p, spa_vf *even, spa_vf *odd)
{
    const float32x4x2_t v = vld2q_f32(p);
    *even = v.val[0];
    *odd = v.val[1];
}
/* Lane masks are VPR predicates: four bits per 32-bit lane. */
typedef mve_pred16_t spa_vm;
typedef uint32x4_t spa_vi;
SPA_ISA_INLINE spa_vm spa_vf_gt(spa_vf a, spa_vf b) { return vcmpgtq_f32(a, b); }
SPA_ISA_INLINE spa_vm spa_vf_lt(spa_vf a, spa_vf b) { return vcmpgtq_f32(b, a); }
SPA_ISA_INLINE spa_vm spa_vm_and(spa_vm a, spa_vm b) { return (spa_vm)(a & b); }
/* Bit 4i of the predicate -> bit i. */
SPA_ISA_INLINE uint32_t spa_vm_bits(spa_vm m)
{
    const uint32_t u = (uint32_t)m & 0x1111u;
    return (u | u >> 3 | u >> 6 | u >> 9) & 0xFu;
}
SPA_ISA_INLINE spa_vi spa_vi_set1(int32_t x) { return vdupq_n_u32((uint32_t)x); }
SPA_ISA_INLINE spa_vi spa_vi_load(const int32_t *p) { return vreinterpretq_u32_s32(vld1q_s32(p)); }
SPA_ISA_INLINE spa_vi spa_vi_from_vf(spa_vf x) { return vreinterpretq_u32_s32(vcvtq_s32_f32(x)); }
SPA_ISA_INLINE spa_vi spa_vi_add(spa_vi a, spa_vi b) { return vaddq_u32(a, b); }
SPA_ISA_INLINE spa_vi spa_vi_mul(spa_vi a, spa_vi b) { return vmulq_u32(a, b); }
SPA_ISA_INLINE spa_vm spa_vi_ltu(spa_vi a, spa_vi b) { return vcmphiq_u32(b, a); }
/* Addresses are 32 bits: base + key * row_bytes in the lanes (vmla by a
 * core register), the other row where the predicate is clear. */
SPA_ISA_INLINE void spa_vi_rows(uintptr_t *dst, spa_vi key, spa_vm in, const void *base, uint32_t row_bytes,
                                const void *other)
{
    const uint32x4_t rows = vmlaq_n_u32(vdupq_n_u32((uint32_t)(uintptr_t)base), key, row_bytes);
    vst1q_u32((uint32_t *)dst, vpselq_u32(rows, vdupq_n_u32((uint32_t)(uintptr_t)other), in));
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
#include "f64_scalar.h"

#endif
