/* Micro-kernels of NsaSelectedAttention(+Grad): the three small GEMM shapes
 * of one (query token, kv head) against its gathered key/value rows, plus a
 * branch-free exp. Scores are kept "key-major": row j of a score tile holds
 * the GP = 16 or 32 query heads of the group in lanes (padded heads are 0),
 * so every product vectorises over the heads of the group and reads key and
 * value rows in their natural layout, broadcasting one element at a time.
 *
 * The AVX-512 paths (behind __AVX512F__) and the portable paths compute the
 * same sums in the same order per lane; the portable path is what every other
 * target builds, and the host tests it with HOST_MARCH=x86-64-v2. */
#ifndef SPA_NSA_SELECT_MK_H
#define SPA_NSA_SELECT_MK_H

#include <float.h>
#include <stdint.h>

#include "half.h"
#include "nsa_select_kernel.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#define SPA_NSAS_LANES 16

#if defined(__GNUC__)
#define SPA_NSAS_INLINE static inline __attribute__((always_inline))
#define SPA_NSAS_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#else
#define SPA_NSAS_INLINE static inline
#define SPA_NSAS_PREFETCH(p) ((void)(p))
#endif

/* A prefetch cursor over `rows` rows of `bytes` bytes, `stride` bytes apart:
 * the micro-kernels request one row (all its lines) every eight inner
 * iterations, so the next chunk's rows arrive while this chunk is computed,
 * spread out (a burst would stall on the miss buffers); the eight iterations
 * between requests are unrolled, with no test in them. Hints only. */
typedef struct spa_nsas_pf {
    const char *row;
    int64_t stride, bytes, rows;
} spa_nsas_pf;

SPA_NSAS_INLINE spa_nsas_pf spa_nsas_pf_rows(const void *base, int64_t stride, int64_t rows,
                                             int64_t bytes)
{
    spa_nsas_pf p = {base, stride, bytes, base != NULL ? rows : 0};
    return p;
}

SPA_NSAS_INLINE void spa_nsas_pf_row(spa_nsas_pf *p)
{
    if (p->rows > 0) {
        for (int64_t off = 0; off < p->bytes; off += 64)
            SPA_NSAS_PREFETCH(p->row + off);
        p->rows--;
        if (p->rows > 0) /* never point past the last row */
            p->row += p->stride;
    }
}

/* Whatever the kernel did not reach. */
SPA_NSAS_INLINE void spa_nsas_pf_rest(spa_nsas_pf *p)
{
    while (p->rows > 0)
        spa_nsas_pf_row(p);
}

/* ---- rounding f32 values to the nearest f16 / bf16 (kept as f32) ----
 * x[0..n), n a multiple of 16: P and dS "in the dtype" as the spec computes
 * them. The AVX-512 paths give the values of half.h bit for bit (RNE, NaN
 * kept NaN); the portable loops are half.h itself. */
#if defined(__AVX512F__)
static inline __m512 spa_nsas_round16_f16(__m512 v)
{
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

static inline __m512 spa_nsas_round16_bf16(__m512 v)
{
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                                  _mm512_set1_epi32(0x7F800000));
    r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x400000));
    return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32((int32_t)0xFFFF0000u)));
}
#endif

/* x[0..n) rounded to bf16 (bf16 != 0) or f16 in place, n a multiple of 16. */
SPA_NSAS_INLINE void spa_nsas_round(float *x, int64_t n, int bf16)
{
#if defined(__AVX512F__)
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        _mm512_storeu_ps(x + i, bf16 ? spa_nsas_round16_bf16(v) : spa_nsas_round16_f16(v));
    }
#else
    for (int64_t i = 0; i < n; i++)
        x[i] = bf16 ? spa_bf16_to_f32(spa_f32_to_bf16(x[i])) : spa_f16_to_f32(spa_f32_to_f16(x[i]));
#endif
}

/* x[j][l] = round(x[j][l] * s[l]) to bf16 (bf16 != 0) or f16, over rows of gp
 * (16 or 32) lanes: the forward's P = exp(z' - m) * (1/l) in the dtype, in one
 * pass. */
SPA_NSAS_INLINE void spa_nsas_scale_round(float *x, int64_t rows, int64_t gp, const float *s,
                                          int bf16)
{
#if defined(__AVX512F__)
    for (int64_t l0 = 0; l0 < gp; l0 += 16) {
        const __m512 sv = _mm512_loadu_ps(s + l0);
        for (int64_t j = 0; j < rows; j++) {
            const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + j * gp + l0), sv);
            _mm512_storeu_ps(x + j * gp + l0, bf16 ? spa_nsas_round16_bf16(v) : spa_nsas_round16_f16(v));
        }
    }
