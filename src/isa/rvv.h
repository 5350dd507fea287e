/* The rvv instruction set layer (RISC-V Vector extension 1.0, the ratified
 * __riscv_ intrinsics of riscv_vector.h): the operations of src/isa/avx512.h
 * on SPA_VL = 8 f32 lanes.
 *
 * Vector length. The templates fix the lane count at generation time (their
 * register tiles, head groups and folds are unrolled by SPA_VL), while an RVV
 * core has any VLEN >= 128. A logical vector here is 8 lanes in an LMUL = 2
 * register group (vfloat32m2_t) run with vl = 8: a group of two registers holds
 * 2 * VLEN / 32 >= 8 lanes on every core, so vl = min(VLMAX, 8) is always 8 and
 * the same binary is right at VLEN 128, 256, 512 and beyond (cores wider than
 * 128 bits leave the upper lanes of each group idle). Every operation works on
 * those 8 lanes alone: no result depends on VLEN, reductions included (the
 * lane folds are slides by 4, 2, 1 within the 8 lanes). Nothing in here takes
 * the VLMAX of a type, and register groups are never split with vget / vset,
 * whose halves move with VLEN.
 *
 * Tails are vl: a partial load or store is the same instruction with vl = n
 * (loads keep the lanes from n on at +0: tail undisturbed over a zero vector).
 * Broadcast operands are f registers (vfmacc.vf, vfmul.vf): a spa_vb is a
 * float, and takes no vector register of a tile.
 *
 * f16 / bf16: where the target has Zvfhmin (-march=..._zvfhmin, or Zvfh,
 * which implies it: target riscv64-rvv-zvfhmin-linux-gnu), f16 is widened and
 * narrowed by vfwcvt.f.f.v / vfncvt.f.f.w: exact, RNE (the dynamic rounding
 * mode), NaN kept NaN as the canonical NaN of RISC-V (positive, quiet, no
 * payload: SPA_ISA_NAN_CANONICAL), as every float operation of the core
 * makes it anyway. rv64gcv alone (target riscv64-rvv-linux-gnu) has neither,
 * so f16 goes through the portable conversions of half.h done on integer
 * lanes (the same bits: RNE, NaN kept NaN with its payload). bf16 by shifts
 * on both. Reached only through half.h. */
#ifndef SPA_ISA_RVV_H
#define SPA_ISA_RVV_H

#ifndef SPA_HALF_H
#error "include half.h, which brings the ISA layer after the scalar conversions"
#endif
/* __riscv_v_intrinsic 12000: the __riscv_ prefixed intrinsics (v0.12, the
 * API ratified as 1.0); VLEN >= 128, as the V extension requires (Zvl128b) */
#if !defined(__riscv_v) || !defined(__riscv_v_intrinsic) || __riscv_v_intrinsic < 12000 || \
    !defined(__riscv_v_min_vlen) || __riscv_v_min_vlen < 128
#error "ISA rvv needs a compiler targeting RVV 1.0 (V, VLEN >= 128) with the __riscv_ intrinsics (clang 19: -march=rv64gcv)"
#endif
#include <riscv_vector.h>

#define SPA_ISA_NAME "rvv"
#define SPA_VL 8
#define SPA_VF_STREAM_ALIGN 0
#define SPA_ISA_INLINE static inline __attribute__((always_inline))
/* No software prefetch: the application cores of this ISA prefetch
 * sequential streams themselves; a hint would only be instructions. */
#define SPA_ISA_PREFETCH 0
/* vl of every full vector operation: 8 lanes of a LMUL = 2 group */
#define SPA_RVV_VL 8u

typedef vfloat32m2_t spa_vf;
typedef float spa_vb; /* an f register: vfmacc.vf */
typedef vuint32m2_t spa_rvv_u32;
typedef vuint16m1_t spa_rvv_u16;

