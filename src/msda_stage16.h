/* Staging of MultiScaleDeformableAttention samples sixteen at a time with
 * AVX-512 (spec/msda.md 5, 6): the location and attention weights of up to
 * 16 consecutive (level, point) samples of one query, read as vectors, give
 * each sample's range check, corner rows, corner validity and bilinear
 * weights. Every lane does the operations of the scalar staging of the
 * kernels, in the same order and with the same roundings (the two roundings
 * of loc * W - 0.5 through explicitly rounded intrinsics, which no compiler
 * fuses), so both paths give the same bits.
 *
 * Part of the avx512 ISA layer (SPA_ISA_MSDA_STAGE16, src/isa/avx512.h:
 * AVX512F, AVX512BW and AVX512VL). Used when the (level,
 * point, xy) dims of location and the (level, point) dims of attnWeight are
 * contiguous, and every key index fits in int32 (num_keys <= INT32_MAX); the
 * kernels keep their scalar staging for everything else. */
#ifndef SPA_MSDA_STAGE16_H
#define SPA_MSDA_STAGE16_H

#include "msda_kernel.h"

#if SPA_ISA_MSDA_STAGE16 && (defined(__GNUC__) || defined(__clang__))
#define SPA_MSDA_STAGE16 1
#include <immintrin.h>

/* Per-lane level constants of one chunk position (16 samples of a query). */
typedef struct spa_msda_lanes {
    float fw[16], fh[16];
    int32_t w[16], h[16], start[16];
    uint32_t valid;        /* lanes below nl*np */
    uint32_t xy_lo, xy_hi; /* the same, for the 32 interleaved (x, y) */
} spa_msda_lanes;

/* The staged chunk: corner rows 00, 01, 10, 11 per lane (the zero row for
 * corners outside the map), their bilinear weights, the attention weight,
 * live bits (bit s: sample s passed the range check) and, for the grad, the
 * gradValue rows (a sink row per corner outside the map) and the fractions. */
typedef struct spa_msda_chunk {
    const float *v[4][16];
    float *g[4][16];
    float w[4][16];
    float a[16], lx[16], ly[16];
    uint32_t live;
} spa_msda_chunk;

/* Lane constants of the nch = ceil(nlp / 16) chunk positions. */
static inline void spa_msda_lanes_init(const spa_msda_levels *lv, int64_t nl, int64_t np,
                                       spa_msda_lanes *out)
{
    const int64_t nlp = nl * np;
    for (int64_t j0 = 0; j0 < nlp; j0 += 16, out++) {
        out->valid = 0;
        for (int i = 0; i < 16; i++) {
            const int64_t pos = j0 + i, l = pos < nlp ? pos / np : 0;
            out->fw[i] = lv->fw[l];
            out->fh[i] = lv->fh[l];
            out->w[i] = (int32_t)lv->w[l]; /* checked <= INT32_MAX */
            out->h[i] = (int32_t)lv->h[l];
            out->start[i] = (int32_t)lv->start[l];
            if (pos < nlp)
                out->valid |= 1u << i;
        }
        out->xy_lo = out->xy_hi = 0;
        for (int i = 0; i < 8; i++) {
            out->xy_lo |= (out->valid >> i & 1u) * (3u << (2 * i));
            out->xy_hi |= (out->valid >> (i + 8) & 1u) * (3u << (2 * i));
        }
    }
}

/* n (<= 16) elements of a float tensor, widened exactly; lanes outside the
 * mask read nothing and hold 0. */
static inline __m512 spa_msda_vload(const void *p, int32_t dt, __mmask16 m)
{
    switch (dt) {
    case SPA_FLOAT16:
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    case SPA_BFLOAT16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
    default:
        return _mm512_maskz_loadu_ps(m, p);
    }
}

/* Row pointers base + key * row_bytes for the 16 lanes of key, where mask
 * says the corner is inside; outside corners get other + sink_step * corner. */
static inline void spa_msda_rows16(__m512i key, __mmask16 in, const void *base, int64_t row_bytes,
                                   const void *other, void **dst)
{
    const __m512i vb = _mm512_set1_epi64((long long)(uintptr_t)base);
    const __m512i vo = _mm512_set1_epi64((long long)(uintptr_t)other);
    const __m512i rb = _mm512_set1_epi64(row_bytes);
    const __m512i klo = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(key));
    const __m512i khi = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(key, 1));
    const __m512i plo = _mm512_mask_blend_epi64((__mmask8)in, vo, _mm512_add_epi64(vb, _mm512_mul_epu32(klo, rb)));
    const __m512i phi = _mm512_mask_blend_epi64((__mmask8)(in >> 8), vo,
                                                _mm512_add_epi64(vb, _mm512_mul_epu32(khi, rb)));
    _mm512_storeu_si512((void *)dst, plo);
    _mm512_storeu_si512((void *)(dst + 8), phi);
}

/* Stages the samples j0 .. j0+15 of one query (lanes past nl*np are dead):
 * lp points at location[b, q, h, 0, 0, 0], ap at attnWeight[b, q, h, 0, 0].
 * vbase is the pair's value slice (rows row_bytes apart), zero a zero row.
 * When gbase is not NULL, the gradValue rows (same layout) and fractions are
 * staged too; outside corners add into sink + corner * sink_step. */
