SPA_STAMP
/* MultiScaleDeformableAttentionGrad, every query of one (batch, head) pair
 * (spec/msda.md 6), reading the pair's packed f32 value slice and adding
 * into its f32 gradValue slice. The pair owns that slice, so the scatter-adds
 * need no atomics and happen in one fixed order: queries, levels, points
 * ascending; corners 00, 01, 10, 11. The samples are staged sixteen per chunk
 * (msda_stage.h, on the ISA layer: range check and per-corner bounds before
 * any address is formed), a tile of chunks at a time; then each live sample
 * adds w * g * a into the corner rows of the f32 accumulator and reduces
 * gradLocation and gradAttnWeight over the channels in 16 lanes (lane j sums
 * channels j, j+16, ... in order), the lanes then folded by halves (j + 8,
 * j + 4, j + 2, j + 1, spa_isa_fold16): a fixed order for any runner. The
 * products are the layer's FMA (fused where the ISA has one, a multiply and
 * an add on the scalar layer). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msda_kernel.h"
#include "msda_stage.h"

enum { PFQ = 8, FQ = 8, NV = 16 / SPA_VL, FOLD_FLOATS = SPA_MSDA_FOLD_FLOATS };

/* The per-sample constants, broadcast. */
typedef struct grad_consts {
    spa_vb w0, w1, w2, w3, av, hy, nhy, ly, nly, hx, nhx, lx, nlx, fw, fh;
} grad_consts;

/* Channels c .. c+n-1 (n = SPA_VL, or fewer for the last C % 16 channels)
 * of one sample: the scatter-adds into the four gradValue rows and the lane
 * sums sx, sy, sa. A partial step loads and stores only its n channels. */
SPA_ISA_INLINE void grad_step(int64_t c, int64_t n, const float *grow, const float *const *r, float *const *g,
                              const grad_consts *k, spa_vf *sx, spa_vf *sy, spa_vf *sa)
{
#define LD(p) (n == SPA_VL ? spa_vf_load(p) : spa_vf_load_n((p), n))
#define ST(p, v) (n == SPA_VL ? spa_vf_store((p), (v)) : spa_vf_store_n((p), (v), n))
    const spa_vf gv = LD(grow + c), t = spa_vf_mulb(gv, k->av);
    const spa_vf v0 = LD(r[0] + c), v1 = LD(r[1] + c), v2 = LD(r[2] + c), v3 = LD(r[3] + c);
    ST(g[0] + c, spa_vf_fmab(LD(g[0] + c), t, k->w0));
    ST(g[1] + c, spa_vf_fmab(LD(g[1] + c), t, k->w1));
    ST(g[2] + c, spa_vf_fmab(LD(g[2] + c), t, k->w2));
    ST(g[3] + c, spa_vf_fmab(LD(g[3] + c), t, k->w3));
#undef LD
#undef ST
    spa_vf val = spa_vf_mulb(v0, k->w0);
    val = spa_vf_fmab(val, v1, k->w1);
    val = spa_vf_fmab(val, v2, k->w2);
    val = spa_vf_fmab(val, v3, k->w3);
    spa_vf dx = spa_vf_mulb(v0, k->nhy);
    dx = spa_vf_fmab(dx, v1, k->hy);
    dx = spa_vf_fmab(dx, v2, k->nly);
    dx = spa_vf_fmab(dx, v3, k->ly);
    spa_vf dy = spa_vf_mulb(v0, k->nhx);
    dy = spa_vf_fmab(dy, v1, k->nlx);
    dy = spa_vf_fmab(dy, v2, k->hx);
    dy = spa_vf_fmab(dy, v3, k->lx);
    *sa = spa_vf_fma(*sa, gv, val);
    *sx = spa_vf_fmab(*sx, spa_vf_mul(t, dx), k->fw);
    *sy = spa_vf_fmab(*sy, spa_vf_mul(t, dy), k->fh);
}

/* The partial step of the last n < SPA_VL channels: the other lanes keep
 * their sums (an Inf weight times the zeros loaded there would be NaN),
 * blended through memory with the layer's partial store. */
SPA_ISA_INLINE void grad_step_part(int64_t c, int64_t n, const float *grow, const float *const *r,
                                float *const *g, const grad_consts *k, spa_vf *sx, spa_vf *sy, spa_vf *sa)
{
    spa_vf nx = *sx, ny = *sy, na = *sa;
    grad_step(c, n, grow, r, g, k, &nx, &ny, &na);
    float keep[3 * SPA_VL];
    spa_vf_store(keep, *sa);
    spa_vf_store(keep + SPA_VL, *sx);
    spa_vf_store(keep + 2 * SPA_VL, *sy);
    spa_vf_store_n(keep, na, n);
    spa_vf_store_n(keep + SPA_VL, nx, n);
    spa_vf_store_n(keep + 2 * SPA_VL, ny, n);
    *sa = spa_vf_load(keep);
    *sx = spa_vf_load(keep + SPA_VL);
    *sy = spa_vf_load(keep + 2 * SPA_VL);
}

