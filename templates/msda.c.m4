SPA_STAMP
/* MultiScaleDeformableAttnFunction, queries [q0, q1) of one (batch, head)
 * pair (spec/msda.md 5), reading the pair's packed f32 value slice. Tile: TS
 * staged samples (enum below), that is max(1, TS / (nl*np)) whole queries.
 * Per tile, pass 1 turns every sample's location into its four corner rows
 * and bilinear weights (the range check and the per-corner bounds are done
 * here, in float before any conversion, so no location can address memory
 * outside its level); pass 2 combines the corner rows of each query in the
 * canonical order (levels, then points, ascending; corners 00, 01, 10, 11;
 * acc += a * samp) and stores the output row once, while the corners of the
 * samples PF places ahead are prefetched. With AVX-512 the same two passes run
 * on tiles of FQ queries staged sixteen samples at a time (fast_range). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msda_kernel.h"
#include "msda_stage16.h"

enum { TS = MSDA_TS, CMAX = SPA_MSDA_MAX_C, PF = 8, PFQ = 8, FQ = 8 };

m4_dnl Scalar widening of location and attnWeight (F16C for f16 where present).
m4_define(`MSDA_LOAD', m4_ifelse(SPA_DT, `f16', `spa_msda_f16($1)', `SPA_LOAD($1)'))m4_dnl

/* Corners outside the map read this row: their value is 0 (spec 5), even
 * where the map itself holds Inf or NaN. */
static const float zero_row[CMAX];

/* Pass 1 for queries [t0, t0 + tn): one descriptor per (query, level, point). */
static void stage(const spa_msda_args *a, int64_t b, int64_t h, const float *vpair, int64_t t0,
                  int64_t tn, spa_msda_fwd_sample *d)
{
    const SPA_T *loc = a->loc;
    const SPA_T *attn = a->attn;
    const int64_t cl = a->c;
    /* A pair reads one short row of location and attnWeight per query, a
     * stride of nh rows apart: too far for the hardware prefetchers to follow
     * across pages, so the rows PFQ queries ahead are requested here. */
    const int64_t loc_bytes = (a->nl * a->ls[3]) * (int64_t)sizeof(SPA_T);
    const int64_t attn_bytes = (a->nl * a->as[3]) * (int64_t)sizeof(SPA_T);
    for (int64_t q = t0; q < t0 + tn; q++) {
        const SPA_T *lq = loc + b * a->ls[0] + q * a->ls[1] + h * a->ls[2];
        const SPA_T *aq = attn + b * a->as[0] + q * a->as[1] + h * a->as[2];
        if (q + PFQ < a->nq) {
            for (int64_t off = 0; off < loc_bytes; off += 64)
                SPA_PREFETCH((const char *)(lq + PFQ * a->ls[1]) + off);
            for (int64_t off = 0; off < attn_bytes; off += 64)
                SPA_PREFETCH((const char *)(aq + PFQ * a->as[1]) + off);
        }
        for (int64_t l = 0; l < a->nl; l++) {
            const int64_t hh = a->lv.h[l], ww = a->lv.w[l];
            const float fh = a->lv.fh[l], fw = a->lv.fw[l];
            const float *vlev = vpair + a->lv.start[l] * cl;
            for (int64_t p = 0; p < a->np; p++, d++) {
                const SPA_T *lp = lq + l * a->ls[3] + p * a->ls[4];
                /* Two roundings each, as in spec 5: the product, then the
                 * shift. The product goes through a volatile so that no
                 * compiler fuses the two into one FMA (builds may use
                 * -ffp-contract=fast): the cell of a sample, and so the
                 * side of every border, must not depend on the compiler. */
                volatile float xs = MSDA_LOAD(lp[0]) * fw;
                volatile float ys = MSDA_LOAD(lp[a->ls[5]]) * fh;
                const float x = xs - 0.5f;
                const float y = ys - 0.5f;
                d->a = MSDA_LOAD(aq[l * a->as[3] + p * a->as[4]]);
                if (!(y > -1.0f && x > -1.0f && y < fh && x < fw)) { /* NaN and Inf fail too */
                    d->live = 0;
                    continue;
                }
                const float x0f = floorf(x), y0f = floorf(y);
                const int64_t x0 = (int64_t)x0f, y0 = (int64_t)y0f; /* in [-1, 2^31] here */
                const float lx = x - x0f, ly = y - y0f, hx = 1.0f - lx, hy = 1.0f - ly;
                /* Both bounds on every corner (one unsigned compare each):
                 * for W or H above 2^24 the float range check alone could
                 * let x0 reach W. */
                const bool in_x0 = (uint64_t)x0 < (uint64_t)ww, in_x1 = (uint64_t)(x0 + 1) < (uint64_t)ww;
                const bool in_y0 = (uint64_t)y0 < (uint64_t)hh, in_y1 = (uint64_t)(y0 + 1) < (uint64_t)hh;
                /* Corner offsets in the level; an outside corner gets the
                 * zero row at offset 0 (both selects compile to cmov). */
                const int64_t o00 = (y0 * ww + x0) * cl, o10 = o00 + ww * cl;
                const bool i00 = in_y0 & in_x0, i01 = in_y0 & in_x1, i10 = in_y1 & in_x0, i11 = in_y1 & in_x1;
                d->v[0] = (i00 ? vlev : zero_row) + (i00 ? o00 : 0);
                d->v[1] = (i01 ? vlev : zero_row) + (i01 ? o00 + cl : 0);
                d->v[2] = (i10 ? vlev : zero_row) + (i10 ? o10 : 0);
                d->v[3] = (i11 ? vlev : zero_row) + (i11 ? o10 + cl : 0);
                d->w[0] = hy * hx;
                d->w[1] = hy * lx;
                d->w[2] = ly * hx;
                d->w[3] = ly * lx;
                d->live = 1;
            }
        }
    }
}