#else
    for (int64_t j = 0; j < rows; j++)
        for (int64_t l = 0; l < gp; l++) {
            const float v = x[j * gp + l] * s[l];
            x[j * gp + l] = bf16 ? spa_bf16_to_f32(spa_f32_to_bf16(v)) : spa_f16_to_f32(spa_f32_to_f16(v));
        }
#endif
}

/* ---- exp ----
 * exp(x) for the softmax, x <= 0 in practice: n = round(x / ln 2),
 * r = x - n ln 2 (two-part constant), Taylor polynomial of degree 7 on
 * |r| <= ln2/2 (truncation < 2^-27), times 2^n. Below -87 the result is +0
 * exactly (masked scores, MASKVAL = -FLT_MAX, must give P == 0), and so is
 * exp(NaN), as in the AVX-512 version (an ordered x >= -87 keeps the lane). */
#define SPA_NSAS_EXP_LOW (-87.0f)

static inline float spa_nsas_exp(float x)
{
    /* written so that NaN clamps to -87.5 too: converting it to int32 below
     * would be undefined */
    float xc = x > -87.5f ? x : -87.5f;
    xc = xc < 88.0f ? xc : 88.0f;
    const float t = xc * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23: rounds to integer */
    const float n = t - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.98412698e-4f;
    p = p * r + 1.38888889e-3f;
    p = p * r + 8.33333333e-3f;
    p = p * r + 4.16666667e-2f;
    p = p * r + 1.66666667e-1f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const float two_n = spa_bits_f32((uint32_t)((int32_t)n + 127) << 23);
    return x >= SPA_NSAS_EXP_LOW ? p * two_n : 0.0f;
}