/* One live sample (lane i of chunk e) over all channels: the scatter-adds,
 * and the 16-lane sums (d/dx, d/dy, d/da) before their fold, into fx, fy, fa.
 * Lane vector m of the sums covers channels m*SPA_VL + 16*t; the last
 * C % 16 channels go to the first lanes, partial vectors where they end
 * inside one. */
static inline void grad_sample(const spa_msda_gchunk *e, int i, float fws, float fhs, int64_t cl, const float *grow,
                               float *fx, float *fy, float *fa)
{
    const float *r[4] = {(const float *)e->f.v[0][i], (const float *)e->f.v[1][i], (const float *)e->f.v[2][i],
                         (const float *)e->f.v[3][i]};
    float *g[4] = {(float *)e->g[0][i], (float *)e->g[1][i], (float *)e->g[2][i], (float *)e->g[3][i]};
    const float lxs = e->lx[i], lys = e->ly[i], hxs = 1.0f - lxs, hys = 1.0f - lys;
    const float cs[10] = {hys, -hys, lys, -lys, hxs, -hxs, lxs, -lxs, fws, fhs};
    const grad_consts k = {spa_vb_load(&e->f.w[0][i]), spa_vb_load(&e->f.w[1][i]), spa_vb_load(&e->f.w[2][i]),
                           spa_vb_load(&e->f.w[3][i]), spa_vb_load(&e->f.a[i]), spa_vb_load(cs + 0),
                           spa_vb_load(cs + 1), spa_vb_load(cs + 2), spa_vb_load(cs + 3),
                           spa_vb_load(cs + 4), spa_vb_load(cs + 5), spa_vb_load(cs + 6),
                           spa_vb_load(cs + 7), spa_vb_load(cs + 8), spa_vb_load(cs + 9)};
    const int64_t cfull = cl & ~(int64_t)15, tail = cl - cfull;
#pragma GCC unroll 4
    for (int m = 0; m < NV; m++) {
        spa_vf sx = spa_vf_zero(), sy = sx, sa = sx;
        for (int64_t c = m * SPA_VL; c < cfull; c += 16)
            grad_step(c, SPA_VL, grow, r, g, &k, &sx, &sy, &sa);
        spa_vf_store(fx + m * SPA_VL, sx);
        spa_vf_store(fy + m * SPA_VL, sy);
        spa_vf_store(fa + m * SPA_VL, sa);
    }
    /* the last C % 16 channels, after the others in each lane (a loop of
     * its own, so that the one above keeps its registers) */
    for (int m = 0; m * SPA_VL < tail; m++) {
        spa_vf sx = spa_vf_load(fx + m * SPA_VL), sy = spa_vf_load(fy + m * SPA_VL), sa = spa_vf_load(fa + m * SPA_VL);
        if (tail - m * SPA_VL >= SPA_VL)
            grad_step(cfull + m * SPA_VL, SPA_VL, grow, r, g, &k, &sx, &sy, &sa);
        else
            grad_step_part(cfull + m * SPA_VL, tail - m * SPA_VL, grow, r, g, &k, &sx, &sy, &sa);
        spa_vf_store(fx + m * SPA_VL, sx);
        spa_vf_store(fy + m * SPA_VL, sy);
        spa_vf_store(fa + m * SPA_VL, sa);
    }
}

/* The location and weight gradients of a sample taken at a NaN location
 * (fold: its first partial-sum row): NaN. Out of line, so no NaN constant
 * stays live in a register across the sample loop (it cost the hot path a
 * spill per sample). */
SPA_MSDA_COLD static void nan_sample(float *fold)
{
    const spa_vf nan = spa_vf_set1(spa_bits_f32(0x7FC00000u));
    for (int m = 0; m < 16; m += SPA_VL) {
        spa_vf_store(fold + m, nan);
        spa_vf_store(fold + 256 + m, nan);
        spa_vf_store(fold + 512 + m, nan);
    }
}

