SPA_STAMP
/* MultiScaleDeformableAttentionGrad, every query of one (batch, head) pair
 * (spec/msda.md 6). The pair owns its gradValue slice, so the scatter-adds
 * need no atomics and happen in one fixed order: queries, levels, points
 * ascending; corners 00, 01, 10, 11. Tile: TS staged samples (enum below),
 * that is max(1, TS / (nl*np)) whole queries. Pass 1 turns each location into
 * corner rows and weights (range check and per-corner bounds in float before
 * any conversion); pass 2 adds w * g * a into the corner rows of the f32
 * accumulator and reduces gradLocation and gradAttnWeight over the channels
 * in L lanes (lane j sums channels j, j+L, ... in order), then folds the
 * lanes pairwise (j + L/2, j + L/4, ...), a fixed order for any runner. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msda_kernel.h"

enum { TS = MSDAG_TS, CMAX = SPA_MSDA_MAX_C, PF = 4, L = 8 };

/* Corners outside the map read this row (value 0, spec 6). */
static const SPA_T zero_row[CMAX];

/* Pass 1 for queries [t0, t0 + tn). Outside corners read zero_row (NULL when
 * rows are copied) and add into their own sink row, never read back. */
static void stage(const spa_msda_args *a, int64_t b, int64_t h, int64_t t0, int64_t tn,
                  float *sink, spa_msda_grad_sample *d)
{
    const SPA_T *vbase = (const SPA_T *)a->value + b * a->vs[0] + h * a->vs[2];
    float *gbase = a->gacc + b * a->gacc_sb + h * a->gacc_sh;
    const int64_t ks = a->vs[1], gks = a->gacc_sk;
    const SPA_T *none = a->vs[3] == 1 ? zero_row : NULL;
    for (int64_t q = t0; q < t0 + tn; q++) {
        const int64_t lq = b * a->ls[0] + q * a->ls[1] + h * a->ls[2];
        const int64_t aq = b * a->as[0] + q * a->as[1] + h * a->as[2];
        for (int64_t l = 0; l < a->nl; l++) {
            const int64_t hh = a->lv.h[l], ww = a->lv.w[l], start = a->lv.start[l];
            const float fh = a->lv.fh[l], fw = a->lv.fw[l];
            for (int64_t p = 0; p < a->np; p++, d++) {
                const int64_t lp = lq + l * a->ls[3] + p * a->ls[4];
                /* Two roundings each, as in spec 5: the product, then the shift. */
                const float xs = spa_msda_load(a->loc, a->loc_dt, lp) * fw;
                const float ys = spa_msda_load(a->loc, a->loc_dt, lp + a->ls[5]) * fh;
                const float x = xs - 0.5f;
                const float y = ys - 0.5f;
                d->a = spa_msda_load(a->attn, a->attn_dt, aq + l * a->as[3] + p * a->as[4]);
                if (!(y > -1.0f && x > -1.0f && y < fh && x < fw)) { /* NaN and Inf fail too */
                    d->live = 0;
                    continue;
                }
                const float x0f = floorf(x), y0f = floorf(y);
                const int64_t x0 = (int64_t)x0f, y0 = (int64_t)y0f; /* in [-1, 2^31] here */
                const float lx = x - x0f, ly = y - y0f, hx = 1.0f - lx, hy = 1.0f - ly;
                const bool in_x0 = x0 >= 0, in_x1 = x0 + 1 <= ww - 1;
                const bool in_y0 = y0 >= 0, in_y1 = y0 + 1 <= hh - 1;
                const int64_t k00 = start + y0 * ww + x0;
                const bool in[4] = {in_y0 && in_x0, in_y0 && in_x1, in_y1 && in_x0, in_y1 && in_x1};
                const int64_t key[4] = {k00, k00 + 1, k00 + ww, k00 + ww + 1};
                for (int k = 0; k < 4; k++) {
                    d->v[k] = in[k] ? vbase + key[k] * ks : none;
                    d->g[k] = in[k] ? gbase + key[k] * gks : sink + k * CMAX;
                }
                d->w[0] = hy * hx;
                d->w[1] = hy * lx;
                d->w[2] = ly * hx;
                d->w[3] = ly * lx;
                d->lx = lx;
                d->ly = ly;
                d->fw = fw;
                d->fh = fh;
                d->live = 1;
            }
        }
    }
}

/* Strided channels: copy the four corner rows (zeros outside the map). */
static void copy_rows(const spa_msda_grad_sample *e, int64_t cs, int64_t cl, SPA_T *rows)
{
    for (int k = 0; k < 4; k++) {
        const SPA_T *src = e->v[k];
        SPA_T *dst = rows + k * CMAX;
        for (int64_t c = 0; c < cl; c++)
            dst[c] = src ? src[c * cs] : zero_row[c];
    }
}