/* acc[c] += a * (w0*r0[c] + w1*r1[c] + w2*r2[c] + w3*r3[c]) for every
 * channel, in that order (spec 5). The corner rows may coincide (the zero
 * row) but are only read; acc is distinct from them. */
static inline void accumulate(int64_t cl, float *restrict acc, const float *restrict r0,
                              const float *restrict r1, const float *restrict r2,
                              const float *restrict r3, const float *w, float av)
{
#if SPA_MSDA_V8
    int64_t c = 0;
#if SPA_MSDA_V16
    if (cl % 16 == 0) {
        const spa_v16 w0 = spa_v16_splat(w[0]), w1 = spa_v16_splat(w[1]);
        const spa_v16 w2 = spa_v16_splat(w[2]), w3 = spa_v16_splat(w[3]), a16 = spa_v16_splat(av);
        for (; c < cl; c += 16) {
            const spa_v16 samp = w0 * spa_v16_load(r0 + c) + w1 * spa_v16_load(r1 + c) +
                                 w2 * spa_v16_load(r2 + c) + w3 * spa_v16_load(r3 + c);
            const spa_v16 sum = spa_v16_load(acc + c) + a16 * samp;
            spa_v16_store(acc + c, &sum);
        }
    }
#endif
    const spa_v8 w0 = spa_v8_splat(w[0]), w1 = spa_v8_splat(w[1]), w2 = spa_v8_splat(w[2]);
    const spa_v8 w3 = spa_v8_splat(w[3]), a8 = spa_v8_splat(av);
    for (; c < cl; c += 8) {
        const spa_v8 samp = w0 * spa_v8_load(r0 + c) + w1 * spa_v8_load(r1 + c) +
                            w2 * spa_v8_load(r2 + c) + w3 * spa_v8_load(r3 + c);
        const spa_v8 sum = spa_v8_load(acc + c) + a8 * samp;
        spa_v8_store(acc + c, &sum);
    }
#else
    const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
    for (int64_t c = 0; c < cl; c++) {
        const float samp = w0 * r0[c] + w1 * r1[c] + w2 * r2[c] + w3 * r3[c];
        acc[c] += av * samp;
    }
#endif
}

static inline void prefetch_corners(const spa_msda_fwd_sample *e, int64_t row_bytes)
{
    for (int64_t off = 0; off < row_bytes; off += 64) {
        SPA_PREFETCH((const char *)e->v[0] + off);
        SPA_PREFETCH((const char *)e->v[1] + off);
        SPA_PREFETCH((const char *)e->v[2] + off);
        SPA_PREFETCH((const char *)e->v[3] + off);
    }
}

#if SPA_MSDA_STAGE16
/* The sixteen-lane path (msda_stage16.h): per query, its samples are staged
 * sixteen at a time, then combined channel block by channel block (16
 * channels, or 8 for the last block when C % 16 == 8) with the accumulator
 * in a register; per channel the operations and their order are those of
 * accumulate(). Outside corners read the zero row, as in stage(). */
