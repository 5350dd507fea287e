/* NsaSelectedAttention and its grad. Shapes: one batch, N1 32, N2 2,
 * blockSize 64, K 16, no mask, topk = 16 distinct random blocks per
 * (token, kv head) but in layer_8192:
 *   bench       T1 = T2 = 4096, D = Dv = 128 (forward)
 *   bench_half  T1 = T2 = 2048, D = Dv = 128
 *   bench_d192  T1 = T2 = 2048, D = 192, Dv = 128
 *   layer_8192  T1 = T2 = 8192, D = Dv = 128, and topk the NSA layer's own
 *               selection (NsaCompressAttention's output on random inputs,
 *               causal: -1 slots where a token sees fewer than K blocks)
 * FLOPs count each multiply-add as 2 and only the products: forward QKᵀ and
 * PV; grad QKᵀ (recomputed), dP, dV, dQ and dK. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { N1 = 32, N2 = 2, BS = 64, KC = 16 };

typedef struct nsas_bench {
    void *ws;
    uint64_t ws_size;
    spa_executor ex;
    const spa_runner *runner;
    spa_status (*run)(void *, uint64_t, const spa_executor *, const spa_runner *);
} nsas_bench;

static void run_once(void *arg)
{
    nsas_bench *b = arg;
    if (b->run(b->ws, b->ws_size, &b->ex, b->runner) != SPA_OK) {
        fprintf(stderr, "nsa_select bench: run failed\n");
        exit(1);
    }
}

static void time_threads(const char *op, spa_dtype dt, const char *shape, nsas_bench *b,
                         double bytes, double flops)
{
    unsigned threads[8];
    int nt = bench_thread_counts(threads, 8);
    b->ws = bench_alloc_zero(b->ws_size);
    for (int i = 0; i < nt; i++) {
        b->runner = bench_runner(threads[i]);
        bench_report(op, dt, shape, threads[i], bench_time_ms(run_once, b), bytes, flops);
    }
    free(b->ws);
}

/* KC distinct blocks out of t/BS per (token, kv head), by partial shuffle. */
static int32_t *random_topk(int64_t t, uint64_t seed)
{
    const int64_t blocks = t / BS;
    int32_t *idx = bench_alloc_zero((size_t)(t * N2 * KC) * sizeof(int32_t));
    int32_t perm[4096];
    for (int64_t i = 0; i < blocks; i++)
        perm[i] = (int32_t)i;
    for (int64_t u = 0; u < t * N2; u++) {
        for (int64_t i = 0; i < KC; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            int64_t j = i + (int64_t)((seed >> 33) % (uint64_t)(blocks - i));
            int32_t tmp = perm[i];
            perm[i] = perm[j];
            perm[j] = tmp;
            idx[u * KC + i] = perm[i];
        }
    }
    return idx;
}

/* The selection the NSA layer itself makes at t tokens: NsaCompressAttention
 * (causal, compression block 32 stride 16, selection block BS, K KC) of
 * random f32 queries against random compressed keys, its topk output; -1
 * where a token sees fewer than KC blocks. */
