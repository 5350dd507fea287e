SPA_STAMP
/* NsaCompress forward, one block of windows of one batch (spec/nsa.md 1.2).
 * Tile TW windows x TC channels (enum below), the channels being a group of
 * whole heads. Each window's f32 sum adds its input rows, each times its
 * per-head weight (the layer's FMA), in ascending token order: with
 * unit-stride rows in register tiles of two windows (each row loaded and
 * widened once for both), otherwise row by row through the tile's
 * accumulators. */
#include <stddef.h>
#include <stdint.h>

#include "half.h"
#include "nsa_compress_kernel.h"

enum { TW = NSAC_TW, TC = NSAC_TC };
m4_divert(-1)
Register tiles (unit-stride input rows): two windows x NSAC_NV vectors of
channels of one head, the accumulators in registers, every input row loaded
once for both windows (when bs == 2 st, the tile slides along all windows,
each row loaded once); NSAC_NV is the most (at most 8, at most 128
channels) for which 3 * NV + 2 vector registers hold the accumulators, the
row and the two weights. Per window the rows are added in ascending order,
as by the row-major path below: the tile never changes a result.
m4_define(`NSAC_NV_FIT', `m4_ifelse(m4_eval($1 <= 1 || 3 * $1 + 2 <= SPA_VREGS), 1, $1, `NSAC_NV_FIT(m4_eval($1 / 2))')')
m4_define(`NSAC_NV', NSAC_NV_FIT(m4_ifelse(m4_eval(128 / SPA_VL > 8), 1, 8, m4_eval(128 / SPA_VL))))
m4_define(`NSAC_VLOAD', m4_ifelse(SPA_DT, `f16', ``spa_vf_load_f16($1)'', SPA_DT, `bf16', ``spa_vf_load_bf16($1)'', ``spa_vf_load($1)''))
m4_define(`NSAC_W', `spa_vb_load(&$1)')
m4_define(`NSAC_ZERO', `    spa_vf a0_$1 = spa_vf_zero(), a1_$1 = a0_$1;
')
m4_define(`NSAC_X', `            const spa_vf x$1 = NSAC_VLOAD(xp + $1 * SPA_VL);
')
NSAC_XS(nv): the row's nv vectors; 16-bit rows two vectors per widening load.
m4_define(`NSAC_X2', `            spa_vf x`'m4_eval(2 * $1), x`'m4_eval(2 * $1 + 1);
            spa_vf_load2_'SPA_DT`(xp + m4_eval(2 * $1) * SPA_VL, &x`'m4_eval(2 * $1), &x`'m4_eval(2 * $1 + 1));
')
m4_define(`NSAC_XS', `m4_ifelse(m4_eval(SPA_IS_F32 == 0 && $1 % 2 == 0), 1, `SPA_FOR(m4_eval($1 / 2), `NSAC_X2')', `SPA_FOR($1, `NSAC_X')')')
NSAC_ROW(nv, f[, g]): one row of a tile, its nv vectors each times the
weight of one window (f) or of two (f, g). Where vector registers are few
(fewer than 16), each vector of the row goes to its windows before the next
is loaded, so the row takes one register (and a widened 16-bit vector is
used where the widening leaves it); elsewhere the row is loaded first.
m4_define(`NSAC_ROW', `m4_ifelse(m4_eval(SPA_VREGS < 16), 1,
  `SPA_FOR($1, `NSAC_XF'm4_ifelse(`$2', `NSAC_F0', 0)m4_ifelse(`$3$2', `NSAC_F1', 1, `$3', `NSAC_F1', 1))',
  `NSAC_XS($1)SPA_FOR($1, `$2')m4_ifelse(`$3', `', `', `SPA_FOR($1, `$3')')')')
m4_define(`NSAC_XF0', `NSAC_X($1)NSAC_F0($1)')
m4_define(`NSAC_XF1', `NSAC_X($1)NSAC_F1($1)')
m4_define(`NSAC_XF01', `NSAC_X($1)NSAC_F0($1)NSAC_F1($1)')
m4_define(`NSAC_F0', `            a0_$1 = spa_vf_fmab(a0_$1, x$1, u0);
')
m4_define(`NSAC_F1', `            a1_$1 = spa_vf_fmab(a1_$1, x$1, u1);
')
m4_define(`NSAC_ST', `    spa_vf_store(o0 + $1 * SPA_VL, a0_$1);
    spa_vf_store(o1 + $1 * SPA_VL, a1_$1);
')
m4_define(`NSAC_ST0', `    spa_vf_store(o0 + $1 * SPA_VL, a0_$1);
')
m4_define(`NSAC_ZERO0', `    spa_vf a0_$1 = spa_vf_zero();
')
m4_define(`NSAC_Z0', `        a0_$1 = spa_vf_zero();
')
m4_define(`NSAC_Z1', `        a1_$1 = spa_vf_zero();
')
m4_define(`NSAC_S0', `        NSAC_RSTORE(o0 + $1 * SPA_VL, a0_$1);
')
m4_define(`NSAC_S1', `        NSAC_RSTORE(o1 + $1 * SPA_VL, a1_$1);
')
The ring tile (bs == 2 st) reads, per row of a segment, the weight of the
window started a segment before (old: the second half of a window, w[st +
r]) and that of the window starting (new: w[r]). Where the layer loads two
adjacent broadcast operands at once (SPA_VB_PAIR), the kernel stages them
as pairs (old, new) per r, and each row takes both with one spa_vb_load2_post;
otherwise as they are, w2 pointing at the second half.
NSAC_RING_U(old, new): the two weights of row r, named old and new.
NSAC_RING_SEG(old, new): what a segment of two windows sets up before its rows.
m4_define(`NSAC_VB_PAIR', m4_ifdef(`SPA_VB_PAIR', `SPA_VB_PAIR', 0))
Where the ISA asks for it (SPA_NSAC_STORE_Y), the ring tile stores each
window sum straight into the output rows (unit-stride ones), narrowed as
the f32 sums of the other paths are (SPA_VSTORE, half.h bit for bit), with no
pass over staged sums; it then runs beside head_tiles, whose two-window
tiles take bs == 2 st where the output rows are strided.
NSAC_RING_OUT: the type the ring tile stores; NSAC_RSTORE(p, v) the store.
NSAC_STAGE_RING(): the head weights (column hw of w) widened into xf as the
ring tile reads them: pairs (w[st + j], w[j]) with SPA_VB_PAIR, else as they are.
m4_define(`NSAC_STAGE_RING', `m4_ifelse(NSAC_VB_PAIR, 1, `m4_dnl
                    for (int64_t j = 0; j < st; j++) {
                        xf[2 * j] = SPA_LOAD(w[(st + j) * a->ws0 + hw]);
                        xf[2 * j + 1] = SPA_LOAD(w[j * a->ws0 + hw]);
                    }
', `m4_dnl
                    for (int64_t j = 0; j < bs; j++)
                        xf[j] = SPA_LOAD(w[j * a->ws0 + hw]);
')')
m4_define(`NSAC_STORE_Y', m4_ifdef(`SPA_NSAC_STORE_Y', `SPA_NSAC_STORE_Y', 0))
m4_ifelse(NSAC_STORE_Y, 1, `
m4_define(`NSAC_RING_OUT', `SPA_T')
m4_define(`NSAC_RSTORE', `SPA_VSTORE($1, $2)')
', `
m4_define(`NSAC_RING_OUT', `float')
m4_define(`NSAC_RSTORE', `spa_vf_store($1, $2)')
')
m4_ifelse(NSAC_VB_PAIR, 1, `
m4_define(`NSAC_RING_DECL', `    const float *wq; /* the pairs of a segment */
')
m4_define(`NSAC_WNEW', `wp[2 * r + 1]')
m4_define(`NSAC_WOLD', `wp[2 * r]')
m4_define(`NSAC_RING_SEG', `        wq = wp;
')
m4_define(`NSAC_RING_U', `            spa_vb $1, $2;
            spa_vb_load2_post(&wq, 2, &$1, &$2);
')
', `
m4_define(`NSAC_RING_DECL', `    const float *w2 = wp + st; /* the second half of each window */
')
m4_define(`NSAC_WNEW', `wp[r]')
m4_define(`NSAC_WOLD', `w2[r]')
m4_define(`NSAC_RING_SEG', `')
m4_define(`NSAC_RING_U', `            const spa_vb m4_ifelse(`$1', `u0', `u0 = NSAC_W(w2[r]), u1 = NSAC_W(wp[r])', `u0 = NSAC_W(wp[r]), u1 = NSAC_W(w2[r])');
')
')
Where the layer reads eight 16-bit elements as their even and odd ones
(SPA_VF_EVEN_ODD) and the ring tile stores the output rows itself, its
16-bit rows are read so, a load per two vectors: the accumulators of a pair
hold the even and the odd channels, stored back in place by the layer.
NSAC_RROW(nv, f[, g]): a row of the ring tile; NSAC_RSTORES(nv, j): the
stores of window j (o0 or o1) of the ring tile.
m4_define(`NSAC_EO', m4_ifelse(m4_ifdef(`SPA_VF_EVEN_ODD', `SPA_VF_EVEN_ODD', 0)`'NSAC_STORE_Y`'SPA_IS_F32, 110, 1, 0))
m4_define(`NSAC_RROW', `m4_ifelse(m4_eval(NSAC_EO && $1 % 2 == 0), 1,
  `SPA_FOR(m4_eval($1 / 2), `NSAC_XEO'm4_ifelse(`$2', `NSAC_F0', 0)m4_ifelse(`$3$2', `NSAC_F1', 1, `$3', `NSAC_F1', 1))',
  `NSAC_ROW($@)')')
m4_define(`NSAC_XEO_', `            spa_vf x`'m4_eval(2 * $1), x`'m4_eval(2 * $1 + 1);
            spa_vf_load_eo_'SPA_DT`(xp + m4_eval(2 * $1) * SPA_VL, &x`'m4_eval(2 * $1), &x`'m4_eval(2 * $1 + 1));
')
m4_define(`NSAC_XEO0', `NSAC_XEO_($1)NSAC_F0(m4_eval(2 * $1))NSAC_F0(m4_eval(2 * $1 + 1))')
m4_define(`NSAC_XEO1', `NSAC_XEO_($1)NSAC_F1(m4_eval(2 * $1))NSAC_F1(m4_eval(2 * $1 + 1))')
m4_define(`NSAC_XEO01', `NSAC_XEO_($1)NSAC_F0(m4_eval(2 * $1))NSAC_F1(m4_eval(2 * $1))NSAC_F0(m4_eval(2 * $1 + 1))NSAC_F1(m4_eval(2 * $1 + 1))')
m4_define(`NSAC_RSTORES', `m4_ifelse(m4_eval(NSAC_EO && $1 % 2 == 0), 1,
  `SPA_FOR(m4_eval($1 / 2), `NSAC_SEO$2')', `SPA_FOR($1, `NSAC_S$2')')')
m4_define(`NSAC_SEO0', `        spa_vf_store_eo_'SPA_DT`(o0 + m4_eval(2 * $1) * SPA_VL, a0_`'m4_eval(2 * $1), a0_`'m4_eval(2 * $1 + 1));
')
m4_define(`NSAC_SEO1', `        spa_vf_store_eo_'SPA_DT`(o1 + m4_eval(2 * $1) * SPA_VL, a1_`'m4_eval(2 * $1), a1_`'m4_eval(2 * $1 + 1));
')
SPA_NSAC_PF_NEXT (gen/isa/<isa>.m4, 0 unless it says so): where the ring
tile covers a head in several channel blocks (NSAC_NV vectors narrower than
the head), each pass walks the rows at the token stride reading one or two
lines of each; the hardware prefetchers start over at every pass and the
rows come from memory again. With the fact set, each row of a pass also
prefetches the lines of the next pass (pfo elements on; the last block of a
head: the first block of the next head of the group, nxt elements from the
head; none after the group s last head), so the passes after the first find
their rows in the caches; NSAC_PF_LINES prefetches, unrolled.
m4_define(`NSAC_PF_NEXT', m4_ifdef(`SPA_NSAC_PF_NEXT', `SPA_NSAC_PF_NEXT', 0))
m4_ifelse(NSAC_PF_NEXT, 1, `
m4_define(`NSAC_PF_LINES', m4_eval((NSAC_NV_FIT(m4_ifelse(m4_eval(128 / SPA_VL > 8), 1, 8, m4_eval(128 / SPA_VL))) * SPA_VL * m4_ifelse(SPA_IS_F32, 1, 4, 2) + 63) / 64))
m4_define(`NSAC_PF_PARAMS', `, ptrdiff_t pfo')
m4_define(`NSAC_PF_ONE', `                __builtin_prefetch((const char *)(xp + pfo) + $1 * 64);
')
m4_define(`NSAC_PF', `            if (pfo != 0) {
SPA_FOR(NSAC_PF_LINES, `NSAC_PF_ONE')m4_dnl
            }
')
NSAC_PF_ARGS(blk): the next pass after a ring call at channel c of blk channels.
m4_define(`NSAC_PF_ARGS', `, c + $1 < d_len ? $1 : nxt != 0 ? nxt - c : 0')
m4_define(`NSAC_PF_HT_PARAM', `, ptrdiff_t nxt')
m4_define(`NSAC_PF_HT_ARG', `, hh + 1 < hn ? (ptrdiff_t)a->xs1 : 0')
', `
m4_define(`NSAC_PF_PARAMS', `')
m4_define(`NSAC_PF', `')
m4_define(`NSAC_PF_ARGS', `')
m4_define(`NSAC_PF_HT_PARAM', `')
m4_define(`NSAC_PF_HT_ARG', `')
')
NSAC_TILES(nv): the pair and single-window tiles of nv vectors, then those of nv / 2, ... 1.
m4_define(`NSAC_TILES', `
/* windows k and k+1 (their rows from xp, st apart), channels of $1 vector(s)
 * of one head: o0, o1 = the two f32 sums */
static inline void pair_$1(const SPA_T *xp, int64_t xs0, const float *wp, int64_t bs, int64_t st, float *o0,
                          float *o1)
{
SPA_FOR($1, `NSAC_ZERO')m4_dnl
    int64_t r = 0;
    for (; r < st; r++, xp += xs0) {
        const spa_vb u0 = NSAC_W(wp[r]);
NSAC_ROW($1, `NSAC_F0')m4_dnl
    }
    for (; r < bs; r++, xp += xs0) {
        const spa_vb u0 = NSAC_W(wp[r]), u1 = NSAC_W(wp[r - st]);
NSAC_ROW($1, `NSAC_F0', `NSAC_F1')m4_dnl
    }
    for (; r < bs + st; r++, xp += xs0) {
        const spa_vb u1 = NSAC_W(wp[r - st]);
NSAC_ROW($1, `NSAC_F1')m4_dnl
    }
SPA_FOR($1, `NSAC_ST')m4_dnl
}

/* windows 0 .. kn-1 (kn >= 1) when bs == 2 * st, channels of $1 vector(s) of
 * one head, window k into o + k * width: the rows in segments of st, each
 * segment loaded once for the two windows holding it (the one started a
 * segment before, the one starting), their accumulators in registers.
 * NSAC_RING_W: the weights as staged (see the kernel below). */
static inline void ring_$1(const SPA_T *xp, ptrdiff_t xs0, const float *wp, ptrdiff_t st, ptrdiff_t kn,
                          NSAC_RING_OUT *o, ptrdiff_t width`'NSAC_PF_PARAMS)
{
NSAC_RING_DECL()m4_dnl
    NSAC_RING_OUT *o0, *o1;
SPA_FOR($1, `NSAC_ZERO')m4_dnl
    for (ptrdiff_t r = 0; r < st; r++, xp += xs0) {
        const spa_vb u0 = NSAC_W(NSAC_WNEW);
NSAC_PF()NSAC_RROW($1, `NSAC_F0')m4_dnl
    }
    ptrdiff_t k = 1;
    for (; k + 1 < kn; k += 2) {
SPA_FOR($1, `NSAC_Z1')m4_dnl
NSAC_RING_SEG(`u0', `u1')m4_dnl
        for (ptrdiff_t r = 0; r < st; r++, xp += xs0) {
NSAC_RING_U(`u0', `u1')m4_dnl
NSAC_PF()NSAC_RROW($1, `NSAC_F0', `NSAC_F1')m4_dnl
        }
        o0 = o + (k - 1) * width;
NSAC_RSTORES($1, 0)m4_dnl
SPA_FOR($1, `NSAC_Z0')m4_dnl
NSAC_RING_SEG(`u1', `u0')m4_dnl
        for (ptrdiff_t r = 0; r < st; r++, xp += xs0) {
NSAC_RING_U(`u1', `u0')m4_dnl
NSAC_PF()NSAC_RROW($1, `NSAC_F0', `NSAC_F1')m4_dnl
        }
        o1 = o + k * width;
NSAC_RSTORES($1, 1)m4_dnl
    }
    if (k < kn) { /* window kn - 1 starts here */
SPA_FOR($1, `NSAC_Z1')m4_dnl
NSAC_RING_SEG(`u0', `u1')m4_dnl
        for (ptrdiff_t r = 0; r < st; r++, xp += xs0) {
NSAC_RING_U(`u0', `u1')m4_dnl
NSAC_PF()NSAC_RROW($1, `NSAC_F0', `NSAC_F1')m4_dnl
        }
        o0 = o + (k - 1) * width;
NSAC_RSTORES($1, 0)m4_dnl
        for (ptrdiff_t r = 0; r < st; r++, xp += xs0) {
            const spa_vb u1 = NSAC_W(NSAC_WOLD);
NSAC_PF()NSAC_RROW($1, `NSAC_F1')m4_dnl
        }
        o1 = o + k * width;
NSAC_RSTORES($1, 1)m4_dnl
    } else {
        for (ptrdiff_t r = 0; r < st; r++, xp += xs0) {
            const spa_vb u0 = NSAC_W(NSAC_WOLD);
NSAC_PF()NSAC_RROW($1, `NSAC_F0')m4_dnl
        }
        o0 = o + (k - 1) * width;
NSAC_RSTORES($1, 0)m4_dnl
    }
}

/* one window, channels of $1 vector(s) of one head */
static inline void single_$1(const SPA_T *xp, int64_t xs0, const float *wp, int64_t bs, float *o0)
{
SPA_FOR($1, `NSAC_ZERO0')m4_dnl
    for (int64_t r = 0; r < bs; r++, xp += xs0) {
        const spa_vb u0 = NSAC_W(wp[r]);
NSAC_ROW($1, `NSAC_F0')m4_dnl
    }
SPA_FOR($1, `NSAC_ST0')m4_dnl
}
m4_ifelse(m4_eval($1 > 1), 1, `NSAC_TILES(m4_eval($1 / 2))')')
NSAC_CALLS(nv, what, args[, extra]): the blocks of nv / 2, ..., 1 vectors for
what is left of d; extra(block channels): more arguments (NSAC_PF_ARGS).
m4_define(`NSAC_CALLS', `m4_ifelse(m4_eval($1 >= 1), 1, `        if (c + m4_eval($1 * SPA_VL) <= d_len) {
            $2_$1($3`'m4_ifelse(`$4', `', `', `$4(m4_eval($1 * SPA_VL))'));
            c += m4_eval($1 * SPA_VL);
        }
NSAC_CALLS(m4_eval($1 / 2), `$2', `$3', `$4')')')
m4_divert(0)m4_dnl
NSAC_TILES(NSAC_NV)m4_dnl

/* Windows [0, kn) of one head (input rows from xh, window k from xh + k*st
 * rows, unit stride; wt: the head's weights, widened), into acc rows
 * k*width + channel. */
m4_ifelse(NSAC_STORE_Y, 1, `
/* Windows [0, kn) of one head by the ring tile (bs == 2 st; input rows from
 * xh, window k from xh + k*st rows, unit stride; wt: the weights as the ring
 * reads them), window k into the unit-stride output row o + k*width. */
static void head_ring(const SPA_T *xh, ptrdiff_t xs0, const float *wt, ptrdiff_t st, ptrdiff_t d_len,
                      ptrdiff_t kn, SPA_T *o, ptrdiff_t width)
{
    ptrdiff_t c = 0;
    { /* d_len is a multiple of VL (ring above) */
        for (; c + m4_eval(NSAC_NV * SPA_VL) <= d_len; c += m4_eval(NSAC_NV * SPA_VL))
            ring_`'NSAC_NV`'(xh + c, xs0, wt, st, kn, o + c, width`'NSAC_PF_ARGS(m4_eval(NSAC_NV * SPA_VL)));
NSAC_CALLS(m4_eval(NSAC_NV / 2), `ring', `xh + c, xs0, wt, st, kn, o + c, width', `NSAC_PF_ARGS')m4_dnl
    }
}
')m4_dnl
static void head_tiles(const SPA_T *xh, int64_t xs0, const float *wt, int64_t bs, int64_t st, int64_t d_len,
                       int64_t kn, float *acc, int64_t width`'NSAC_PF_HT_PARAM)
{
m4_ifelse(NSAC_STORE_Y, 1, `', `m4_dnl
    if (bs == 2 * st) {
        int64_t c = 0;
        for (; c + m4_eval(NSAC_NV * SPA_VL) <= d_len; c += m4_eval(NSAC_NV * SPA_VL))
            ring_`'NSAC_NV`'(xh + c, (ptrdiff_t)xs0, wt, (ptrdiff_t)st, (ptrdiff_t)kn, acc + c,
                             (ptrdiff_t)width`'NSAC_PF_ARGS(m4_eval(NSAC_NV * SPA_VL)));
NSAC_CALLS(m4_eval(NSAC_NV / 2), `ring', `xh + c, (ptrdiff_t)xs0, wt, (ptrdiff_t)st, (ptrdiff_t)kn, acc + c, (ptrdiff_t)width', `NSAC_PF_ARGS')m4_dnl
        return;
    }
')m4_dnl
    int64_t k = 0;
    for (; k + 1 < kn; k += 2) {
        const SPA_T *xk = xh + k * st * xs0;
        float *o0 = acc + k * width, *o1 = o0 + width;
        int64_t c = 0;
        for (; c + m4_eval(NSAC_NV * SPA_VL) <= d_len; c += m4_eval(NSAC_NV * SPA_VL))
            pair_`'NSAC_NV`'(xk + c, xs0, wt, bs, st, o0 + c, o1 + c);
NSAC_CALLS(m4_eval(NSAC_NV / 2), `pair', `xk + c, xs0, wt, bs, st, o0 + c, o1 + c')m4_dnl
    }
    if (k < kn) {
        const SPA_T *xk = xh + k * st * xs0;
        float *o0 = acc + k * width;
        int64_t c = 0;
        for (; c + m4_eval(NSAC_NV * SPA_VL) <= d_len; c += m4_eval(NSAC_NV * SPA_VL))
            single_`'NSAC_NV`'(xk + c, xs0, wt, bs, o0 + c);
NSAC_CALLS(m4_eval(NSAC_NV / 2), `single', `xk + c, xs0, wt, bs, o0 + c')m4_dnl
    }
}

/* acc += wv * x over n channels, on the ISA layer (the last n % VL by its
 * partial loads and stores). */
static inline void axpy(float *restrict acc, const float *restrict x, float wv, int64_t n)
{
    const spa_vf vw = spa_vf_set1(wv);
    const int64_t whole = n - n % SPA_VL;
    for (int64_t e = 0; e < whole; e += SPA_VL)
        spa_vf_store(acc + e, spa_vf_fma(spa_vf_load(acc + e), vw, spa_vf_load(x + e)));
    if (whole < n)
        spa_vf_store_n(acc + whole, spa_vf_fma(spa_vf_load_n(acc + whole, n - whole), vw, spa_vf_load_n(x + whole, n - whole)),
                       n - whole);
}

/* The first n < VL channels of a unit-stride row, widened, the other lanes
 * 0: the layer's partial load (a 16-bit row's n elements converted first). */
static inline spa_vf tail_load(const SPA_T *p, int64_t n)
{
m4_ifelse(SPA_IS_F32, 1, `    return spa_vf_load_n(p, n);
', `    float f[SPA_VL];
    for (int64_t e = 0; e < n; e++)
        f[e] = SPA_LOAD(p[e]);
    return spa_vf_load_n(f, n);
')m4_dnl
}

/* The channel tail of the register tiles (the last n < VL channels of one
 * head, unit stride): windows [0, kn) one partial vector each, their rows
 * ascending as in every other path, into acc rows k * width. wh: the head's
 * weight column (stride ws0). */
static void tail_windows(const SPA_T *xh, int64_t xs0, const SPA_T *wh, int64_t ws0, int64_t bs, int64_t st,
                         int64_t n, int64_t kn, float *acc, int64_t width)
{
    for (int64_t k = 0; k < kn; k++) {
        const SPA_T *xp = xh + k * st * xs0;
        spa_vf v = spa_vf_zero();
        for (int64_t r = 0; r < bs; r++, xp += xs0)
            v = spa_vf_fmab(v, tail_load(xp, n), spa_vb_set(SPA_LOAD(wh[r * ws0])));
        spa_vf_store_n(acc + k * width, v, n);
    }
}

/* Strided input rows: row by row, each row widened once into xf and added,
 * with its weight, into the accumulator of every window holding it (the
 * same sums in the same order as the tiles). */
static void rows_strided(const spa_nsac_args *a, int64_t first, int64_t kn, int64_t h0, int64_t hn, float *acc,
                         float *xf)
{
    const SPA_T *x = a->x;
    const SPA_T *w = a->w;
    const int64_t d_len = a->d, bs = a->bs, st = a->st, width = hn * d_len;
    const int64_t span = (kn - 1) * st + bs;
    for (int64_t e = 0; e < kn * width; e++)
        acc[e] = 0.0f;
    for (int64_t r = 0; r < span; r++) {
        /* Ask for the rows a few tokens ahead: the heads of a group are
         * short runs the hardware prefetcher alone serves poorly. */
        if (r + SPA_PREFETCH_ROWS < span)
            for (int64_t hh = 0; hh < hn; hh++)
                SPA_PREFETCH_RUN(x + (first + r + SPA_PREFETCH_ROWS) * a->xs0 + (h0 + hh) * a->xs1,
                                 a->xs2 == 1 ? d_len * SPA_SZ : 0); /* dense rows only: a channel
                                 * stride can be anything where D is 1, and a strided row's span
                                 * holds more lines than elements */
        for (int64_t hh = 0; hh < hn; hh++) {
            const SPA_T *xr = x + (first + r) * a->xs0 + (h0 + hh) * a->xs1;
            float *xd = xf + hh * d_len;
            SPA_WIDEN_ROW(xd, xr, a->xs2, d_len);
        }
        /* Windows k of the tile holding row r: k*st <= r < k*st + bs. */
        const int64_t klo = r < bs ? 0 : (r - bs) / st + 1;
        const int64_t khi = r / st < kn - 1 ? r / st : kn - 1;
        for (int64_t k = klo; k <= khi; k++) {
            const SPA_T *wr = w + (r - k * st) * a->ws0 + h0 * a->ws1;
            for (int64_t hh = 0; hh < hn; hh++)
                axpy(acc + k * width + hh * d_len, xf + hh * d_len, SPA_LOAD(wr[hh * a->ws1]), d_len);
        }
    }
}

void NSAC_KSYM()(const spa_nsac_args *a, int64_t tok0, int64_t row0, int64_t nwin, float *scratch)
{
    const SPA_T *x = a->x;
    const SPA_T *w = a->w;
    SPA_T *y = a->y;
    const int64_t d_len = a->d, bs = a->bs, st = a->st, heads = a->n;
    const int64_t group = spa_nsac_head_group(heads, d_len, TC);
    float *acc = scratch;                      /* [TW][group * d] window sums */
    float *xf = scratch + TW * group * d_len;  /* [group * d] one input row, widened */
m4_ifelse(NSAC_STORE_Y, 1, `    /* unit-stride rows in and out, bs == 2 st: the ring tile */
    const int ring = a->xs2 == 1 && a->ys2 == 1 && bs == 2 * st && bs <= group * d_len && d_len % SPA_VL == 0;
')m4_dnl

    for (int64_t k0 = 0; k0 < nwin; k0 += TW) {
        const int64_t kn = nwin - k0 < TW ? nwin - k0 : TW;
        const int64_t first = tok0 + k0 * st;
        for (int64_t h0 = 0; h0 < heads; h0 += group) {
            const int64_t hn = heads - h0 < group ? heads - h0 : group;
            const int64_t width = hn * d_len;
m4_ifelse(NSAC_STORE_Y, 1, `m4_dnl
            if (ring) { /* the ring tile, head by head, into the output rows */
                for (int64_t hh = 0; hh < hn; hh++) {
                    const int64_t hw = (h0 + hh) * a->ws1;
NSAC_STAGE_RING()m4_dnl
                    head_ring(x + first * a->xs0 + (h0 + hh) * a->xs1, (ptrdiff_t)a->xs0, xf, (ptrdiff_t)st,
                              (ptrdiff_t)d_len, (ptrdiff_t)kn, y + (row0 + k0) * a->ys0 + (h0 + hh) * a->ys1,
                              (ptrdiff_t)a->ys0);
                }
                continue;
            }
')m4_dnl
            if (a->xs2 == 1 && bs <= group * d_len) /* register tiles, head by head */
                for (int64_t hh = 0; hh < hn; hh++) {
                    /* the head's weights, widened, where the strided path widens rows */
m4_ifelse(NSAC_VB_PAIR`'NSAC_STORE_Y, 10, `                    if (bs == 2 * st) { /* the ring tile weight pairs */
                        const int64_t hw = (h0 + hh) * a->ws1;
NSAC_STAGE_RING()m4_dnl
                    } else
    ')m4_dnl
                    for (int64_t j = 0; j < bs; j++)
                        xf[j] = SPA_LOAD(w[j * a->ws0 + (h0 + hh) * a->ws1]);
                    head_tiles(x + first * a->xs0 + (h0 + hh) * a->xs1, a->xs0, xf, bs, st, d_len, kn,
                               acc + hh * d_len, width`'NSAC_PF_HT_ARG);
                    if (d_len % SPA_VL != 0) { /* the tiles took whole vectors */
                        const int64_t c = d_len - d_len % SPA_VL;
                        tail_windows(x + first * a->xs0 + (h0 + hh) * a->xs1 + c, a->xs0, w + (h0 + hh) * a->ws1,
                                     a->ws0, bs, st, d_len - c, kn, acc + hh * d_len + c, width);
                    }
                }
            else
                rows_strided(a, first, kn, h0, hn, acc, xf);
            for (int64_t k = 0; k < kn; k++)
                for (int64_t hh = 0; hh < hn; hh++) {
                    SPA_T *yr = y + (row0 + k0 + k) * a->ys0 + (h0 + hh) * a->ys1;
                    const float *ak = acc + k * width + hh * d_len;
                    SPA_NARROW_ROW(yr, a->ys2, ak, d_len);
                }
        }
    }
}