SPA_ISA_INLINE spa_vf spa_vf_zero(void) { return __riscv_vfmv_v_f_f32m2(0.0f, SPA_RVV_VL); }
SPA_ISA_INLINE spa_vf spa_vf_set1(float x) { return __riscv_vfmv_v_f_f32m2(x, SPA_RVV_VL); }
SPA_ISA_INLINE spa_vf spa_vf_load(const float *p) { return __riscv_vle32_v_f32m2(p, SPA_RVV_VL); }
SPA_ISA_INLINE void spa_vf_store(float *p, spa_vf v) { __riscv_vse32_v_f32m2(p, v, SPA_RVV_VL); }
/* Lanes s elements apart: strided loads and stores (vlse32 / vsse32). */
SPA_ISA_INLINE void spa_vf_scatter(float *p, int64_t s, spa_vf v)
{
    __riscv_vsse32_v_f32m2(p, (ptrdiff_t)s * (ptrdiff_t)sizeof(float), v, SPA_RVV_VL);
}
SPA_ISA_INLINE spa_vf spa_vf_gather(const float *p, int64_t s)
{
    return __riscv_vlse32_v_f32m2(p, (ptrdiff_t)s * (ptrdiff_t)sizeof(float), SPA_RVV_VL);
}
/* The first n lanes (0 <= n <= SPA_VL): vl = n, nothing touched past them;
 * the loaded lanes from n on stay +0 (tail undisturbed). */
SPA_ISA_INLINE spa_vf spa_vf_load_n(const float *p, int64_t n)
{
    return __riscv_vle32_v_f32m2_tu(spa_vf_zero(), p, (size_t)n);
}
SPA_ISA_INLINE void spa_vf_store_n(float *p, spa_vf v, int64_t n) { __riscv_vse32_v_f32m2(p, v, (size_t)n); }
SPA_ISA_INLINE spa_vf spa_vf_add(spa_vf a, spa_vf b) { return __riscv_vfadd_vv_f32m2(a, b, SPA_RVV_VL); }
SPA_ISA_INLINE spa_vf spa_vf_sub(spa_vf a, spa_vf b) { return __riscv_vfsub_vv_f32m2(a, b, SPA_RVV_VL); }
SPA_ISA_INLINE spa_vf spa_vf_mul(spa_vf a, spa_vf b) { return __riscv_vfmul_vv_f32m2(a, b, SPA_RVV_VL); }
/* The x86 rule (a > b ? a : b), so that NaN lanes behave as on every ISA
 * (vfmax would return the number of a NaN / number pair). */
SPA_ISA_INLINE spa_vf spa_vf_max(spa_vf a, spa_vf b)
{
    return __riscv_vmerge_vvm_f32m2(b, a, __riscv_vmflt_vv_f32m2_b16(b, a, SPA_RVV_VL), SPA_RVV_VL);
}
SPA_ISA_INLINE spa_vf spa_vf_min(spa_vf a, spa_vf b)
{
    return __riscv_vmerge_vvm_f32m2(b, a, __riscv_vmflt_vv_f32m2_b16(a, b, SPA_RVV_VL), SPA_RVV_VL);
}
SPA_ISA_INLINE spa_vf spa_vf_fma(spa_vf c, spa_vf a, spa_vf b) { return __riscv_vfmacc_vv_f32m2(c, a, b, SPA_RVV_VL); }
SPA_ISA_INLINE spa_vb spa_vb_load(const float *p) { return *p; }
SPA_ISA_INLINE spa_vb spa_vb_set(float x) { return x; }
SPA_ISA_INLINE spa_vf spa_vf_fmab(spa_vf c, spa_vf a, spa_vb x) { return __riscv_vfmacc_vf_f32m2(c, x, a, SPA_RVV_VL); }
/* Four consecutive broadcast operands: their address (each one flw). */
typedef const float *spa_vq;
SPA_ISA_INLINE spa_vq spa_vq_load(const float *p) { return p; }
SPA_ISA_INLINE spa_vf spa_vf_fmaq(spa_vf c, spa_vf a, spa_vq q, int i)
{
    return __riscv_vfmacc_vf_f32m2(c, q[i], a, SPA_RVV_VL);
}
/* Lanes by halves: j + j+4, then j + j+2, then 0 + 1 (slides within the 8
 * lanes, whatever VLEN). */
