/* DSA's sparse attention (spa_dsa_sparse_attention, both phases: a decode
 * step plans anew), DeepSeek-V3.2-Exp's sparse MLA: one latent head of
 * D 512 + rope 64 that is also the value (MLA-absorb), top 2048 tokens per
 * query (sparse_block_size 1), a paged latent cache of 128-row pages in
 * shuffled order, 8k context:
 * - decode_h16 / decode_h128: one new token, 16 / 128 query heads;
 * - prefill_h128: a 64-token chunk at the end of the context, causal,
 *   128 heads.
 * FLOPs count each multiply-add of Q Kᵀ (576 dims) and P V (512) as 2; the
 * bytes are the selected rows read once per token, q and the output.
 * Against the FMA peak and the triad measured in the same run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { DN = 512, DR = 64, K = 2048, PAGE = 128, CTX = 8192 };

typedef struct sa_bench {
    spa_tensor q, qr, k, kr, v, idx, table, o;
    spa_int_array sq, len;
    int64_t qn[1], ctx[1];
    void *ws;
    uint64_t ws_size;
    const spa_runner *runner;
} sa_bench;

static spa_status plan(sa_bench *b, uint64_t *size, spa_executor *ex)
{
    return spa_dsa_sparse_attention_get_workspace_size(&b->q, &b->qr, &b->k, &b->kr, &b->v, &b->idx, &b->table,
                                                       &b->sq, &b->len, 0.0416666, 1, 3, &b->o, NULL, NULL, size,
                                                       ex);
}

static void step(void *arg)
{
    sa_bench *b = arg;
    spa_executor ex;
    uint64_t size;
    if (plan(b, &size, &ex) != SPA_OK || size > b->ws_size ||
        spa_dsa_sparse_attention(b->ws, size, &ex, b->runner) != SPA_OK) {
        fprintf(stderr, "dsa_sparse_attention bench: call failed\n");
        exit(1);
    }
}

static void bench_shape(spa_dtype dt, int64_t heads, int64_t t, const char *shape)
{
    if (!bench_wanted(dt, shape))
        return;
    const size_t es = bench_dtype_size(dt);
    const int64_t pages = CTX / PAGE;
    sa_bench b;
    memset(&b, 0, sizeof b);
    const int64_t qd[3] = {t, heads, DN}, qrd[3] = {t, heads, DR}, kd[4] = {pages, PAGE, 1, DN};
    const int64_t krd[4] = {pages, PAGE, 1, DR}, id[3] = {t, 1, K}, td[2] = {1, pages}, od[3] = {t, heads, DN};
    void *q = bench_alloc_random(dt, (size_t)(t * heads * DN), 1);
    void *qr = bench_alloc_random(dt, (size_t)(t * heads * DR), 2);
    void *k = bench_alloc_random(dt, (size_t)(CTX * DN), 3);
    void *kr = bench_alloc_random(dt, (size_t)(CTX * DR), 4);
    void *o = bench_alloc_zero(es * (size_t)(t * heads * DN));
    int32_t *idx = bench_alloc_zero(sizeof(int32_t) * (size_t)(t * K));
    int32_t *table = bench_alloc_zero(sizeof(int32_t) * (size_t)pages);
    uint64_t seed = 11; /* the pages in shuffled order, then each token's picks */
    bench_shuffled_pages(table, pages, &seed);
    bench_causal_topk(idx, t, K, CTX, &seed);
    b.q = bench_tensor(dt, 3, qd, q), b.qr = bench_tensor(dt, 3, qrd, qr);
    b.k = bench_tensor(dt, 4, kd, k), b.kr = bench_tensor(dt, 4, krd, kr), b.v = b.k; /* MLA-absorb */
    b.idx = bench_tensor(SPA_INT32, 3, id, idx), b.table = bench_tensor(SPA_INT32, 2, td, table);
    b.o = bench_tensor(dt, 3, od, o);
    b.qn[0] = t, b.ctx[0] = CTX;
    b.sq.data = b.qn, b.sq.size = 1, b.len.data = b.ctx, b.len.size = 1;
    spa_executor ex;
    if (plan(&b, &b.ws_size, &ex) != SPA_OK) {
        fprintf(stderr, "dsa_sparse_attention bench: phase 1 failed\n");
        exit(1);
    }
    b.ws = bench_alloc_zero(b.ws_size);
    const double flops = 2.0 * (double)(t * heads * K) * (DN + DR + DN);
    const double bytes = (double)(t * K) * (DN + DR) * (double)es + 2.0 * (double)(t * heads * DN) * (double)es;
    unsigned threads[8];
    const int nt = bench_thread_counts(threads, 8);
    for (int i = 0; i < nt; i++) {
        b.runner = bench_runner(threads[i]);
        bench_report("dsa_sparse_attention", dt, shape, threads[i], bench_time_ms(step, &b), bytes, flops);
    }
    free(b.ws), free(q), free(qr), free(k), free(kr), free(o), free(idx), free(table);
}

void bench_dsa_sparse_attention(void)
{
    static const spa_dtype dts[2] = {SPA_FLOAT32, SPA_BFLOAT16};
    for (int i = 0; i < 2; i++) {
        bench_shape(dts[i], 16, 1, "decode_h16");
        bench_shape(dts[i], 128, 1, "decode_h128");
        bench_shape(dts[i], 128, 64, "prefill_h128");
    }
}
