SPA_STAMP
/* MultiScaleDeformableAttentionGrad, every query of one (batch, head) pair
 * (spec/msda.md 6), reading the pair's packed f32 value slice and adding
 * into its f32 gradValue slice. The pair owns that slice, so the scatter-adds
 * need no atomics and happen in one fixed order: queries, levels, points
 * ascending; corners 00, 01, 10, 11. Tile: TS staged samples (enum below),
 * that is max(1, TS / (nl*np)) whole queries. Pass 1 turns each location into
 * corner rows and weights (range check and per-corner bounds in float before
 * any conversion); pass 2 adds w * g * a into the corner rows of the f32
 * accumulator and reduces gradLocation and gradAttnWeight over the channels
 * in N lanes (lane j sums channels j, j+N, ... in order), then folds the
 * lanes pairwise (j + N/2, j + N/4, ...), a fixed order for any runner.
 * With AVX-512 and C a multiple of 16 the same passes run on tiles of FQ
 * queries staged sixteen samples at a time (fast_all), with the same
 * operations in the same order. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msda_kernel.h"
#include "msda_stage16.h"

enum { TS = MSDAG_TS, CMAX = SPA_MSDA_MAX_C, PF = 4, PFQ = 8, FQ = 8 };

/* Corners outside the map read this row (value 0, spec 6). */
static const float zero_row[CMAX];

/* Pass 1 for queries [t0, t0 + tn). Outside corners read zero_row and add
 * into their own sink row, never read back. */