SPA_ISA_INLINE float spa_vf_hsum(spa_vf v)
{
    v = __riscv_vfadd_vv_f32m2(v, __riscv_vslidedown_vx_f32m2(v, 4, 4), 4);
    v = __riscv_vfadd_vv_f32m2(v, __riscv_vslidedown_vx_f32m2(v, 2, 2), 2);
    v = __riscv_vfadd_vv_f32m2(v, __riscv_vslidedown_vx_f32m2(v, 1, 1), 1);
    return __riscv_vfmv_f_s_f32m2_f32(v);
}

/* Nearest integer, ties even: the dynamic rounding mode (RNE, as every
 * float operation of the library assumes), |x| < 2^31. */
SPA_ISA_INLINE spa_vf spa_vf_round(spa_vf x)
{
    return __riscv_vfcvt_f_x_v_f32m2(__riscv_vfcvt_x_f_v_i32m2(x, SPA_RVV_VL), SPA_RVV_VL);
}
SPA_ISA_INLINE spa_vf spa_vf_scale2(spa_vf p, spa_vf n)
{
    const vint32m2_t e = __riscv_vsll_vx_i32m2(
        __riscv_vadd_vx_i32m2(__riscv_vfcvt_x_f_v_i32m2(n, SPA_RVV_VL), 127, SPA_RVV_VL), 23, SPA_RVV_VL);
    return __riscv_vfmul_vv_f32m2(p, __riscv_vreinterpret_v_i32m2_f32m2(e), SPA_RVV_VL);
}
SPA_ISA_INLINE spa_vf spa_vf_zero_below(spa_vf v, spa_vf x, spa_vf lo)
{
    return __riscv_vmerge_vvm_f32m2(v, spa_vf_zero(), __riscv_vmflt_vv_f32m2_b16(x, lo, SPA_RVV_VL), SPA_RVV_VL);
}

/* ---- f16 / bf16 ---- */
SPA_ISA_INLINE spa_rvv_u16 spa_rvv_load_u16(const uint16_t *p) { return __riscv_vle16_v_u16m1(p, SPA_RVV_VL); }
SPA_ISA_INLINE spa_rvv_u32 spa_rvv_u32_of(spa_vf v) { return __riscv_vreinterpret_v_f32m2_u32m2(v); }
SPA_ISA_INLINE spa_vf spa_rvv_f32_of(spa_rvv_u32 u) { return __riscv_vreinterpret_v_u32m2_f32m2(u); }
/* (Unsigned compares as "greater than": RVV has no vmsgeu.vx, which the
 * compiler would make a vmsltu and a vmnot.) */
/* The conversions keep to 32-bit lanes (e32, m2) up to the one narrowing
 * instruction of a store: each change of the element width costs a
 * vsetvli, and unit-stride 16-bit loads and stores of 8 lanes need none. */
#if defined(__riscv_zvfhmin)
/* Zvfhmin: one conversion each way (the vector unit switches to 16-bit
 * elements for it: the compiler's vsetvli). */
#define SPA_ISA_NAN_CANONICAL 1
SPA_ISA_INLINE spa_vf spa_rvv_widen_f16(spa_rvv_u16 h)
{
    return __riscv_vfwcvt_f_f_v_f32m2(__riscv_vreinterpret_v_u16m1_f16m1(h), SPA_RVV_VL);
}
SPA_ISA_INLINE spa_rvv_u16 spa_rvv_narrow_f16(spa_vf v)
{
    return __riscv_vreinterpret_v_f16m1_u16m1(__riscv_vfncvt_f_f_w_f16m1(v, SPA_RVV_VL));
}
SPA_ISA_INLINE spa_vf spa_vf_round_f16(spa_vf v) { return spa_rvv_widen_f16(spa_rvv_narrow_f16(v)); }
#else
/* f16 bits -> f32, half.h's spa_f16_to_f32 on integer lanes: the bits
 * sign-extended (the sign in bit 31), exponent and mantissa shifted to bits
 * 13..27; their f32 scaled by 2^112 (normals rebiased, subnormals made
 * normal), exponent 31 made 255, the sign copied back. */