#if defined(__AVX512F__)
static inline __m512 spa_nsas_exp16(__m512 x)
{
    __m512 xc = _mm512_max_ps(x, _mm512_set1_ps(-87.5f));
    xc = _mm512_min_ps(xc, _mm512_set1_ps(88.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_sub_ps(xc, _mm512_mul_ps(n, _mm512_set1_ps(0.693359375f)));
    r = _mm512_sub_ps(r, _mm512_mul_ps(n, _mm512_set1_ps(-2.12194440e-4f)));
    __m512 p = _mm512_set1_ps(1.98412698e-4f);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.38888889e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(8.33333333e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(4.16666667e-2f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.66666667e-1f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.5f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(SPA_NSAS_EXP_LOW), _CMP_GE_OQ);
    return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(p, n));
}
#endif

/* x[0..n) = exp(x[0..n)), n a multiple of 16. */
static inline void spa_nsas_exp_row(float *x, int64_t n)
{
#if defined(__AVX512F__)
    for (int64_t i = 0; i < n; i += 16)
        _mm512_storeu_ps(x + i, spa_nsas_exp16(_mm512_loadu_ps(x + i)));
#else
    for (int64_t i = 0; i < n; i++)
        x[i] = spa_nsas_exp(x[i]);
#endif
}

/* x[j][l] = exp(x[j][l] - m[l]) and sum[l] = sum_j x[j][l] (in row order)
 * over rows of gp (16 or 32) lanes: the softmax numerators in one pass. */
SPA_NSAS_INLINE void spa_nsas_exp_sum(float *x, int64_t rows, int64_t gp, const float *m,
                                      float *sum)
{
#if defined(__AVX512F__)
    for (int64_t l0 = 0; l0 < gp; l0 += 16) {
        const __m512 mv = _mm512_loadu_ps(m + l0);
        __m512 acc = _mm512_setzero_ps();
        for (int64_t j = 0; j < rows; j++) {
            float *xj = x + j * gp + l0;
            const __m512 e = spa_nsas_exp16(_mm512_sub_ps(_mm512_loadu_ps(xj), mv));
            _mm512_storeu_ps(xj, e);
            acc = _mm512_add_ps(acc, e);
        }
        _mm512_storeu_ps(sum + l0, acc);
    }
#else
    for (int64_t l = 0; l < gp; l++)
        sum[l] = 0.0f;
    for (int64_t j = 0; j < rows; j++)
        for (int64_t l = 0; l < gp; l++) {
            const float e = spa_nsas_exp(x[j * gp + l] - m[l]);
            x[j * gp + l] = e;
            sum[l] += e;
        }
#endif
}

/* ---- scores: out[j][l] = sum_d a[j*lda + d] * bt[d*gp + l] ----
 * rows a multiple of 16, gp 16 or 32: Q Kᵀ (a = key rows, bt = query heads
 * transposed) and dY Vᵀ in the grad. */
SPA_NSAS_INLINE void spa_nsas_scores(const float *a, int64_t lda, int64_t rows, const float *bt,
                                     int64_t n, int64_t gp, float *out, spa_nsas_pf *pf)
{
#if defined(__AVX512F__)
#define SPA_R8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define SPA_R16(X) SPA_R8(X) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
    if (gp == 16) {
        for (int64_t j0 = 0; j0 < rows; j0 += 16) {
            const float *a0 = a + j0 * lda;
#define DECL(r) __m512 c##r = _mm512_setzero_ps();
            SPA_R16(DECL)
#undef DECL
            for (int64_t d0 = 0; d0 < n; d0 += 8) { /* n is a multiple of 16 */
                spa_nsas_pf_row(pf);
#pragma GCC unroll 8
                for (int64_t d = d0; d < d0 + 8; d++) {
                    const __m512 b = _mm512_loadu_ps(bt + d * 16);
                    const float *ad = a0 + d;
#define FMA(r) c##r = _mm512_fmadd_ps(_mm512_set1_ps(ad[(r) * lda]), b, c##r);
                    SPA_R16(FMA)
#undef FMA
                }
            }
#define ST(r) _mm512_storeu_ps(out + (j0 + (r)) * 16, c##r);
            SPA_R16(ST)
#undef ST
        }
        return;
    }
    for (int64_t j0 = 0; j0 < rows; j0 += 8) {
        const float *a0 = a + j0 * lda;
#define DECL(r) __m512 c##r = _mm512_setzero_ps(), f##r = _mm512_setzero_ps();
        SPA_R8(DECL)
#undef DECL
        for (int64_t d0 = 0; d0 < n; d0 += 8) {
            spa_nsas_pf_row(pf);
#pragma GCC unroll 8
            for (int64_t d = d0; d < d0 + 8; d++) {
                const __m512 b0 = _mm512_loadu_ps(bt + d * 32), b1 = _mm512_loadu_ps(bt + d * 32 + 16);
                const float *ad = a0 + d;
#define FMA(r)                                          \
    {                                                   \
        const __m512 x = _mm512_set1_ps(ad[(r) * lda]); \
        c##r = _mm512_fmadd_ps(x, b0, c##r);            \
        f##r = _mm512_fmadd_ps(x, b1, f##r);            \
    }
                SPA_R8(FMA)
#undef FMA
            }
        }
#define ST(r)                                               \
    _mm512_storeu_ps(out + (j0 + (r)) * 32, c##r);          \
    _mm512_storeu_ps(out + (j0 + (r)) * 32 + 16, f##r);
        SPA_R8(ST)
#undef ST
    }
#else
    for (int64_t j = 0; j < rows; j++) {
        float acc[32] = {0};
        const float *aj = a + j * lda;
        for (int64_t d = 0; d < n; d++) {
            const float x = aj[d];
            if ((d & 7) == 0) spa_nsas_pf_row(pf);
            const float *b = bt + d * gp;
            for (int64_t l = 0; l < gp; l++)
                acc[l] += x * b[l];
        }
        for (int64_t l = 0; l < gp; l++)
            out[j * gp + l] = acc[l];
    }
#endif
}

/* The scores with the row pitch as a constant for the common head dims: the
 * sixteen rows of a tile then sit at constant displacements from one
 * pointer, where a run-time pitch needs a register per row and spills. */
SPA_NSAS_INLINE void spa_nsas_scores_pitch(const float *a, int64_t lda, int64_t rows,
                                           const float *bt, int64_t n, int64_t gp, float *out,
                                           spa_nsas_pf *pf)
{
#if defined(__AVX512F__)
    switch (lda) {
    case 64:
        spa_nsas_scores(a, 64, rows, bt, n, gp, out, pf);
        return;
    case 128:
        spa_nsas_scores(a, 128, rows, bt, n, gp, out, pf);
        return;
    case 192:
        spa_nsas_scores(a, 192, rows, bt, n, gp, out, pf);
        return;
    default:
        break;
    }
#endif
    spa_nsas_scores(a, lda, rows, bt, n, gp, out, pf);
}

/* ---- scaled scores and their max, forward ----
 * out[j][l] = scale * sum_d a[j*lda + d] * bt[d*gp + l] for the valid rows
 * j < nvalid, MASKVAL (-FLT_MAX) for the causally masked rest (a suffix of
 * the block); mx[l] = max(mx[l], valid rows). rows a multiple of 16; a tile
 * of 16 rows with no valid row skips its products. The same values as the
 * plain scores scaled afterwards, in one pass over the tile. */
SPA_NSAS_INLINE void spa_nsas_scores_max(const float *a, int64_t lda, int64_t rows, int64_t nvalid,
                                         const float *bt, int64_t n, int64_t gp, float scale,
                                         float *out, float *mx, spa_nsas_pf *pf)
{
    for (int64_t j0 = 0; j0 < rows; j0 += 16) {
        float *o = out + j0 * gp;
        const int64_t valid = nvalid - j0 < 0 ? 0 : nvalid - j0 > 16 ? 16 : nvalid - j0;
        if (valid > 0)
            spa_nsas_scores_pitch(a + j0 * lda, lda, 16, bt, n, gp, o, pf);
#if defined(__AVX512F__)
        const __m512 sv = _mm512_set1_ps(scale), masked = _mm512_set1_ps(-FLT_MAX);
        for (int64_t l0 = 0; l0 < gp; l0 += 16) {
            __m512 m = _mm512_loadu_ps(mx + l0);
            int64_t r = 0;
            for (; r < valid; r++) {
                const __m512 z = _mm512_mul_ps(sv, _mm512_loadu_ps(o + r * gp + l0));
                _mm512_storeu_ps(o + r * gp + l0, z);
                m = _mm512_max_ps(m, z);
            }
            for (; r < 16; r++)
                _mm512_storeu_ps(o + r * gp + l0, masked);
            _mm512_storeu_ps(mx + l0, m);
        }
#else
        for (int64_t r = 0; r < 16; r++)
            for (int64_t l = 0; l < gp; l++) {
                if (r < valid) {
                    const float z = scale * o[r * gp + l];
                    o[r * gp + l] = z;
                    mx[l] = mx[l] > z ? mx[l] : z;
                } else {
                    o[r * gp + l] = -FLT_MAX;
                }
            }
#endif
    }
}

/* ---- transposed accumulate: acc[e][l] += sum_j a[j*lda + e] * p[j*gp + l] ----
 * e < n (a multiple of 16): P V (a = value rows, p = P) and dSᵀ... K (dQ). */
SPA_NSAS_INLINE void spa_nsas_accum_t(const float *a, int64_t lda, int64_t rows, const float *p,
                                      int64_t n, int64_t gp, float *acc, spa_nsas_pf *pf)
{
#if defined(__AVX512F__)
    if (gp == 16) {
        for (int64_t e0 = 0; e0 < n; e0 += 16) {
            float *ce = acc + e0 * 16;
#define LD(r) __m512 c##r = _mm512_loadu_ps(ce + (r) * 16);
            SPA_R16(LD)
#undef LD
            for (int64_t j0 = 0; j0 < rows; j0 += 8) { /* rows is a multiple of 16 */
                spa_nsas_pf_row(pf);
#pragma GCC unroll 8
                for (int64_t j = j0; j < j0 + 8; j++) {
                    const __m512 pv = _mm512_loadu_ps(p + j * 16);
                    const float *aj = a + j * lda + e0;
#define FMA(r) c##r = _mm512_fmadd_ps(_mm512_set1_ps(aj[r]), pv, c##r);
                    SPA_R16(FMA)
#undef FMA
                }
            }
#define ST(r) _mm512_storeu_ps(ce + (r) * 16, c##r);
            SPA_R16(ST)
#undef ST
        }
        return;
    }
    for (int64_t e0 = 0; e0 < n; e0 += 8) {
        float *ce = acc + e0 * 32;
#define LD(r)                                              \
    __m512 c##r = _mm512_loadu_ps(ce + (r) * 32),          \
           f##r = _mm512_loadu_ps(ce + (r) * 32 + 16);
        SPA_R8(LD)
#undef LD
        for (int64_t j0 = 0; j0 < rows; j0 += 8) {
            spa_nsas_pf_row(pf);
#pragma GCC unroll 8
            for (int64_t j = j0; j < j0 + 8; j++) {
                const __m512 p0 = _mm512_loadu_ps(p + j * 32), p1 = _mm512_loadu_ps(p + j * 32 + 16);
                const float *aj = a + j * lda + e0;
#define FMA(r)                                  \
    {                                           \
        const __m512 x = _mm512_set1_ps(aj[r]); \
        c##r = _mm512_fmadd_ps(x, p0, c##r);    \
        f##r = _mm512_fmadd_ps(x, p1, f##r);    \
    }
                SPA_R8(FMA)
#undef FMA
            }
        }
#define ST(r)                                   \
    _mm512_storeu_ps(ce + (r) * 32, c##r);      \
    _mm512_storeu_ps(ce + (r) * 32 + 16, f##r);
        SPA_R8(ST)
#undef ST
    }
#else
    for (int64_t e = 0; e < n; e++) {
        float c[32];
        float *ce = acc + e * gp;
        for (int64_t l = 0; l < gp; l++)
            c[l] = ce[l];
        for (int64_t j = 0; j < rows; j++) {
            const float x = a[j * lda + e];
            if ((j & 7) == 0) spa_nsas_pf_row(pf);
            const float *pj = p + j * gp;
            for (int64_t l = 0; l < gp; l++)
                c[l] += x * pj[l];
        }
        for (int64_t l = 0; l < gp; l++)
            ce[l] = c[l];
    }
#endif
}

/* ---- row update: out[j*n + e] += sum_{c<g} w[j*gp + c] * b[c*n + e] ----
 * rows a multiple of 4, n a multiple of 16: the dK rows (w = dS, b = Q) and
 * dV rows (w = P, b = dY) of one token; heads summed in ascending order. */
SPA_NSAS_INLINE void spa_nsas_rows_add(const float *w, int64_t rows, int64_t gp, const float *b,
                                       int64_t g, int64_t n, float *out, spa_nsas_pf *pf)
{
#if defined(__AVX512F__)
#define SPA_R4(X) X(0) X(1) X(2) X(3)
    for (int64_t j0 = 0; j0 < rows; j0 += 4) {
        const float *wj = w + j0 * gp;
        float *oj = out + j0 * n;
        int64_t e0 = 0;
        for (; e0 + 64 <= n; e0 += 64) {
#define LD(r)                                                 \
    __m512 c##r##0 = _mm512_loadu_ps(oj + (r) * n + e0);      \
    __m512 c##r##1 = _mm512_loadu_ps(oj + (r) * n + e0 + 16); \
    __m512 c##r##2 = _mm512_loadu_ps(oj + (r) * n + e0 + 32); \
    __m512 c##r##3 = _mm512_loadu_ps(oj + (r) * n + e0 + 48);
            SPA_R4(LD)
#undef LD
            spa_nsas_pf_row(pf);
            for (int64_t c = 0; c < g; c++) {
                const float *bc = b + c * n + e0;
                const __m512 b0 = _mm512_loadu_ps(bc), b1 = _mm512_loadu_ps(bc + 16),
                             b2 = _mm512_loadu_ps(bc + 32), b3 = _mm512_loadu_ps(bc + 48);
#define FMA(r)                                              \
    {                                                       \
        const __m512 x = _mm512_set1_ps(wj[(r) * gp + c]);  \
        c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);          \
        c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1);          \
        c##r##2 = _mm512_fmadd_ps(x, b2, c##r##2);          \
        c##r##3 = _mm512_fmadd_ps(x, b3, c##r##3);          \
    }
                SPA_R4(FMA)
#undef FMA
            }
#define ST(r)                                          \
    _mm512_storeu_ps(oj + (r) * n + e0, c##r##0);      \
    _mm512_storeu_ps(oj + (r) * n + e0 + 16, c##r##1); \
    _mm512_storeu_ps(oj + (r) * n + e0 + 32, c##r##2); \
    _mm512_storeu_ps(oj + (r) * n + e0 + 48, c##r##3);
            SPA_R4(ST)
#undef ST
        }
        for (; e0 < n; e0 += 16) {
#define LD(r) __m512 c##r = _mm512_loadu_ps(oj + (r) * n + e0);
            SPA_R4(LD)
#undef LD
            for (int64_t c = 0; c < g; c++) {
                const __m512 b0 = _mm512_loadu_ps(b + c * n + e0);
#define FMA(r) c##r = _mm512_fmadd_ps(_mm512_set1_ps(wj[(r) * gp + c]), b0, c##r);
                SPA_R4(FMA)
#undef FMA
            }
#define ST(r) _mm512_storeu_ps(oj + (r) * n + e0, c##r);
            SPA_R4(ST)
#undef ST
        }
    }
#undef SPA_R4
#undef SPA_R8
#undef SPA_R16
#else
    for (int64_t j = 0; j < rows; j++) {
        float *oj = out + j * n;
        for (int64_t e0 = 0; e0 < n; e0 += 16) {
            float c16[16];
            if (e0 == 0) spa_nsas_pf_row(pf);
            for (int l = 0; l < 16; l++)
                c16[l] = oj[e0 + l];
            for (int64_t c = 0; c < g; c++) {
                const float x = w[j * gp + c];
                const float *bc = b + c * n + e0;
                for (int l = 0; l < 16; l++)
                    c16[l] += x * bc[l];
            }
            for (int l = 0; l < 16; l++)
                oj[e0 + l] = c16[l];
        }
    }
#endif
}

#endif