static int32_t *layer_topk(int64_t t, int64_t d)
{
    enum { L = 32, ST = 16 };
    const int64_t c = (t - L) / ST + 1, sq_vals[1] = {t}, sc_vals[1] = {c};
    const spa_int_array sq = {sq_vals, 1}, sc = {sc_vals, 1};
    const int64_t qd[3] = {t, N1, d}, kd[3] = {c, N2, d}, od[3] = {t, N1, d}, sd[3] = {t, N1, 8},
                  td[3] = {t, N2, KC};
    void *q = bench_alloc_random(SPA_FLOAT32, (size_t)(t * N1 * d), 11);
    void *k = bench_alloc_random(SPA_FLOAT32, (size_t)(c * N2 * d), 12);
    void *v = bench_alloc_random(SPA_FLOAT32, (size_t)(c * N2 * d), 13);
    void *o = bench_alloc_zero((size_t)(t * N1 * d) * 4);
    void *mx = bench_alloc_zero((size_t)(t * N1 * 8) * 4), *sm = bench_alloc_zero((size_t)(t * N1 * 8) * 4);
    int32_t *topk = bench_alloc_zero((size_t)(t * N2 * KC) * 4);
    spa_tensor tq = bench_tensor(SPA_FLOAT32, 3, qd, q), tk = bench_tensor(SPA_FLOAT32, 3, kd, k),
               tv = bench_tensor(SPA_FLOAT32, 3, kd, v), to = bench_tensor(SPA_FLOAT32, 3, od, o),
               tmx = bench_tensor(SPA_FLOAT32, 3, sd, mx), tsm = bench_tensor(SPA_FLOAT32, 3, sd, sm),
               tt = bench_tensor(SPA_INT32, 3, td, topk);
    uint64_t ws_size;
    spa_executor ex;
    if (spa_nsa_compress_attention_get_workspace_size(&tq, &tk, &tv, NULL, NULL, &sq, &sc, NULL, 1.0 / 11.3137, N1,
                                                      "TND", 2, L, ST, BS, KC, &tmx, &tsm, &to, &tt, &ws_size,
                                                      &ex) != SPA_OK) {
        fprintf(stderr, "nsa_select bench: the layer's selection: phase 1 failed\n");
        exit(1);
    }
    void *ws = bench_alloc_zero(ws_size);
    if (spa_nsa_compress_attention(ws, ws_size, &ex, bench_runner(2)) != SPA_OK) {
        fprintf(stderr, "nsa_select bench: the layer's selection failed\n");
        exit(1);
    }
    free(ws), free(q), free(k), free(v), free(o), free(mx), free(sm);
    return topk;
}