SPA_ISA_INLINE spa_vf spa_rvv_widen_f16_s(vint32m2_t sx)
{
    const spa_rvv_u32 su = __riscv_vreinterpret_v_i32m2_u32m2(sx);
    const spa_rvv_u32 em = __riscv_vand_vx_u32m2(__riscv_vsll_vx_u32m2(su, 13, SPA_RVV_VL), 0x0FFFE000u, SPA_RVV_VL);
    spa_rvv_u32 bits = spa_rvv_u32_of(__riscv_vfmul_vf_f32m2(spa_rvv_f32_of(em), 0x1p112f, SPA_RVV_VL));
    bits = __riscv_vor_vx_u32m2_mu(__riscv_vmsgtu_vx_u32m2_b16(em, 0x0F7FFFFFu, SPA_RVV_VL), bits, bits, 0x7F800000u,
                                   SPA_RVV_VL);
    return __riscv_vfsgnj_vv_f32m2(spa_rvv_f32_of(bits), spa_rvv_f32_of(su), SPA_RVV_VL);
}
SPA_ISA_INLINE spa_vf spa_rvv_widen_f16(spa_rvv_u16 h)
{
    return spa_rvv_widen_f16_s(__riscv_vsext_vf2_i32m2(__riscv_vreinterpret_v_u16m1_i16m1(h), SPA_RVV_VL));
}
/* f32 -> f16 bits (in the low half of 32-bit lanes), half.h's
 * spa_f32_to_f16: RNE, Inf from 65520 up, NaN kept NaN (quiet bit, upper
 * payload). The normal range is rebiased and shifted by vssrl, whose
 * fixed-point rounding set to round-to-nearest-even (vxrm rne) is RNE on the
 * bits shifted out. */
SPA_ISA_INLINE spa_rvv_u32 spa_rvv_f16_bits(spa_vf v)
{
    const spa_rvv_u32 u = spa_rvv_u32_of(v);
    const spa_rvv_u32 a = __riscv_vand_vx_u32m2(u, 0x7FFFFFFFu, SPA_RVV_VL);
    spa_rvv_u32 r = __riscv_vssrl_vx_u32m2(__riscv_vadd_vx_u32m2(a, 0xC8000000u, SPA_RVV_VL), 13, __RISCV_VXRM_RNE,
                                           SPA_RVV_VL);
    /* below 2^-14: adding 0.5 makes the FPU round to a multiple of 2^-24;
     * the low bits of the sum are the result (0x3f000000 above them) */
    const spa_rvv_u32 sub_sum = spa_rvv_u32_of(__riscv_vfadd_vf_f32m2(spa_rvv_f32_of(a), 0.5f, SPA_RVV_VL));
    /* from 65520 up the rebiased, rounded value passes 0x7C00 (Inf): clamped
     * (below 2^-14 r is anything: those lanes take sub_sum) */
    r = __riscv_vminu_vx_u32m2(r, 0x7C00u, SPA_RVV_VL);
    r = __riscv_vmerge_vvm_u32m2(r, sub_sum, __riscv_vmsltu_vx_u32m2_b16(a, 0x38800000u, SPA_RVV_VL), SPA_RVV_VL);
    const vbool16_t nan = __riscv_vmsgtu_vx_u32m2_b16(a, 0x7F800000u, SPA_RVV_VL);
    r = __riscv_vand_vx_u32m2_mu(nan, r, __riscv_vsrl_vx_u32m2(a, 13, SPA_RVV_VL), 0x3FFu, SPA_RVV_VL);
    r = __riscv_vor_vx_u32m2_mu(nan, r, r, 0x7E00u, SPA_RVV_VL);
    return __riscv_vor_vx_u32m2_mu(__riscv_vmsgtu_vx_u32m2_b16(u, 0x7FFFFFFFu, SPA_RVV_VL), r, r, 0x8000u, SPA_RVV_VL);
}
SPA_ISA_INLINE spa_rvv_u16 spa_rvv_narrow_f16(spa_vf v) { return __riscv_vncvt_x_x_w_u16m1(spa_rvv_f16_bits(v), SPA_RVV_VL); }
SPA_ISA_INLINE spa_vf spa_vf_round_f16(spa_vf v)
{
    /* the f16 bits sign-extended from bit 15 (shifted up, shifted down
     * arithmetically) */
    const vint32m2_t b = __riscv_vreinterpret_v_u32m2_i32m2(__riscv_vsll_vx_u32m2(spa_rvv_f16_bits(v), 16, SPA_RVV_VL));
    return spa_rvv_widen_f16_s(__riscv_vsra_vx_i32m2(b, 16, SPA_RVV_VL));
}
#endif
/* f32 -> bf16 bits for lanes that are not NaN (the _num forms): the upper
 * half rounded to nearest even by vnclipu (vxrm rne); no lane saturates but
 * NaN (the largest finite values round to the infinities, as half.h). */