static bool fast_fits(const spa_msda_args *a, int64_t nlp, int64_t desc_bytes)
{
    const int64_t nch = (nlp + 15) / 16;
    return a->nk <= INT32_MAX && a->ls[5] == 1 && a->ls[4] == 2 && a->ls[3] == 2 * a->np &&
           a->as[4] == 1 && a->as[3] == a->np &&
           nch * (int64_t)(sizeof(spa_msda_chunk) + sizeof(spa_msda_lanes)) <= desc_bytes;
}

/* Channels [c0, c0 + 16 * NB) of one query, NB accumulators side by side
 * (independent chains); the last block covers 8 channels when `last` is
 * 0x00FF. */
static inline __attribute__((always_inline)) void
fast_group(const spa_msda_chunk *ch, int64_t nch, int64_t c0, const int nb, __mmask16 last, float *acc)
{
    __m512 s[4];
    __mmask16 cm[4];
    for (int k = 0; k < nb; k++) {
        s[k] = _mm512_setzero_ps();
        cm[k] = k == nb - 1 ? last : (__mmask16)0xFFFF;
    }
    for (int64_t j = 0; j < nch; j++) {
        const spa_msda_chunk *e = &ch[j];
        for (uint32_t live = e->live; live != 0; live &= live - 1) {
            const int i = __builtin_ctz(live);
            const float *p0 = e->v[0][i] + c0, *p1 = e->v[1][i] + c0;
            const float *p2 = e->v[2][i] + c0, *p3 = e->v[3][i] + c0;
            const __m512 w0 = _mm512_set1_ps(e->w[0][i]), w1 = _mm512_set1_ps(e->w[1][i]);
            const __m512 w2 = _mm512_set1_ps(e->w[2][i]), w3 = _mm512_set1_ps(e->w[3][i]);
            const __m512 av = _mm512_set1_ps(e->a[i]);
            for (int k = 0; k < nb; k++) {
                __m512 samp = _mm512_mul_ps(w0, _mm512_maskz_loadu_ps(cm[k], p0 + 16 * k));
                samp = _mm512_add_ps(samp, _mm512_mul_ps(w1, _mm512_maskz_loadu_ps(cm[k], p1 + 16 * k)));
                samp = _mm512_add_ps(samp, _mm512_mul_ps(w2, _mm512_maskz_loadu_ps(cm[k], p2 + 16 * k)));
                samp = _mm512_add_ps(samp, _mm512_mul_ps(w3, _mm512_maskz_loadu_ps(cm[k], p3 + 16 * k)));
                s[k] = _mm512_add_ps(s[k], _mm512_mul_ps(av, samp));
            }
        }
    }
    for (int k = 0; k < nb; k++)
        _mm512_mask_storeu_ps(acc + c0 + 16 * k, cm[k], s[k]);
}

/* The output row of one query into acc, up to 64 channels per pass. */
static void fast_combine(const spa_msda_chunk *ch, int64_t nch, int64_t cl, float *acc)
{
    for (int64_t c0 = 0; c0 < cl; c0 += 64) {
        const int64_t left = cl - c0;
        const int nb = left >= 64 ? 4 : (int)((left + 15) / 16);
        const __mmask16 last = left >= 16 * nb ? (__mmask16)0xFFFF : (__mmask16)0x00FF;
        switch (nb) {
        case 1:
            fast_group(ch, nch, c0, 1, last, acc);
            break;
        case 2:
            fast_group(ch, nch, c0, 2, last, acc);
            break;
        case 3:
            fast_group(ch, nch, c0, 3, last, acc);
            break;
        default:
            fast_group(ch, nch, c0, 4, last, acc);
            break;
        }
    }
}

/* Queries [q0, q1) in tiles of tq: the tile is staged first, then combined,
 * so that the combine reads descriptors whose stores have long completed. */