static void prefetch_corners(const spa_msda_grad_sample *e, int64_t row_bytes, int64_t acc_bytes)
{
    if (!e->live)
        return;
    for (int k = 0; k < 4; k++) {
        for (int64_t off = 0; off < row_bytes; off += 64)
            SPA_PREFETCH((const char *)e->v[k] + off);
        for (int64_t off = 0; off < acc_bytes; off += 64)
            SPA_PREFETCH_W((char *)e->g[k] + off);
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
        for (int64_t c = 0; c < cl; c++)
            grow[c] = spa_f16_to_f32(g[c * st]);
        break;
    }
    case SPA_BFLOAT16: {
        const uint16_t *g = (const uint16_t *)a->gout + off;
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

void MSDAG_KSYM()(const spa_msda_args *a, int64_t b, int64_t h, void *scratch)
{
    const int64_t nlp = a->nl * a->np, cl = a->c, cs = a->vs[3];
    const int64_t tq = TS / nlp > 0 ? TS / nlp : 1;
    spa_msda_grad_sample *desc = scratch;
    float *restrict grow = (float *)(desc + tq * nlp);
    float *sink = grow + CMAX; /* 4 rows */
    SPA_T *rows = (SPA_T *)(sink + 4 * CMAX);
    const int64_t row_bytes = cs == 1 ? cl * (int64_t)sizeof(SPA_T) : 0;
    const int64_t acc_bytes = cl * (int64_t)sizeof(float);

    for (int64_t t0 = 0; t0 < a->nq; t0 += tq) {
        const int64_t tn = a->nq - t0 < tq ? a->nq - t0 : tq;
        stage(a, b, h, t0, tn, sink, desc);
        const int64_t ns = tn * nlp;
        for (int64_t s = 0; s < PF && s < ns; s++)
            prefetch_corners(&desc[s], row_bytes, acc_bytes);
        for (int64_t i = 0; i < tn; i++) {
            const int64_t q = t0 + i;
            load_gout(a, b, q, h, grow);
            const int64_t gq = b * a->gls[0] + q * a->gls[1] + h * a->gls[2];
            const int64_t aq = b * a->gas[0] + q * a->gas[1] + h * a->gas[2];
            const spa_msda_grad_sample *e = &desc[i * nlp];
            for (int64_t l = 0; l < a->nl; l++) {
                for (int64_t p = 0; p < a->np; p++, e++) {
                    const int64_t s = e - desc;
                    if (s + PF < ns)
                        prefetch_corners(&desc[s + PF], row_bytes, acc_bytes);
                    const int64_t go = gq + l * a->gls[3] + p * a->gls[4];
                    const int64_t ao = aq + l * a->gas[3] + p * a->gas[4];
                    if (!e->live) { /* skipped sample: zero gradients, nothing to value */
                        spa_msda_store(a->gloc, a->gloc_dt, go, 0.0f);
                        spa_msda_store(a->gloc, a->gloc_dt, go + a->gls[5], 0.0f);
                        spa_msda_store(a->gattn, a->gattn_dt, ao, 0.0f);
                        continue;
                    }
                    const SPA_T *src = rows;
                    if (cs != 1)
                        copy_rows(e, cs, cl, rows);
                    const SPA_T *restrict r0 = cs == 1 ? e->v[0] : src;
                    const SPA_T *restrict r1 = cs == 1 ? e->v[1] : src + CMAX;
                    const SPA_T *restrict r2 = cs == 1 ? e->v[2] : src + 2 * CMAX;
                    const SPA_T *restrict r3 = cs == 1 ? e->v[3] : src + 3 * CMAX;
                    float *restrict g0 = e->g[0], *restrict g1 = e->g[1];
                    float *restrict g2 = e->g[2], *restrict g3 = e->g[3];
                    const float w0 = e->w[0], w1 = e->w[1], w2 = e->w[2], w3 = e->w[3];
                    const float av = e->a, lx = e->lx, ly = e->ly, hx = 1.0f - lx, hy = 1.0f - ly;
                    const float fw = e->fw, fh = e->fh;
                    float lane_a[L] = {0}, lane_x[L] = {0}, lane_y[L] = {0};
                    for (int64_t c0 = 0; c0 < cl; c0 += L) {
                        for (int j = 0; j < L; j++) {
                            const int64_t c = c0 + j;
                            const float g = grow[c], t = g * av;
                            const float v0 = SPA_LOAD(r0[c]), v1 = SPA_LOAD(r1[c]);
                            const float v2 = SPA_LOAD(r2[c]), v3 = SPA_LOAD(r3[c]);
                            g0[c] += w0 * t;
                            g1[c] += w1 * t;
                            g2[c] += w2 * t;
                            g3[c] += w3 * t;
                            const float val = w0 * v0 + w1 * v1 + w2 * v2 + w3 * v3;
                            const float dx = -hy * v0 + hy * v1 - ly * v2 + ly * v3;
                            const float dy = -hx * v0 - lx * v1 + hx * v2 + lx * v3;
                            lane_a[j] += g * val;
                            lane_x[j] += (t * dx) * fw;
                            lane_y[j] += (t * dy) * fh;
                        }
                    }
                    for (int half = L / 2; half > 0; half /= 2)
                        for (int j = 0; j < half; j++) {
                            lane_a[j] += lane_a[j + half];
                            lane_x[j] += lane_x[j + half];
                            lane_y[j] += lane_y[j + half];
                        }
                    spa_msda_store(a->gloc, a->gloc_dt, go, lane_x[0]);
                    spa_msda_store(a->gloc, a->gloc_dt, go + a->gls[5], lane_y[0]);
                    spa_msda_store(a->gattn, a->gattn_dt, ao, lane_a[0]);
                }
            }
        }
    }
}
