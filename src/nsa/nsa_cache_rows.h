/* What the inference operators share about a KV cache (spattn/nsa_infer.h):
 * the page that holds a sequence's row, read once from an untrusted block
 * table, and a cache row widened into a kernel's scratch (f32 rows, or
 * double ones for float64), zero-padded to the kernel's pitch. */
#ifndef SPA_NSA_CACHE_ROWS_H
#define SPA_NSA_CACHE_ROWS_H

#include <stdint.h>
#include <string.h>

#include "half.h"
#include "spattn/types.h"

/* The page holding row p of batch b: page b of a contiguous cache (table
 * NULL), else its table entry, or -1 where that entry (read once) is not a
 * page of the cache's pages. */
static inline int64_t spa_nsa_cache_page(const spa_tensor *table, int64_t page_size, int64_t pages, int64_t b,
                                         int64_t p)
{
    if (table == NULL)
        return b;
    const int32_t *row = (const int32_t *)table->data + b * table->strides[0];
    const int64_t pg = row[(p / page_size) * table->strides[1]];
    return pg >= 0 && pg < pages ? pg : -1;
}

/* The batch of query token t, qs[b] the first token of batch b (ascending):
 * the last b with qs[b] <= t (a batch without queries shares its qs with
 * the next, which wins). */
static inline int64_t spa_nsa_cache_batch_of(const int64_t *qs, int64_t batches, int64_t t)
{
    int64_t lo = 0, hi = batches - 1;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        if (qs[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Row r of page `page`, head h of cache tensor c ([pages, rows, heads, dim]),
 * n elements widened into dst, then zeros up to pitch. */
static inline void spa_nsa_cache_row(const spa_tensor *c, int64_t page, int64_t r, int64_t h, int64_t n,
                                     int64_t pitch, void *dst)
{
    const size_t es = spa_dtype_size(c->dtype);
    const unsigned char *src = (const unsigned char *)c->data +
                               (size_t)(page * c->strides[0] + r * c->strides[1] + h * c->strides[2]) * es;
    const int64_t s = c->strides[3];
    if (c->dtype == SPA_FLOAT64) {
        double *d = dst;
        const double *x = (const double *)(const void *)src;
        if (s == 1)
            memcpy(d, x, (size_t)n * sizeof(double));
        else
            for (int64_t i = 0; i < n; i++)
                d[i] = x[i * s];
        for (int64_t i = n; i < pitch; i++)
            d[i] = 0.0;
        return;
    }
    float *d = dst;
    if (c->dtype == SPA_FLOAT32) {
        const float *x = (const float *)(const void *)src;
        if (s == 1)
            memcpy(d, x, (size_t)n * sizeof(float));
        else
            for (int64_t i = 0; i < n; i++)
                d[i] = x[i * s];
    } else {
        const uint16_t *u = (const uint16_t *)(const void *)src;
        if (s == 1 && c->dtype == SPA_FLOAT16)
            spa_f16_widen_run(d, u, n);
        else if (s == 1)
            spa_bf16_widen_run(d, u, n);
        else
            for (int64_t i = 0; i < n; i++)
                d[i] = c->dtype == SPA_FLOAT16 ? spa_f16_to_f32(u[i * s]) : spa_bf16_to_f32(u[i * s]);
    }
    for (int64_t i = n; i < pitch; i++)
        d[i] = 0.0f;
}

/* Row r of page `page`, head h (n elements at unit stride: the parts read
 * in place, parts_in_place) copied in the cache's dtype to dst; page < 0: n
 * zero elements. */
static inline void spa_nsa_cache_row_raw(const spa_tensor *c, int64_t page, int64_t r, int64_t h, int64_t n,
                                         void *dst)
{
    const size_t es = spa_dtype_size(c->dtype);
    if (page < 0) {
        memset(dst, 0, (size_t)n * es);
        return;
    }
    const unsigned char *src = (const unsigned char *)c->data +
                               (size_t)(page * c->strides[0] + r * c->strides[1] + h * c->strides[2]) * es;
    memcpy(dst, src, (size_t)n * es);
}

/* The first element of row r of page `page`, head h of a 16-bit cache c. */
static inline const uint16_t *spa_nsa_cache_row_u16(const spa_tensor *c, int64_t page, int64_t r, int64_t h)
{
    return (const uint16_t *)c->data + page * c->strides[0] + r * c->strides[1] + h * c->strides[2];
}

/* Row r of page `page`, head h of a bf16 cache c (n elements) as the bf16
 * pair words of the dot-product kernels (spa_nsas_args.kb): elements 2i and
 * 2i+1 in word i, the first in the low half, then zero words up to pitch;
 * page < 0: pitch zero words. */
static inline void spa_nsa_cache_row_words(const spa_tensor *c, int64_t page, int64_t r, int64_t h, int64_t n,
                                           int64_t pitch, uint32_t *dst)
{
    int64_t i = 0;
    if (page >= 0) {
        const uint16_t *u = spa_nsa_cache_row_u16(c, page, r, h);
        const int64_t s = c->strides[3];
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (s == 1) { /* a dense row holds its words already */
            memcpy(dst, u, (size_t)(n / 2) * sizeof *dst);
            i = n / 2;
        }
#endif
        for (; 2 * i + 1 < n; i++)
            dst[i] = (uint32_t)u[2 * i * s] | (uint32_t)u[(2 * i + 1) * s] << 16;
        if (2 * i < n) { /* an odd n: the last element, its pair zero */
            dst[i] = u[2 * i * s];
            i++;
        }
    }
    for (; i < pitch; i++)
        dst[i] = 0;
}

/* The same row's bf16 bits as they are (n elements, then zeros up to
 * pitch; page < 0: pitch zeros): a value row before it is paired. */
static inline void spa_nsa_cache_row_bits(const spa_tensor *c, int64_t page, int64_t r, int64_t h, int64_t n,
                                          int64_t pitch, uint16_t *dst)
{
    int64_t i = 0;
    if (page >= 0) {
        const uint16_t *u = spa_nsa_cache_row_u16(c, page, r, h);
        const int64_t s = c->strides[3];
        if (s == 1) {
            memcpy(dst, u, (size_t)n * sizeof *dst);
            i = n;
        }
        for (; i < n; i++)
            dst[i] = u[i * s];
    }
    for (; i < pitch; i++)
        dst[i] = 0;
}

/* pitch zeros of the kernels' element (double for float64, else float). */
static inline void spa_nsa_zero_row(void *dst, int64_t pitch, int32_t dt)
{
    if (dt == SPA_FLOAT64)
        for (int64_t i = 0; i < pitch; i++)
            ((double *)dst)[i] = 0.0;
    else
        for (int64_t i = 0; i < pitch; i++)
            ((float *)dst)[i] = 0.0f;
}

#endif