static void fast_range(const spa_msda_args *a, int64_t b, int64_t h, const float *vpair, int64_t q0,
                       int64_t q1, int64_t tq, spa_msda_chunk *ch, spa_msda_lanes *ln, float *acc)
{
    const int64_t nlp = a->nl * a->np, nch = (nlp + 15) / 16, cl = a->c;
    const int64_t row_bytes = cl * (int64_t)sizeof(float);
    const SPA_T *loc = a->loc;
    const SPA_T *attn = a->attn;
    SPA_T *out = a->out;
    spa_msda_lanes_init(&a->lv, a->nl, a->np, ln);
    for (int64_t t0 = q0; t0 < q1; t0 += tq) {
        const int64_t tn = q1 - t0 < tq ? q1 - t0 : tq;
        for (int64_t i = 0; i < tn; i++) {
            const int64_t q = t0 + i;
            const SPA_T *lq = loc + b * a->ls[0] + q * a->ls[1] + h * a->ls[2];
            const SPA_T *aq = attn + b * a->as[0] + q * a->as[1] + h * a->as[2];
            if (q + PFQ < a->nq) {
                for (int64_t off = 0; off < 2 * nlp * (int64_t)sizeof(SPA_T); off += 64)
                    SPA_PREFETCH((const char *)(lq + PFQ * a->ls[1]) + off);
                for (int64_t off = 0; off < nlp * (int64_t)sizeof(SPA_T); off += 64)
                    SPA_PREFETCH((const char *)(aq + PFQ * a->as[1]) + off);
            }
            for (int64_t j = 0; j < nch; j++)
                spa_msda_stage16(&ln[j], 16 * j, lq, a->loc_dt, aq, a->attn_dt, vpair, row_bytes,
                                 zero_row, NULL, NULL, 0, &ch[i * nch + j]);
        }
        for (int64_t i = 0; i < tn; i++) {
            fast_combine(&ch[i * nch], nch, cl, acc);
            SPA_T *orow = out + b * a->os[0] + (t0 + i) * a->os[1] + h * cl * a->os[2];
            SPA_NARROW_ROW(orow, a->os[2], acc, cl);
        }
    }
}
#endif

void MSDA_KSYM()(const spa_msda_args *a, int64_t b, int64_t h, const float *vpair, int64_t q0,
                 int64_t q1, void *scratch)
{
    const int64_t nlp = a->nl * a->np, cl = a->c;
    const int64_t tq = TS / nlp > 0 ? TS / nlp : 1;
    spa_msda_fwd_sample *desc = scratch;
    float *acc = (float *)(desc + tq * nlp);
    const int64_t row_bytes = cl * (int64_t)sizeof(float);
    SPA_T *out = a->out;
#if SPA_MSDA_STAGE16
    if (fast_fits(a, nlp, tq * nlp * (int64_t)sizeof(spa_msda_fwd_sample))) {
        /* tiles of up to FQ queries in the descriptor area, the lane constants after them */
        const int64_t nch = (nlp + 15) / 16, desc_bytes = tq * nlp * (int64_t)sizeof(spa_msda_fwd_sample);
        const int64_t room = (desc_bytes - nch * (int64_t)sizeof(spa_msda_lanes)) /
                             (nch * (int64_t)sizeof(spa_msda_chunk));
        const int64_t ftq = room < FQ ? room : FQ;
        spa_msda_chunk *ch = scratch;
        fast_range(a, b, h, vpair, q0, q1, ftq, ch, (spa_msda_lanes *)(ch + ftq * nch), acc);
        return;
    }
#endif

    for (int64_t t0 = q0; t0 < q1; t0 += tq) {
        const int64_t tn = q1 - t0 < tq ? q1 - t0 : tq;
        stage(a, b, h, vpair, t0, tn, desc);
        const int64_t ns = tn * nlp;
        for (int64_t s = 0; s < PF && s < ns; s++)
            if (desc[s].live)
                prefetch_corners(&desc[s], row_bytes);
        for (int64_t i = 0; i < tn; i++) {
            for (int64_t c = 0; c < cl; c++)
                acc[c] = 0.0f;
            for (int64_t s = i * nlp; s < (i + 1) * nlp; s++) {
                if (s + PF < ns && desc[s + PF].live)
                    prefetch_corners(&desc[s + PF], row_bytes);
                const spa_msda_fwd_sample *e = &desc[s];
                if (!e->live)
                    continue;
                accumulate(cl, acc, e->v[0], e->v[1], e->v[2], e->v[3], e->w, e->a);
            }
            SPA_T *orow = out + b * a->os[0] + (t0 + i) * a->os[1] + h * cl * a->os[2];
            SPA_NARROW_ROW(orow, a->os[2], acc, cl);
        }
    }
}
