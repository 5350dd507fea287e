/* The grad of DSA's sparse attention (spa_dsa_sparse_attention_grad, both
 * phases), at DeepSeek-V3.2-Exp's sparse MLA in training: one latent head
 * of D 512 + rope 64 that is also the value (MLA-absorb: dvalue NULL, the
 * key's gradient holds both), top 2048 tokens per query (sparse_block_size
 * 1), a contiguous 8k-token key; a 64-token chunk at the end of the
 * context, causal, 16 and 128 query heads (train_h16, train_h128). The
 * statistics and the output come from one forward call before the timing.
 * FLOPs count each multiply-add of the five products as 2: Q Kᵀ again
 * (576 dims), dP = dY Vᵀ (512), dQ (576), dK (576) and dV (512); the bytes
 * are the selected rows read once per token, q, dq, out and its grad, and
 * the key's gradient written. Against the FMA peak and the triad measured
 * in the same run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { DN = 512, DR = 64, K = 2048, CTX = 8192 };

typedef struct sag_bench {
    spa_tensor q, qr, k, kr, idx, o, dy, mx, sm, dq, dqr, dk, dkr;
    spa_int_array sq, len;
    int64_t qn[1], ctx[1];
    void *ws;
    uint64_t ws_size;
    const spa_runner *runner;
} sag_bench;

static spa_status plan(sag_bench *b, uint64_t *size, spa_executor *ex)
{
    return spa_dsa_sparse_attention_grad_get_workspace_size(
        &b->q, &b->qr, &b->k, &b->kr, &b->k, &b->idx, &b->sq, &b->len, &b->o, &b->dy, &b->mx, &b->sm, 0.0416666, 1,
        3, &b->dq, &b->dqr, &b->dk, &b->dkr, NULL, size, ex);
}

static void step(void *arg)
{
    sag_bench *b = arg;
    spa_executor ex;
    uint64_t size;
    if (plan(b, &size, &ex) != SPA_OK || size > b->ws_size ||
        spa_dsa_sparse_attention_grad(b->ws, size, &ex, b->runner) != SPA_OK) {
        fprintf(stderr, "dsa_sparse_attention_grad bench: call failed\n");
        exit(1);
    }
}

/* The forward, once: out and the statistics the grad reads. */
static void forward(sag_bench *b)
{
    spa_executor ex;
    uint64_t size;
    if (spa_dsa_sparse_attention_get_workspace_size(&b->q, &b->qr, &b->k, &b->kr, &b->k, &b->idx, NULL, &b->sq,
                                                    &b->len, 0.0416666, 1, 3, &b->o, &b->mx, &b->sm, &size,
                                                    &ex) != SPA_OK) {
        fprintf(stderr, "dsa_sparse_attention_grad bench: the forward's phase 1 failed\n");
        exit(1);
    }
    void *ws = bench_alloc_zero(size);
    if (spa_dsa_sparse_attention(ws, size, &ex, NULL) != SPA_OK) {
        fprintf(stderr, "dsa_sparse_attention_grad bench: the forward failed\n");
        exit(1);
    }
    free(ws);
}

static void bench_shape(spa_dtype dt, int64_t heads, int64_t t, const char *shape)
{
    if (!bench_wanted(dt, shape))
        return;
    const size_t es = bench_dtype_size(dt);
    sag_bench b;
    memset(&b, 0, sizeof b);
    const int64_t qd[3] = {t, heads, DN}, qrd[3] = {t, heads, DR}, kd[4] = {1, CTX, 1, DN};
    const int64_t krd[4] = {1, CTX, 1, DR}, id[3] = {t, 1, K}, sd[3] = {1, t, heads};
    void *q = bench_alloc_random(dt, (size_t)(t * heads * DN), 1);
    void *qr = bench_alloc_random(dt, (size_t)(t * heads * DR), 2);
    void *k = bench_alloc_random(dt, (size_t)(CTX * DN), 3);
    void *kr = bench_alloc_random(dt, (size_t)(CTX * DR), 4);
    void *dy = bench_alloc_random(dt, (size_t)(t * heads * DN), 5);
    void *o = bench_alloc_zero(es * (size_t)(t * heads * DN));
    void *dq = bench_alloc_zero(es * (size_t)(t * heads * DN)), *dqr = bench_alloc_zero(es * (size_t)(t * heads * DR));
    void *dk = bench_alloc_zero(es * (size_t)(CTX * DN)), *dkr = bench_alloc_zero(es * (size_t)(CTX * DR));
    float *mx = bench_alloc_zero(sizeof(float) * (size_t)(t * heads));
    float *sm = bench_alloc_zero(sizeof(float) * (size_t)(t * heads));
    int32_t *idx = bench_alloc_zero(sizeof(int32_t) * (size_t)(t * K));
    uint64_t seed = 11;
    bench_causal_topk(idx, t, K, CTX, &seed);
    b.q = bench_tensor(dt, 3, qd, q), b.qr = bench_tensor(dt, 3, qrd, qr);
    b.k = bench_tensor(dt, 4, kd, k), b.kr = bench_tensor(dt, 4, krd, kr);
    b.idx = bench_tensor(SPA_INT32, 3, id, idx);
    b.o = bench_tensor(dt, 3, qd, o), b.dy = bench_tensor(dt, 3, qd, dy);
    b.mx = bench_tensor(SPA_FLOAT32, 3, sd, mx), b.sm = bench_tensor(SPA_FLOAT32, 3, sd, sm);
    b.dq = bench_tensor(dt, 3, qd, dq), b.dqr = bench_tensor(dt, 3, qrd, dqr);
    b.dk = bench_tensor(dt, 4, kd, dk), b.dkr = bench_tensor(dt, 4, krd, dkr);
    b.qn[0] = t, b.ctx[0] = CTX;
    b.sq.data = b.qn, b.sq.size = 1, b.len.data = b.ctx, b.len.size = 1;
    forward(&b);
    spa_executor ex;
    if (plan(&b, &b.ws_size, &ex) != SPA_OK) {
        fprintf(stderr, "dsa_sparse_attention_grad bench: phase 1 failed\n");
        exit(1);
    }
    b.ws = bench_alloc_zero(b.ws_size);
    const double flops = 2.0 * (double)(t * heads * K) * (3.0 * (DN + DR) + 2.0 * DN);
    const double bytes = (double)(t * K) * (DN + DR) * (double)es + 4.0 * (double)(t * heads * (DN + DR)) * (double)es +
                         (double)CTX * (DN + DR) * (double)es;
    unsigned threads[8];
    const int nt = bench_thread_counts(threads, 8);
    for (int i = 0; i < nt; i++) {
        b.runner = bench_runner(threads[i]);
        bench_report("dsa_sparse_attention_grad", dt, shape, threads[i], bench_time_ms(step, &b), bytes, flops);
    }
    free(b.ws), free(q), free(qr), free(k), free(kr), free(dy), free(o), free(dq), free(dqr), free(dk), free(dkr);
    free(mx), free(sm), free(idx);
}

void bench_dsa_sparse_attention_grad(void)
{
    static const spa_dtype dts[2] = {SPA_FLOAT32, SPA_BFLOAT16};
    for (int i = 0; i < 2; i++) {
        bench_shape(dts[i], 16, 64, "train_h16");
        bench_shape(dts[i], 128, 64, "train_h128");
    }
}