static inline void spa_msda_stage16(const spa_msda_lanes *ln, int64_t j0, const void *lp, int32_t ldt,
                                    const void *ap, int32_t adt, const float *vbase,
                                    int64_t row_bytes, const float *zero, float *gbase,
                                    float *sink, int64_t sink_step, spa_msda_chunk *ch)
{
    const size_t lsz = ldt == SPA_FLOAT32 ? 4 : 2, asz = adt == SPA_FLOAT32 ? 4 : 2;
    const __mmask16 valid = (__mmask16)ln->valid;
    const __m512 xy0 = spa_msda_vload((const char *)lp + (size_t)(2 * j0) * lsz, ldt, (__mmask16)ln->xy_lo);
    const __m512 xy1 = spa_msda_vload((const char *)lp + (size_t)(2 * j0 + 16) * lsz, ldt, (__mmask16)ln->xy_hi);
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512 lxn = _mm512_permutex2var_ps(xy0, even, xy1), lyn = _mm512_permutex2var_ps(xy0, odd, xy1);
    const __m512 fw = _mm512_loadu_ps(ln->fw), fh = _mm512_loadu_ps(ln->fh);
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f), mone = _mm512_set1_ps(-1.0f);
    /* x = loc_x * W - 0.5, two roundings */
    const __m512 x = _mm512_sub_round_ps(_mm512_mul_round_ps(lxn, fw, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                                         half, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 y = _mm512_sub_round_ps(_mm512_mul_round_ps(lyn, fh, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                                         half, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm512_storeu_ps(ch->a, spa_msda_vload((const char *)ap + (size_t)j0 * asz, adt, valid));
    /* the range check; ordered compares, so NaN fails */
    __mmask16 live = _mm512_mask_cmp_ps_mask(valid, y, mone, _CMP_GT_OQ);
    live = _mm512_mask_cmp_ps_mask(live, x, mone, _CMP_GT_OQ);
    live = _mm512_mask_cmp_ps_mask(live, y, fh, _CMP_LT_OQ);
    live = _mm512_mask_cmp_ps_mask(live, x, fw, _CMP_LT_OQ);
    ch->live = live;
    const __m512 x0f = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512 y0f = _mm512_roundscale_ps(y, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    /* live lanes: x0, y0 in [-1, 2^31) */
    const __m512i x0 = _mm512_cvttps_epi32(x0f), y0 = _mm512_cvttps_epi32(y0f);
    const __m512 lx = _mm512_sub_ps(x, x0f), ly = _mm512_sub_ps(y, y0f);
    const __m512 hx = _mm512_sub_ps(one, lx), hy = _mm512_sub_ps(one, ly);
    _mm512_storeu_ps(ch->w[0], _mm512_mul_ps(hy, hx));
    _mm512_storeu_ps(ch->w[1], _mm512_mul_ps(hy, lx));
    _mm512_storeu_ps(ch->w[2], _mm512_mul_ps(ly, hx));
    _mm512_storeu_ps(ch->w[3], _mm512_mul_ps(ly, lx));
    /* both bounds of every corner, unsigned (-1 is huge) */
    const __m512i w = _mm512_loadu_si512(ln->w), h = _mm512_loadu_si512(ln->h);
    const __m512i ione = _mm512_set1_epi32(1);
    const __m512i x1 = _mm512_add_epi32(x0, ione), y1 = _mm512_add_epi32(y0, ione);
    const __mmask16 in_x0 = _mm512_cmplt_epu32_mask(x0, w), in_x1 = _mm512_cmplt_epu32_mask(x1, w);
    const __mmask16 in_y0 = _mm512_mask_cmplt_epu32_mask(live, y0, h);
    const __mmask16 in_y1 = _mm512_mask_cmplt_epu32_mask(live, y1, h);
    /* key of corner 00: start + y0 * W + x0 (exact for inside corners,
     * which are below num_keys; wraps harmlessly for the others) */
    const __m512i k00 = _mm512_add_epi32(_mm512_loadu_si512(ln->start),
                                         _mm512_add_epi32(_mm512_mullo_epi32(y0, w), x0));
    const __m512i k10 = _mm512_add_epi32(k00, w);
    const __mmask16 in[4] = {(__mmask16)(in_y0 & in_x0), (__mmask16)(in_y0 & in_x1),
                             (__mmask16)(in_y1 & in_x0), (__mmask16)(in_y1 & in_x1)};
    const __m512i key[4] = {k00, _mm512_add_epi32(k00, ione), k10, _mm512_add_epi32(k10, ione)};
    for (int k = 0; k < 4; k++)
        spa_msda_rows16(key[k], in[k], vbase, row_bytes, zero, (void **)ch->v[k]);
    if (gbase != NULL) {
        for (int k = 0; k < 4; k++)
            spa_msda_rows16(key[k], in[k], gbase, row_bytes, sink + k * sink_step, (void **)ch->g[k]);
        _mm512_storeu_ps(ch->lx, lx);
        _mm512_storeu_ps(ch->ly, ly);
    }
}

#else
#define SPA_MSDA_STAGE16 0
#endif

#endif