/* gradOutput row of (b, q, h), widened. */
static void load_gout(const spa_msda_args *a, int64_t b, int64_t q, int64_t h, float *grow)
{
    const int64_t cl = a->c, st = a->gos[2];
    const int64_t off = b * a->gos[0] + q * a->gos[1] + h * cl * st;
    switch (a->gout_dt) {
    case SPA_FLOAT16: {
        const uint16_t *g = (const uint16_t *)a->gout + off;
        if (st == 1) {
            spa_f16_widen_run(grow, g, cl);
            break;
        }
        for (int64_t c = 0; c < cl; c++)
            grow[c] = spa_f16_to_f32(g[c * st]);
        break;
    }
    case SPA_BFLOAT16: {
        const uint16_t *g = (const uint16_t *)a->gout + off;
        if (st == 1) {
            spa_bf16_widen_run(grow, g, cl);
            break;
        }
        for (int64_t c = 0; c < cl; c++)
            grow[c] = spa_bf16_to_f32(g[c * st]);
        break;
    }
    default: {
        const float *g = (const float *)a->gout + off;
        for (int64_t c = 0; c < cl; c++)
            grow[c] = g[c * st];
        break;
    }
    }
}

/* The gradients of the n samples of chunk e (unit j of query q) from the
 * folded sums: gradLocation (x, y) and gradAttnWeight, as vectors where
 * their sample dims are contiguous and the chunk is whole. */
static void store_chunk(const spa_msda_args *a, int64_t b, int64_t q, int64_t h, int64_t j, int n, bool out_vec,
                        const float *sums)
{
    const int64_t gq = b * a->gls[0] + q * a->gls[1] + h * a->gls[2];
    const int64_t aq = b * a->gas[0] + q * a->gas[1] + h * a->gas[2];
    if (out_vec && n == 16) { /* (x, y) interleaved, then the weights */
        for (int s = 0; s < 16; s += SPA_VL) {
            spa_vf lo, hi;
            spa_vf_zip(spa_vf_load(sums + s), spa_vf_load(sums + 16 + s), &lo, &hi);
            spa_msda_vstore(a->gloc, a->gloc_dt, gq + 32 * j + 2 * s, lo);
            spa_msda_vstore(a->gloc, a->gloc_dt, gq + 32 * j + 2 * s + SPA_VL, hi);
            spa_msda_vstore(a->gattn, a->gattn_dt, aq + 16 * j + s, spa_vf_load(sums + 32 + s));
        }
        return;
    }
    for (int k = 0; k < n; k++) {
        const int64_t s = 16 * j + k, l = s / a->np, p = s % a->np;
        const int64_t go = gq + l * a->gls[3] + p * a->gls[4];
        spa_msda_store(a->gloc, a->gloc_dt, go, sums[k]);
        spa_msda_store(a->gloc, a->gloc_dt, go + a->gls[5], sums[16 + k]);
        spa_msda_store(a->gattn, a->gattn_dt, aq + l * a->gas[3] + p * a->gas[4], sums[32 + k]);
    }
}

/* The gradients of one staged chunk (chunk j of query q): each live
 * sample's, folded, stored. Out of line, so that the sample loop is
 * register-allocated apart from the staging (inlined together, the staging's
 * values took its registers: a spill per sample on AVX-512). */
SPA_MSDA_NOINLINE static void grad_chunk(const spa_msda_args *a, int64_t b, int64_t q, int64_t h, int64_t j,
                                         const spa_msda_gchunk *e, const spa_msda_lanes *lj, int64_t cl,
                                         const float *gr, float *fold, bool out_vec)
{
    const int64_t nlp = a->nl * a->np;
    const int n = nlp - 16 * j < 16 ? (int)(nlp - 16 * j) : 16;
    for (int k = 0; k < 16; k++) {
        if (k < n && (e->f.live >> k & 1u)) {
            grad_sample(e, k, lj->fw[k], lj->fh[k], cl, gr, fold + 16 * k, fold + 256 + 16 * k,
                        fold + 512 + 16 * k);
        } else { /* skipped sample (or past nl * np): zero gradients, NaN
                  * ones for a sample taken at a NaN location */
            for (int m = 0; m < 16; m += SPA_VL) {
                spa_vf_store(fold + 16 * k + m, spa_vf_zero());
                spa_vf_store(fold + 256 + 16 * k + m, spa_vf_zero());
                spa_vf_store(fold + 512 + 16 * k + m, spa_vf_zero());
            }
            if (e->f.nanloc >> k & 1u)
                nan_sample(fold + 16 * k);
        }
    }
    float sums[48];
    spa_isa_fold16(fold, sums);
    spa_isa_fold16(fold + 256, sums + 16);
    spa_isa_fold16(fold + 512, sums + 32);
    store_chunk(a, b, q, h, j, n, out_vec, sums);
}

