m4_divert(-1)
The register-tile micro-kernels of NsaSelectedAttention(+Grad), generated
for the target's ISA (gen/isa/<isa>.m4: SPA_VL lanes, SPA_VREGS vector
registers) on its layer (src/isa/<isa>.h); included by both op templates.
Each tile keeps R rows x NV vectors of accumulators in registers; for the
score and accumulate shapes NV vectors cover NV * SPA_VL of the GP = 8, 16 or 32
head lanes (passes over the rest), R as many rows as the registers hold.
Per output element the products are summed in one fixed order whatever the
tile, so the tile never changes a result; the ISA's FMA (fused, or a
multiply and an add on the scalar layer) does.

NSAS_NV<gp> / NSAS_R<gp>: operand vectors and rows of the tiles for GP = 8
(ISAs of at most 8 lanes), 16 and 32 (src/nsa/nsa_select_kernel.h, SPA_NSAS_GP_MIN). Rows of the row-update tile: 4 (its callers pass
multiples of 4), NSAS_RA_NV vectors along the head dim (at most 64 lanes).
SPA_PITCH_CONSTANTS (-D from the Makefile, 1 unless the build says 0): the
score and accumulate tiles are also compiled with the row pitch as a constant
for the common head dims 64, 128, 192 (the same source, constant-folded).
The sanitizer builds leave them out: under ASan + UBSan they made the select
kernels compile five times longer, and the run-time pitch runs the same code.
m4_ifdef(`SPA_PITCH_CONSTANTS', `', `m4_define(`SPA_PITCH_CONSTANTS', 1)')
m4_define(`NSAS_GP8', m4_eval(SPA_VL <= 8))
m4_define(`NSAS_NV8', SPA_BEST_COLS(m4_eval(8 / SPA_VL)))
m4_define(`NSAS_R8', SPA_FIT_ROWS(NSAS_NV8, 16))
m4_define(`NSAS_NV16', SPA_BEST_COLS(m4_eval(16 / SPA_VL)))
m4_define(`NSAS_R16', SPA_FIT_ROWS(NSAS_NV16, 16))
m4_define(`NSAS_NV32', SPA_BEST_COLS(m4_eval(32 / SPA_VL)))
m4_define(`NSAS_R32', SPA_FIT_ROWS(NSAS_NV32, 16))
m4_define(`NSAS_RA_FIT', `m4_ifelse(m4_eval($1 <= 1 || 5 * $1 + 2 <= SPA_VREGS), 1, $1, `NSAS_RA_FIT(m4_eval($1 / 2))')')
m4_define(`NSAS_RA_NV', NSAS_RA_FIT(m4_eval(64 / SPA_VL)))
SPA_NSAS_INDICES: a tile's sizes as ptrdiff_t (one register on 32-bit cores,
int64_t itself on 64-bit ones), from its int64_t parameters.
m4_define(`SPA_NSAS_INDICES', `const ptrdiff_t lda = (ptrdiff_t)lda_, rows = (ptrdiff_t)rows_, n = (ptrdiff_t)n_, gp = (ptrdiff_t)gp_;')
m4_define(`NSAS_TILE_NAME', `SPA_ISA`_g'$3`_'$1`x'm4_eval($2 * SPA_VL)')
NSAS_MK_TILE(gp): the tile name for that GP, NSAS_DISPATCH(kind, args): the
branch on gp calling the tile of each.
m4_define(`NSAS_MK_TILE', `NSAS_TILE_NAME(NSAS_R$1, NSAS_NV$1, $1)')
m4_define(`NSAS_DISPATCH', `m4_ifelse(NSAS_GP8, 1, `    if (gp == 8)
        spa_mk_nsas_$1_`'NSAS_MK_TILE(8)($2, 8, $3);
    else ')    if (gp == 16)
        spa_mk_nsas_$1_`'NSAS_MK_TILE(16)($2, 16, $3);
    else
        spa_mk_nsas_$1_`'NSAS_MK_TILE(32)($2, 32, $3);
')

Pieces of the tiles: accumulator r, v is c<r>_<v>; operand vector v is b<v>;
broadcast of row r is x<r>.
m4_define(`NSAS_ZERO', `            spa_vf c$1_$2 = spa_vf_zero();
')
m4_define(`NSAS_LDC', `            spa_vf c$1_$2 = spa_vf_load(cb + $1 * cs + $2 * SPA_VL);
')
m4_define(`NSAS_STC', `            spa_vf_store(cb + $1 * cs + $2 * SPA_VL, c$1_$2);
')
m4_define(`NSAS_LDB', `                    const spa_vf b$1 = spa_vf_load(bp + $1 * SPA_VL);
')
m4_define(`NSAS_LDX', `                    const spa_vb x$1 = spa_vb_load(xp + $1 * xs);
')
m4_define(`NSAS_FMA', `                    c$1_$2 = spa_vf_fmab(c$1_$2, b$2, x$1);
')
Quads (spa_vq: four consecutive broadcast operands, one register on NEON,
used by lane): the scores read four head-dim steps of a row at once, the
transposed accumulate four rows of one step (tiles of a multiple of 4 rows).
m4_define(`NSAS_LDQ', `                    const spa_vq q$1 = spa_vq_load(xp + $1 * xs);
')
m4_define(`NSAS_FMAQ', `                        c$1_$2 = spa_vf_fmaq(c$1_$2, b$2, q$1, NSAS_DD);
')
m4_define(`NSAS_QSTEP', `m4_define(`NSAS_DD', $1)m4_dnl
                    {
                        const float *bp = bt + (d + $1) * gp + l0;
SPA_FOR(NSAS_QNV, `NSAS_LDBQ')m4_dnl
SPA_FOR2(NSAS_QR, NSAS_QNV, `NSAS_FMAQ')m4_dnl
                    }
')
m4_define(`NSAS_LDBQ', `                        const spa_vf b$1 = spa_vf_load(bp + $1 * SPA_VL);
')
m4_define(`NSAS_LDQA', `                    const spa_vq q$1 = spa_vq_load(xp + 4 * $1);
')
m4_define(`NSAS_FMAQA', `                    c$1_$2 = spa_vf_fmaq(c$1_$2, b$2, q`'m4_eval($1 / 4), m4_eval($1 % 4));
')

Pairs (SPA_VB_PAIR 1: spa_vb_load2 reads two consecutive broadcast operands
in one instruction): the scores read two head-dim steps of each row at once
(x<r>_0, x<r>_1), the transposed accumulate two rows of one step.
m4_ifdef(`SPA_VB_PAIR', `', `m4_define(`SPA_VB_PAIR', 0)')
m4_define(`NSAS_LDX2', `                    spa_vb x$1_0, x$1_1;
                    spa_vb_load2(xp + $1 * xs, &x$1_0, &x$1_1);
')
m4_define(`NSAS_FMAP', `                        c$1_$2 = spa_vf_fmab(c$1_$2, b$2, x$1_`'NSAS_DD);
')
m4_define(`NSAS_PSTEP', `m4_define(`NSAS_DD', $1)m4_dnl
                    {
                        const float *bp = bt + (d + $1) * gp + l0;
SPA_FOR(NSAS_QNV, `NSAS_LDBQ')m4_dnl
SPA_FOR2(NSAS_QR, NSAS_QNV, `NSAS_FMAP')m4_dnl
                    }
')
m4_define(`NSAS_PAIR', `                {
                    const ptrdiff_t d = d0 + m4_eval(2 * $1);
                    const float *xp = a0 + d;
SPA_FOR(NSAS_QR, `NSAS_LDX2')m4_dnl
SPA_FOR(2, `NSAS_PSTEP')m4_dnl
                }
')
m4_define(`NSAS_LDXP', `                    spa_vb x`'m4_eval(2 * $1), x`'m4_eval(2 * $1 + 1);
                    spa_vb_load2(xp + m4_eval(2 * $1), &x`'m4_eval(2 * $1), &x`'m4_eval(2 * $1 + 1));
')

NSAS_SCORES_TILE(GP): out[j][l] = sum_d a[j*lda + d] * bt[d*gp + l].
m4_define(`NSAS_SCORES_TILE', `m4_ifelse(SPA_VB_PAIR, 1, `NSAS_SCORES_TILE_P', `NSAS_SCORES_TILE_')(NSAS_R$1, NSAS_NV$1, $1)')
NSAS_SP_ROWS(R, NV, from, to): the paired score tiles of R rows from row
from to row to (relative to jb), one after another.
m4_define(`NSAS_SP_ROWS', `            for (ptrdiff_t j0 = jb + $3; j0 < jb + $4; j0 += $1) {
                const float *a0 = a + j0 * lda;
                float *cb = out + j0 * gp + l0;
                const ptrdiff_t cs = gp, xs = lda;
SPA_FOR2($1, $2, `NSAS_ZERO')m4_dnl
                for (ptrdiff_t d0 = 0; d0 < n; d0 += 8) { /* n is a multiple of 16 */
                    spa_nsas_pf_row(pf);
m4_define(`NSAS_QR', $1)m4_define(`NSAS_QNV', $2)SPA_FOR(4, `NSAS_PAIR')m4_dnl
                }
SPA_FOR2($1, $2, `NSAS_STC')m4_dnl
            }
')
The forward (spa_nsas_scores_max) also gets tiles of three rows where 3 x NV
accumulators and NV operand vectors fit (the broadcasts in core registers):
16 rows as 4 x 3 + 2 x 2, spa_mk_nsas_scores3_*. (The grad keeps the
two-row tiles: the larger code would gain it little.)
m4_define(`NSAS_SCORES_TILE_P', `
/* scores, one register tile: gp, rows x head lanes as in the name; each
 * row read two head-dim steps at a time */
SPA_NSAS_INLINE void spa_mk_nsas_scores_`'NSAS_TILE_NAME($1, $2, $3)(const float *a, int64_t lda_, int64_t rows_,
        const float *bt, int64_t n_, int64_t gp_, float *out, spa_nsas_pf *pf)
{
    SPA_NSAS_INDICES
    for (ptrdiff_t l0 = 0; l0 < gp; l0 += m4_eval($2 * SPA_VL))
        for (ptrdiff_t j0 = 0; j0 < rows; j0 += $1) {
            const float *a0 = a + j0 * lda;
            float *cb = out + j0 * gp + l0;
            const ptrdiff_t cs = gp, xs = lda;
SPA_FOR2($1, $2, `NSAS_ZERO')m4_dnl
            for (ptrdiff_t d0 = 0; d0 < n; d0 += 8) { /* n is a multiple of 16 */
                spa_nsas_pf_row(pf);
m4_define(`NSAS_QR', $1)m4_define(`NSAS_QNV', $2)SPA_FOR(4, `NSAS_PAIR')m4_dnl
            }
SPA_FOR2($1, $2, `NSAS_STC')m4_dnl
        }
}

/* the same with 16 rows as 4 x 3 + 2 x 2 where three rows fit */
SPA_NSAS_INLINE void spa_mk_nsas_scores3_`'NSAS_TILE_NAME($1, $2, $3)(const float *a, int64_t lda_, int64_t rows_,
        const float *bt, int64_t n_, int64_t gp_, float *out, spa_nsas_pf *pf)
{
    SPA_NSAS_INDICES
    for (ptrdiff_t l0 = 0; l0 < gp; l0 += m4_eval($2 * SPA_VL))
        for (ptrdiff_t jb = 0; jb < rows; jb += 16) {
m4_ifelse(m4_eval(4 * $2 <= SPA_VREGS), 1, `NSAS_SP_ROWS(3, $2, 0, 12)NSAS_SP_ROWS(2, $2, 12, 16)', `NSAS_SP_ROWS($1, $2, 0, 16)')m4_dnl
        }
}
')
m4_define(`NSAS_SCORES_TILE_', `
/* scores, one register tile: gp, rows x head lanes as in the name */
SPA_NSAS_INLINE void spa_mk_nsas_scores_`'NSAS_TILE_NAME($1, $2, $3)(const float *a, int64_t lda_, int64_t rows_,
        const float *bt, int64_t n_, int64_t gp_, float *out, spa_nsas_pf *pf)
{
    SPA_NSAS_INDICES
    for (ptrdiff_t l0 = 0; l0 < gp; l0 += m4_eval($2 * SPA_VL))
        for (ptrdiff_t j0 = 0; j0 < rows; j0 += $1) {
            const float *a0 = a + j0 * lda;
            float *cb = out + j0 * gp + l0;
            const ptrdiff_t cs = gp, xs = lda;
SPA_FOR2($1, $2, `NSAS_ZERO')m4_dnl
            for (ptrdiff_t d0 = 0; d0 < n; d0 += 8) { /* n is a multiple of 16 */
                spa_nsas_pf_row(pf);
#pragma GCC unroll 2
                for (ptrdiff_t d = d0; d < d0 + 8; d += 4) {
                    const float *xp = a0 + d;
SPA_FOR($1, `NSAS_LDQ')m4_dnl
m4_define(`NSAS_QR', $1)m4_define(`NSAS_QNV', $2)SPA_FOR(4, `NSAS_QSTEP')m4_dnl
                }
            }
SPA_FOR2($1, $2, `NSAS_STC')m4_dnl
        }
}
')

NSAS_ASTEP(k): row j0 + k of the paired transposed accumulate.
m4_define(`NSAS_ASTEP', `                {
                    const float *bp = p + (j0 + $1) * gp + l0;
SPA_FOR(NSAS_ANV, `NSAS_LDB')m4_dnl
SPA_FOR(m4_eval(NSAS_AR / 2 - 1), `NSAS_LDXP')m4_dnl
                    spa_vb x`'m4_eval(NSAS_AR - 2), x`'m4_eval(NSAS_AR - 1);
                    spa_vb_load2_post(&xp, lda, &x`'m4_eval(NSAS_AR - 2), &x`'m4_eval(NSAS_AR - 1));
SPA_FOR2(NSAS_AR, NSAS_ANV, `NSAS_FMA')m4_dnl
                }
')

NSAS_ACCUM_TILE(GP): acc[e][l] += sum_j a[j*lda + e] * p[j*gp + l].
m4_define(`NSAS_ACCUM_TILE', `m4_ifelse(m4_eval(SPA_VB_PAIR && NSAS_R$1 % 2 == 0), 1, `NSAS_ACCUM_TILE_P', `NSAS_ACCUM_TILE_')(NSAS_R$1, NSAS_NV$1, $1)')
m4_define(`NSAS_ACCUM_TILE_P', `
/* transposed accumulate, one register tile: gp, rows x head lanes as in the
 * name; the operands of a step read in pairs, the last pair stepping to the
 * next row */
SPA_NSAS_INLINE void spa_mk_nsas_accum_t_`'NSAS_TILE_NAME($1, $2, $3)(const float *a, int64_t lda_, int64_t rows_,
        const float *p, int64_t n_, int64_t gp_, float *acc, spa_nsas_pf *pf)
{
    SPA_NSAS_INDICES
    for (ptrdiff_t l0 = 0; l0 < gp; l0 += m4_eval($2 * SPA_VL))
        for (ptrdiff_t e0 = 0; e0 < n; e0 += $1) {
            float *cb = acc + e0 * gp + l0;
            const ptrdiff_t cs = gp;
            const float *xp = a + e0;
SPA_FOR2($1, $2, `NSAS_LDC')m4_dnl
            for (ptrdiff_t j0 = 0; j0 < rows; j0 += 8) { /* rows is a multiple of 16 */
                spa_nsas_pf_row(pf);
m4_define(`NSAS_AR', $1)m4_define(`NSAS_ANV', $2)SPA_FOR(8, `NSAS_ASTEP')m4_dnl
            }
SPA_FOR2($1, $2, `NSAS_STC')m4_dnl
        }
}
')
m4_define(`NSAS_ACCUM_TILE_', `
/* transposed accumulate, one register tile: gp, rows x head lanes as in the name */
SPA_NSAS_INLINE void spa_mk_nsas_accum_t_`'NSAS_TILE_NAME($1, $2, $3)(const float *a, int64_t lda_, int64_t rows_,
        const float *p, int64_t n_, int64_t gp_, float *acc, spa_nsas_pf *pf)
{
    SPA_NSAS_INDICES
    for (ptrdiff_t l0 = 0; l0 < gp; l0 += m4_eval($2 * SPA_VL))
        for (ptrdiff_t e0 = 0; e0 < n; e0 += $1) {
            float *cb = acc + e0 * gp + l0;
            const ptrdiff_t cs = gp;
m4_ifelse(m4_eval($1 % 4), 0, `', `            const ptrdiff_t xs = 1;
')m4_dnl
SPA_FOR2($1, $2, `NSAS_LDC')m4_dnl
            for (ptrdiff_t j0 = 0; j0 < rows; j0 += 8) { /* rows is a multiple of 16 */
                spa_nsas_pf_row(pf);
#pragma GCC unroll 8
                for (ptrdiff_t j = j0; j < j0 + 8; j++) {
                    const float *bp = p + j * gp + l0, *xp = a + j * lda + e0;
SPA_FOR($2, `NSAS_LDB')m4_dnl
m4_ifelse(m4_eval($1 % 4), 0, `SPA_FOR(m4_eval($1 / 4), `NSAS_LDQA')SPA_FOR2($1, $2, `NSAS_FMAQA')', `SPA_FOR($1, `NSAS_LDX')SPA_FOR2($1, $2, `NSAS_FMA')')m4_dnl
                }
            }
SPA_FOR2($1, $2, `NSAS_STC')m4_dnl
        }
}
')

NSAS_ROWS_ADD_STEP(NV, prefetch): one pass of the row update over NV vectors
of the head dim at e0 (the 4 x NV tile). Unrolled by 4 over the heads where
general-purpose registers are few (the rows of w then at constant
displacements: see spa_nsas_rows_add), to spread the loop's own instructions.
m4_define(`NSAS_ROWS_ADD_STEP', `        {
            float *cb = oj + e0;
            const ptrdiff_t cs = n, xs = gp;
SPA_FOR2(4, $1, `NSAS_LDC')m4_dnl
$2m4_ifelse(m4_eval(SPA_VL > 1 && SPA_GPRS < 16), 1, `#pragma GCC unroll 4
')m4_dnl
            for (ptrdiff_t c = 0; c < g; c++) {
                {
                    const float *bp = b + c * n + e0, *xp = wj + c;
SPA_FOR($1, `NSAS_LDB')m4_dnl
SPA_FOR(4, `NSAS_LDX')m4_dnl
SPA_FOR2(4, $1, `NSAS_FMA')m4_dnl
                }
            }
SPA_FOR2(4, $1, `NSAS_STC')m4_dnl
        }
')
NSAS_EXP_SUM: the softmax numerators and sums of the forward, spa_nsas_exp_sum
(src/nsa/nsa_select_mk.h), or where add and multiply take a broadcast
operand from a core register (SPA_VB_ARITH 1) spa_nsas_exp_sum_vb below; only
for a max m computed from the same scores (the grads, given m, call
spa_nsas_exp_sum).
m4_ifdef(`SPA_VB_ARITH', `', `m4_define(`SPA_VB_ARITH', 0)')
m4_define(`NSAS_EXP_SUM', m4_ifelse(SPA_VB_ARITH, 1, `spa_nsas_exp_sum_vb', `spa_nsas_exp_sum'))
m4_divert(0)m4_dnl
m4_ifelse(SPA_VB_ARITH, 1, `
/* spa_nsas_exp_sum with the constants of the exp as broadcast operands in
 * core registers (where vector registers are few they would be spilled and
 * reloaded per vector). The same operations in the same order, so the same
 * bits, but for the clamps, which are left out. The lower one (-87.5)
 * changes x only where x < -87, whose result is +0 either way (the last
 * select tests x itself), and the arithmetic on such lanes raises no trap.
 * The upper one (88) changes nothing in the forward, the one caller: its m
 * is the max of the scores themselves, so x = s - m <= 0 or NaN (a NaN
 * score, whose row is NaN whatever the other lanes give). */
SPA_NSAS_INLINE void spa_nsas_exp_sum_vb(float *x, int64_t rows_, int64_t gp_, const float *m, float *sum)
{
    const ptrdiff_t rows = (ptrdiff_t)rows_, gp = (ptrdiff_t)gp_;
    const spa_vf low = spa_vf_set1(SPA_NSAS_EXP_LOW);
    const spa_vb log2e = spa_vb_set(1.44269504088896341f), ln2hi = spa_vb_set(0.693359375f),
                 ln2lo = spa_vb_set(-2.12194440e-4f), c7 = spa_vb_set(1.98412698e-4f),
                 c6 = spa_vb_set(1.38888889e-3f), c5 = spa_vb_set(8.33333333e-3f),
                 c4 = spa_vb_set(4.16666667e-2f), c3 = spa_vb_set(1.66666667e-1f),
                 c2 = spa_vb_set(0.5f), one = spa_vb_set(1.0f);
    for (ptrdiff_t l0 = 0; l0 < gp; l0 += SPA_VL) {
        const spa_vf mv = spa_vf_load(m + l0);
        spa_vf acc = spa_vf_zero();
        float *xj = x + l0;
        for (ptrdiff_t j = 0; j < rows; j++, xj += gp) {
            const spa_vf xv = spa_vf_sub(spa_vf_load(xj), mv);
            const spa_vf n = spa_vf_round(spa_vf_mulb(xv, log2e));
            spa_vf r = spa_vf_sub(xv, spa_vf_mulb(n, ln2hi));
            r = spa_vf_sub(r, spa_vf_mulb(n, ln2lo));
            spa_vf p = spa_vf_addb(spa_vf_mulb(r, c7), c6);
            p = spa_vf_addb(spa_vf_mul(p, r), c5);
            p = spa_vf_addb(spa_vf_mul(p, r), c4);
            p = spa_vf_addb(spa_vf_mul(p, r), c3);
            p = spa_vf_addb(spa_vf_mul(p, r), c2);
            p = spa_vf_addb(spa_vf_mul(p, r), one);
            p = spa_vf_addb(spa_vf_mul(p, r), one);
            const spa_vf e = spa_vf_zero_below(spa_vf_scale2(p, n), xv, low);
            spa_vf_store(xj, e);
            acc = spa_vf_add(acc, e);
        }
        spa_vf_store(sum + l0, acc);
    }
}
')m4_dnl
/* ---- register-tile micro-kernels of the target's ISA, generated from
 * templates/nsa/nsa_select_mk.m4 (tiles named <isa>_<rows>x<lanes>) ---- */
m4_ifelse(NSAS_GP8, 1, `NSAS_SCORES_TILE(8)')m4_dnl
NSAS_SCORES_TILE(16)m4_dnl
NSAS_SCORES_TILE(32)m4_dnl

/* scores: out[j][l] = sum_d a[j*lda + d] * bt[d*gp + l], rows a multiple of
 * 16, gp 8, 16 or 32: Q Kᵀ (a = key rows, bt = query heads transposed) and
 * dY Vᵀ in the grad. */
SPA_NSAS_INLINE void spa_nsas_scores(const float *a, int64_t lda, int64_t rows, const float *bt,
                                     int64_t n, int64_t gp, float *out, spa_nsas_pf *pf)
{
NSAS_DISPATCH(`scores', `a, lda, rows, bt, n', `out, pf')m4_dnl
}

/* The scores with the row pitch as a constant for the common head dims: the
 * rows of a tile then sit at constant displacements from one pointer, where
 * a run-time pitch needs a register per row. */
SPA_NSAS_INLINE void spa_nsas_scores_pitch(const float *a, int64_t lda, int64_t rows,
                                           const float *bt, int64_t n, int64_t gp, float *out,
                                           spa_nsas_pf *pf)
{
m4_ifelse(m4_eval(SPA_VL == 1 || !SPA_PITCH_CONSTANTS), 1, `', `m4_dnl
    switch (lda) {
    case 64:
        spa_nsas_scores(a, 64, rows, bt, n, gp, out, pf);
        return;
    case 128:
        spa_nsas_scores(a, 128, rows, bt, n, gp, out, pf);
        return;
    case 192:
        spa_nsas_scores(a, 192, rows, bt, n, gp, out, pf);
        return;
    default:
        break;
    }
')m4_dnl
    spa_nsas_scores(a, lda, rows, bt, n, gp, out, pf);
}

m4_ifelse(SPA_VB_PAIR, 1, `
/* The scores of the forward: spa_nsas_scores_pitch on the tiles of three
 * rows (spa_mk_nsas_scores3_*). */
SPA_NSAS_INLINE void spa_nsas_scores3(const float *a, int64_t lda, int64_t rows, const float *bt,
                                      int64_t n, int64_t gp, float *out, spa_nsas_pf *pf)
{
NSAS_DISPATCH(`scores3', `a, lda, rows, bt, n', `out, pf')m4_dnl
}

SPA_NSAS_INLINE void spa_nsas_scores3_pitch(const float *a, int64_t lda, int64_t rows,
                                            const float *bt, int64_t n, int64_t gp, float *out,
                                            spa_nsas_pf *pf)
{
m4_ifelse(SPA_PITCH_CONSTANTS, 1, `m4_dnl
    switch (lda) {
    case 64:
        spa_nsas_scores3(a, 64, rows, bt, n, gp, out, pf);
        return;
    case 128:
        spa_nsas_scores3(a, 128, rows, bt, n, gp, out, pf);
        return;
    case 192:
        spa_nsas_scores3(a, 192, rows, bt, n, gp, out, pf);
        return;
    default:
        break;
    }
')m4_dnl
    spa_nsas_scores3(a, lda, rows, bt, n, gp, out, pf);
}
')m4_dnl

m4_define(`NSAS_SCORES_MAX_FN', `/* scaled scores and their max, forward:
 * out[j][l] = scale * sum_d a[j*lda + d] * bt[d*gp + l] for the valid rows
 * j < min(nvalid, nin), MASKVAL (-FLT_MAX) for the causally masked rest of
 * the rows inside the KV of the batch (j < nin), -inf for the rows past its end
 * (a partial last block: never attended, even where every score of the row
 * is masked); mx[l] = max(mx[l], valid rows). The masked and outside rows
 * are suffixes of the block. rows a multiple of 16; a tile of 16 rows with
 * no valid row skips its products. */
SPA_NSAS_INLINE void $1(const $2 *a, int64_t lda, int64_t rows, int64_t nvalid,
                                         int64_t nin, const $3 *bt, int64_t n, int64_t gp,
                                         float scale, float *out, float *mx, spa_nsas_pf *pf)
{
    const spa_vf sv = spa_vf_set1(scale), masked = spa_vf_set1(-FLT_MAX),
                 outside = spa_vf_set1(-INFINITY);
    for (int64_t j0 = 0; j0 < rows; j0 += 16) {
        float *o = out + j0 * gp;
        const int64_t in = nin - j0 < 0 ? 0 : nin - j0 > 16 ? 16 : nin - j0;
        int64_t valid = nvalid - j0 < 0 ? 0 : nvalid - j0 > 16 ? 16 : nvalid - j0;
        valid = valid < in ? valid : in;
        if (valid > 0)
            $4(a + j0 * lda, lda, 16, bt, n, gp, o, pf);
        for (int64_t l0 = 0; l0 < gp; l0 += SPA_VL) {
            spa_vf m = spa_vf_load(mx + l0);
            int64_t r = 0;
            for (; r < valid; r++) {
                const spa_vf z = spa_vf_mul(sv, spa_vf_load(o + r * gp + l0));
                spa_vf_store(o + r * gp + l0, z);
                m = spa_vf_max(m, z);
            }
            for (; r < in; r++)
                spa_vf_store(o + r * gp + l0, masked);
            for (; r < 16; r++)
                spa_vf_store(o + r * gp + l0, outside);
            spa_vf_store(mx + l0, m);
        }
    }
}
')m4_dnl
NSAS_SCORES_MAX_FN(`spa_nsas_scores_max', `float', `float', m4_ifelse(SPA_VB_PAIR, 1, `spa_nsas_scores3_pitch', `spa_nsas_scores_pitch'))m4_dnl
m4_ifelse(NSAS_GP8, 1, `NSAS_ACCUM_TILE(8)')m4_dnl
NSAS_ACCUM_TILE(16)m4_dnl
NSAS_ACCUM_TILE(32)m4_dnl

/* transposed accumulate, any row pitch: see spa_nsas_accum_t */
SPA_NSAS_INLINE void spa_nsas_accum_t_any(const float *a, int64_t lda, int64_t rows, const float *p,
                                          int64_t n, int64_t gp, float *acc, spa_nsas_pf *pf)
{
NSAS_DISPATCH(`accum_t', `a, lda, rows, p, n', `acc, pf')m4_dnl
}

/* transposed accumulate: acc[e][l] += sum_j a[j*lda + e] * p[j*gp + l],
 * e < n (a multiple of 16): P V (a = value rows, p = P) and dSᵀ K (dQ).
 * Where general-purpose registers are few (SPA_GPRS < 16) the row pitch is
 * a constant for the common head dims, as in the scores: the eight rows of
 * an unrolled pass then sit at constant displacements from one pointer,
 * where a run-time pitch needs a register per row. (With 16 or more, the
 * pointers are cheaper than the larger code.) */
SPA_NSAS_INLINE void spa_nsas_accum_t(const float *a, int64_t lda, int64_t rows, const float *p,
                                      int64_t n, int64_t gp, float *acc, spa_nsas_pf *pf)
{
m4_ifelse(m4_eval(SPA_VL == 1 || SPA_GPRS >= 16 || !SPA_PITCH_CONSTANTS), 1, `', `m4_dnl
    switch (lda) {
    case 64:
        spa_nsas_accum_t_any(a, 64, rows, p, n, gp, acc, pf);
        return;
    case 128:
        spa_nsas_accum_t_any(a, 128, rows, p, n, gp, acc, pf);
        return;
    case 192:
        spa_nsas_accum_t_any(a, 192, rows, p, n, gp, acc, pf);
        return;
    default:
        break;
    }
')m4_dnl
    spa_nsas_accum_t_any(a, lda, rows, p, n, gp, acc, pf);
}

/* row update: out[j*n + e] += sum_{c<g} w[j*gp + c] * b[c*n + e], rows a
 * multiple of 4, n a multiple of 16: the dK rows (w = dS, b = Q) and dV rows
 * (w = P, b = dY) of one token; heads summed in ascending order. Tiles of 4
 * rows x the widest run of the head dim the registers hold (at most 64
 * lanes), then 16 lanes at a time for the rest. */
SPA_NSAS_INLINE void spa_nsas_rows_add_any(const float *w, int64_t rows_, int64_t gp_, const float *b,
                                           int64_t g_, int64_t n_, float *out, spa_nsas_pf *pf)
{
    const ptrdiff_t rows = (ptrdiff_t)rows_, gp = (ptrdiff_t)gp_, g = (ptrdiff_t)g_, n = (ptrdiff_t)n_;
    for (ptrdiff_t j0 = 0; j0 < rows; j0 += 4) {
        const float *wj = w + j0 * gp;
        float *oj = out + j0 * n;
        ptrdiff_t e0 = 0;
        for (; e0 + m4_eval(NSAS_RA_NV * SPA_VL) <= n; e0 += m4_eval(NSAS_RA_NV * SPA_VL))
NSAS_ROWS_ADD_STEP(NSAS_RA_NV, `            spa_nsas_pf_row(pf);
')m4_dnl
m4_ifelse(m4_eval(NSAS_RA_NV * SPA_VL > 16), 1, `m4_dnl
        for (; e0 < n; e0 += 16)
NSAS_ROWS_ADD_STEP(m4_eval(16 / SPA_VL), `')m4_dnl
')m4_dnl
    }
}

/* The row update, with the head group's lane count gp (8, 16 or 32) a
 * constant where general-purpose registers are few (SPA_GPRS < 16): the
 * four rows of w then sit at constant displacements from one pointer. */
SPA_NSAS_INLINE void spa_nsas_rows_add(const float *w, int64_t rows, int64_t gp, const float *b, int64_t g,
                                       int64_t n, float *out, spa_nsas_pf *pf)
{
m4_ifelse(m4_eval(SPA_VL == 1 || SPA_GPRS >= 16), 1, `', `m4_dnl
    switch (gp) {
m4_ifelse(NSAS_GP8, 1, `    case 8:
        spa_nsas_rows_add_any(w, rows, 8, b, g, n, out, pf);
        return;
')m4_dnl
    case 16:
        spa_nsas_rows_add_any(w, rows, 16, b, g, n, out, pf);
        return;
    case 32:
        spa_nsas_rows_add_any(w, rows, 32, b, g, n, out, pf);
        return;
    default:
        break;
    }
')m4_dnl
    spa_nsas_rows_add_any(w, rows, gp, b, g, n, out, pf);
}
