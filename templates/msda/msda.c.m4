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
SPA_MSDA_FOLD (gen/isa/<isa>.m4, 0 unless it says so): the staging folds the
attention weight into the four corner weights once per sample, so a vector
of a sample costs four FMAs into the accumulator (acc += (a*w00)*r00 + ...,
corners in order) instead of five operations (samp, then acc += a * samp).
Each accumulator then carries a chain of four dependent FMAs per sample: a
win where instructions are the cost (in-order cores with enough channel
vectors to interleave), a loss where FMA latency is (few vectors on an
out-of-order core), so the ISA decides. A query with a non-finite attention
weight is staged again unfolded and combined in the canonical form
(Inf * 0 in a folded weight would make NaN where a * samp is an infinity).
m4_ifdef(`SPA_MSDA_FOLD', `', `m4_define(`SPA_MSDA_FOLD', 0)')
The register tile of the combine: MSDA_NB accumulator vectors (at most 8, at
most 128 channels) where NB + MSDA_REST vector registers hold them beside
the sample chain of one vector at a time (unfolded: its sum and operand, and
the next chain s first loads; folded: an operand and the next one) and the
broadcast weights (five unfolded, four folded).
m4_define(`MSDA_REST', m4_ifelse(SPA_MSDA_FOLD, 1, `m4_eval(2 + 4 * SPA_VB_VREGS)', `m4_eval(4 + 5 * SPA_VB_VREGS)'))
m4_define(`MSDA_NB_FIT', `m4_ifelse(m4_eval($1 <= 1 || $1 + MSDA_REST <= SPA_VREGS), 1, $1, `MSDA_NB_FIT(m4_eval($1 / 2))')')
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
m4_define(`MSDA_FOLD_STEP', `            s$1 = spa_vf_fmab(s$1, $2(p0 + $1 * SPA_VL$3), w0);
            s$1 = spa_vf_fmab(s$1, $2(p1 + $1 * SPA_VL$3), w1);
            s$1 = spa_vf_fmab(s$1, $2(p2 + $1 * SPA_VL$3), w2);
            s$1 = spa_vf_fmab(s$1, $2(p3 + $1 * SPA_VL$3), w3);
')
m4_define(`MSDA_FULL_STEP', `MSDA_STEP($1, `spa_vf_load', `')')
m4_define(`MSDA_TAIL_STEP', `MSDA_STEP($1, `spa_vf_load_n', `, n')')
m4_define(`MSDA_FOLD_FULL_STEP', `MSDA_FOLD_STEP($1, `spa_vf_load', `')')
m4_define(`MSDA_FOLD_TAIL_STEP', `MSDA_FOLD_STEP($1, `spa_vf_load_n', `, n')')
m4_define(`MSDA_STORE', `    spa_vf_store(acc + c0 + $1 * SPA_VL, s$1);
')
MSDA_PF_NEXT: where the ISA takes software prefetch (SPA_PREFETCH_SW), the
first block of channels of a query requests the corner rows of the same
sample of the query two ahead in the tile (nx, NULL otherwise), their first
pfo + 1 bytes (at most two lines): the corner rows are gathered from a slice
of megabytes at addresses no hardware prefetcher predicts, and the combine
otherwise waits on them (perf: most of the kernel's samples on the corner
loads). Two ahead measured 5 % faster at the encoder shape than none (one
thread; one ahead gained less), a query's rows at once after its staging
no better.
m4_define(`MSDA_PF_NEXT', `m4_ifelse(SPA_PREFETCH_SW, 1, `            if (nx != NULL) {
                const spa_msda_chunk *f = &nx[j];
                for (int k = 0; k < 4; k++) {
                    SPA_PREFETCH((const char *)f->v[k][i]);
                    SPA_PREFETCH((const char *)f->v[k][i] + pfo);
                }
            }
', `            (void)nx, (void)pfo;
')')
MSDA_GROUP_INLINE(nb): the main block of the combine is inlined at each call
(the first, at c0 = 0, reads its rows at constant offsets); the others are
left to the compiler (code size).
m4_define(`MSDA_GROUP_INLINE', `m4_ifelse(m4_eval($1 == MSDA_NB && SPA_MSDA_NB_MEM == 0), 1, `SPA_ISA_INLINE', `static inline')')
MSDA_GROUP(name, nb, step macro, store, extra parameter, folded): one block
of channels of one query, nb accumulators.
m4_define(`MSDA_GROUP', `
/* channels from c0 of one query, $2 accumulator vector(s) */
MSDA_GROUP_INLINE($2) void group_$1(const spa_msda_chunk *ch, int64_t nch, int64_t c0,$5 float *acc,
                                    const spa_msda_chunk *nx, int64_t pfo)
{
SPA_FOR($2, `MSDA_ZERO')m4_dnl
    for (int64_t j = 0; j < nch; j++) {
        const spa_msda_chunk *e = &ch[j];
        for (uint32_t live = e->live; live != 0; live &= live - 1) {
            const size_t i = (size_t)spa_isa_ctz32(live);
MSDA_PF_NEXT()m4_dnl
            const float *p0 = (const float *)e->v[0][i] + c0, *p1 = (const float *)e->v[1][i] + c0;
            const float *p2 = (const float *)e->v[2][i] + c0, *p3 = (const float *)e->v[3][i] + c0;
            const spa_vb w0 = spa_vb_load(&e->w[0][i]), w1 = spa_vb_load(&e->w[1][i]);
            const spa_vb w2 = spa_vb_load(&e->w[2][i]), w3 = spa_vb_load(&e->w[3][i]);
m4_ifelse($6, 1, `', `            const spa_vb av = spa_vb_load(&e->a[i]);
')m4_dnl
SPA_FOR($2, `$3')m4_dnl
        }
    }
$4}
')
SPA_MSDA_NB_MEM (gen/isa/<isa>.m4, 0 unless it says so; folded combines
only): vectors of a block of MSDA_MIX_VECS (eight, or 128 channels) whose
accumulators stay in the acc row (a load and a store each per sample) beside
the MSDA_MIX_REG others in registers, so that each sample s pointers and
weights load once per block where the registers cannot hold a whole block.
m4_ifdef(`SPA_MSDA_NB_MEM', `', `m4_define(`SPA_MSDA_NB_MEM', 0)')
m4_define(`MSDA_MIX_VECS', m4_ifelse(m4_eval(128 / SPA_VL > 8), 1, 8, m4_eval(128 / SPA_VL)))
m4_define(`MSDA_MIX_REG', m4_eval(MSDA_MIX_VECS - SPA_MSDA_NB_MEM))
m4_ifelse(m4_eval(SPA_MSDA_NB_MEM > 0 && MSDA_MIX_REG + MSDA_REST > SPA_VREGS), 1, `m4_errprint(`spattn gen: SPA_MSDA_NB_MEM leaves more accumulators than registers
')m4_m4exit(1)')
m4_define(`MSDA_MEM_ZERO', `    spa_vf_store(macc + m4_eval($1 * SPA_VL), spa_vf_zero());
')
m4_define(`MSDA_MEM_STEP', `            {
                float *const o = macc + m4_eval($1 * SPA_VL);
                spa_vf m = spa_vf_load(o);
                m = spa_vf_fmab(m, spa_vf_load(p0 + m4_eval(($1 + MSDA_MIX_REG) * SPA_VL)), w0);
                m = spa_vf_fmab(m, spa_vf_load(p1 + m4_eval(($1 + MSDA_MIX_REG) * SPA_VL)), w1);
                m = spa_vf_fmab(m, spa_vf_load(p2 + m4_eval(($1 + MSDA_MIX_REG) * SPA_VL)), w2);
                m = spa_vf_fmab(m, spa_vf_load(p3 + m4_eval(($1 + MSDA_MIX_REG) * SPA_VL)), w3);
                spa_vf_store(o, m);
            }
')
m4_define(`MSDA_MIX_CH', m4_eval(MSDA_MIX_VECS * SPA_VL))
m4_define(`MSDA_MIX_GROUP', `
/* channels from c0 of one query, MSDA_MIX_REG accumulator vectors in
 * registers and SPA_MSDA_NB_MEM in the acc row, weights folded */
SPA_ISA_INLINE void group_mix(const spa_msda_chunk *ch, int64_t nch, int64_t c0, float *acc, const spa_msda_chunk *nx,
                              int64_t pfo)
{
    float *const macc = acc + c0 + m4_eval(MSDA_MIX_REG * SPA_VL);
SPA_FOR(MSDA_MIX_REG, `MSDA_ZERO')m4_dnl
SPA_FOR(SPA_MSDA_NB_MEM, `MSDA_MEM_ZERO')m4_dnl
    for (int64_t j = 0; j < nch; j++) {
        const spa_msda_chunk *e = &ch[j];
        for (uint32_t live = e->live; live != 0; live &= live - 1) {
            const size_t i = (size_t)spa_isa_ctz32(live);
MSDA_PF_NEXT()m4_dnl
            const float *p0 = (const float *)e->v[0][i] + c0, *p1 = (const float *)e->v[1][i] + c0;
            const float *p2 = (const float *)e->v[2][i] + c0, *p3 = (const float *)e->v[3][i] + c0;
            const spa_vb w0 = spa_vb_load(&e->w[0][i]), w1 = spa_vb_load(&e->w[1][i]);
            const spa_vb w2 = spa_vb_load(&e->w[2][i]), w3 = spa_vb_load(&e->w[3][i]);
SPA_FOR(MSDA_MIX_REG, `MSDA_FOLD_FULL_STEP')m4_dnl
SPA_FOR(SPA_MSDA_NB_MEM, `MSDA_MEM_STEP')m4_dnl
        }
    }
SPA_FOR(MSDA_MIX_REG, `MSDA_STORE')m4_dnl
}
')
MSDA_GROUPS(nb, step prefix, name prefix, folded): the groups of nb, nb/2, ..., 1 vectors.
m4_define(`MSDA_GROUPS', `MSDA_GROUP($3$1, $1, `MSDA_$2FULL_STEP', `SPA_FOR($1, `MSDA_STORE')', `', $4)m4_ifelse(m4_eval($1 > 1), 1, `MSDA_GROUPS(m4_eval($1 / 2), `$2', `$3', $4)')')
m4_define(`MSDA_TAIL_GROUP', `m4_ifelse(m4_eval(SPA_VL > 1), 1, `m4_dnl
MSDA_GROUP($2`tail', 1, `MSDA_$1TAIL_STEP', `    spa_vf_store_n(acc + c0, s0, n);
', ` int64_t n,', $3)m4_dnl
')')
m4_define(`MSDA_CALLS', `m4_ifelse(m4_eval($1 >= 1), 1, `    if (c0 + m4_eval($1 * SPA_VL) <= cl) {
        group_$1(ch, nch, c0, acc, nx, pfo);
        c0 += m4_eval($1 * SPA_VL);
        nx = NULL;
    }
MSDA_CALLS(m4_eval($1 / 2))')')
m4_divert(0)m4_dnl

/* The offset of the last byte a prefetch requests of a corner row of cl
 * floats: its first two cache lines at most (the hardware follows a longer
 * row once it is read). */
static inline int64_t pf_last(int64_t cl)
{
    return (cl < 32 ? cl * 4 : 128) - 1;
}
m4_ifelse(m4_eval(SPA_MSDA_NB_MEM > 0), 1, `MSDA_MIX_GROUP()')m4_dnl
m4_ifelse(SPA_MSDA_FOLD, 1, `MSDA_GROUPS(MSDA_NB, `FOLD_', `', 1)MSDA_TAIL_GROUP(`FOLD_', `', 1)m4_dnl
MSDA_GROUP(`plain1', 1, `MSDA_FULL_STEP', `    spa_vf_store(acc + c0, s0);
', `', 0)MSDA_TAIL_GROUP(`', `plain', 0)', `MSDA_GROUPS(MSDA_NB, `', `', 0)MSDA_TAIL_GROUP(`', `', 0)')m4_dnl

/* The output row of one query into acc: blocks of MSDA_NB vectors, then the
 * smaller blocks for what is left of C. The first block is its own call
 * with c0 = 0, so that its corner rows are read at constant offsets from the
 * staged pointers (no address computed per corner and sample; the common C
 * fits one block). */
static void combine(const spa_msda_chunk *ch, int64_t nch, int64_t cl, float *acc, const spa_msda_chunk *nx)
{
    int64_t c0 = 0;
    const int64_t pfo = pf_last(cl); /* nx: the first block of channels only */
m4_ifelse(m4_eval(SPA_MSDA_NB_MEM > 0), 1, `m4_dnl
    /* blocks of MSDA_MIX_VECS vectors first, the first at c0 = 0 */
    if (cl >= MSDA_MIX_CH) {
        group_mix(ch, nch, 0, acc, nx, pfo);
        c0 = MSDA_MIX_CH;
        nx = NULL;
    }
    for (; c0 + MSDA_MIX_CH <= cl; c0 += MSDA_MIX_CH)
        group_mix(ch, nch, c0, acc, NULL, 0);
')m4_dnl
    if (c0 == 0 && cl >= m4_eval(MSDA_NB * SPA_VL)) {
        group_`'MSDA_NB`'(ch, nch, 0, acc, nx, pfo);
        c0 = m4_eval(MSDA_NB * SPA_VL);
        nx = NULL;
    }
    for (; c0 + m4_eval(MSDA_NB * SPA_VL) <= cl; c0 += m4_eval(MSDA_NB * SPA_VL))
        group_`'MSDA_NB`'(ch, nch, c0, acc, NULL, 0);
MSDA_CALLS(m4_eval(MSDA_NB / 2))m4_dnl
m4_ifelse(m4_eval(SPA_VL > 1), 1, `m4_dnl
    if (c0 < cl) /* the last C % SPA_VL channels: partial vectors */
        group_tail(ch, nch, c0, cl - c0, acc, nx, pfo);
')m4_dnl
}
m4_ifelse(SPA_MSDA_FOLD, 1, `
/* The same from chunks staged unfolded (a query with a non-finite attention
 * weight), one vector at a time. */
SPA_MSDA_COLD static void combine_plain(const spa_msda_chunk *ch, int64_t nch, int64_t cl, float *acc)
{
    int64_t c0 = 0;
    for (; c0 + SPA_VL <= cl; c0 += SPA_VL)
        group_plain1(ch, nch, c0, acc, NULL, 0);
m4_ifelse(m4_eval(SPA_VL > 1), 1, `m4_dnl
    if (c0 < cl)
        group_plaintail(ch, nch, c0, cl - c0, acc, NULL, 0);
')m4_dnl
}
')m4_dnl

/* The output row of a query one of whose samples has a NaN location: the
 * sample a * v(NaN, NaN) is NaN in every channel, so is their sum. */
SPA_MSDA_COLD static void nan_row(float *acc, int64_t cl)
{
    for (int64_t c = 0; c < cl; c++)
        acc[c] = spa_bits_f32(0x7FC00000u);
}

/* nan_row where a chunk of the query found a sample at a NaN location. */
static inline void nan_locations(const spa_msda_chunk *ch, int64_t nch, int64_t cl, float *acc)
{
    uint32_t nanloc = 0;
    for (int64_t j = 0; j < nch; j++)
        nanloc |= ch[j].nanloc;
    if (nanloc != 0)
        nan_row(acc, cl);
}

/* Stages the chunks of query q (one call site per dtype pair: the common
 * one, location and attnWeight in the kernel's dtype, with constants). */
SPA_ISA_INLINE void stage_query(const spa_msda_args *a, const spa_msda_lanes *ln, int64_t nch, int64_t lq,
                                int32_t ldt, int64_t aq, int32_t adt, bool packed, const spa_msda_stage_out *o,
                                spa_msda_chunk *ch, float *gat, spa_vf *seen)
{
    for (int64_t j = 0; j < nch; j++)
        spa_msda_stage(a, &ln[j], 16 * j, lq, ldt, aq, adt, packed, o, &ch[j], NULL, gat, seen);
}

/* The same for location and attnWeight in dtypes other than the kernel's:
 * out of line, so that the common case above keeps its code and registers
 * (fold: whether to fold; returns what stage_query leaves in seen). */
SPA_MSDA_COLD static spa_vf stage_query_mixed(const spa_msda_args *a, const spa_msda_lanes *ln, int64_t nch, int64_t lq,
                                              int64_t aq, bool packed, const spa_msda_stage_out *o, spa_msda_chunk *ch,
                                              float *gat, bool fold)
{
    spa_vf seen = spa_vf_zero();
    stage_query(a, ln, nch, lq, a->loc_dt, aq, a->attn_dt, packed, o, ch, gat, fold ? &seen : NULL);
    return seen;
}
m4_ifelse(SPA_MSDA_FOLD, 1, `
/* A query with a non-finite attention weight: staged again unfolded and
 * combined in the canonical form. */
SPA_MSDA_COLD static void plain_query(const spa_msda_args *a, const spa_msda_lanes *ln, int64_t nch, int64_t lq,
                                      int64_t aq, bool packed, const spa_msda_stage_out *o, spa_msda_chunk *ch,
                                      float *gat, int64_t cl, float *acc)
{
    (void)stage_query_mixed(a, ln, nch, lq, aq, packed, o, ch, gat, false);
    combine_plain(ch, nch, cl, acc);
}
')m4_dnl

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
m4_ifelse(SPA_MSDA_FOLD, 1, `    bool plain[FQ]; /* query i of the tile: a non-finite attention weight */
')m4_dnl
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
m4_ifelse(SPA_MSDA_FOLD, 1, `m4_dnl
            spa_vf seen = spa_vf_zero();
            if (own_dt)
                stage_query(a, ln, nch, lq, DT, aq, DT, packed, &o, &ch[i * nch], gat, &seen);
            else
                seen = stage_query_mixed(a, ln, nch, lq, aq, packed, &o, &ch[i * nch], gat, true);
            const float z = spa_vf_hsum(seen); /* NaN where an attention weight is not finite */
            plain[i] = z != z;
', `m4_dnl
            if (own_dt)
                stage_query(a, ln, nch, lq, DT, aq, DT, packed, &o, &ch[i * nch], gat, NULL);
            else
                (void)stage_query_mixed(a, ln, nch, lq, aq, packed, &o, &ch[i * nch], gat, false);
')m4_dnl
        }
        for (int64_t i = 0; i < tn; i++) {
m4_ifelse(SPA_MSDA_FOLD, 1, `m4_dnl
            if (plain[i]) { /* only this staging looks for NaN locations */
                plain_query(a, ln, nch, b * a->ls[0] + (t0 + i) * a->ls[1] + h * a->ls[2],
                            b * a->as[0] + (t0 + i) * a->as[1] + h * a->as[2], packed, &o, &ch[i * nch], gat, cl,
                            acc);
                nan_locations(&ch[i * nch], nch, cl, acc);
            } else {
                combine(&ch[i * nch], nch, cl, acc, i + 2 < tn ? &ch[(i + 2) * nch] : NULL);
            }
', `m4_dnl
            combine(&ch[i * nch], nch, cl, acc, i + 2 < tn ? &ch[(i + 2) * nch] : NULL);
            nan_locations(&ch[i * nch], nch, cl, acc);
')m4_dnl
            SPA_T *orow = out + b * a->os[0] + (t0 + i) * a->os[1] + h * cl * a->os[2];
            SPA_NARROW_ROW(orow, a->os[2], acc, cl);
        }
    }
}