SPA_ISA_INLINE spa_rvv_u16 spa_rvv_narrow_bf16_num(spa_vf v)
{
    return __riscv_vnclipu_wx_u16m1(spa_rvv_u32_of(v), 16, __RISCV_VXRM_RNE, SPA_RVV_VL);
}
/* ... and NaN kept NaN: its upper half with the quiet bit set. */
SPA_ISA_INLINE spa_rvv_u16 spa_rvv_narrow_bf16(spa_vf v)
{
    const vbool16_t nan = __riscv_vmfne_vv_f32m2_b16(v, v, SPA_RVV_VL);
    const spa_rvv_u16 r = spa_rvv_narrow_bf16_num(v);
    return __riscv_vor_vx_u16m1_mu(nan, r, __riscv_vnsrl_wx_u16m1(spa_rvv_u32_of(v), 16, SPA_RVV_VL), 0x40u,
                                   SPA_RVV_VL);
}
SPA_ISA_INLINE spa_vf spa_rvv_widen_bf16(spa_rvv_u16 h)
{
    return spa_rvv_f32_of(__riscv_vsll_vx_u32m2(__riscv_vzext_vf2_u32m2(h, SPA_RVV_VL), 16, SPA_RVV_VL));
}

SPA_ISA_INLINE spa_vf spa_vf_load_f16(const uint16_t *p) { return spa_rvv_widen_f16(spa_rvv_load_u16(p)); }
SPA_ISA_INLINE spa_vf spa_vf_load_bf16(const uint16_t *p) { return spa_rvv_widen_bf16(spa_rvv_load_u16(p)); }
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
SPA_ISA_INLINE void spa_vf_store_f16(uint16_t *p, spa_vf v) { __riscv_vse16_v_u16m1(p, spa_rvv_narrow_f16(v), SPA_RVV_VL); }
SPA_ISA_INLINE void spa_vf_store_bf16(uint16_t *p, spa_vf v) { __riscv_vse16_v_u16m1(p, spa_rvv_narrow_bf16(v), SPA_RVV_VL); }
#include "compose_pairs.h"
SPA_ISA_INLINE void spa_vf_store_f16_num(uint16_t *p, spa_vf v) { spa_vf_store_f16(p, v); }
SPA_ISA_INLINE void spa_vf_store2_f16_num(uint16_t *p, spa_vf lo, spa_vf hi) { spa_vf_store2_f16(p, lo, hi); }
SPA_ISA_INLINE void spa_vf_store_bf16_num(uint16_t *p, spa_vf v)
{
    __riscv_vse16_v_u16m1(p, spa_rvv_narrow_bf16_num(v), SPA_RVV_VL);
}
SPA_ISA_INLINE void spa_vf_store2_bf16_num(uint16_t *p, spa_vf lo, spa_vf hi)
{
    spa_vf_store_bf16_num(p, lo);
    spa_vf_store_bf16_num(p + SPA_VL, hi);
}
/* NaN tracking of the _num runs: a sum, NaN once a lane met a NaN (an
 * infinity of each sign, or a sum grown to both, also reads as NaN: the run
 * then narrows again exactly, still the right bits). vfmax would drop NaN. */