static void stage(const spa_msda_args *a, int64_t b, int64_t h, const float *vpair, float *gpair,
                  int64_t t0, int64_t tn, float *sink, spa_msda_grad_sample *d)
{
    const int64_t cl = a->c;
    /* Short rows of location and attnWeight, a stride of nh rows apart: the
     * rows PFQ queries ahead are requested here. */
    const size_t lsz = a->loc_dt == SPA_FLOAT32 ? 4 : 2, asz = a->attn_dt == SPA_FLOAT32 ? 4 : 2;
    const int64_t loc_bytes = (a->nl * a->ls[3]) * (int64_t)lsz;
    const int64_t attn_bytes = (a->nl * a->as[3]) * (int64_t)asz;
    for (int64_t q = t0; q < t0 + tn; q++) {
        const int64_t lq = b * a->ls[0] + q * a->ls[1] + h * a->ls[2];
        const int64_t aq = b * a->as[0] + q * a->as[1] + h * a->as[2];
        if (q + PFQ < a->nq) {
            const char *lp = (const char *)a->loc + (size_t)(lq + PFQ * a->ls[1]) * lsz;
            const char *ap = (const char *)a->attn + (size_t)(aq + PFQ * a->as[1]) * asz;
            for (int64_t off = 0; off < loc_bytes; off += 64)
                SPA_PREFETCH(lp + off);
            for (int64_t off = 0; off < attn_bytes; off += 64)
                SPA_PREFETCH(ap + off);
        }
        for (int64_t l = 0; l < a->nl; l++) {
            const int64_t hh = a->lv.h[l], ww = a->lv.w[l];
            const float fh = a->lv.fh[l], fw = a->lv.fw[l];
            const float *vlev = vpair + a->lv.start[l] * cl;
            float *glev = gpair + a->lv.start[l] * cl;
            for (int64_t p = 0; p < a->np; p++, d++) {
                const int64_t lp = lq + l * a->ls[3] + p * a->ls[4];
                /* Two roundings each, as in spec 5: the product, then the
                 * shift. The product goes through a volatile so that no
                 * compiler fuses the two into one FMA (builds may use
                 * -ffp-contract=fast): the cell of a sample, and so the
                 * side of every border, must not depend on the compiler. */
                volatile float xs = spa_msda_load(a->loc, a->loc_dt, lp) * fw;
                volatile float ys = spa_msda_load(a->loc, a->loc_dt, lp + a->ls[5]) * fh;
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
                /* Both bounds on every corner (one unsigned compare each):
                 * for W or H above 2^24 the float range check alone could
                 * let x0 reach W. */
                const bool in_x0 = (uint64_t)x0 < (uint64_t)ww, in_x1 = (uint64_t)(x0 + 1) < (uint64_t)ww;
                const bool in_y0 = (uint64_t)y0 < (uint64_t)hh, in_y1 = (uint64_t)(y0 + 1) < (uint64_t)hh;
                /* Corner offsets in the level; an outside corner gets the
                 * zero row / its sink row at offset 0 (selects, no branches). */
                const int64_t o00 = (y0 * ww + x0) * cl, o10 = o00 + ww * cl;
                const bool i00 = in_y0 & in_x0, i01 = in_y0 & in_x1, i10 = in_y1 & in_x0, i11 = in_y1 & in_x1;
                const int64_t k00 = i00 ? o00 : 0, k01 = i01 ? o00 + cl : 0;
                const int64_t k10 = i10 ? o10 : 0, k11 = i11 ? o10 + cl : 0;
                d->v[0] = (i00 ? vlev : zero_row) + k00;
                d->v[1] = (i01 ? vlev : zero_row) + k01;
                d->v[2] = (i10 ? vlev : zero_row) + k10;
                d->v[3] = (i11 ? vlev : zero_row) + k11;
                d->g[0] = (i00 ? glev : sink) + k00;
                d->g[1] = (i01 ? glev : sink + CMAX) + k01;
                d->g[2] = (i10 ? glev : sink + 2 * CMAX) + k10;
                d->g[3] = (i11 ? glev : sink + 3 * CMAX) + k11;
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

static inline void prefetch_corners(const spa_msda_grad_sample *e, int64_t row_bytes)
{
    for (int64_t off = 0; off < row_bytes; off += 64)
        for (int k = 0; k < 4; k++) {
            SPA_PREFETCH((const char *)e->v[k] + off);
            SPA_PREFETCH_W((char *)e->g[k] + off);
        }
}

/* One live sample, channel by channel: the scatter-adds w * g * a into the
 * four gradValue rows, and the three reductions over the channels in N lanes
 * (lane j sums channels j, j+N, ... in order; N = 16 when C is a multiple of
 * 16, else 8), the lanes then folded pairwise (j + N/2, j + N/4, ...): a
 * fixed order. The rows are distinct (outside corners have their own sink
 * rows; the zero row is only read), which the restrict parameters tell the
 * vectoriser. channels_8 and channels_16 are generated by MSDAG_CHANNELS. */
m4_define(`MSDAG_CHANNELS_HEAD', `
static inline void channels_$1(int64_t cl, const float *restrict grow, const float *restrict r0,
                              const float *restrict r1, const float *restrict r2,
                              const float *restrict r3, float *restrict g0, float *restrict g1,
                              float *restrict g2, float *restrict g3, const float *w, float av,
                              float lx, float ly, float fw, float fh, float *restrict sums)
{
    const float hx = 1.0f - lx, hy = 1.0f - ly;')m4_dnl
m4_dnl MSDAG_VSTEP(type, offset, suffix): one vector of channels c + offset.
m4_define(`MSDAG_VSTEP', `
        {
            const spa_$1 g = spa_$1_load(grow + c + $2), t = g * a$1;
            const spa_$1 v0 = spa_$1_load(r0 + c + $2), v1 = spa_$1_load(r1 + c + $2);
            const spa_$1 v2 = spa_$1_load(r2 + c + $2), v3 = spa_$1_load(r3 + c + $2);
            const spa_$1 n0 = spa_$1_load(g0 + c + $2) + w0$1 * t, n1 = spa_$1_load(g1 + c + $2) + w1$1 * t;
            const spa_$1 n2 = spa_$1_load(g2 + c + $2) + w2$1 * t, n3 = spa_$1_load(g3 + c + $2) + w3$1 * t;
            spa_$1_store(g0 + c + $2, &n0);
            spa_$1_store(g1 + c + $2, &n1);
            spa_$1_store(g2 + c + $2, &n2);
            spa_$1_store(g3 + c + $2, &n3);
            const spa_$1 val = w0$1 * v0 + w1$1 * v1 + w2$1 * v2 + w3$1 * v3;
            const spa_$1 dx = nhy$1 * v0 + hy$1 * v1 - ly$1 * v2 + ly$1 * v3;
            const spa_$1 dy = nhx$1 * v0 - lx$1 * v1 + hx$1 * v2 + lx$1 * v3;
            va$3 += g * val;
            vx$3 += (t * dx) * fw$1;
            vy$3 += (t * dy) * fh$1;
        }')m4_dnl
m4_dnl MSDAG_VCONST(type): the broadcast scalars of one sample.
m4_define(`MSDAG_VCONST', `
    const spa_$1 w0$1 = spa_$1_splat(w[0]), w1$1 = spa_$1_splat(w[1]), w2$1 = spa_$1_splat(w[2]);
    const spa_$1 w3$1 = spa_$1_splat(w[3]), a$1 = spa_$1_splat(av), fw$1 = spa_$1_splat(fw);
    const spa_$1 fh$1 = spa_$1_splat(fh), lx$1 = spa_$1_splat(lx), ly$1 = spa_$1_splat(ly);
    const spa_$1 hx$1 = spa_$1_splat(hx), hy$1 = spa_$1_splat(hy);
    const spa_$1 nhx$1 = spa_$1_splat(-hx), nhy$1 = spa_$1_splat(-hy);')m4_dnl
m4_dnl MSDAG_PLAIN(N): the same operations, one channel at a time, N lanes.
m4_define(`MSDAG_PLAIN', `
    const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
    float la[$1] = {0}, lxs[$1] = {0}, lys[$1] = {0};
    for (int64_t c0 = 0; c0 < cl; c0 += $1) {
        for (int j = 0; j < $1; j++) {
            const int64_t c = c0 + j;
            const float g = grow[c], t = g * av;
            const float v0 = r0[c], v1 = r1[c], v2 = r2[c], v3 = r3[c];
            g0[c] += w0 * t;
            g1[c] += w1 * t;
            g2[c] += w2 * t;
            g3[c] += w3 * t;
            const float val = w0 * v0 + w1 * v1 + w2 * v2 + w3 * v3;
            const float dx = -hy * v0 + hy * v1 - ly * v2 + ly * v3;
            const float dy = -hx * v0 - lx * v1 + hx * v2 + lx * v3;
            la[j] += g * val;
            lxs[j] += (t * dx) * fw;
            lys[j] += (t * dy) * fh;
        }
    }
    for (int half = $1 / 2; half > 0; half /= 2)
        for (int j = 0; j < half; j++) {
            la[j] += la[j + half];
            lxs[j] += lxs[j + half];
            lys[j] += lys[j + half];
        }
    sums[0] = lxs[0];
    sums[1] = lys[0];
    sums[2] = la[0];')m4_dnl
MSDAG_CHANNELS_HEAD(8)
#if SPA_MSDA_V8
MSDAG_VCONST(v8)
    spa_v8 va = spa_v8_splat(0.0f), vx = va, vy = va;
    for (int64_t c = 0; c < cl; c += 8)
MSDAG_VSTEP(v8, 0, `')
    sums[0] = spa_v8_fold(&vx);
    sums[1] = spa_v8_fold(&vy);
    sums[2] = spa_v8_fold(&va);
#else
MSDAG_PLAIN(8)
#endif
}
MSDAG_CHANNELS_HEAD(16)
#if SPA_MSDA_V16
MSDAG_VCONST(v16)
    spa_v16 va = spa_v16_splat(0.0f), vx = va, vy = va;
    for (int64_t c = 0; c < cl; c += 16)
MSDAG_VSTEP(v16, 0, `')
    sums[0] = spa_v16_fold(&vx);
    sums[1] = spa_v16_fold(&vy);
    sums[2] = spa_v16_fold(&va);
#elif SPA_MSDA_V8
    /* lanes 0-7 in the _lo vectors, 8-15 in the _hi ones */
MSDAG_VCONST(v8)
    spa_v8 va_lo = spa_v8_splat(0.0f), vx_lo = va_lo, vy_lo = va_lo;
    spa_v8 va_hi = va_lo, vx_hi = va_lo, vy_hi = va_lo;
    for (int64_t c = 0; c < cl; c += 16) {
MSDAG_VSTEP(v8, 0, `_lo')
MSDAG_VSTEP(v8, 8, `_hi')
    }
    const spa_v8 sx = vx_lo + vx_hi, sy = vy_lo + vy_hi, sa = va_lo + va_hi;
    sums[0] = spa_v8_fold(&sx);
    sums[1] = spa_v8_fold(&sy);
    sums[2] = spa_v8_fold(&sa);
#else
MSDAG_PLAIN(16)
#endif
}

static inline void sample_channels(int64_t cl, const float *grow, const spa_msda_grad_sample *e,
                                   float *sums)
{
    if (cl % 16 == 0)
        channels_16(cl, grow, e->v[0], e->v[1], e->v[2], e->v[3], e->g[0], e->g[1], e->g[2],
                    e->g[3], e->w, e->a, e->lx, e->ly, e->fw, e->fh, sums);
    else
        channels_8(cl, grow, e->v[0], e->v[1], e->v[2], e->v[3], e->g[0], e->g[1], e->g[2],
                   e->g[3], e->w, e->a, e->lx, e->ly, e->fw, e->fh, sums);
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

#if SPA_MSDA_STAGE16
/* The sixteen-lane path (msda_stage16.h), for C a multiple of 16: a tile of
 * queries is staged sixteen samples at a time, then each live sample runs
 * the operations of channels_16 (same order, same 16-lane reductions and
 * folds) with intrinsics, the channel blocks of one sample side by side. */
/* the 16-lane sums of d/dx, d/dy, d/da of the 16 samples of a chunk */
enum { FOLD_BYTES = 3 * 256 * (int)sizeof(float) };

static bool fast_fits(const spa_msda_args *a, int64_t nlp, int64_t desc_bytes)
{
    const int64_t nch = (nlp + 15) / 16;
    return a->c % 16 == 0 && a->nk <= INT32_MAX && a->ls[5] == 1 && a->ls[4] == 2 &&
           a->ls[3] == 2 * a->np && a->as[4] == 1 && a->as[3] == a->np &&
           FOLD_BYTES + nch * (int64_t)sizeof(spa_msda_lanes) + nch * (int64_t)sizeof(spa_msda_chunk) <=
               desc_bytes;
}

/* spa_v16_fold of sixteen vectors v[0..15] at once, result k in lane k:
 * per vector lanes j + j+8, then j + j+4, j + j+2 and 0 + 1, as pairs of
 * vectors shuffled together (each addition is one of spa_v16_fold's). */
static inline __m512 fast_fold16(const float *v)
{
    __m512 s1[8], s2[4], s3[2];
    for (int m = 0; m < 8; m++) {
        const __m512 x = _mm512_loadu_ps(v + 32 * m), y = _mm512_loadu_ps(v + 32 * m + 16);
        s1[m] = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 2, 3, 2)));
    }
    for (int m = 0; m < 4; m++)
        s2[m] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[2 * m], s1[2 * m + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_f32x4(s1[2 * m], s1[2 * m + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int m = 0; m < 2; m++)
        s3[m] = _mm512_add_ps(_mm512_shuffle_ps(s2[2 * m], s2[2 * m + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_ps(s2[2 * m], s2[2 * m + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(s3[0], s3[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(s3[0], s3[1], _MM_SHUFFLE(3, 1, 3, 1)));
    /* vector k ends in lane 4 * (k % 4) + k / 4 */
    return _mm512_permutexvar_ps(_mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0), r);
}

/* One live sample (lane i of chunk e) over all channels: the scatter-adds,
 * and the 16-lane sums of channels_16 (d/dx, d/dy, d/da) before their fold,
 * into sx, sy, sa. */
static inline void fast_sample(const spa_msda_chunk *e, int i, float fws, float fhs, int64_t cl,
                               const float *grow, float *sx, float *sy, float *sa)
{
    const float *r0 = e->v[0][i], *r1 = e->v[1][i], *r2 = e->v[2][i], *r3 = e->v[3][i];
    float *g0 = e->g[0][i], *g1 = e->g[1][i], *g2 = e->g[2][i], *g3 = e->g[3][i];
    const float lxs = e->lx[i], lys = e->ly[i];
    const __m512 w0 = _mm512_set1_ps(e->w[0][i]), w1 = _mm512_set1_ps(e->w[1][i]);
    const __m512 w2 = _mm512_set1_ps(e->w[2][i]), w3 = _mm512_set1_ps(e->w[3][i]);
    const __m512 av = _mm512_set1_ps(e->a[i]), fw = _mm512_set1_ps(fws), fh = _mm512_set1_ps(fhs);
    const __m512 lx = _mm512_set1_ps(lxs), ly = _mm512_set1_ps(lys);
    const __m512 hx = _mm512_set1_ps(1.0f - lxs), hy = _mm512_set1_ps(1.0f - lys);
    const __m512 nhx = _mm512_set1_ps(-(1.0f - lxs)), nhy = _mm512_set1_ps(-(1.0f - lys));
    __m512 va = _mm512_setzero_ps(), vx = va, vy = va;
    for (int64_t c = 0; c < cl; c += 16) {
        const __m512 g = _mm512_loadu_ps(grow + c), t = _mm512_mul_ps(g, av);
        const __m512 v0 = _mm512_loadu_ps(r0 + c), v1 = _mm512_loadu_ps(r1 + c);
        const __m512 v2 = _mm512_loadu_ps(r2 + c), v3 = _mm512_loadu_ps(r3 + c);
        _mm512_storeu_ps(g0 + c, _mm512_add_ps(_mm512_loadu_ps(g0 + c), _mm512_mul_ps(w0, t)));
        _mm512_storeu_ps(g1 + c, _mm512_add_ps(_mm512_loadu_ps(g1 + c), _mm512_mul_ps(w1, t)));
        _mm512_storeu_ps(g2 + c, _mm512_add_ps(_mm512_loadu_ps(g2 + c), _mm512_mul_ps(w2, t)));
        _mm512_storeu_ps(g3 + c, _mm512_add_ps(_mm512_loadu_ps(g3 + c), _mm512_mul_ps(w3, t)));
        __m512 val = _mm512_mul_ps(w0, v0);
        val = _mm512_add_ps(val, _mm512_mul_ps(w1, v1));
        val = _mm512_add_ps(val, _mm512_mul_ps(w2, v2));
        val = _mm512_add_ps(val, _mm512_mul_ps(w3, v3));
        __m512 dx = _mm512_add_ps(_mm512_mul_ps(nhy, v0), _mm512_mul_ps(hy, v1));
        dx = _mm512_sub_ps(dx, _mm512_mul_ps(ly, v2));
        dx = _mm512_add_ps(dx, _mm512_mul_ps(ly, v3));
        __m512 dy = _mm512_sub_ps(_mm512_mul_ps(nhx, v0), _mm512_mul_ps(lx, v1));
        dy = _mm512_add_ps(dy, _mm512_mul_ps(hx, v2));
        dy = _mm512_add_ps(dy, _mm512_mul_ps(lx, v3));
        va = _mm512_add_ps(va, _mm512_mul_ps(g, val));
        vx = _mm512_add_ps(vx, _mm512_mul_ps(_mm512_mul_ps(t, dx), fw));
        vy = _mm512_add_ps(vy, _mm512_mul_ps(_mm512_mul_ps(t, dy), fh));
    }
    _mm512_storeu_ps(sx, vx);
    _mm512_storeu_ps(sy, vy);
    _mm512_storeu_ps(sa, va);
}

/* Lanes m of v into t (dtype dt) at element offset off, narrowed as
 * spa_msda_store does: F16C rounding is RNE like spa_f32_to_f16; the bf16
 * lanes round like spa_f32_to_bf16 (a NaN keeps its top bits, made quiet). */
static inline void fast_store(void *t, int32_t dt, int64_t off, __mmask16 m, __m512 v)
{
    switch (dt) {
    case SPA_FLOAT16:
        _mm256_mask_storeu_epi16((uint16_t *)t + off, m, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        break;
    case SPA_BFLOAT16: {
        const __m512i u = _mm512_castps_si512(v);
        const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        const __m512i rounded =
            _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd), 16);
        const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        const __m512i r = _mm512_mask_or_epi32(rounded, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
        _mm256_mask_storeu_epi16((uint16_t *)t + off, m, _mm512_cvtepi32_epi16(r));
        break;
    }
    default:
        _mm512_mask_storeu_ps((float *)t + off, m, v);
        break;
    }
}

static void fast_all(const spa_msda_args *a, int64_t b, int64_t h, const float *vpair, float *gpair,
                     int64_t tq, spa_msda_chunk *ch, spa_msda_lanes *ln, float *fold, float *grow,
                     float *sink)
{
    const int64_t nlp = a->nl * a->np, nch = (nlp + 15) / 16, cl = a->c;
    const int64_t row_bytes = cl * (int64_t)sizeof(float);
    const size_t lsz = a->loc_dt == SPA_FLOAT32 ? 4 : 2, asz = a->attn_dt == SPA_FLOAT32 ? 4 : 2;
    const size_t gsz = a->gout_dt == SPA_FLOAT32 ? 4 : 2;
    const int64_t gout_bytes = cl * a->gos[2] * (int64_t)gsz;
    spa_msda_lanes_init(&a->lv, a->nl, a->np, ln);
    /* gradLocation and gradAttnWeight laid out like location and attnWeight
     * here: each chunk's results are stored as vectors */
    const bool out_vec = a->gls[5] == 1 && a->gls[4] == 2 && a->gls[3] == 2 * a->np && a->gas[4] == 1 &&
                         a->gas[3] == a->np;
    const __m512i ilv_lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i ilv_hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    for (int64_t t0 = 0; t0 < a->nq; t0 += tq) {
        const int64_t tn = a->nq - t0 < tq ? a->nq - t0 : tq;
        for (int64_t i = 0; i < tn; i++) {
            const int64_t q = t0 + i;
            const char *lq = (const char *)a->loc + (size_t)(b * a->ls[0] + q * a->ls[1] + h * a->ls[2]) * lsz;
            const char *aq = (const char *)a->attn + (size_t)(b * a->as[0] + q * a->as[1] + h * a->as[2]) * asz;
            if (q + PFQ < a->nq) {
                for (int64_t off = 0; off < 2 * nlp * (int64_t)lsz; off += 64)
                    SPA_PREFETCH(lq + (size_t)(PFQ * a->ls[1]) * lsz + off);
                for (int64_t off = 0; off < nlp * (int64_t)asz; off += 64)
                    SPA_PREFETCH(aq + (size_t)(PFQ * a->as[1]) * asz + off);
            }
            /* the gradOutput row the combine reads first after this tile */
            if (q + tq < a->nq)
                for (int64_t off = 0; off < gout_bytes; off += 64)
                    SPA_PREFETCH((const char *)a->gout +
                                 (size_t)(b * a->gos[0] + (q + tq) * a->gos[1] + h * cl * a->gos[2]) * gsz + off);
            for (int64_t j = 0; j < nch; j++)
                spa_msda_stage16(&ln[j], 16 * j, lq, a->loc_dt, aq, a->attn_dt, vpair, row_bytes, zero_row,
                                 gpair, sink, CMAX, &ch[i * nch + j]);
        }
        for (int64_t i = 0; i < tn; i++) {
            const int64_t q = t0 + i;
            const int64_t goff = b * a->gos[0] + q * a->gos[1] + h * cl * a->gos[2];
            const float *gr = grow;
            if (a->gos[2] != 1)
                load_gout(a, b, q, h, grow);
            else if (a->gout_dt == SPA_FLOAT32) /* read in place */
                gr = (const float *)a->gout + goff;
            else
                for (int64_t c = 0; c < cl; c += 16)
                    _mm512_storeu_ps(grow + c, spa_msda_vload((const uint16_t *)a->gout + goff + c, a->gout_dt,
                                                              (__mmask16)0xFFFF));
            const int64_t gq = b * a->gls[0] + q * a->gls[1] + h * a->gls[2];
            const int64_t aq = b * a->gas[0] + q * a->gas[1] + h * a->gas[2];
            for (int64_t j = 0; j < nch; j++) {
                const spa_msda_chunk *e = &ch[i * nch + j];
                const int n = nlp - 16 * j < 16 ? (int)(nlp - 16 * j) : 16;
                for (int k = 0; k < n; k++) {
                    if (e->live >> k & 1u) {
                        fast_sample(e, k, ln[j].fw[k], ln[j].fh[k], cl, gr, fold + 16 * k,
                                    fold + 256 + 16 * k, fold + 512 + 16 * k);
                    } else { /* skipped sample: zero gradients */
                        _mm512_storeu_ps(fold + 16 * k, _mm512_setzero_ps());
                        _mm512_storeu_ps(fold + 256 + 16 * k, _mm512_setzero_ps());
                        _mm512_storeu_ps(fold + 512 + 16 * k, _mm512_setzero_ps());
                    }
                }
                float sums[3][16];
                _mm512_storeu_ps(sums[0], fast_fold16(fold));
                _mm512_storeu_ps(sums[1], fast_fold16(fold + 256));
                _mm512_storeu_ps(sums[2], fast_fold16(fold + 512));
                if (out_vec) { /* the chunk's rows are contiguous: (x, y) interleaved, then the weights */
                    const __m512 sx = _mm512_loadu_ps(sums[0]), sy = _mm512_loadu_ps(sums[1]);
                    fast_store(a->gloc, a->gloc_dt, gq + 32 * j, (__mmask16)ln[j].xy_lo,
                               _mm512_permutex2var_ps(sx, ilv_lo, sy));
                    fast_store(a->gloc, a->gloc_dt, gq + 32 * j + 16, (__mmask16)ln[j].xy_hi,
                               _mm512_permutex2var_ps(sx, ilv_hi, sy));
                    fast_store(a->gattn, a->gattn_dt, aq + 16 * j, (__mmask16)ln[j].valid, _mm512_loadu_ps(sums[2]));
                    continue;
                }
                for (int k = 0; k < n; k++) {
                    const int64_t s = 16 * j + k, l = s / a->np, p = s % a->np;
                    const int64_t go = gq + l * a->gls[3] + p * a->gls[4];
                    spa_msda_store(a->gloc, a->gloc_dt, go, sums[0][k]);
                    spa_msda_store(a->gloc, a->gloc_dt, go + a->gls[5], sums[1][k]);
                    spa_msda_store(a->gattn, a->gattn_dt, aq + l * a->gas[3] + p * a->gas[4], sums[2][k]);
                }
            }
        }
    }
}
#endif

void MSDAG_KSYM()(const spa_msda_args *a, int64_t b, int64_t h, const float *vpair, float *gpair,
                 void *scratch)
{
    const int64_t nlp = a->nl * a->np, cl = a->c;
    const int64_t tq = TS / nlp > 0 ? TS / nlp : 1;
    spa_msda_grad_sample *desc = scratch;
    float *restrict grow = (float *)(desc + tq * nlp);
    float *sink = grow + CMAX; /* 4 rows */
    const int64_t row_bytes = cl * (int64_t)sizeof(float);
    const size_t gsz = a->gout_dt == SPA_FLOAT32 ? 4 : 2;
    const int64_t gout_bytes = cl * a->gos[2] * (int64_t)gsz;
#if SPA_MSDA_STAGE16
    if (fast_fits(a, nlp, tq * nlp * (int64_t)sizeof(spa_msda_grad_sample))) {
        /* in the descriptor area: tiles of up to FQ queries (pointers first,
         * for their alignment), the fold rows, the lane constants */
        const int64_t nch = (nlp + 15) / 16, desc_bytes = tq * nlp * (int64_t)sizeof(spa_msda_grad_sample);
        const int64_t room = (desc_bytes - FOLD_BYTES - nch * (int64_t)sizeof(spa_msda_lanes)) /
                             (nch * (int64_t)sizeof(spa_msda_chunk));
        const int64_t ftq = room < FQ ? room : FQ;
        spa_msda_chunk *ch = scratch;
        float *fold = (float *)(ch + ftq * nch);
        fast_all(a, b, h, vpair, gpair, ftq, ch, (spa_msda_lanes *)(fold + 3 * 256), fold, grow, sink);
        return;
    }
#endif

    for (int64_t t0 = 0; t0 < a->nq; t0 += tq) {
        const int64_t tn = a->nq - t0 < tq ? a->nq - t0 : tq;
        stage(a, b, h, vpair, gpair, t0, tn, sink, desc);
        const int64_t ns = tn * nlp;
        for (int64_t s = 0; s < PF && s < ns; s++)
            if (desc[s].live)
                prefetch_corners(&desc[s], row_bytes);
        for (int64_t i = 0; i < tn; i++) {
            const int64_t q = t0 + i;
            if (q + 2 < a->nq) /* the gradOutput row two queries ahead */
                for (int64_t off = 0; off < gout_bytes; off += 64)
                    SPA_PREFETCH((const char *)a->gout +
                                 (size_t)(b * a->gos[0] + (q + 2) * a->gos[1] + h * cl * a->gos[2]) * gsz + off);
            load_gout(a, b, q, h, grow);
            const int64_t gq = b * a->gls[0] + q * a->gls[1] + h * a->gls[2];
            const int64_t aq = b * a->gas[0] + q * a->gas[1] + h * a->gas[2];
            const spa_msda_grad_sample *e = &desc[i * nlp];
            for (int64_t l = 0; l < a->nl; l++) {
                for (int64_t p = 0; p < a->np; p++, e++) {
                    const int64_t s = e - desc;
                    if (s + PF < ns && desc[s + PF].live)
                        prefetch_corners(&desc[s + PF], row_bytes);
                    const int64_t go = gq + l * a->gls[3] + p * a->gls[4];
                    const int64_t ao = aq + l * a->gas[3] + p * a->gas[4];
                    if (!e->live) { /* skipped sample: zero gradients, nothing to value */
                        spa_msda_store(a->gloc, a->gloc_dt, go, 0.0f);
                        spa_msda_store(a->gloc, a->gloc_dt, go + a->gls[5], 0.0f);
                        spa_msda_store(a->gattn, a->gattn_dt, ao, 0.0f);
                        continue;
                    }
                    float sums[3];
                    sample_channels(cl, grow, e, sums);
                    spa_msda_store(a->gloc, a->gloc_dt, go, sums[0]);
                    spa_msda_store(a->gloc, a->gloc_dt, go + a->gls[5], sums[1]);
                    spa_msda_store(a->gattn, a->gattn_dt, ao, sums[2]);
                }
            }
        }
    }
}
