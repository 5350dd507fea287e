/* Lane-wise helpers of the NsaSelectedAttention(+Grad) micro-kernels, on the
 * target's ISA layer (src/isa/<isa>.h): the prefetch cursor, the branch-free
 * exp of the softmax and the in-place rounding of P and dS to the dtype.
 * Scores are kept "key-major": row j of a score tile holds the GP = 8, 16 or 32
 * query heads of the group in lanes (padded heads are 0), so every operation
 * here runs over whole vectors of heads (GP is a multiple of every SPA_VL).
 * The register-tile GEMM kernels are generated per ISA from
 * templates/nsa/nsa_select_mk.m4. */
#ifndef SPA_NSA_SELECT_MK_H
#define SPA_NSA_SELECT_MK_H

#include <float.h>
#include <math.h> /* INFINITY */
#include <stddef.h>
#include <stdint.h>

#include "half.h"
#include "nsa_select_kernel.h"

#if defined(__GNUC__)
#define SPA_NSAS_INLINE static inline __attribute__((always_inline, unused))
#define SPA_NSAS_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#else
#define SPA_NSAS_INLINE static inline
#define SPA_NSAS_PREFETCH(p) ((void)(p))
#endif

/* A prefetch cursor over `rows` rows of `bytes` bytes, `stride` bytes apart:
 * the micro-kernels request one row (all its lines) every eight inner
 * iterations, so the next chunk's rows arrive while this chunk is computed,
 * spread out (a burst would stall on the miss buffers); the eight iterations
 * between requests are unrolled, with no test in them. Hints only. */
typedef struct spa_nsas_pf {
    const char *row;
    int64_t stride, bytes, rows;
} spa_nsas_pf;

SPA_NSAS_INLINE spa_nsas_pf spa_nsas_pf_rows(const void *base, int64_t stride, int64_t rows,
                                             int64_t bytes)
{
    /* no rows to request where the layer takes no hints (SPA_ISA_PREFETCH
     * 0): the cursors and their loops fold away */
    spa_nsas_pf p = {base, stride, bytes, base != NULL && SPA_ISA_PREFETCH ? rows : 0};
    return p;
}

SPA_NSAS_INLINE void spa_nsas_pf_row(spa_nsas_pf *p)
{
    if (SPA_ISA_PREFETCH && p->rows > 0) {
        for (int64_t off = 0; off < p->bytes; off += 64)
            SPA_NSAS_PREFETCH(p->row + off);
        p->rows--;
        if (p->rows > 0) /* never point past the last row */
            p->row += p->stride;
    }
}

/* Whatever the kernel did not reach. */
SPA_NSAS_INLINE void spa_nsas_pf_rest(spa_nsas_pf *p)
{
    while (SPA_ISA_PREFETCH && p->rows > 0)
        spa_nsas_pf_row(p);
}

/* ---- rounding f32 values to the nearest f16 / bf16 (kept as f32) ----
 * P and dS "in the dtype" as the spec computes them: the values of half.h
 * bit for bit (RNE, NaN kept NaN) on every ISA. */

/* x[0..n) rounded to bf16 (bf16 != 0) or f16 in place, n a multiple of 16. */
SPA_NSAS_INLINE void spa_nsas_round(float *x, int64_t n, int bf16)
{
    for (int64_t i = 0; i < n; i += SPA_VL) {
        const spa_vf v = spa_vf_load(x + i);
        spa_vf_store(x + i, bf16 ? spa_vf_round_bf16(v) : spa_vf_round_f16(v));
    }
}

/* x[j][l] = round(x[j][l] * s[l]) to bf16 (bf16 != 0) or f16, over rows of gp
 * (8, 16 or 32) lanes: the forward's P = exp(z' - m) * (1/l) in the dtype, in one
 * pass. */
SPA_NSAS_INLINE void spa_nsas_scale_round(float *x, int64_t rows_, int64_t gp_, const float *s,
                                          int bf16)
{
    const ptrdiff_t rows = (ptrdiff_t)rows_, gp = (ptrdiff_t)gp_;
    for (ptrdiff_t l0 = 0; l0 < gp; l0 += SPA_VL) {
        const spa_vf sv = spa_vf_load(s + l0);
        for (ptrdiff_t j = 0; j < rows; j++) {
            const spa_vf v = spa_vf_mul(spa_vf_load(x + j * gp + l0), sv);
            spa_vf_store(x + j * gp + l0, bf16 ? spa_vf_round_bf16(v) : spa_vf_round_f16(v));
        }
    }
}

