SPA_STAMP
/* NsaCompressGrad, one block of tokens of one batch (spec/nsa.md 2.2).
 * Each token gathers w[j][h] * dY[window] from the windows that cover it, so
 * every inputGrad element is written once (no scatter, no atomics) and tokens
 * no window covers get +0. The same pass adds sum_d dY*x into the block's
 * weightGrad partials. Tile TT tokens x TC channels (enum below), the channels
 * being a group of whole heads: the outputGrad rows touching the tile are
 * widened once into the scratch, then the tile's tokens are read in order. */
#include <stdbool.h>
#include <stdint.h>

#include "half.h"
#include "nsa_compress_kernel.h"
#include "native_div.h"

enum { TC = NSACG_TC, LANES = 16 }; /* tokens per tile: a->tt (plan time, <= NSACG_TT) */

m4_divert(-1)
The register tile of one token and head: NSACG_NV vectors of channels (a
multiple of 16 channels) hold the inputGrad sums while the token's windows
are added in ascending order; each window's 16 dot-product lanes (lane j
sums channels j, j+16, ...) live in memory, the channel blocks ascending.
NV: the most (at most 8, at most 128 channels, at least 16 channels) for
which 3 NV + 4 vector registers hold the sums, the input row, one outputGrad
row and the weight.
m4_define(`NSACG_NV_FIT', `m4_ifelse(m4_eval($1 * SPA_VL <= 16 || 3 * $1 + 4 <= SPA_VREGS), 1, $1, `NSACG_NV_FIT(m4_eval($1 / 2))')')
m4_define(`NSACG_NVMIN', m4_eval(16 / SPA_VL))
m4_define(`NSACG_NV', NSACG_NV_FIT(m4_ifelse(m4_eval(128 / SPA_VL > 8), 1, m4_ifelse(m4_eval(NSACG_NVMIN > 8), 1, NSACG_NVMIN, 8), m4_eval(128 / SPA_VL))))
m4_define(`NSACG_VLOAD', m4_ifelse(SPA_DT, `f16', ``spa_vf_load_f16($1)'', SPA_DT, `bf16', ``spa_vf_load_bf16($1)'', ``spa_vf_load($1)''))
NSACG_XREG: 1 where the NV input vectors stay in registers over the
windows (3 NV + 4 vector registers, as above); 0 where NV had to stay at 16
channels without that room (eight registers: the sums alone take four), and
each window reads the input vectors again (NSACG_XLD, the loader of the
token variant) rather than spilling them. The scalar layer keeps them.
m4_define(`NSACG_XREG', m4_eval(SPA_VL == 1 || 3 * NSACG_NV + 4 <= SPA_VREGS))
m4_define(`NSACG_X', `m4_ifelse(NSACG_XREG, 1, `    const spa_vf x$1 = $2(xr + c0 + $1 * SPA_VL);
')')
m4_define(`NSACG_XV', `m4_ifelse(NSACG_XREG, 1, `x$1', `NSACG_XLD(xr + c0 + $1 * SPA_VL)')')
m4_define(`NSACG_XD', `NSACG_X($1, `NSACG_VLOAD')')
m4_define(`NSACG_XF', `NSACG_X($1, `spa_vf_load')')
m4_define(`NSACG_Z', `        spa_vf d$1 = spa_vf_zero();
')
m4_define(`NSACG_W', `            {
                const spa_vf g = spa_vf_load(dyr + $1 * SPA_VL);
                float *l = lk + m4_eval(($1 * SPA_VL) % 16);
                d$1 = spa_vf_fmab(d$1, g, u);
                spa_vf_store(l, NSACG_LANE($1, NSACG_FIRST));
            }
')
m4_define(`NSACG_S', `    spa_vf_store(acc + c0 + $1 * SPA_VL, d$1);
')
m4_define(`NSACG_S0', `        spa_vf_store(acc + c0 + $1 * SPA_VL, spa_vf_zero());
')
m4_define(`NSACG_LANE', `m4_ifelse(m4_eval($2 && $1 * SPA_VL < 16), 1, `spa_vf_mul(g, NSACG_XV($1))', `spa_vf_fma(spa_vf_load(l), g, NSACG_XV($1))')')
m4_define(`NSACG_W0', `    spa_vf d$1;
    {
        const spa_vf g = spa_vf_load(dyr + $1 * SPA_VL);
        float *l = lk + m4_eval(($1 * SPA_VL) % 16);
        d$1 = spa_vf_mulb(g, u);
        spa_vf_store(l, NSACG_LANE($1, NSACG_FIRST));
    }
')
NSACG_TOKEN(nv, suffix, x type, x load): the tile over channels [c0, c0 + nv*VL).
m4_define(`NSACG_TOKEN', `
/* channels [c0, c0 + m4_eval($1 * SPA_VL)) of one token and head: the nw windows
 * (outputGrad rows dy[k], weights wv[k]) into the inputGrad row acc (the
 * first product taken as is: no window, +0) and the dot-product lanes
 * lanes[k] */
static inline void tok_$1$2(const $3 *xr, int64_t c0, int64_t nw, const float *const *dy, const float *wv, float *lanes,
                           float *acc)
{
    if (nw == 0) {
SPA_FOR($1, `NSACG_S0')m4_dnl
        return;
    }
SPA_FOR($1, `$4')m4_dnl
    const float *dyr = dy[0] + c0;
    float *lk = lanes;
    spa_vb u = spa_vb_load(&wv[0]);
SPA_FOR($1, `NSACG_W0')m4_dnl
    for (int64_t k = 1; k < nw; k++) {
        dyr = dy[k] + c0;
        lk = lanes + 16 * k;
        u = spa_vb_load(&wv[k]);
SPA_FOR($1, `NSACG_W')m4_dnl
    }
SPA_FOR($1, `NSACG_S')m4_dnl
}
m4_ifelse(m4_eval($1 > NSACG_NVMIN), 1, `NSACG_TOKEN(m4_eval($1 / 2), `$2', `$3', `$4')')')
NSACG_CALLS1(nv, suffix): while no block ran (c0 == 0), the first block is the largest that fits.
m4_define(`NSACG_CALLS1', `m4_ifelse(m4_eval($1 >= NSACG_NVMIN), 1, `    if (c0 == 0 && d_len >= m4_eval($1 * SPA_VL)) {
        tok_$1$2`'1(xr, 0, nw, dy, wv, lanes, acc);
        c0 = m4_eval($1 * SPA_VL);
    }
NSACG_CALLS1(m4_eval($1 / 2), `$2')')')
NSACG_ROW(suffix, x type): one token and head over all channels.
m4_define(`NSACG_CALLS', `m4_ifelse(m4_eval($1 >= NSACG_NVMIN), 1, `    if (c0 + m4_eval($1 * SPA_VL) <= d_len) {
        tok_$1$2(xr, c0, nw, dy, wv, lanes, acc);
        c0 += m4_eval($1 * SPA_VL);
    }
NSACG_CALLS(m4_eval($1 / 2), `$2')')')
m4_define(`NSACG_ROW', `
/* one token and head, all d_len channels (a multiple of 16) */
SPA_ISA_INLINE void token_row$1(const $2 *xr, int64_t d_len, int64_t nw, const float *const *dy, const float *wv,
                        float *lanes, float *acc)
{
    /* the first block writes the lanes, the others add to them */
    int64_t c0 = 0;
    if (d_len >= m4_eval(NSACG_NV * SPA_VL)) {
        tok_`'NSACG_NV`'$1`'1(xr, 0, nw, dy, wv, lanes, acc);
        c0 = m4_eval(NSACG_NV * SPA_VL);
    }
NSACG_CALLS1(m4_eval(NSACG_NV / 2), `$1')m4_dnl
    for (; c0 + m4_eval(NSACG_NV * SPA_VL) <= d_len; c0 += m4_eval(NSACG_NV * SPA_VL))
        tok_`'NSACG_NV`'$1(xr, c0, nw, dy, wv, lanes, acc);
NSACG_CALLS(m4_eval(NSACG_NV / 2), `$1')m4_dnl
}
')
The two-window row: a token that two windows cover (every token away from a
sequence's edges when bs = 2 st, the shape NSA uses), with both windows'
dot-product lanes in registers over the whole row instead of in memory per
block. NSACG_DOT lanes per window: 16 (lane j sums channels j, j+16, ...:
the block tiles' lanes, so their operations and order, hence the same
bits), or the ISA's SPA_DOT_LANES where its registers cannot hold 2 x 16
lanes beside a step (MVE: 4, one vector per window; a per-ISA sum order,
deterministic like every other). Lanes: first product, then channels
ascending; inputGrad: window 0's product, then window 1's. Fits where the
lanes (2 x DOT/VL), one step's x, g0, g1 and d and the two broadcast
weights are registers: not on a single-lane ISA.
m4_define(`NSACG_DOT', m4_ifdef(`SPA_DOT_LANES', `SPA_DOT_LANES', 16))
m4_define(`NSACG_NL', m4_eval(NSACG_DOT / SPA_VL))
m4_define(`NSACG_NV16', m4_eval(16 / SPA_VL))
m4_define(`NSACG_PAIR_FITS', m4_eval(SPA_VL > 1 && 2 * NSACG_NL + 4 + 2 * SPA_VB_VREGS <= SPA_VREGS))
m4_define(`NSACG_PL_DECL', `    spa_vf l0_$1, l1_$1;
')
NSACG_PSTEP(i, lane op): vector i of a 16-channel group (lane vector i mod
NL); NSACG_XLOAD and NSACG_OUT (defined before each NSACG_PAIR) load x and
store inputGrad.
m4_define(`NSACG_PSTEP', `        {
            const spa_vf x = NSACG_XLOAD(xr + c + $1 * SPA_VL);
            const spa_vf g0 = spa_vf_load(dy0 + c + $1 * SPA_VL);
            const spa_vf g1 = spa_vf_load(dy1 + c + $1 * SPA_VL);
            NSACG_OUT(dst + c + $1 * SPA_VL, spa_vf_fmab(spa_vf_mulb(g0, u0), g1, u1));
            l0_`'m4_eval($1 % NSACG_NL) = $2;
            l1_`'m4_eval($1 % NSACG_NL) = $3;
        }
')
NSACG_PSTEP2(j, first): vectors 2j and 2j+1 of a 16-channel group, each row
read by one two-vector load (NSACG_XLOAD2, spa_vf_load2) and inputGrad
written by one two-vector store (NSACG_OUT2): the same operations on each
vector as `NSACG_PSTEP', in the same order per lane vector and per element.
m4_define(`NSACG_LOP', `m4_ifelse(m4_eval($2 && $1 < NSACG_NL), 1, `spa_vf_mul($4, $5)', `spa_vf_fma($3, $4, $5)')')
m4_define(`NSACG_PLANE', `            l0_`'m4_eval($1 % NSACG_NL) = NSACG_LOP($1, $5, `l0_'m4_eval($1 % NSACG_NL), $2, $4);
            l1_`'m4_eval($1 % NSACG_NL) = NSACG_LOP($1, $5, `l1_'m4_eval($1 % NSACG_NL), $3, $4);
')
m4_define(`NSACG_PSTEP2', `        {
            spa_vf xa, xb, ga0, gb0, ga1, gb1;
            NSACG_XLOAD2(xr + c + m4_eval(2 * $1 * SPA_VL), &xa, &xb);
            spa_vf_load2(dy0 + c + m4_eval(2 * $1 * SPA_VL), &ga0, &gb0);
            spa_vf_load2(dy1 + c + m4_eval(2 * $1 * SPA_VL), &ga1, &gb1);
            NSACG_OUT2(dst + c + m4_eval(2 * $1 * SPA_VL), spa_vf_fmab(spa_vf_mulb(ga0, u0), ga1, u1),
                       spa_vf_fmab(spa_vf_mulb(gb0, u0), gb1, u1));
NSACG_PLANE(m4_eval(2 * $1), `ga0', `ga1', `xa', $2)m4_dnl
NSACG_PLANE(m4_eval(2 * $1 + 1), `gb0', `gb1', `xb', $2)m4_dnl
        }
')
m4_define(`NSACG_PSTEP2_FIRST', `NSACG_PSTEP2($1, 1)')
m4_define(`NSACG_PSTEP2_NEXT', `NSACG_PSTEP2($1, 0)')
NSACG_PSTEPS(first or next): the steps of one 16-channel group, by pairs
where it has an even number of vectors and the registers hold a pair step
(six loaded vectors, two results) beside the lanes and the weights (not on
MVE: its eight registers would spill).
m4_define(`NSACG_PAIRS', m4_eval(NSACG_NV16 % 2 == 0 && 2 * NSACG_NL + 8 + 2 * SPA_VB_VREGS <= SPA_VREGS))
m4_define(`NSACG_PSTEPS', `m4_ifelse(NSACG_PAIRS, 1, `SPA_FOR(m4_eval(NSACG_NV16 / 2), `NSACG_PSTEP2_$1')', `SPA_FOR(NSACG_NV16, `NSACG_PSTEP_$1')')')
m4_define(`NSACG_PSTEP_FMA', `NSACG_PSTEP($1, `spa_vf_fma(l0_'m4_eval($1 % NSACG_NL)`, g0, x)', `spa_vf_fma(l1_'m4_eval($1 % NSACG_NL)`, g1, x)')')
m4_define(`NSACG_PSTEP_FIRST', `m4_ifelse(m4_eval($1 < NSACG_NL), 1, `NSACG_PSTEP($1, `spa_vf_mul(g0, x)', `spa_vf_mul(g1, x)')', `NSACG_PSTEP_FMA($1)')')
m4_define(`NSACG_PSTEP_NEXT', `NSACG_PSTEP_FMA($1)')
m4_define(`NSACG_PFOLD', `m4_ifelse(NSACG_NL, 1, `spa_vf_hsum($1_0)',
  NSACG_NL, 2, `spa_vf_hsum(spa_vf_add($1_0, $1_1))',
  NSACG_NL, 4, `spa_vf_hsum(spa_vf_add(spa_vf_add($1_0, $1_2), spa_vf_add($1_1, $1_3)))',
  `m4_errprint(`nsa_compress_grad: no fold for 'NSACG_NL` vectors
')m4_m4exit(1)')')
NSACG_UNROLL128: rows of 128 channels (the usual head size) unrolled where
the ISA says its loops cost more than its code (SPA_ROW128_UNROLL, MVE: a
pointer bump per stream and step, no post-increment from GCC, while every
offset of a 128-channel row fits a load or store immediate).
m4_define(`NSACG_UNROLL128', m4_ifdef(`SPA_ROW128_UNROLL', `SPA_ROW128_UNROLL', 0))
NSACG_G128(k): group k + 1 of a 128-channel row.
m4_define(`NSACG_G128', `        c = m4_eval(16 * ($1 + 1));
NSACG_PSTEPS(`NEXT')')
NSACG_PAIR(name, x type, out type, numbers): numbers 1, the row narrowed by
the layer form for numbers (NSACG_OUT2_N, NSACG_OUT_N), for rows whose
inputs are all finite (the caller knows: NSACG_FINITE).
m4_define(`NSACG_PAIR', `
m4_ifelse($4, 1, `/* the row as the exact form computes it, inputGrad narrowed by the layer
 * form for numbers: for finite outputGrad rows and weights, whose inputGrad
 * values are never NaN */', `/* one token and head covered by two windows (outputGrad rows dy0, dy1,
 * weights w0, w1), all d_len channels (a multiple of 16): the inputGrad row
 * into dst, the two windows dot products into dot[0], dot[1] */')
SPA_ISA_INLINE void $1(const $2 *xr, ptrdiff_t d_len, const float *dy0, const float *dy1, float w0, float w1,
                       float *dot, $3 *dst)
{
    const spa_vb u0 = spa_vb_set(w0), u1 = spa_vb_set(w1);
SPA_FOR(NSACG_NL, `NSACG_PL_DECL')m4_dnl
    ptrdiff_t c = 0; /* native width: no 64-bit compares on 32-bit cores */
    {
NSACG_PSTEPS(`FIRST')m4_dnl
    }
m4_ifelse(m4_eval(NSACG_NV16 >= 4), 1, `m4_dnl
m4_ifelse(NSACG_UNROLL128, 1, `m4_dnl
    if (d_len == 128) {
        /* the usual head size: the seven other groups at constant offsets
         * (immediates of the loads and stores), no loop control */
SPA_FOR(7, `NSACG_G128')m4_dnl
    } else {
')m4_dnl
    /* 16 channels (NV16 vectors) per step: each lane vector takes one
     * product per step, so no step-to-step chain keeps loaded rows live
     * (with two steps per iteration GCC sinks the first products to the
     * second and spills) */
    for (c = 16; c < d_len; c += 16) {
NSACG_PSTEPS(`NEXT')m4_dnl
    }
m4_ifelse(NSACG_UNROLL128, 1, `    }
')m4_dnl
', `m4_dnl
    /* 32 channels per step (the loop control spread over twice
     * the work), then a last 16 */
    for (c = 16; c + 32 <= d_len; c += 32) {
NSACG_PSTEPS(`NEXT')m4_dnl
        c += 16;
NSACG_PSTEPS(`NEXT')m4_dnl
        c -= 16;
    }
    if (c < d_len) {
NSACG_PSTEPS(`NEXT')m4_dnl
    }
')m4_dnl
    dot[0] = NSACG_PFOLD(`l0');
    dot[1] = NSACG_PFOLD(`l1');
}
')
m4_define(`NSACG_OUT_F', `spa_vf_store($1, $2)')
m4_define(`NSACG_OUT_H', `SPA_VSTORE($1, $2)')
m4_define(`NSACG_OUT2_F', `spa_vf_store2($1, $2, $3)')
m4_define(`NSACG_OUT2_H', `spa_vf_store2_'SPA_DT`($1, $2, $3)')
m4_define(`NSACG_OUT_N', `spa_vf_store_'SPA_DT`_num($1, $2)')
m4_define(`NSACG_OUT2_N', `spa_vf_store2_'SPA_DT`_num($1, $2, $3)')
NSACG_FINITE: 16-bit rows narrowed by the form for numbers where the
inputs that make inputGrad are finite: outputGrad rows (checked as the tile
stages them) and the two weights of the row. Every value is then
g0 * w0 + g1 * w1 of finite values by one FMA, never NaN (an overflow is an
infinity, which the form for numbers narrows exactly). Where the layer says
that form costs less than its exact one (SPA_NUM_BF16: neon, mve;
SPA_NUM_F16: mve).
m4_define(`NSACG_NUM_FORM', `m4_ifelse(SPA_DT, `bf16', `m4_ifdef(`SPA_NUM_BF16', 1, 0)', SPA_DT, `f16', `m4_ifdef(`SPA_NUM_F16', 1, 0)', 0)')
m4_define(`NSACG_FINITE', m4_eval(NSACG_PAIR_FITS && NSACG_NUM_FORM))
NSACG_PAIR_TOKEN(name, row, numbers): the two-window rows of one token,
head by head, in a function of its own where the ISA asks (SPA_ROW_CALL,
MVE: inlined in the kernel, GCC 12 keeps few of its pointers in registers
and formed the addresses of the widening loads and narrowing stores of
16-bit rows there, four instructions per vector). numbers 1: the row
narrows by the form for numbers, while the weights of a head are finite.
m4_define(`NSACG_TOKEN_LINKAGE', `m4_ifelse(m4_ifdef(`SPA_ROW_CALL', `SPA_ROW_CALL', 0), 1, `__attribute__((noinline)) static', `SPA_ISA_INLINE')')
m4_define(`NSACG_PAIR_TOKEN', `
m4_ifelse($3, 1, `/* heads [0, hn) of the token, while the two weights of a head are finite
 * (the outputGrad rows are finite too); returns the heads done */', `/* heads [0, hn) of the token; returns hn */')
NSACG_TOKEN_LINKAGE ptrdiff_t $1(const pair_token *t, ptrdiff_t hn)
{
    const SPA_T *xr = t->x, *w0p = t->w0, *w1p = t->w1;
    SPA_T *dxr = t->dx;
    const float *dy0 = t->dy0;
    for (ptrdiff_t hh = 0;;) {
        const float w0 = SPA_LOAD(*w0p), w1 = SPA_LOAD(*w1p);
m4_ifelse($3, 1, `        const float w_seen = w0 * 0.0f + w1 * 0.0f;
        if (w_seen != w_seen)
            return hh;
')m4_dnl
        float dot[2];
        $2(xr, t->d, dy0, dy0 + t->dy_next, w0, w1, dot, dxr);
        t->wp0[hh] += dot[0];
        t->wp1[hh] += dot[1];
        if (++hh == hn)
            return hh;
        /* the next head (never a step past the last one) */
        xr += t->xs;
        dxr += t->dxs;
        dy0 += t->dys;
        w0p += t->ws;
        w1p += t->ws;
    }
}
')
m4_define(`NSACG_TOKEN_ARGS', `/* element strides of tensors in memory: native width */
                        const pair_token tk = {x_h0, dx_h0, dy_h0, w0_h0, w1_h0, wp0, wp1,
                                               (ptrdiff_t)a->xs1, (ptrdiff_t)a->dxs1, (ptrdiff_t)dy_head,
                                               (ptrdiff_t)dy_next, (ptrdiff_t)a->ws1, d_pair};')
m4_define(`NSACG_XLOAD2_F', `spa_vf_load2($1, $2, $3)')
m4_define(`NSACG_XLOAD2_H', `spa_vf_load2_'SPA_DT`($1, $2, $3)')
m4_divert(0)m4_dnl
m4_ifelse(NSACG_PAIR_FITS, 1, `m4_dnl
m4_define(`NSACG_XLOAD', `spa_vf_load($1)')m4_define(`NSACG_OUT', `NSACG_OUT_F($1, $2)')m4_dnl
m4_define(`NSACG_XLOAD2', `NSACG_XLOAD2_F($1, $2, $3)')m4_define(`NSACG_OUT2', `NSACG_OUT2_F($1, $2, $3)')m4_dnl
NSACG_PAIR(`pair_row_f_f', `float', `float')m4_dnl

/* one token covered by two windows: its rows and weights for the first head
 * of a group, each stepping by its head stride (the float stores of a row
 * cannot change these fields, of other types: no reloads) */
typedef struct {
    const SPA_T *x;
    SPA_T *dx;
    const float *dy0;
    const SPA_T *w0, *w1;
    float *wp0, *wp1;
    ptrdiff_t xs, dxs, dys, dy_next, ws, d;
} pair_token;
m4_ifelse(SPA_DT, `f32', `NSACG_PAIR_TOKEN(`pair_token_f', `pair_row_f_f', 0)')m4_dnl
m4_ifelse(SPA_DT, `f32', `', `m4_dnl
m4_define(`NSACG_OUT', `NSACG_OUT_H($1, $2)')m4_define(`NSACG_OUT2', `NSACG_OUT2_H($1, $2, $3)')m4_dnl
NSACG_PAIR(`pair_row_f_h', `float', `SPA_T')m4_dnl
m4_define(`NSACG_XLOAD', `NSACG_VLOAD($1)')m4_define(`NSACG_XLOAD2', `NSACG_XLOAD2_H($1, $2, $3)')m4_dnl
NSACG_PAIR(`pair_row_d_h', `SPA_T', `SPA_T')m4_dnl
m4_ifelse(NSACG_FINITE, 1, `', `NSACG_PAIR_TOKEN(`pair_token_d_h', `pair_row_d_h', 0)')m4_dnl
m4_ifelse(NSACG_FINITE, 1, `m4_define(`NSACG_OUT2', `NSACG_OUT2_N($1, $2, $3)')m4_define(`NSACG_OUT', `NSACG_OUT_N($1, $2)')m4_dnl
NSACG_PAIR(`pair_row_d_h_num', `SPA_T', `SPA_T', 1)m4_dnl
m4_define(`NSACG_OUT2', `NSACG_OUT2_H($1, $2, $3)')m4_define(`NSACG_OUT', `NSACG_OUT_H($1, $2)')m4_dnl
NSACG_PAIR_TOKEN(`pair_token_num', `pair_row_d_h_num', 1)m4_dnl
')m4_dnl
m4_define(`NSACG_OUT', `NSACG_OUT_F($1, $2)')m4_define(`NSACG_OUT2', `NSACG_OUT2_F($1, $2, $3)')m4_dnl
NSACG_PAIR(`pair_row_d_f', `SPA_T', `float')m4_dnl
')')m4_dnl
m4_divert(-1)
m4_divert(0)m4_dnl
m4_define(`NSACG_FIRST', 1)m4_dnl
m4_define(`NSACG_XLD', `spa_vf_load($1)')m4_dnl
NSACG_TOKEN(NSACG_NV, `_f1', `float', `NSACG_XF')m4_dnl
m4_define(`NSACG_FIRST', 0)m4_dnl
NSACG_TOKEN(NSACG_NV, `_f', `float', `NSACG_XF')m4_dnl
NSACG_ROW(`_f', `float')m4_dnl
m4_ifelse(SPA_DT, `f32', `', `m4_define(`NSACG_FIRST', 1)m4_dnl
m4_define(`NSACG_XLD', `NSACG_VLOAD($1)')m4_dnl
NSACG_TOKEN(NSACG_NV, `_d1', `SPA_T', `NSACG_XD')m4_dnl
m4_define(`NSACG_FIRST', 0)m4_dnl
NSACG_TOKEN(NSACG_NV, `_d', `SPA_T', `NSACG_XD')m4_dnl
NSACG_ROW(`_d', `SPA_T')m4_dnl
')m4_dnl

/* The channel tail of one token and head: channels [c0, d_len), fewer
 * than 16, after token_row's 16-channel blocks, by the layer's partial
 * vectors (xt: the tail's input, widened). inputGrad as the blocks form it
 * (window 0's product, then the others' added in order) and each window's
 * products added into its 16 lanes (lane c - c0), zeroed first where no
 * block ran (c0 == 0). Out of line: inlined, it costs the two-window
 * tokens registers (1% more instructions on NEON). */
__attribute__((noinline)) static void token_tail(const float *xt, int64_t c0, int64_t d_len, int64_t nw, const float *const *dy,
                       const float *wv, float *lanes, float *acc)
{
    if (c0 == 0)
        for (int64_t k = 0; k < nw; k++)
            for (int64_t e = 0; e < LANES; e += SPA_VL)
                spa_vf_store(lanes + LANES * k + e, spa_vf_zero());
    for (int64_t c = c0; c < d_len; c += SPA_VL) {
        const int64_t n = d_len - c < SPA_VL ? d_len - c : SPA_VL;
        const spa_vf x = spa_vf_load_n(xt + (c - c0), n);
        spa_vf d = spa_vf_zero();
        for (int64_t k = 0; k < nw; k++) {
            const spa_vf g = spa_vf_load_n(dy[k] + c, n);
            const spa_vb u = spa_vb_load(&wv[k]);
            float *l = lanes + LANES * k + (c - c0);
            d = k == 0 ? spa_vf_mulb(g, u) : spa_vf_fmab(d, g, u);
            spa_vf_store(l, spa_vf_fma(spa_vf_load(l), g, x));
        }
        spa_vf_store_n(acc + c, d, n);
    }
}

m4_ifelse(SPA_IS_F32, 1, `', `
/* token_tail of a unit-stride 16-bit input row: its tail widened first
 * (here, not in the kernel frame) */
__attribute__((noinline)) static void token_tail_d(const SPA_T *xr, int64_t c0, int64_t d_len, int64_t nw,
                                                   const float *const *dy, const float *wv, float *lanes, float *acc)
{
    float xt[LANES];
    for (int64_t e = 0; e < d_len - c0; e++)
        xt[e] = SPA_LOAD(xr[e]);
    token_tail(xt, c0, d_len, nw, dy, wv, lanes, acc);
}
')m4_dnl

m4_ifelse(NSACG_FINITE, 1, `
/* dst[0..n) = widen(src[k * stride]); whether every value was finite */
static inline bool widen_row_finite(float *dst, const SPA_T *src, int64_t stride, int64_t n)
{
    if (stride == 1)
        return SPA_WIDEN_FINITE_RUN(dst, src, n);
    float seen = 0.0f;
    for (int64_t k = 0; k < n; k++) {
        dst[k] = SPA_LOAD(src[k * stride]);
        seen += dst[k] * 0.0f;
    }
    return seen == seen;
}
')m4_dnl
/* The 16 dot-product lanes of one window, folded by halves (8, 4, 2, 1):
 * as vectors, then the lanes of one vector by spa_vf_hsum, the same order
 * on every ISA. */
m4_ifelse(m4_ifdef(`SPA_VF_SIZELESS', `SPA_VF_SIZELESS', 0), 1, `m4_dnl
m4_dnl Where the vector type is sizeless (RVV: no arrays of it), the vectors
m4_dnl are named, unrolled here; the same operations in the same order.
m4_define(`NSACG_FOLD_NV', m4_eval(16 / SPA_VL))m4_dnl
m4_define(`NSACG_FOLD_LD', `    spa_vf v$1 = spa_vf_load(l + $1 * SPA_VL);
')m4_dnl
m4_define(`NSACG_FOLD_ADD', `    v$1 = spa_vf_add(v$1, v`'m4_eval($1 + NSACG_FOLD_H));
')m4_dnl
m4_define(`NSACG_FOLD', `m4_ifelse(m4_eval($1 >= 1), 1, `m4_define(`NSACG_FOLD_H', $1)SPA_FOR($1, `NSACG_FOLD_ADD')NSACG_FOLD(m4_eval($1 / 2))')')m4_dnl
static inline float fold16(const float *l)
{
SPA_FOR(NSACG_FOLD_NV, `NSACG_FOLD_LD')m4_dnl
NSACG_FOLD(m4_eval(NSACG_FOLD_NV / 2))m4_dnl
    return spa_vf_hsum(v0);
}
', `m4_dnl
static inline float fold16(const float *l)
{
    enum { NV = LANES / SPA_VL };
    spa_vf v[NV];
#pragma GCC unroll 16
    for (int k = 0; k < NV; k++)
        v[k] = spa_vf_load(l + k * SPA_VL);
#pragma GCC unroll 16
    for (int half = NV / 2; half > 0; half /= 2)
        for (int k = 0; k < half; k++)
            v[k] = spa_vf_add(v[k], v[k + half]);
    return spa_vf_hsum(v[0]);
}
')m4_dnl

/* Channels [c0, c0 + TC) of every head (all of them where D <= TC). */
SPA_ISA_INLINE void grad_slice(const spa_nsac_args *a_in, int64_t c0, int64_t bstart, int64_t row0, int64_t nwin,
                       int64_t t0, int64_t t1, float *wpart, float *scratch)
{
    /* a private copy: the compiler need not reload the strides after every
     * store through the float pointers below */
    spa_nsac_args args = *a_in;
    if (a_in->d > TC)
        spa_nsac_slice(&args, c0, a_in->d - c0 < TC ? a_in->d - c0 : TC, SPA_SZ);
    const spa_nsac_args *const a = &args;
    const SPA_T *x = a->x;
    const SPA_T *w = a->w;
    const SPA_T *dy = a->y;
    SPA_T *dx = a->dx;
    const int64_t d_len = a->d, bs = a->bs, st = a->st, heads = a->n;
    const int64_t group = spa_nsac_head_group(heads, d_len, TC);
    /* scratch (spa_nsac_grad_scratch): the staged outputGrad rows (dy_rows
     * per head, enough for a tile of tt tokens), then one input row and one
     * accumulator row, then where a token has more windows than the stack
     * arrays hold, their lanes, weights and row pointers */
    float *dyf = scratch;
    float *xf = dyf + a->dy_rows * group * d_len;
    float *acc = xf + d_len;
    /* the dot-product lanes, weights and outputGrad rows of a token's windows
     * (set where a token's windows are more: token_arrays) */
    float lanes_stack[SPA_NSACG_NW_STACK * LANES], wv_stack[SPA_NSACG_NW_STACK];
    const float *dyk_stack[SPA_NSACG_NW_STACK];
    /* f32 unit-stride outputGrad rows are read in place, others staged widened */
    const bool dy_in_place = SPA_IS_F32 && a->ys2 == 1;
    const bool dx_in_place = SPA_IS_F32 && a->dxs2 == 1 && SPA_VF_STREAM_ALIGN == 0;
m4_ifelse(NSACG_PAIR_FITS, 1, `m4_dnl
    /* f16 / bf16 unit-stride inputGrad rows of two-window tokens are
     * narrowed from registers where the ISA has no streaming stores */
    const bool dx_direct = !SPA_IS_F32 && a->dxs2 == 1 && SPA_VF_STREAM_ALIGN == 0;
')m4_dnl

    for (int64_t p0 = t0 - bstart; p0 < t1 - bstart; p0 += a->tt) {
        const int64_t p1 = t1 - bstart - p0 < a->tt ? t1 - bstart : p0 + a->tt;
        /* Windows touching tokens [p0, p1). */
        const int64_t ilo = p0 < bs ? 0 : spa_div_nat(p0 - bs, st) + 1;
        const int64_t ihi = spa_div_nat(p1 - 1, st) < nwin - 1 ? spa_div_nat(p1 - 1, st) : nwin - 1;
        for (int64_t h0 = 0; h0 < heads; h0 += group) {
            const int64_t hn = heads - h0 < group ? heads - h0 : group;
            const int64_t width = hn * d_len;
m4_ifelse(NSACG_FINITE, 1, `m4_dnl
            bool dy_finite = true; /* the staged rows: no NaN, no infinity */
')m4_dnl
            for (int64_t i = ilo; i <= ihi && !dy_in_place; i++)
                for (int64_t hh = 0; hh < hn; hh++) {
                    const SPA_T *dyr = dy + (row0 + i) * a->ys0 + (h0 + hh) * a->ys1;
                    float *dst = dyf + (i - ilo) * width + hh * d_len;
m4_ifelse(NSACG_FINITE, 1, `m4_dnl
                    if (!widen_row_finite(dst, dyr, a->ys2, d_len))
                        dy_finite = false;
', `m4_dnl
                    SPA_WIDEN_ROW(dst, dyr, a->ys2, d_len);
')m4_dnl
                }
            for (int64_t p = p0; p < p1; p++) {
                /* Ask for the rows a few tokens ahead (short runs per head). */
                if (p + SPA_PREFETCH_ROWS < p1)
                    for (int64_t hh = 0; hh < hn; hh++)
                        SPA_PREFETCH_RUN(x + (bstart + p + SPA_PREFETCH_ROWS) * a->xs0 + (h0 + hh) * a->xs1,
                                         a->xs2 == 1 ? d_len * SPA_SZ : 0); /* dense rows only (see
                                         * nsa_compress.c.m4) */
                const int64_t klo = p < bs ? 0 : spa_div_nat(p - bs, st) + 1;
                const int64_t khi = spa_div_nat(p, st) < nwin - 1 ? spa_div_nat(p, st) : nwin - 1;
                const int64_t nw = khi >= klo ? khi - klo + 1 : 0; /* <= nw_max */
m4_ifelse(NSACG_PAIR_FITS, 1, `m4_dnl
                if (nw == 2 && d_len % LANES == 0) { /* pair rows: 16-channel groups */
                    /* the two windows (rows and weights), then head by head,
                     * every pointer stepping by its head stride */
                    const int64_t j0 = p - klo * st, j1 = j0 - st;
                    /* row pointers of head h0; those of head hh are formed in the
                     * loop, never a step past the last head (strides can be
                     * large enough that such a pointer would not exist) */
                    const SPA_T *x_h0 = x + (bstart + p) * a->xs0 + h0 * a->xs1;
                    SPA_T *dx_h0 = dx + (bstart + p) * a->dxs0 + h0 * a->dxs1;
                    const SPA_T *w0_h0 = w + j0 * a->ws0 + h0 * a->ws1;
                    const SPA_T *w1_h0 = w + j1 * a->ws0 + h0 * a->ws1;
                    float *wp0 = wpart + j0 * heads + h0;
                    float *wp1 = wpart + j1 * heads + h0;
                    const float *dy_h0 = dy_in_place
                                             ? (const float *)(const void *)(dy + (row0 + klo) * a->ys0 + h0 * a->ys1)
                                             : dyf + (klo - ilo) * width;
                    const int64_t dy_next = dy_in_place ? a->ys0 : width; /* window klo -> klo + 1 */
                    const int64_t dy_head = dy_in_place ? a->ys1 : d_len;
                    const ptrdiff_t d_pair = (ptrdiff_t)d_len; /* <= 256 (validated) */
                    int64_t hh = 0;
m4_ifelse(NSACG_FINITE, 1, `m4_dnl
                    if (dx_direct && a->xs2 == 1 && dy_finite) {
                        NSACG_TOKEN_ARGS
                        hh = pair_token_num(&tk, (ptrdiff_t)hn); /* the rest: weights not finite */
                    }
', SPA_DT, `f32', `m4_dnl
                    if (dx_in_place && a->xs2 == 1) {
                        NSACG_TOKEN_ARGS
                        hh = pair_token_f(&tk, (ptrdiff_t)hn);
                    }
', `m4_dnl
                    if (dx_direct && a->xs2 == 1) {
                        NSACG_TOKEN_ARGS
                        hh = pair_token_d_h(&tk, (ptrdiff_t)hn);
                    }
')m4_dnl
                    for (; hh < hn; hh++) {
                        const SPA_T *xr = x_h0 + hh * a->xs1;
                        SPA_T *dxr = dx_h0 + hh * a->dxs1;
                        const float *dy0 = dy_h0 + hh * dy_head;
                        const float *dy1 = dy0 + dy_next;
                        const float w0 = SPA_LOAD(w0_h0[hh * a->ws1]), w1 = SPA_LOAD(w1_h0[hh * a->ws1]);
                        float *dst = dx_in_place ? (float *)(void *)dxr : acc;
                        float dot[2];
                        if (a->xs2 != 1)
                            SPA_WIDEN_ROW(xf, xr, a->xs2, d_len);
m4_ifelse(SPA_DT, `f32', `m4_dnl
                        pair_row_f_f(a->xs2 == 1 ? xr : xf, d_pair, dy0, dy1, w0, w1, dot, dst);
', `m4_dnl
                        if (dx_direct && a->xs2 == 1)
                            pair_row_d_h(xr, d_pair, dy0, dy1, w0, w1, dot, dxr);
                        else if (dx_direct)
                            pair_row_f_h(xf, d_pair, dy0, dy1, w0, w1, dot, dxr);
                        else if (a->xs2 == 1)
                            pair_row_d_f(xr, d_pair, dy0, dy1, w0, w1, dot, dst);
                        else
                            pair_row_f_f(xf, d_pair, dy0, dy1, w0, w1, dot, dst);
')m4_dnl
                        wp0[hh] += dot[0];
                        wp1[hh] += dot[1];
                        if (dx_in_place || dx_direct)
                            continue;
                        if (a->dxs2 == 1)
                            SPA_NARROW_STREAM_RUN(dxr, acc, d_len);
                        else
                            SPA_NARROW_ROW(dxr, a->dxs2, acc, d_len);
                    }
                    continue;
                }
')m4_dnl
                /* set here, not live across the two-window tokens above */
                float *lanes = lanes_stack, *wv = wv_stack;
                const float **dyk = dyk_stack;
                if (nw > SPA_NSACG_NW_STACK) {
                    /* past the rows, xf and acc: lanes, weights, then the
                     * pointers at an even float offset (8-byte aligned: the
                     * scratch is) */
                    const int64_t at = (a->dy_rows + 2) * group * d_len, pat = at + (LANES + 1) * a->nw_max;
                    lanes = scratch + at;
                    wv = lanes + LANES * a->nw_max;
                    dyk = (const float **)(void *)(scratch + pat + pat % 2);
                }
                const int64_t d_tail = d_len % LANES, d_blocks = d_len - d_tail; /* token_row: 16-channel blocks */
                for (int64_t hh = 0; hh < hn; hh++) {
                    const int64_t h = h0 + hh;
                    const SPA_T *xr = x + (bstart + p) * a->xs0 + h * a->xs1;
                    SPA_T *dxr = dx + (bstart + p) * a->dxs0 + h * a->dxs1;
                    for (int64_t k = 0; k < nw; k++) {
                        const int64_t i = klo + k;
                        wv[k] = SPA_LOAD(w[(p - i * st) * a->ws0 + h * a->ws1]);
                        dyk[k] = dy_in_place ? (const float *)(const void *)(dy + (row0 + i) * a->ys0 + h * a->ys1)
                                             : dyf + (i - ilo) * width + hh * d_len;
                    }
                    /* f32 inputGrad rows are written in place where the ISA
                     * has no streaming stores; otherwise the row goes out
                     * from acc */
                    float *dst = dx_in_place ? (float *)(void *)dxr : acc;
                    /* unit-stride input rows are read in place (widened in
                     * registers), other rows widened first */
                    if (a->xs2 != 1)
                        SPA_WIDEN_ROW(xf, xr, a->xs2, d_len);
m4_ifelse(SPA_DT, `f32', `m4_dnl
                    token_row_f(a->xs2 == 1 ? xr : xf, d_len, nw, dyk, wv, lanes, dst);
                    if (d_tail != 0)
                        token_tail((a->xs2 == 1 ? xr : xf) + d_blocks, d_blocks, d_len, nw, dyk, wv, lanes, dst);
', `m4_dnl
                    if (a->xs2 == 1)
                        token_row_d(xr, d_len, nw, dyk, wv, lanes, dst);
                    else
                        token_row_f(xf, d_len, nw, dyk, wv, lanes, dst);
                    if (d_tail != 0 && a->xs2 == 1)
                        token_tail_d(xr + d_blocks, d_blocks, d_len, nw, dyk, wv, lanes, dst);
                    else if (d_tail != 0)
                        token_tail(xf + d_blocks, d_blocks, d_len, nw, dyk, wv, lanes, dst);
')m4_dnl
                    for (int64_t k = 0; k < nw; k++)
                        wpart[(p - (klo + k) * st) * heads + h] += fold16(lanes + 16 * k);
                    /* inputGrad is written once and not read back here: stream it. */
                    if (dx_in_place)
                        continue;
                    if (a->dxs2 == 1)
                        SPA_NARROW_STREAM_RUN(dxr, acc, d_len);
                    else
                        SPA_NARROW_ROW(dxr, a->dxs2, acc, d_len);
                }
            }
        }
    }
}

void NSACG_KSYM()(const spa_nsac_args *a, int64_t bstart, int64_t row0, int64_t nwin,
                 int64_t t0, int64_t t1, float *wpart, float *scratch)
{
    /* heads wider than the tile: slices of TC channels, their weight
     * partials added in channel order (spa_nsac_slice) */
    int64_t c0 = 0;
    do
        grad_slice(a, c0, bstart, row0, nwin, t0, t1, wpart, scratch);
    while ((c0 += TC) < a->d);
    spa_stream_fence();
}
