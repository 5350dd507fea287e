SPA_STAMP
/* MultiScaleDeformableAttnFunction, queries [q0, q1) of one (batch, head)
 * pair (spec/msda.md 5), reading the pair's packed f32 value slice. Per tile
 * of up to FQ queries, pass 1 stages every sample (msda_stage.h: range check,
 * corner rows, per-corner bounds and bilinear weights, sixteen samples per
 * chunk on the ISA layer), so that no location can address memory outside
 * its level; pass 2 combines the corner rows of each query in the canonical
 * order (levels, then points, ascending; per sample
 * samp = w00*r00 + w01*r01 + w10*r10 + w11*r11, then acc += a * samp) with
 * the accumulators of a block of channels in registers, and stores the
 * output row once. The products are the layer's FMA (fused where the ISA has
 * one, a multiply and an add on the scalar layer). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msda_kernel.h"
#include "msda_stage.h"
#include "native_div.h"

enum { PFQ = 8, FQ = 8 };
/* the dtype of the output, the kernel's; location and attnWeight come in
 * theirs (most often the same: that case is staged with constant dtypes) */
enum { DT = m4_ifelse(SPA_DT, `f16', `SPA_FLOAT16', SPA_DT, `bf16', `SPA_BFLOAT16', `SPA_FLOAT32') };

m4_divert(-1)
The register tile of the combine: MSDA_NB accumulator vectors (at most 8, at
most 128 channels) where NB + 4 + 5 * SPA_VB_VREGS vector registers hold
them, the sample chain of one vector at a time (its sum and operand, and the
next chain's first loads) and the five broadcast weights.
m4_define(`MSDA_NB_FIT', `m4_ifelse(m4_eval($1 <= 1 || $1 + 4 + 5 * SPA_VB_VREGS <= SPA_VREGS), 1, $1, `MSDA_NB_FIT(m4_eval($1 / 2))')')
m4_define(`MSDA_NB', MSDA_NB_FIT(m4_ifelse(m4_eval(128 / SPA_VL > 8), 1, 8, m4_eval(128 / SPA_VL))))
m4_define(`MSDA_ZERO', `    spa_vf s$1 = spa_vf_zero();
')
m4_define(`MSDA_STEP', `            {
                spa_vf t = spa_vf_mulb($2(p0 + $1 * SPA_VL$3), w0);
                t = spa_vf_fmab(t, $2(p1 + $1 * SPA_VL$3), w1);
                t = spa_vf_fmab(t, $2(p2 + $1 * SPA_VL$3), w2);
                t = spa_vf_fmab(t, $2(p3 + $1 * SPA_VL$3), w3);
                s$1 = spa_vf_fmab(s$1, t, av);
            }
')
m4_define(`MSDA_FULL_STEP', `MSDA_STEP($1, `spa_vf_load', `')')
m4_define(`MSDA_TAIL_STEP', `MSDA_STEP($1, `spa_vf_load_n', `, n')')
m4_define(`MSDA_STORE', `    spa_vf_store(acc + c0 + $1 * SPA_VL, s$1);
')
MSDA_GROUP(name, nb, step macro, store, extra parameter): one block of
channels of one query, nb accumulators.
m4_define(`MSDA_GROUP', `
/* channels from c0 of one query, $2 accumulator vector(s) */
static inline void group_$1(const spa_msda_chunk *ch, int64_t nch, int64_t c0,$5 float *acc)
{
SPA_FOR($2, `MSDA_ZERO')m4_dnl
    for (int64_t j = 0; j < nch; j++) {
        const spa_msda_chunk *e = &ch[j];
        for (uint32_t live = e->live; live != 0; live &= live - 1) {
            const int i = spa_isa_ctz32(live);
            const float *p0 = (const float *)e->v[0][i] + c0, *p1 = (const float *)e->v[1][i] + c0;
            const float *p2 = (const float *)e->v[2][i] + c0, *p3 = (const float *)e->v[3][i] + c0;
            const spa_vb w0 = spa_vb_load(&e->w[0][i]), w1 = spa_vb_load(&e->w[1][i]);
            const spa_vb w2 = spa_vb_load(&e->w[2][i]), w3 = spa_vb_load(&e->w[3][i]);
            const spa_vb av = spa_vb_load(&e->a[i]);
SPA_FOR($2, `$3')m4_dnl
        }
    }
$4}
')
MSDA_GROUPS(nb): the groups of nb, nb/2, ..., 1 vectors.
m4_define(`MSDA_GROUPS', `MSDA_GROUP($1, $1, `MSDA_FULL_STEP', `SPA_FOR($1, `MSDA_STORE')', `')m4_ifelse(m4_eval($1 > 1), 1, `MSDA_GROUPS(m4_eval($1 / 2))')')
m4_define(`MSDA_CALLS', `m4_ifelse(m4_eval($1 >= 1), 1, `    if (c0 + m4_eval($1 * SPA_VL) <= cl) {
        group_$1(ch, nch, c0, acc);
        c0 += m4_eval($1 * SPA_VL);
    }
MSDA_CALLS(m4_eval($1 / 2))')')
m4_divert(0)m4_dnl
MSDA_GROUPS(MSDA_NB)m4_dnl
m4_ifelse(m4_eval(SPA_VL > 1), 1, `m4_dnl
MSDA_GROUP(`tail', 1, `MSDA_TAIL_STEP', `    spa_vf_store_n(acc + c0, s0, n);
', ` int64_t n,')m4_dnl
')m4_dnl

/* The output row of one query into acc: blocks of MSDA_NB vectors, then the
 * smaller blocks for what is left of C. */
static void combine(const spa_msda_chunk *ch, int64_t nch, int64_t cl, float *acc)
{
    int64_t c0 = 0;
    for (; c0 + m4_eval(MSDA_NB * SPA_VL) <= cl; c0 += m4_eval(MSDA_NB * SPA_VL))
        group_`'MSDA_NB`'(ch, nch, c0, acc);
MSDA_CALLS(m4_eval(MSDA_NB / 2))m4_dnl
m4_ifelse(m4_eval(SPA_VL > 1), 1, `m4_dnl
    if (c0 < cl) /* the last C % SPA_VL channels: partial vectors */
        group_tail(ch, nch, c0, cl - c0, acc);
')m4_dnl
}

/* Stages the chunks of query q (one call site per dtype pair: the common
 * one, location and attnWeight in the kernel's dtype, with constants). */
SPA_ISA_INLINE void stage_query(const spa_msda_args *a, const spa_msda_lanes *ln, int64_t nch, int64_t lq,
                                int32_t ldt, int64_t aq, int32_t adt, bool packed, const spa_msda_stage_out *o,
                                spa_msda_chunk *ch, float *gat)
{
    for (int64_t j = 0; j < nch; j++)
        spa_msda_stage(a, &ln[j], 16 * j, lq, ldt, aq, adt, packed, o, &ch[j], NULL, gat);
}

/* The same for location and attnWeight in dtypes other than the kernel's:
 * out of line, so that the common case above keeps its code and registers. */
SPA_MSDA_COLD static void stage_query_mixed(const spa_msda_args *a, const spa_msda_lanes *ln, int64_t nch, int64_t lq, int64_t aq,
                              bool packed, const spa_msda_stage_out *o, spa_msda_chunk *ch, float *gat)
{
    stage_query(a, ln, nch, lq, a->loc_dt, aq, a->attn_dt, packed, o, ch, gat);
}

void MSDA_KSYM()(const spa_msda_args *a, int64_t b, int64_t h, const float *vpair, int64_t q0,
                 int64_t q1, void *scratch)
{
    const int64_t nlp = a->nl * a->np, nch = (nlp + 15) / 16, cl = a->c;
    const int64_t desc_bytes = spa_msda_desc_bytes(a->tq, nlp, false);
    float *acc = (float *)(void *)((unsigned char *)scratch + desc_bytes);
    /* in the descriptor area: the chunks of up to FQ queries, the lane
     * constants, the gathered coordinates */
    const int64_t fixed = nch * (int64_t)sizeof(spa_msda_lanes) + SPA_MSDA_GATHER_FLOATS * (int64_t)sizeof(float);
    const int64_t room = spa_div_nat(desc_bytes - fixed, nch * (int64_t)sizeof(spa_msda_chunk));
    const int64_t ftq = room < FQ ? room : FQ;
    spa_msda_chunk *ch = scratch;
    spa_msda_lanes *ln = (spa_msda_lanes *)(void *)(ch + ftq * nch);
    float *gat = (float *)(void *)(ln + nch);
    const uint64_t row_bytes = (uint64_t)cl * sizeof(float);
    const spa_msda_stage_out o = {vpair, a->zero, NULL, NULL, 0, row_bytes, spa_msda_wide(a, row_bytes)};
    const bool packed = spa_msda_packed(a);
    const bool own_dt = a->loc_dt == DT && a->attn_dt == DT;
    const size_t lsz = a->loc_dt == SPA_FLOAT32 ? 4 : 2, asz = a->attn_dt == SPA_FLOAT32 ? 4 : 2;
    const int64_t lbytes = a->nl * a->ls[3] * (int64_t)lsz, abytes = a->nl * a->as[3] * (int64_t)asz;
    SPA_T *out = a->out;
    spa_msda_lanes_init(a->lv, a->nl, a->np, ln);
    for (int64_t t0 = q0; t0 < q1; t0 += ftq) {
        const int64_t tn = q1 - t0 < ftq ? q1 - t0 : ftq;
        for (int64_t i = 0; i < tn; i++) {
            const int64_t q = t0 + i;
            const int64_t lq = b * a->ls[0] + q * a->ls[1] + h * a->ls[2];
            const int64_t aq = b * a->as[0] + q * a->as[1] + h * a->as[2];
            /* A pair reads one short row of location and attnWeight per
             * query, a stride of nh rows apart: too far for the hardware
             * prefetchers to follow across pages, so the rows PFQ queries
             * ahead are requested here. */
            if (q + PFQ < a->nq) {
                const char *lp = (const char *)a->loc + (size_t)(lq + PFQ * a->ls[1]) * lsz;
                const char *ap = (const char *)a->attn + (size_t)(aq + PFQ * a->as[1]) * asz;
                for (int64_t off = 0; off < lbytes; off += 64)
                    SPA_PREFETCH(lp + off);
                for (int64_t off = 0; off < abytes; off += 64)
                    SPA_PREFETCH(ap + off);
            }
            if (own_dt)
                stage_query(a, ln, nch, lq, DT, aq, DT, packed, &o, &ch[i * nch], gat);
            else
                stage_query_mixed(a, ln, nch, lq, aq, packed, &o, &ch[i * nch], gat);
        }
        for (int64_t i = 0; i < tn; i++) {
            combine(&ch[i * nch], nch, cl, acc);
            SPA_T *orow = out + b * a->os[0] + (t0 + i) * a->os[1] + h * cl * a->os[2];
            SPA_NARROW_ROW(orow, a->os[2], acc, cl);
        }
    }
}