SPA_ISA_INLINE spa_vf spa_vf_nan_seen(spa_vf seen, spa_vf v) { return __riscv_vfadd_vv_f32m2(seen, v, SPA_RVV_VL); }
SPA_ISA_INLINE int spa_vf_any_nan(spa_vf seen)
{
    return __riscv_vcpop_m_b16(__riscv_vmfne_vv_f32m2_b16(seen, seen, SPA_RVV_VL), SPA_RVV_VL) != 0;
}
/* in 32-bit lanes throughout: vssrl (vxrm rne) rounds as vnclipu */
SPA_ISA_INLINE spa_vf spa_vf_round_bf16(spa_vf v)
{
    const spa_rvv_u32 u = spa_rvv_u32_of(v);
    const vbool16_t nan = __riscv_vmfne_vv_f32m2_b16(v, v, SPA_RVV_VL);
    spa_rvv_u32 r = __riscv_vssrl_vx_u32m2(u, 16, __RISCV_VXRM_RNE, SPA_RVV_VL);
    r = __riscv_vsrl_vx_u32m2_mu(nan, r, u, 16, SPA_RVV_VL);
    r = __riscv_vor_vx_u32m2_mu(nan, r, r, 0x40u, SPA_RVV_VL);
    return spa_rvv_f32_of(__riscv_vsll_vx_u32m2(r, 16, SPA_RVV_VL));
}

SPA_ISA_INLINE void spa_vf_stream(float *p, spa_vf v) { spa_vf_store(p, v); }
SPA_ISA_INLINE void spa_vf_stream_f16(uint16_t *p, spa_vf v) { spa_vf_store_f16(p, v); }
SPA_ISA_INLINE void spa_vf_stream_bf16(uint16_t *p, spa_vf v) { spa_vf_store_bf16(p, v); }
SPA_ISA_INLINE void spa_isa_stream_fence(void) {}

SPA_ISA_INLINE float spa_isa_f16_to_f32(uint16_t h) { return spa_f16_to_f32(h); }

/* ---- sample staging and reductions (deformable attention; see avx512.h) ---- */
SPA_ISA_INLINE spa_vf spa_vf_mulb(spa_vf a, spa_vb x) { return __riscv_vfmul_vf_f32m2(a, x, SPA_RVV_VL); }
/* No conversion here uses a static rounding mode (vfcvt.rtz): QEMU 7.2
 * aborts translating a vector float instruction that follows one in the
 * same block. Conversions round by the dynamic mode (RNE, as every float
 * operation of the library assumes) and are corrected. */
/* |x| rounded toward zero, for |x| < 2^23 (other lanes: anything) */
SPA_ISA_INLINE spa_vf spa_rvv_floor_abs(spa_vf ax)
{
    const spa_vf r = __riscv_vfcvt_f_x_v_f32m2(__riscv_vfcvt_x_f_v_i32m2(ax, SPA_RVV_VL), SPA_RVV_VL);
    return __riscv_vfsub_vf_f32m2_mu(__riscv_vmflt_vv_f32m2_b16(ax, r, SPA_RVV_VL), r, r, 1.0f, SPA_RVV_VL);
}
/* Toward -inf for |x| < 2^23 (nearest, one less where that is above x; the
 * sign of x kept, so -0 stays -0); larger values, infinities and NaN are
 * already integers or stay themselves. */
SPA_ISA_INLINE spa_vf spa_vf_floor(spa_vf x)
{
    const vbool16_t small = __riscv_vmflt_vf_f32m2_b16(__riscv_vfabs_v_f32m2(x, SPA_RVV_VL), 8388608.0f, SPA_RVV_VL);
    const spa_vf r = __riscv_vfcvt_f_x_v_f32m2(__riscv_vfcvt_x_f_v_i32m2(x, SPA_RVV_VL), SPA_RVV_VL);
    spa_vf f = __riscv_vfsub_vf_f32m2_mu(__riscv_vmflt_vv_f32m2_b16(x, r, SPA_RVV_VL), r, r, 1.0f, SPA_RVV_VL);
    f = __riscv_vmerge_vvm_f32m2(x, f, small, SPA_RVV_VL);
    return __riscv_vfsgnj_vv_f32m2(f, x, SPA_RVV_VL);
}
/* Interleaving and deinterleaving through strided accesses (8 lanes a
 * side: a stack round trip for zip / unzip, none for load_unzip). */
