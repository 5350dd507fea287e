/* exp in double lanes for the float64 softmax kernels (templates/f64/),
 * over the layer's spa_vd (src/isa/f64_*.h): x clamped to [-709.1, 709.8],
 * n = round(x / ln 2) (the 1.5 * 2^52 shifter: an add and a subtract, the
 * same on every layer), r = x - n ln 2 with a two-part ln 2 (n ln2hi is
 * exact), the Taylor polynomial of degree 12 on |r| < 0.35 (truncation
 * below 2e-16 relative), times 2^n (spa_vd_pow2i). Below about -708.4
 * (masked scores, -FLT_MAX) the result is +0 exactly; above 709.5 it is
 * +inf; NaN gives NaN (the clamps take x as their second operand, which
 * the x86 rule of spa_vd_max / spa_vd_min passes through when NaN), so a
 * NaN score makes its softmax row NaN. Accurate to a few ulp: libm's exp is
 * not needed (one call per score was most of the time). Included by the
 * generated kernels after half.h. */
#ifndef SPA_F64_EXP_H
#define SPA_F64_EXP_H

/* The constants, set once before a loop so that they stay in registers. */
typedef struct spa_f64_expk {
    spa_vd lo, hi, log2e, shift, ln2hi, ln2lo, c[13];
} spa_f64_expk;

SPA_ISA_INLINE spa_f64_expk spa_f64_expk_set(void)
{
    spa_f64_expk k;
    k.lo = spa_vd_set1(-709.1);
    k.hi = spa_vd_set1(709.8);
    k.log2e = spa_vd_set1(1.4426950408889634074);
    k.shift = spa_vd_set1(6755399441055744.0); /* 1.5 * 2^52 */
    k.ln2hi = spa_vd_set1(6.93147180369123816490e-01); /* 32 bits: n * ln2hi is exact */
    k.ln2lo = spa_vd_set1(1.90821492927058770002e-10);
    double f = 1.0;
    for (int i = 0; i <= 12; i++) { /* c[i] = 1 / i! */
        f = i > 1 ? f / (double)i : 1.0;
        k.c[i] = spa_vd_set1(f);
    }
    return k;
}

SPA_ISA_INLINE spa_vd spa_f64_expv(spa_vd x, const spa_f64_expk *k)
{
    const spa_vd xc = spa_vd_min(k->hi, spa_vd_max(k->lo, x));
    const spa_vd n = spa_vd_sub(spa_vd_add(spa_vd_mul(xc, k->log2e), k->shift), k->shift);
    spa_vd r = spa_vd_sub(xc, spa_vd_mul(n, k->ln2hi));
    r = spa_vd_sub(r, spa_vd_mul(n, k->ln2lo));
    spa_vd p = k->c[12];
    for (int i = 11; i >= 0; i--)
        p = spa_vd_fma(k->c[i], p, r);
    return spa_vd_mul(p, spa_vd_pow2i(n));
}

#endif
