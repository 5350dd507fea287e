SPA_STAMP
/* MultiScaleDeformableAttnFunction in float64 (src/msda/msda_f64.h), queries
 * [q0, q1) of one (batch, head) pair, reading the pair's packed double value
 * slice. Per query it first takes every sample in double (spec/msda.md 5:
 * x = loc_x * W - 0.5, the range check, floor, the fractions, each corner
 * checked against the map) and keeps the live ones in order; then it
 * combines their corner rows block of channels by block of channels, the
 * accumulators in registers, in the canonical order (levels, then points,
 * ascending; samp = w00*r00 + w01*r01 + w10*r10 + w11*r11, then
 * acc += a * samp, with the layer's spa_vd_fma), and stores the output row
 * once, in the output's dtype. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "msda_f64.h"

m4_include(`templates/msda/f64/msda_stage.m4')m4_dnl
m4_divert(-1)
MSDAD_GROUP(name, nb, step macro, store macro, extra parameter): the channels
from c0 of one query, nb accumulator vectors.
m4_define(`MSDAD_ZERO', `    spa_vd s$1 = spa_vd_zero();
')
m4_define(`MSDAD_STEP', `        {
            spa_vd t = spa_vd_mul($2(e->v[0] + c0 + $1 * SPA_VDL$3), w0);
            t = spa_vd_fma(t, $2(e->v[1] + c0 + $1 * SPA_VDL$3), w1);
            t = spa_vd_fma(t, $2(e->v[2] + c0 + $1 * SPA_VDL$3), w2);
            t = spa_vd_fma(t, $2(e->v[3] + c0 + $1 * SPA_VDL$3), w3);
            s$1 = spa_vd_fma(s$1, t, av);
        }
')
m4_define(`MSDAD_FULL_STEP', `MSDAD_STEP($1, `spa_vd_load', `')')
m4_define(`MSDAD_TAIL_STEP', `MSDAD_STEP($1, `spa_vd_load_n', `, n')')
m4_define(`MSDAD_STORE', `    spa_vd_store(row + c0 + $1 * SPA_VDL, s$1);
')
m4_define(`MSDAD_GROUP', `
/* channels from c0 of one query, $2 accumulator vector(s) */
static inline void group_$1(const spa_msda_f64_sample *s, int64_t ns, int64_t c0,$5 double *row)
{
SPA_FOR($2, `MSDAD_ZERO')m4_dnl
    for (int64_t j = 0; j < ns; j++) {
        const spa_msda_f64_sample *e = &s[j];
        const spa_vd w0 = spa_vd_set1(e->w[0]), w1 = spa_vd_set1(e->w[1]);
        const spa_vd w2 = spa_vd_set1(e->w[2]), w3 = spa_vd_set1(e->w[3]);
        const spa_vd av = spa_vd_set1(e->a);
SPA_FOR($2, `$3')m4_dnl
    }
$4}
')
m4_define(`MSDAD_GROUPS', `MSDAD_GROUP($1, $1, `MSDAD_FULL_STEP', `SPA_FOR($1, `MSDAD_STORE')', `')m4_ifelse(m4_eval($1 > 1), 1, `MSDAD_GROUPS(m4_eval($1 / 2))')')
m4_define(`MSDAD_CALLS', `m4_ifelse(m4_eval($1 >= 1), 1, `    if (c0 + m4_eval($1 * SPA_VDL) <= cl) {
        group_$1(s, ns, c0, row);
        c0 += m4_eval($1 * SPA_VDL);
    }
MSDAD_CALLS(m4_eval($1 / 2))')')
m4_divert(0)m4_dnl
MSDAD_GROUPS(MSDAD_NB)m4_dnl
m4_ifelse(m4_eval(SPA_VDL > 1), 1, `m4_dnl
MSDAD_GROUP(`tail', 1, `MSDAD_TAIL_STEP', `    spa_vd_store_n(row + c0, s0, n);
', ` int64_t n,')m4_dnl
')m4_dnl

/* The output row of one query (C doubles) from its ns live samples. */
static void combine(const spa_msda_f64_sample *s, int64_t ns, int64_t cl, double *row)
{
    int64_t c0 = 0;
    for (; c0 + m4_eval(MSDAD_NB * SPA_VDL) <= cl; c0 += m4_eval(MSDAD_NB * SPA_VDL))
        group_`'MSDAD_NB`'(s, ns, c0, row);
MSDAD_CALLS(m4_eval(MSDAD_NB / 2))m4_dnl
m4_ifelse(m4_eval(SPA_VDL > 1), 1, `m4_dnl
    if (c0 < cl) /* the last C % SPA_VDL channels: a partial vector */
        group_tail(s, ns, c0, cl - c0, row);
')m4_dnl
}

/* The live samples of query q, levels then points ascending: their count.
 * Location and attnWeight in dtypes ldt and adt (one call site with
 * constants for the common case, both float64). */
SPA_ISA_INLINE int64_t stage(const spa_msda_f64_args *a, int64_t b, int64_t h, int64_t q, const double *vpair,
                             int32_t ldt, int32_t adt, spa_msda_f64_sample *s, bool *nanloc)
{
    const int64_t lq = b * a->ls[0] + q * a->ls[1] + h * a->ls[2];
    const int64_t aq = b * a->as[0] + q * a->as[1] + h * a->as[2];
    int64_t n = 0;
    for (int64_t l = 0; l < a->nl; l++) {
        const spa_msda_level *lv = &a->lv[l];
        const double fw = (double)lv->w, fh = (double)lv->h;
        for (int64_t p = 0; p < a->np; p++) {
            MSDAD_SAMPLE(`*nanloc |= xl != xl || yl != yl;
                continue;')
            spa_msda_f64_sample *e = &s[n++];
            e->w[0] = hy * hx;
            e->w[1] = hy * lx;
            e->w[2] = ly * hx;
            e->w[3] = ly * lx;
            e->a = spa_msda_f64_get(a->attn, adt, aq + l * a->as[3] + p * a->as[4]);
            for (int k = 0; k < 4; k++)
                e->v[k] = in[k] ? vpair + key[k] * a->c : a->zero;
        }
    }
    return n;
}

void MSDAD_KSYM()(const spa_msda_f64_args *a, int64_t b, int64_t h, const double *vpair, int64_t q0, int64_t q1,
                  void *scratch)
{
    const int64_t cl = a->c;
    spa_msda_f64_sample *s = scratch;
    double *acc = (double *)(void *)(s + a->nl * a->np);
    /* a float64 output row of unit stride takes the sums directly */
    const bool direct = a->out_dt == SPA_FLOAT64 && a->os[2] == 1;
    const bool own_dt = a->loc_dt == SPA_FLOAT64 && a->attn_dt == SPA_FLOAT64;
    for (int64_t q = q0; q < q1; q++) {
        spa_msda_f64_prefetch_rows(a, b, h, q);
        bool nanloc = false;
        const int64_t ns = own_dt ? stage(a, b, h, q, vpair, SPA_FLOAT64, SPA_FLOAT64, s, &nanloc)
                                  : stage(a, b, h, q, vpair, a->loc_dt, a->attn_dt, s, &nanloc);
        const int64_t off = b * a->os[0] + q * a->os[1] + h * cl * a->os[2];
        if (direct && !nanloc) {
            combine(s, ns, cl, (double *)a->out + off);
            continue;
        }
        combine(s, ns, cl, acc);
        if (nanloc) /* a sample taken at a NaN location: NaN in every channel */
            for (int64_t c = 0; c < cl; c++)
                acc[c] = (double)spa_bits_f32(0x7FC00000u);
        for (int64_t c = 0; c < cl; c++)
            spa_msda_f64_put(a->out, a->out_dt, off + c * a->os[2], acc[c]);
    }
}