SPA_ISA_INLINE void spa_vf_zip(spa_vf a, spa_vf b, spa_vf *lo, spa_vf *hi)
{
    float t[2 * SPA_VL];
    __riscv_vsse32_v_f32m2(t, 2 * sizeof(float), a, SPA_RVV_VL);
    __riscv_vsse32_v_f32m2(t + 1, 2 * sizeof(float), b, SPA_RVV_VL);
    *lo = spa_vf_load(t);
    *hi = spa_vf_load(t + SPA_VL);
}
SPA_ISA_INLINE void spa_vf_load_unzip(const float *p, spa_vf *even, spa_vf *odd)
{
    *even = __riscv_vlse32_v_f32m2(p, 2 * sizeof(float), SPA_RVV_VL);
    *odd = __riscv_vlse32_v_f32m2(p + 1, 2 * sizeof(float), SPA_RVV_VL);
}
SPA_ISA_INLINE void spa_vf_unzip(spa_vf a, spa_vf b, spa_vf *even, spa_vf *odd)
{
    float t[2 * SPA_VL];
    spa_vf_store(t, a);
    spa_vf_store(t + SPA_VL, b);
    spa_vf_load_unzip(t, even, odd);
}
typedef vbool16_t spa_vm; /* the mask of e32 lanes in a LMUL = 2 group */
typedef vuint32m2_t spa_vi;
SPA_ISA_INLINE spa_vm spa_vf_gt(spa_vf a, spa_vf b) { return __riscv_vmfgt_vv_f32m2_b16(a, b, SPA_RVV_VL); }
SPA_ISA_INLINE spa_vm spa_vf_lt(spa_vf a, spa_vf b) { return __riscv_vmflt_vv_f32m2_b16(a, b, SPA_RVV_VL); }
SPA_ISA_INLINE spa_vm spa_vm_and(spa_vm a, spa_vm b) { return __riscv_vmand_mm_b16(a, b, SPA_RVV_VL); }
/* lane i -> bit i: the mask register's first byte (bits past vl are not
 * defined: masked off) */
SPA_ISA_INLINE uint32_t spa_vm_bits(spa_vm m)
{
    return (uint32_t)__riscv_vmv_x_s_u8m1_u8(__riscv_vreinterpret_v_b16_u8m1(m)) & 0xFFu;
}
SPA_ISA_INLINE spa_vi spa_vi_set1(int32_t x) { return __riscv_vmv_v_x_u32m2((uint32_t)x, SPA_RVV_VL); }
SPA_ISA_INLINE spa_vi spa_vi_load(const int32_t *p)
{
    return __riscv_vle32_v_u32m2((const uint32_t *)(const void *)p, SPA_RVV_VL);
}
/* Truncation; 0x80000000 outside the int32 range and for NaN, as the x86
 * and Arm layers give (a conversion would saturate, and make NaN
 * 0x7fffffff). |x| < 2^23 is floored as |x| with the sign put back; larger
 * values are integers already. */
