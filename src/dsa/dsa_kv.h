/* What the DSA operators share about their key cache (spattn/dsa.h): its
 * three layouts, the sequence arrays that give its batches, and the pages a
 * batch's rows lie on, read from an untrusted block table.
 *   paged       [pages, page_size, N2, D] through an INT32 block table;
 *   contiguous  [B, S, N2, D], batch b's rows in page b;
 *   TND         [T2, N2, D], the batches' rows one after the other: seen as
 *               one page of T2 rows, batch b's starting at its first row. */
#ifndef SPA_DSA_KV_H
#define SPA_DSA_KV_H

#include <stdbool.h>
#include <stdint.h>

#include "half.h"
#include "spattn/types.h"

typedef struct spa_dsa_kv {
    spa_tensor kx; /* the key as [pages, page_size, N2, D] ([1, T2, N2, D] for TND) */
    int64_t batches, pages, page_size, kv_cap; /* kv_cap: the rows a batch may hold */
    bool tnd, paged;
} spa_dsa_kv;

/* A key-like tensor (key, key_rope, value) of the layout as the 4-D view
 * spa_dsa_kv.kx is of the key. */
spa_tensor spa_dsa_kv_view(const spa_tensor *x);

/* The rules that read no array contents: key's rank and layout, the table,
 * how many batches the arrays give (sq / skv / table NULL: not given), for
 * t query tokens. */
spa_status spa_dsa_kv_check(const spa_tensor *key, const spa_tensor *table, const spa_int_array *sq,
                            const spa_int_array *skv, int64_t t, spa_dsa_kv *kv);

/* S_b and L_b of each batch, read once (copies: the trusted arrays of phase
 * 2, with a TND key's first row of each batch, or NULL); *lmax: the longest
 * L_b. */
spa_status spa_dsa_kv_check_seq(const spa_dsa_kv *kv, const spa_int_array *sq, const spa_int_array *skv, int64_t t,
                                int64_t *sq_copy, int64_t *kv_copy, int64_t *start_copy, int64_t *lmax);

/* The page holding row p of batch b (spa_nsa_cache_page; TND: the one page),
 * -1 where the table entry, read once, is not a page of the key. */
int64_t spa_dsa_kv_page(const spa_dsa_kv *kv, const spa_tensor *table, int64_t b, int64_t p);

/* Row p of batch b within its page; start: batch b's first row (TND). */
static inline int64_t spa_dsa_kv_row(const spa_dsa_kv *kv, int64_t start, int64_t p)
{
    return kv->tnd ? start + p : kv->paged ? p % kv->page_size : p;
}

/* The tokens query i of a batch of nq queries and len keys sees: 0 ..
 * seen - 1 (sparse_mode 3: up to its position len - nq + i, none where
 * that is negative; 0: all len). */
static inline int64_t spa_dsa_seen(int64_t mode, int64_t len, int64_t nq, int64_t i)
{
    if (mode == 0)
        return len;
    const int64_t pos = len - nq + i;
    return pos < 0 ? 0 : pos + 1 < len ? pos + 1 : len;
}

/* Element i of tensor x (a float dtype) as double, exactly. */
static inline double spa_dsa_value(const spa_tensor *x, int64_t i)
{
    switch (x->dtype) {
    case SPA_FLOAT64:
        return ((const double *)x->data)[i];
    case SPA_FLOAT32:
        return (double)((const float *)x->data)[i];
    case SPA_BFLOAT16:
        return (double)spa_bf16_to_f32(((const uint16_t *)x->data)[i]);
    default:
        return (double)spa_f16_to_f32(((const uint16_t *)x->data)[i]);
    }
}

/* The table entries of every page the sequences' rows lie on; len: the
 * trusted L_b copies (phase 2), or NULL to read skv. */
spa_status spa_dsa_kv_check_table(const spa_dsa_kv *kv, const spa_tensor *table, const spa_int_array *skv,
                                  const int64_t *len);

#endif