void MSDAG_KSYM()(const spa_msda_args *a, int64_t b, int64_t h, const float *vpair, float *gpair,
                 void *scratch)
{
    const int64_t nlp = a->nl * a->np, nch = (nlp + 15) / 16, cl = a->c;
    const int64_t desc_bytes = spa_msda_desc_bytes(a->tq, nlp, true);
    float *restrict grow = (float *)(void *)((unsigned char *)scratch + desc_bytes);
    float *sink = grow + cl; /* 4 rows of C */
    /* in the descriptor area: a tile of chunks (pointers first, for their
     * alignment; at most FQ queries' worth), the fold rows, the lane
     * constants, the gathered coordinates */
    const int64_t fixed = (FOLD_FLOATS + SPA_MSDA_GATHER_FLOATS) * (int64_t)sizeof(float) +
                          nch * (int64_t)sizeof(spa_msda_lanes);
    const int64_t room = (desc_bytes - fixed) / (int64_t)sizeof(spa_msda_gchunk);
    const int64_t cap = room < FQ * nch ? room : FQ * nch;
    spa_msda_gchunk *ch = scratch;
    float *fold = (float *)(void *)(ch + cap);
    spa_msda_lanes *ln = (spa_msda_lanes *)(void *)(fold + FOLD_FLOATS);
    float *gat = (float *)(void *)(ln + nch);
    const uint64_t row_bytes = (uint64_t)cl * sizeof(float);
    const spa_msda_stage_out o = {vpair, a->zero, gpair, sink, cl, row_bytes, spa_msda_wide(a, row_bytes)};
    const bool packed = spa_msda_packed(a);
    /* gradLocation and gradAttnWeight laid out like location and attnWeight
     * here: each chunk's results are stored as vectors */
    const bool out_vec = a->gls[5] == 1 && a->gls[4] == 2 && a->gls[3] == 2 * a->np && a->gas[4] == 1 &&
                         a->gas[3] == a->np;
    const size_t lsz = a->loc_dt == SPA_FLOAT32 ? 4 : 2, asz = a->attn_dt == SPA_FLOAT32 ? 4 : 2;
    const size_t gsz = a->gout_dt == SPA_FLOAT32 ? 4 : 2;
    const int64_t gout_bytes = cl * a->gos[2] * (int64_t)gsz;
    spa_msda_lanes_init(a->lv, a->nl, a->np, ln);
    const int64_t units = a->nq * nch; /* (query, chunk) in order */
    int64_t loaded = -1;               /* the query whose gradOutput row gr is */
    const float *gr = grow;
    for (int64_t u0 = 0; u0 < units; u0 += cap) {
        const int64_t un = units - u0 < cap ? units - u0 : cap;
        for (int64_t u = u0; u < u0 + un; u++) {
            const int64_t q = u / nch, j = u - q * nch;
            const int64_t lq = b * a->ls[0] + q * a->ls[1] + h * a->ls[2];
            const int64_t aq = b * a->as[0] + q * a->as[1] + h * a->as[2];
            if (j == 0) {
                /* Short rows of location and attnWeight, a stride of nh
                 * rows apart: the rows PFQ queries ahead are requested here,
                 * and the gradOutput row of the query the combine reads
                 * after this tile. */
                if (q + PFQ < a->nq) {
                    const char *lp = (const char *)a->loc + (size_t)(lq + PFQ * a->ls[1]) * lsz;
                    const char *ap = (const char *)a->attn + (size_t)(aq + PFQ * a->as[1]) * asz;
                    for (int64_t off = 0; off < (a->nl * a->ls[3]) * (int64_t)lsz; off += 64)
                        SPA_PREFETCH(lp + off);
                    for (int64_t off = 0; off < (a->nl * a->as[3]) * (int64_t)asz; off += 64)
                        SPA_PREFETCH(ap + off);
                }
                const int64_t qn = q + (cap + nch - 1) / nch;
                if (qn < a->nq)
                    for (int64_t off = 0; off < gout_bytes; off += 64)
                        SPA_PREFETCH((const char *)a->gout +
                                     (size_t)(b * a->gos[0] + qn * a->gos[1] + h * cl * a->gos[2]) * gsz + off);
            }
            spa_msda_stage(a, &ln[j], 16 * j, lq, a->loc_dt, aq, a->attn_dt, packed, &o, &ch[u - u0].f, &ch[u - u0], gat, NULL);
        }
        for (int64_t u = u0; u < u0 + un; u++) {
            const int64_t q = u / nch, j = u - q * nch;
            if (q != loaded) {
                const int64_t goff = b * a->gos[0] + q * a->gos[1] + h * cl * a->gos[2];
                if (a->gos[2] == 1 && a->gout_dt == SPA_FLOAT32) { /* read in place */
                    gr = (const float *)a->gout + goff;
                } else {
                    load_gout(a, b, q, h, grow);
                    gr = grow;
                }
                loaded = q;
            }
            grad_chunk(a, b, q, h, j, &ch[u - u0], &ln[j], cl, gr, fold, out_vec);
        }
    }
}