static void bench_shape(spa_dtype dt, const char *shape, int64_t t, int64_t d, int64_t dv, int grad)
{
    if (!bench_wanted(dt, shape))
        return;
    const size_t es = bench_dtype_size(dt);
    const int64_t seq_vals[1] = {t};
    const spa_int_array seq = {seq_vals, 1};
    const int64_t qd[3] = {t, N1, d}, kd[3] = {t, N2, d}, vd[3] = {t, N2, dv}, id[3] = {t, N2, KC},
                  od[3] = {t, N1, dv}, sd[3] = {t, N1, 8};
    void *q = bench_alloc_random(dt, (size_t)(t * N1 * d), 1);
    void *k = bench_alloc_random(dt, (size_t)(t * N2 * d), 2);
    void *v = bench_alloc_random(dt, (size_t)(t * N2 * dv), 3);
    /* layer_*: the NSA layer's own selection, random distinct blocks otherwise */
    int32_t *idx = strncmp(shape, "layer", 5) == 0 ? layer_topk(t, d) : random_topk(t, 4);
    void *o = bench_alloc_zero((size_t)(t * N1 * dv) * es);
    const spa_dtype st = dt == SPA_FLOAT64 ? SPA_FLOAT64 : SPA_FLOAT32; /* the statistics' dtype */
    void *mx = bench_alloc_zero((size_t)(t * N1 * 8) * bench_dtype_size(st));
    void *sm = bench_alloc_zero((size_t)(t * N1 * 8) * bench_dtype_size(st));
    spa_tensor tq = bench_tensor(dt, 3, qd, q), tk = bench_tensor(dt, 3, kd, k),
               tv = bench_tensor(dt, 3, vd, v), ti = bench_tensor(SPA_INT32, 3, id, idx),
               to = bench_tensor(dt, 3, od, o), tmx = bench_tensor(st, 3, sd, mx),
               tsm = bench_tensor(st, 3, sd, sm);
    const double scale = 1.0 / 11.3137;
    nsas_bench b;
    if (spa_nsa_select_get_workspace_size(&tq, &tk, &tv, &ti, NULL, &seq, &seq, scale, N1, "TND", 0,
                                          BS, KC, &tmx, &tsm, &to, &b.ws_size, &b.ex) != SPA_OK) {
        fprintf(stderr, "nsa_select bench: phase 1 failed\n");
        exit(1);
    }
    b.run = spa_nsa_select;
    double slots = 0; /* the valid ones (the layer's selection has -1 slots) */
    for (int64_t i = 0; i < t * N2 * KC; i++)
        slots += idx[i] >= 0;
    const double pairs = slots * (N1 / N2) * BS; /* (query head, selected key) pairs */
    const double in_bytes = (double)(t * N1 * d + t * N2 * (d + dv)) * (double)es + (double)(t * N2 * KC) * 4;
    const double out_bytes = (double)(t * N1 * dv) * (double)es + 2.0 * (double)(t * N1 * 8) * 4;
    if (!grad) {
        time_threads("nsa_select", dt, shape, &b, in_bytes + out_bytes, 2 * pairs * (double)(d + dv));
        bench_block_overlap("this shape's topk", idx, N2, KC, seq_vals, 1, t / BS);
    } else {
        /* the forward's outputs are the grad's inputs */
        b.ws = bench_alloc_zero(b.ws_size);
        b.runner = bench_runner(2);
        run_once(&b);
        free(b.ws);
        void *dy = bench_alloc_random(dt, (size_t)(t * N1 * dv), 5);
        void *dq = bench_alloc_zero((size_t)(t * N1 * d) * es);
        void *dk = bench_alloc_zero((size_t)(t * N2 * d) * es);
        void *dvv = bench_alloc_zero((size_t)(t * N2 * dv) * es);
        spa_tensor tdy = bench_tensor(dt, 3, od, dy), tdq = bench_tensor(dt, 3, qd, dq),
                   tdk = bench_tensor(dt, 3, kd, dk), tdv = bench_tensor(dt, 3, vd, dvv);
        if (spa_nsa_select_grad_get_workspace_size(&tq, &tk, &tv, &to, &tdy, &tmx, &tsm, &ti, &seq,
                                                   &seq, NULL, scale, BS, KC, N1, "TND", 0, &tdq,
                                                   &tdk, &tdv, &b.ws_size, &b.ex) != SPA_OK) {
            fprintf(stderr, "nsa_select_grad bench: phase 1 failed\n");
            exit(1);
        }
        b.run = spa_nsa_select_grad;
        /* reads q, k, v, topk, O, dY, max, sum; writes dq, dk, dv */
        const double bytes = in_bytes + out_bytes + (double)(t * N1 * dv) * (double)es +
                             (double)(t * N1 * d + t * N2 * (d + dv)) * (double)es;
        time_threads("nsa_select_grad", dt, shape, &b, bytes, 2 * pairs * (double)(3 * d + 2 * dv));
        free(dy), free(dq), free(dk), free(dvv);
    }
    free(q), free(k), free(v), free(idx), free(o), free(mx), free(sm);
}

static const spa_dtype bench_dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};

void bench_nsa_select(void)
{
    for (int i = 0; i < 4; i++) {
        bench_shape(bench_dts[i], "bench", 4096, 128, 128, 0);
        bench_shape(bench_dts[i], "bench_half", 2048, 128, 128, 0);
        bench_shape(bench_dts[i], "bench_d192", 2048, 192, 128, 0);
        bench_shape(bench_dts[i], "layer_8192", 8192, 128, 128, 0);
    }
}

void bench_nsa_select_grad(void)
{
    for (int i = 0; i < 4; i++) {
        bench_shape(bench_dts[i], "bench_half", 2048, 128, 128, 1);
        bench_shape(bench_dts[i], "bench_d192", 2048, 192, 128, 1);
        bench_shape(bench_dts[i], "layer_8192", 8192, 128, 128, 1);
    }
}
