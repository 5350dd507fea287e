/* The lightning indexer's grad (spa_dsa_lightning_indexer_grad, both
 * phases), at DeepSeek-V3.2-Exp's indexer in training: 64 heads of D 128
 * on one key head, f32 weights, the gradient of the top 2048 scores of
 * each query (INT64 indices, as the training graph hands them), a
 * contiguous 8k-token key; a 256-token chunk at the end of the context,
 * causal (prefill_8k, the indexer's forward shape). FLOPs count each
 * multiply-add of the three products (Q Kᵀ again, dQ, dK) as 2; the bytes
 * are the selected key rows read once per token, q, w, dq, dw, the
 * indices and their gradient, and the key's gradient written. Against the
 * FMA peak and the triad measured in the same run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { HQ = 64, D = 128, K = 2048, CTX = 8192 };

typedef struct lig_bench {
    spa_tensor q, k, w, idx, dy, dq, dk, dw;
    spa_int_array sq, len;
    int64_t qn[1], ctx[1];
    void *ws;
    uint64_t ws_size;
    const spa_runner *runner;
} lig_bench;

static spa_status plan(lig_bench *b, uint64_t *size, spa_executor *ex)
{
    return spa_dsa_lightning_indexer_grad_get_workspace_size(&b->q, &b->k, &b->w, &b->idx, &b->dy, &b->sq, &b->len,
                                                             3, &b->dq, &b->dk, &b->dw, size, ex);
}

static void step(void *arg)
{
    lig_bench *b = arg;
    spa_executor ex;
    uint64_t size;
    if (plan(b, &size, &ex) != SPA_OK || size > b->ws_size ||
        spa_dsa_lightning_indexer_grad(b->ws, size, &ex, b->runner) != SPA_OK) {
        fprintf(stderr, "dsa_lightning_indexer_grad bench: call failed\n");
        exit(1);
    }
}

static void bench_shape(spa_dtype dt, int64_t t, const char *shape)
{
    if (!bench_wanted(dt, shape))
        return;
    const size_t es = bench_dtype_size(dt);
    lig_bench b;
    memset(&b, 0, sizeof b);
    const int64_t qd[3] = {t, HQ, D}, kd[4] = {1, CTX, 1, D}, wd[2] = {t, HQ}, id[3] = {t, 1, K};
    void *q = bench_alloc_random(dt, (size_t)(t * HQ * D), 1);
    void *k = bench_alloc_random(dt, (size_t)(CTX * D), 2);
    void *w = bench_alloc_random(SPA_FLOAT32, (size_t)(t * HQ), 3);
    void *dy = bench_alloc_random(dt, (size_t)(t * K), 4);
    void *dq = bench_alloc_zero(es * (size_t)(t * HQ * D)), *dk = bench_alloc_zero(es * (size_t)(CTX * D));
    void *dw = bench_alloc_zero(sizeof(float) * (size_t)(t * HQ));
    int32_t *picks = bench_alloc_zero(sizeof(int32_t) * (size_t)(t * K));
    int64_t *idx = bench_alloc_zero(sizeof(int64_t) * (size_t)(t * K));
    uint64_t seed = 11;
    bench_causal_topk(picks, t, K, CTX, &seed);
    for (int64_t i = 0; i < t * K; i++)
        idx[i] = picks[i];
    b.q = bench_tensor(dt, 3, qd, q), b.k = bench_tensor(dt, 4, kd, k), b.w = bench_tensor(SPA_FLOAT32, 2, wd, w);
    b.idx = bench_tensor(SPA_INT64, 3, id, idx), b.dy = bench_tensor(dt, 3, id, dy);
    b.dq = bench_tensor(dt, 3, qd, dq), b.dk = bench_tensor(dt, 4, kd, dk), b.dw = bench_tensor(SPA_FLOAT32, 2, wd, dw);
    b.qn[0] = t, b.ctx[0] = CTX;
    b.sq.data = b.qn, b.sq.size = 1, b.len.data = b.ctx, b.len.size = 1;
    spa_executor ex;
    if (plan(&b, &b.ws_size, &ex) != SPA_OK) {
        fprintf(stderr, "dsa_lightning_indexer_grad bench: phase 1 failed\n");
        exit(1);
    }
    b.ws = bench_alloc_zero(b.ws_size);
    const double flops = 2.0 * 3.0 * (double)(t * HQ * K) * D;
    const double bytes = (double)(t * K) * D * (double)es + 2.0 * (double)(t * HQ) * (D * (double)es + 4.0) +
                         (double)(t * K) * (8.0 + (double)es) + (double)CTX * D * (double)es;
    unsigned threads[8];
    const int nt = bench_thread_counts(threads, 8);
    for (int i = 0; i < nt; i++) {
        b.runner = bench_runner(threads[i]);
        bench_report("dsa_lightning_indexer_grad", dt, shape, threads[i], bench_time_ms(step, &b), bytes, flops);
    }
    free(b.ws), free(q), free(k), free(w), free(dy), free(dq), free(dk), free(dw), free(picks), free(idx);
}

void bench_dsa_lightning_indexer_grad(void)
{
    static const spa_dtype dts[2] = {SPA_FLOAT32, SPA_BFLOAT16};
    for (int i = 0; i < 2; i++)
        bench_shape(dts[i], 256, "prefill_8k");
}