/* ---- exp ----
 * exp(x) for the softmax, x <= 0 in practice: n = round(x / ln 2),
 * r = x - n ln 2 (two-part constant), Taylor polynomial of degree 7 on
 * |r| <= ln2/2 (truncation < 2^-27), times 2^n. Below -87 the result is +0
 * exactly (masked scores, MASKVAL = -FLT_MAX, must give P == 0); NaN gives
 * NaN, so that a NaN score makes its softmax row NaN: the clamps take x as
 * their second operand, which the x86 rule of spa_vf_max / spa_vf_min
 * passes through when it is NaN, and the last select zeroes only lanes
 * that are ordered below the bound. Separate multiplies and adds, no FMA:
 * the same bits on every ISA. */
#define SPA_NSAS_EXP_LOW (-87.0f)

/* The constants of spa_nsas_expv, as floats: broadcast where they are used
 * (constant vectors, which the compilers keep in registers across a loop as
 * before), since the vector types of some layers (RVV) are sizeless and
 * cannot be struct members. */
typedef struct spa_nsas_expk {
    float lo, hi, log2e, ln2hi, ln2lo, c7, c6, c5, c4, c3, c2, one, low;
} spa_nsas_expk;

SPA_NSAS_INLINE spa_nsas_expk spa_nsas_expk_set(void)
{
    const spa_nsas_expk k = {-87.5f,         88.0f,          1.44269504088896341f, 0.693359375f, -2.12194440e-4f,
                             1.98412698e-4f, 1.38888889e-3f, 8.33333333e-3f,       4.16666667e-2f, 1.66666667e-1f,
                             0.5f,           1.0f,           SPA_NSAS_EXP_LOW};
    return k;
}

SPA_NSAS_INLINE spa_vf spa_nsas_expv(spa_vf x, const spa_nsas_expk *k)
{
    spa_vf xc = spa_vf_max(spa_vf_set1(k->lo), x);
    xc = spa_vf_min(spa_vf_set1(k->hi), xc);
    const spa_vf n = spa_vf_round(spa_vf_mul(xc, spa_vf_set1(k->log2e)));
    spa_vf r = spa_vf_sub(xc, spa_vf_mul(n, spa_vf_set1(k->ln2hi)));
    r = spa_vf_sub(r, spa_vf_mul(n, spa_vf_set1(k->ln2lo)));
    spa_vf p = spa_vf_set1(k->c7);
    p = spa_vf_add(spa_vf_mul(p, r), spa_vf_set1(k->c6));
    p = spa_vf_add(spa_vf_mul(p, r), spa_vf_set1(k->c5));
    p = spa_vf_add(spa_vf_mul(p, r), spa_vf_set1(k->c4));
    p = spa_vf_add(spa_vf_mul(p, r), spa_vf_set1(k->c3));
    p = spa_vf_add(spa_vf_mul(p, r), spa_vf_set1(k->c2));
    p = spa_vf_add(spa_vf_mul(p, r), spa_vf_set1(k->one));
    p = spa_vf_add(spa_vf_mul(p, r), spa_vf_set1(k->one));
    return spa_vf_zero_below(spa_vf_scale2(p, n), x, spa_vf_set1(k->low));
}

/* x[0..n) = exp(x[0..n)), n a multiple of 16. */
SPA_NSAS_INLINE void spa_nsas_exp_row(float *x, int64_t n)
{
    const spa_nsas_expk k = spa_nsas_expk_set();
    for (int64_t i = 0; i < n; i += SPA_VL)
        spa_vf_store(x + i, spa_nsas_expv(spa_vf_load(x + i), &k));
}

/* x[j][l] = exp(x[j][l] - m[l]) and sum[l] = sum_j x[j][l] (in row order)
 * over rows of gp (8, 16 or 32) lanes: the softmax numerators in one pass. */
SPA_NSAS_INLINE void spa_nsas_exp_sum(float *x, int64_t rows, int64_t gp, const float *m,
                                      float *sum)
{
    const spa_nsas_expk k = spa_nsas_expk_set();
    for (int64_t l0 = 0; l0 < gp; l0 += SPA_VL) {
        const spa_vf mv = spa_vf_load(m + l0);
        spa_vf acc = spa_vf_zero();
        for (int64_t j = 0; j < rows; j++) {
            float *xj = x + j * gp + l0;
            const spa_vf e = spa_nsas_expv(spa_vf_sub(spa_vf_load(xj), mv), &k);
            spa_vf_store(xj, e);
            acc = spa_vf_add(acc, e);
        }
        spa_vf_store(sum + l0, acc);
    }
}

#endif
