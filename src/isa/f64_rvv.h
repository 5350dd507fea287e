/* The float64 part of the rvv layer: spa_vd, SPA_VDL = 4 double lanes.
 * Included by rvv.h; the operations are listed in f64_avx512.h. Reached only
 * through half.h.
 *
 * The float64 kernels keep their accumulators in arrays of spa_vd (chunks of
 * SPA_F64_NV vectors, src/core/f64_rows.h), which RVV types cannot be (they are
 * sizeless), so spa_vd is a GNU vector of four doubles: clang compiles its
 * arithmetic to RVV instructions at vl = 4 in a LMUL = 2 group (vsetivli 4,
 * e64, m2), right at any VLEN >= 128, as the f32 lanes. Tails go through the
 * intrinsics with vl = n (one stack round trip: a GNU vector and an RVV
 * register group do not convert into each other). */
#ifndef SPA_ISA_F64_RVV_H
#define SPA_ISA_F64_RVV_H

#define SPA_VDL 4
typedef double spa_vd __attribute__((vector_size(4 * sizeof(double))));
/* the same, for loads and stores at the alignment of a double */
typedef double spa_rvv_vd_mem __attribute__((vector_size(4 * sizeof(double)), aligned(sizeof(double)), may_alias));
typedef int64_t spa_rvv_vd_bits __attribute__((vector_size(4 * sizeof(double))));

SPA_ISA_INLINE spa_vd spa_vd_zero(void) { return (spa_vd){0.0, 0.0, 0.0, 0.0}; }
SPA_ISA_INLINE spa_vd spa_vd_set1(double x) { return (spa_vd){x, x, x, x}; }
SPA_ISA_INLINE spa_vd spa_vd_load(const double *p) { return *(const spa_rvv_vd_mem *)(const void *)p; }
SPA_ISA_INLINE void spa_vd_store(double *p, spa_vd v) { *(spa_rvv_vd_mem *)(void *)p = v; }
/* The first n lanes (vl = n): nothing read or written past them; loaded
 * lanes from n on are +0. */
SPA_ISA_INLINE spa_vd spa_vd_load_n(const double *p, int64_t n)
{
    double t[SPA_VDL];
    __riscv_vse64_v_f64m2(t, __riscv_vle64_v_f64m2_tu(__riscv_vfmv_v_f_f64m2(0.0, SPA_VDL), p, (size_t)n), SPA_VDL);
    return spa_vd_load(t);
}
SPA_ISA_INLINE void spa_vd_store_n(double *p, spa_vd v, int64_t n)
{
    double t[SPA_VDL];
    spa_vd_store(t, v);
    __riscv_vse64_v_f64m2(p, __riscv_vle64_v_f64m2(t, (size_t)n), (size_t)n);
}
SPA_ISA_INLINE spa_vd spa_vd_add(spa_vd a, spa_vd b) { return a + b; }
SPA_ISA_INLINE spa_vd spa_vd_sub(spa_vd a, spa_vd b) { return a - b; }
SPA_ISA_INLINE spa_vd spa_vd_mul(spa_vd a, spa_vd b) { return a * b; }
SPA_ISA_INLINE spa_vd spa_vd_div(spa_vd a, spa_vd b) { return a / b; }
/* one rounding (vfmacc.vv) */
SPA_ISA_INLINE spa_vd spa_vd_fma(spa_vd c, spa_vd a, spa_vd b) { return __builtin_elementwise_fma(a, b, c); }
/* The x86 rule (a > b ? a : b): a compare and a merge. */
SPA_ISA_INLINE spa_vd spa_vd_max(spa_vd a, spa_vd b)
{
    const spa_rvv_vd_bits gt = a > b;
    return (spa_vd)((gt & (spa_rvv_vd_bits)a) | (~gt & (spa_rvv_vd_bits)b));
}
SPA_ISA_INLINE spa_vd spa_vd_min(spa_vd a, spa_vd b)
{
    const spa_rvv_vd_bits lt = a < b;
    return (spa_vd)((lt & (spa_rvv_vd_bits)a) | (~lt & (spa_rvv_vd_bits)b));
}
/* 2^n for integer-valued n in [-1022, 1023] (the exp of src/core/f64_exp.h).
 * Not by a float-to-int conversion (vfcvt.rtz, which QEMU 7.2 mishandles):
 * n + 1.5 * 2^52 holds n in its low mantissa bits, and the shift by 52 keeps
 * only the low 12 bits of that plus the bias, which are n + 1023. */
SPA_ISA_INLINE spa_vd spa_vd_pow2i(spa_vd n)
{
    const spa_rvv_vd_bits m = (spa_rvv_vd_bits)(n + spa_vd_set1(0x1.8p52));
    return (spa_vd)((m + 1023) << 52);
}
/* by halves: (0 + 2) + (1 + 3) */
SPA_ISA_INLINE double spa_vd_hsum(spa_vd v) { return (v[0] + v[2]) + (v[1] + v[3]); }

#endif