SPA_ISA_INLINE spa_vi spa_vi_from_vf(spa_vf x)
{
    const vbool16_t in = __riscv_vmand_mm_b16(__riscv_vmfge_vf_f32m2_b16(x, -2147483648.0f, SPA_RVV_VL),
                                              __riscv_vmflt_vf_f32m2_b16(x, 2147483648.0f, SPA_RVV_VL), SPA_RVV_VL);
    const spa_vf ax = __riscv_vfabs_v_f32m2(x, SPA_RVV_VL);
    const vbool16_t small = __riscv_vmflt_vf_f32m2_b16(ax, 8388608.0f, SPA_RVV_VL);
    const spa_vf t = __riscv_vfsgnj_vv_f32m2(__riscv_vmerge_vvm_f32m2(x, spa_rvv_floor_abs(ax), small, SPA_RVV_VL), x,
                                             SPA_RVV_VL);
    const spa_vi i = __riscv_vreinterpret_v_i32m2_u32m2(__riscv_vfcvt_x_f_v_i32m2(t, SPA_RVV_VL));
    return __riscv_vmerge_vvm_u32m2(__riscv_vmv_v_x_u32m2(0x80000000u, SPA_RVV_VL), i, in, SPA_RVV_VL);
}
SPA_ISA_INLINE spa_vi spa_vi_add(spa_vi a, spa_vi b) { return __riscv_vadd_vv_u32m2(a, b, SPA_RVV_VL); }
SPA_ISA_INLINE spa_vi spa_vi_mul(spa_vi a, spa_vi b) { return __riscv_vmul_vv_u32m2(a, b, SPA_RVV_VL); }
SPA_ISA_INLINE spa_vm spa_vi_ltu(spa_vi a, spa_vi b) { return __riscv_vmsltu_vv_u32m2_b16(a, b, SPA_RVV_VL); }
/* dst[i] = in_i ? base + key_i * row_bytes : other: a widening multiply to
 * 64-bit lanes (a LMUL = 4 group, the same mask), the base added, merged. */
SPA_ISA_INLINE void spa_vi_rows(uintptr_t *dst, spa_vi key, spa_vm in, const void *base, uint32_t row_bytes,
                                const void *other)
{
    const vuint64m4_t rows = __riscv_vadd_vx_u64m4(__riscv_vwmulu_vx_u64m4(key, row_bytes, SPA_RVV_VL),
                                                   (uint64_t)(uintptr_t)base, SPA_RVV_VL);
    const vuint64m4_t v = __riscv_vmerge_vvm_u64m4(__riscv_vmv_v_x_u64m4((uint64_t)(uintptr_t)other, SPA_RVV_VL), rows,
                                                   in, SPA_RVV_VL);
    __riscv_vse64_v_u64m4((uint64_t *)(void *)dst, v, SPA_RVV_VL);
}
/* out[k] = the 16 floats v[16k..16k+15] folded by halves, eight k at a time
 * as lanes: column j of eight rows is one strided load, and each addition
 * one of the scalar fold's (j + j+8, j + j+4, j + j+2, 0 + 1). */
SPA_ISA_INLINE void spa_isa_fold16(const float *v, float *out)
{
    for (int k0 = 0; k0 < 16; k0 += SPA_VL) {
        const float *r = v + 16 * k0;
#define SPA_RVV_COL(j) __riscv_vlse32_v_f32m2(r + (j), 16 * sizeof(float), SPA_RVV_VL)
        spa_vf c0 = spa_vf_add(SPA_RVV_COL(0), SPA_RVV_COL(8)), c1 = spa_vf_add(SPA_RVV_COL(1), SPA_RVV_COL(9));
        spa_vf c2 = spa_vf_add(SPA_RVV_COL(2), SPA_RVV_COL(10)), c3 = spa_vf_add(SPA_RVV_COL(3), SPA_RVV_COL(11));
        spa_vf c4 = spa_vf_add(SPA_RVV_COL(4), SPA_RVV_COL(12)), c5 = spa_vf_add(SPA_RVV_COL(5), SPA_RVV_COL(13));
        spa_vf c6 = spa_vf_add(SPA_RVV_COL(6), SPA_RVV_COL(14)), c7 = spa_vf_add(SPA_RVV_COL(7), SPA_RVV_COL(15));
#undef SPA_RVV_COL
        c0 = spa_vf_add(c0, c4);
        c1 = spa_vf_add(c1, c5);
        c2 = spa_vf_add(c2, c6);
        c3 = spa_vf_add(c3, c7);
        c0 = spa_vf_add(c0, c2);
        c1 = spa_vf_add(c1, c3);
        spa_vf_store(out + k0, spa_vf_add(c0, c1));
    }
}

SPA_ISA_INLINE int spa_isa_ctz32(uint32_t x) { return __builtin_ctz(x); }

/* float64 lanes (spa_vd) for the float64 kernels. */
#include "f64_rvv.h"

#endif
