/* The DSA lightning indexer (spa_dsa_lightning_indexer, both phases: a
 * decode step plans anew). DeepSeek-V3.2-Exp's indexer: 64 heads of D 128
 * on one key head, top 2048, f32 weights, a paged key cache of 128-row
 * pages in shuffled order (CANN's PA_BSND):
 * - decode_8k / decode_32k: one new token against 8k / 32k keys;
 * - prefill_8k: a 256-token chunk, causal (sparse_mode 3), at the end of
 *   an 8k context (the shape issue 33 scales DeepSeek's to).
 * FLOPs count each multiply-add of Q Kᵀ as 2 (the ReLU-weighted head sum
 * and the top-K are not counted); the bytes are the key rows read once per
 * call, q, w and the indices written. Against the FMA peak and the triad
 * measured in the same run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { HQ = 64, D = 128, K = 2048, PAGE = 128 };

typedef struct li_bench {
    spa_tensor q, k, w, table, idx;
    spa_int_array sq, len;
    int64_t qn[1], ctx[1];
    int64_t mode;
    void *ws;
    uint64_t ws_size;
    const spa_runner *runner;
} li_bench;

static void step(void *arg)
{
    li_bench *b = arg;
    spa_executor ex;
    uint64_t size;
    if (spa_dsa_lightning_indexer_get_workspace_size(&b->q, &b->k, &b->w, &b->table, &b->sq, &b->len, K, b->mode,
                                                     &b->idx, NULL, &size, &ex) != SPA_OK ||
        size > b->ws_size || spa_dsa_lightning_indexer(b->ws, size, &ex, b->runner) != SPA_OK) {
        fprintf(stderr, "dsa_lightning_indexer bench: call failed\n");
        exit(1);
    }
}

static void bench_shape(spa_dtype dt, int64_t ctx, int64_t t, const char *shape)
{
    if (!bench_wanted(dt, shape))
        return;
    const size_t es = bench_dtype_size(dt);
    const int64_t pages = ctx / PAGE;
    li_bench b;
    memset(&b, 0, sizeof b);
    const int64_t qd[3] = {t, HQ, D}, kd[4] = {pages, PAGE, 1, D}, wd[2] = {t, HQ}, id[3] = {t, 1, K};
    const int64_t td[2] = {1, pages};
    void *q = bench_alloc_random(dt, (size_t)(t * HQ * D), 1);
    void *k = bench_alloc_random(dt, (size_t)(ctx * D), 2);
    void *w = bench_alloc_random(SPA_FLOAT32, (size_t)(t * HQ), 3);
    int32_t *idx = bench_alloc_zero(sizeof(int32_t) * (size_t)(t * K));
    int32_t *table = bench_alloc_zero(sizeof(int32_t) * (size_t)pages);
    uint64_t seed = 11;
    bench_shuffled_pages(table, pages, &seed);
    b.q = bench_tensor(dt, 3, qd, q), b.k = bench_tensor(dt, 4, kd, k), b.w = bench_tensor(SPA_FLOAT32, 2, wd, w);
    b.idx = bench_tensor(SPA_INT32, 3, id, idx), b.table = bench_tensor(SPA_INT32, 2, td, table);
    b.qn[0] = t, b.ctx[0] = ctx;
    b.sq.data = b.qn, b.sq.size = 1, b.len.data = b.ctx, b.len.size = 1;
    b.mode = 3;
    spa_executor ex;
    if (spa_dsa_lightning_indexer_get_workspace_size(&b.q, &b.k, &b.w, &b.table, &b.sq, &b.len, K, b.mode, &b.idx,
                                                     NULL, &b.ws_size, &ex) != SPA_OK) {
        fprintf(stderr, "dsa_lightning_indexer bench: phase 1 failed\n");
        exit(1);
    }
    b.ws = bench_alloc_zero(b.ws_size);
    /* keys seen: query i of the t newest sees ctx - t + i + 1 of them */
    const double seen = (double)t * (double)(ctx - t) + (double)t * (double)(t + 1) / 2.0;
    const double flops = 2.0 * HQ * D * seen;
    const double bytes = (double)ctx * D * (double)es + (double)(t * HQ * D) * (double)es + (double)(t * HQ) * 4.0 +
                         (double)(t * K) * 4.0;
    unsigned threads[8];
    const int nt = bench_thread_counts(threads, 8);
    for (int i = 0; i < nt; i++) {
        b.runner = bench_runner(threads[i]);
        bench_report("dsa_lightning_indexer", dt, shape, threads[i], bench_time_ms(step, &b), bytes, flops);
    }
    free(b.ws), free(q), free(k), free(w), free(idx), free(table);
}

void bench_dsa_lightning_indexer(void)
{
    static const spa_dtype dts[2] = {SPA_FLOAT32, SPA_BFLOAT16};
    for (int i = 0; i < 2; i++) {
        bench_shape(dts[i], 8192, 1, "decode_8k");
        bench_shape(dts[i], 32768, 1, "decode_32k");
        bench_shape(dts[i], 8192, 256, "prefill_8k");
    }
}
