/* The DSA key cache's layouts and sequence rules (dsa_kv.h). */
#include "dsa_kv.h"

#include <string.h>

#include "internal.h"
#include "nsa_cache_rows.h"

spa_tensor spa_dsa_kv_view(const spa_tensor *x)
{
    spa_tensor v = *x;
    if (x->rank != 3)
        return v;
    for (int32_t k = 3; k > 0; k--) /* the same elements as one page of T2 rows */
        v.dims[k] = x->dims[k - 1], v.strides[k] = x->strides[k - 1];
    v.dims[0] = 1, v.strides[0] = 0, v.rank = 4;
    return v;
}

spa_status spa_dsa_kv_check(const spa_tensor *key, const spa_tensor *table, const spa_int_array *sq,
                            const spa_int_array *skv, int64_t t, spa_dsa_kv *kv)
{
    memset(kv, 0, sizeof *kv);
    kv->tnd = key->rank == 3;
    kv->paged = table != NULL;
    SPA_TRY(spa_tensor_check(key, kv->tnd ? 3 : 4));
    kv->kx = spa_dsa_kv_view(key);
    if (kv->tnd) {
        SPA_REQUIRE(table == NULL /* a TND key takes no block_table */);
        SPA_REQUIRE(skv != NULL /* a TND key: actual_seq_kv_len gives the batches */);
    }
    kv->pages = kv->kx.dims[0], kv->page_size = kv->kx.dims[1];
    if (skv != NULL) {
        SPA_TRY(spa_seq_check_size(skv));
        kv->batches = (int64_t)skv->size;
    } else {
        kv->batches = kv->pages;
        SPA_REQUIRE(kv->batches >= 1 /* no actual_seq_kv_len: key's dim 0 is B */);
    }
    SPA_REQUIRE(kv->batches <= 65536 /* at most 65536 batches */);
    if (sq != NULL) {
        SPA_TRY(spa_seq_check_size(sq));
        SPA_REQUIRE((int64_t)sq->size == kv->batches /* actual_seq_q_len: one count per batch */);
    } else {
        SPA_REQUIRE(t % kv->batches == 0 /* no actual_seq_q_len: T a multiple of B */);
    }
    if (table != NULL) {
        SPA_TRY(spa_tensor_check(table, 2));
        SPA_REQUIRE(table->dtype == SPA_INT32 /* block_table: INT32 */);
        SPA_REQUIRE(table->dims[0] == kv->batches /* block_table: a row per batch */);
        SPA_REQUIRE(spa_mul_ok(table->dims[1], kv->page_size, &kv->kv_cap));
    } else {
        SPA_REQUIRE(kv->tnd || kv->pages >= kv->batches /* contiguous key: key[b] per batch */);
        kv->kv_cap = kv->page_size; /* TND: every batch's rows inside the T2 rows (check_seq) */
    }
    return SPA_OK;
}

spa_status spa_dsa_kv_check_seq(const spa_dsa_kv *kv, const spa_int_array *sq, const spa_int_array *skv, int64_t t,
                                int64_t *sq_copy, int64_t *kv_copy, int64_t *start_copy, int64_t *lmax)
{
    int64_t total = 0, start = 0;
    *lmax = 0;
    for (int64_t b = 0; b < kv->batches; b++) {
        const int64_t s = sq != NULL ? sq->data[b] : t / kv->batches;
        const int64_t l = skv != NULL ? skv->data[b] : kv->page_size;
        SPA_REQUIRE(s >= 0 && l >= 0 /* actual_seq_q_len / actual_seq_kv_len >= 0 */);
        SPA_REQUIRE(l <= kv->kv_cap /* L_b fits the cache (block_table row, or key dim 1) */);
        SPA_REQUIRE(l <= INT32_MAX /* key indices are INT32 */);
        if (kv->tnd)
            SPA_REQUIRE(l <= kv->kv_cap - start /* actual_seq_kv_len: the batches' rows inside key's T2 */);
        SPA_REQUIRE(spa_add_ok(total, s, &total));
        *lmax = l > *lmax ? l : *lmax;
        if (sq_copy != NULL)
            sq_copy[b] = s, kv_copy[b] = l, start_copy[b] = start;
        start += kv->tnd ? l : 0;
    }
    SPA_REQUIRE(total == t /* the query counts sum to T */);
    return SPA_OK;
}

int64_t spa_dsa_kv_page(const spa_dsa_kv *kv, const spa_tensor *table, int64_t b, int64_t p)
{
    if (kv->tnd)
        return 0;
    return spa_nsa_cache_page(kv->paged ? table : NULL, kv->page_size, kv->pages, b, p);
}

spa_status spa_dsa_kv_check_table(const spa_dsa_kv *kv, const spa_tensor *table, const spa_int_array *skv,
                                  const int64_t *len)
{
    if (!kv->paged)
        return SPA_OK;
    for (int64_t b = 0; b < kv->batches; b++) {
        const int64_t l = len != NULL ? len[b] : skv->data[b];
        for (int64_t p = 0; p < l; p += kv->page_size)
            SPA_REQUIRE(spa_dsa_kv_page(kv, table, b, p) >= 0 /* block_table: pages of the key cache */);
    }
    return SPA_OK;
}
