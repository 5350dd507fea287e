/* Selected attention on a KV cache, one decode step (spa_nsa_select_infer,
 * both phases: a decode step plans anew for its own indices). The shape of
 * NSA's paper configuration: one sequence, one new query, HQ 16, H 1,
 * D = Dv = 128, selected blocks of 64, S = 16 of them (the current one and
 * 15 others), a paged cache of 128-row pages in a shuffled order, at
 * contexts 8k, 32k and 128k. Each timed call selects other blocks (eight
 * index sets in turn), so it reads its rows from where the cache lives, not
 * from the previous call's. The bytes are what the step must read (its
 * selected rows, q, the indices, the pages' table entries) and write (o);
 * FLOPs count each multiply-add as 2. The roofline bound printed under each
 * line is max(bytes / triad, FLOPs / FMA peak), both measured in this run.
 * For comparison, nsa_select_prefix: the training operator asked for the
 * same one query (T1 = 1, T2 = the context), which makes the whole cache
 * f32 on every call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { HQ = 16, HK = 1, D = 128, BS = 64, S = 16, PAGE = 128, SETS = 8 };

typedef struct infer_bench {
    spa_tensor q, k, v, topk[SETS], table, o;
    spa_int_array sq, len;
    int64_t qn[1], ctx[1];
    void *ws;
    uint64_t ws_size;
    const spa_runner *runner;
    int set;
} infer_bench;

static void step(void *arg)
{
    infer_bench *b = arg;
    spa_executor ex;
    uint64_t size;
    const spa_tensor *ti = &b->topk[b->set];
    b->set = (b->set + 1) % SETS;
    if (spa_nsa_select_infer_get_workspace_size(&b->q, &b->k, &b->v, ti, &b->table, &b->sq, &b->len,
                                                0.08838834764831845, BS, &b->o, &size, &ex) != SPA_OK ||
        size > b->ws_size || spa_nsa_select_infer(b->ws, size, &ex, b->runner) != SPA_OK) {
        fprintf(stderr, "nsa_select_infer bench: call failed\n");
        exit(1);
    }
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

static void bench_ctx(spa_dtype dt, int64_t ctx, const char *shape)
{
    if (!bench_wanted(dt, shape))
        return;
    const size_t es = bench_dtype_size(dt);
    const int64_t pages = ctx / PAGE, blocks = ctx / BS;
    infer_bench b;
    memset(&b, 0, sizeof b);
    const int64_t qd[3] = {1, HQ, D}, kd[4] = {pages, PAGE, HK, D}, od[3] = {1, HQ, D};
    const int64_t id[3] = {1, HK, S}, td[2] = {1, pages};
    void *q = bench_alloc_random(dt, (size_t)(HQ * D), 1);
    void *k = bench_alloc_random(dt, (size_t)(ctx * HK * D), 2);
    void *v = bench_alloc_random(dt, (size_t)(ctx * HK * D), 3);
    void *o = bench_alloc_zero((size_t)(HQ * D) * es);
    int32_t *table = bench_alloc_zero(sizeof(int32_t) * (size_t)pages);
    uint64_t seed = 7;
    for (int64_t i = 0; i < pages; i++)
        table[i] = (int32_t)i;
    for (int64_t i = pages - 1; i > 0; i--) {
        const int64_t j = (int64_t)(lcg(&seed) % (uint64_t)(i + 1));
        const int32_t x = table[i];
        table[i] = table[j], table[j] = x;
    }
    int32_t *idx = bench_alloc_zero(sizeof(int32_t) * SETS * S);
    for (int s = 0; s < SETS; s++) {
        idx[s * S] = (int32_t)(blocks - 1); /* the current block, then 15 distinct others */
        for (int i = 1; i < S; i++) {
            int32_t x;
            int fresh;
            do {
                x = (int32_t)(lcg(&seed) % (uint64_t)(blocks - 1));
                fresh = 1;
                for (int j = 0; j < i; j++)
                    fresh &= idx[s * S + j] != x;
            } while (!fresh);
            idx[s * S + i] = x;
        }
        b.topk[s] = bench_tensor(SPA_INT32, 3, id, idx + s * S);
    }
    b.q = bench_tensor(dt, 3, qd, q), b.k = bench_tensor(dt, 4, kd, k), b.v = bench_tensor(dt, 4, kd, v);
    b.o = bench_tensor(dt, 3, od, o), b.table = bench_tensor(SPA_INT32, 2, td, table);
    b.qn[0] = 1, b.ctx[0] = ctx;
    b.sq.data = b.qn, b.sq.size = 1, b.len.data = b.ctx, b.len.size = 1;
    spa_executor ex;
    if (spa_nsa_select_infer_get_workspace_size(&b.q, &b.k, &b.v, &b.topk[0], &b.table, &b.sq, &b.len,
                                                0.08838834764831845, BS, &b.o, &b.ws_size, &ex) != SPA_OK) {
        fprintf(stderr, "nsa_select_infer bench: phase 1 failed\n");
        exit(1);
    }
    b.ws = bench_alloc_zero(b.ws_size);
    /* read: q, the selected rows of k and v, the indices, a table entry per
     * page they touch; written: o */
    const double rows = (double)S * BS;
    const double bytes = (double)(HQ * D) * (double)es * 2 + rows * HK * 2 * D * (double)es + S * 4.0 +
                         rows / PAGE * 2 * 4.0;
    const double flops = 2.0 * HQ * rows * (2 * D);
    unsigned threads[8];
    const int nt = bench_thread_counts(threads, 8);
    for (int i = 0; i < nt; i++) {
        b.runner = bench_runner(threads[i]);
        const double ms = bench_time_ms(step, &b);
        bench_report("nsa_select_infer", dt, shape, threads[i], ms, bytes, flops);
        const double t_mem = bytes / (bench_live_triad_gbps(threads[i]) * 1e6);
        const double t_fma = flops / (bench_live_fma_gflops(threads[i]) * 1e6);
        const double bound = t_mem > t_fma ? t_mem : t_fma;
        printf("#   decode step: %.0f KiB read, %.2f MFLOP; roofline bound %.4f ms (%s), the step %.1fx of it\n",
               bytes / 1024.0, flops / 1e6, bound, t_mem > t_fma ? "memory" : "FMA", ms / bound);
    }
    free(b.ws), free(q), free(k), free(v), free(o), free(table), free(idx);
}

/* The training operator on the same single query: T1 = 1 against T2 = ctx
 * keys (no causal mask), the kernel rows of the whole cache made f32. */
typedef struct prefix_call {
    void *ws;
    uint64_t size;
    spa_executor ex;
    const spa_runner *runner;
} prefix_call;

static void prefix_run(void *arg)
{
    prefix_call *c = arg;
    if (spa_nsa_select(c->ws, c->size, &c->ex, c->runner) != SPA_OK) {
        fprintf(stderr, "nsa_select_prefix bench: run failed\n");
        exit(1);
    }
}

static void bench_prefix(spa_dtype dt, int64_t ctx, const char *shape)
{
    if (!bench_wanted(dt, shape))
        return;
    const size_t es = bench_dtype_size(dt);
    const int64_t t2 = ctx - 1; /* not a multiple of the block: the partial last block */
    const int64_t qd[3] = {1, HQ, D}, kd[3] = {t2, HK, D}, id[3] = {1, HK, S}, sd[3] = {1, HQ, 8};
    void *q = bench_alloc_random(dt, (size_t)(HQ * D), 1);
    void *k = bench_alloc_random(dt, (size_t)(t2 * HK * D), 2);
    void *v = bench_alloc_random(dt, (size_t)(t2 * HK * D), 3);
    void *o = bench_alloc_zero((size_t)(HQ * D) * es);
    float *mx = bench_alloc_zero(sizeof(float) * HQ * 8), *sm = bench_alloc_zero(sizeof(float) * HQ * 8);
    int32_t *idx = bench_alloc_zero(sizeof(int32_t) * S);
    for (int i = 0; i < S; i++)
        idx[i] = (int32_t)(t2 / BS - i);
    const int64_t one[1] = {1}, kvl[1] = {t2};
    const spa_int_array sq = {one, 1}, skv = {kvl, 1};
    spa_tensor tq = bench_tensor(dt, 3, qd, q), tk = bench_tensor(dt, 3, kd, k), tv = bench_tensor(dt, 3, kd, v),
               ti = bench_tensor(SPA_INT32, 3, id, idx), to = bench_tensor(dt, 3, qd, o),
               tmx = bench_tensor(SPA_FLOAT32, 3, sd, mx), tsm = bench_tensor(SPA_FLOAT32, 3, sd, sm);
    prefix_call c;
    if (spa_nsa_select_get_workspace_size(&tq, &tk, &tv, &ti, NULL, &sq, &skv, 0.0884, HQ, "TND", 0, BS, S, &tmx,
                                          &tsm, &to, &c.size, &c.ex) != SPA_OK) {
        fprintf(stderr, "nsa_select_prefix bench: phase 1 failed\n");
        exit(1);
    }
    c.ws = bench_alloc_zero(c.size);
    unsigned threads[8];
    const int nt = bench_thread_counts(threads, 8);
    for (int i = 0; i < nt; i++) {
        c.runner = bench_runner(threads[i]);
        bench_report("nsa_select_prefix", dt, shape, threads[i], bench_time_ms(prefix_run, &c),
                     (double)S * BS * HK * 2 * D * (double)es, 2.0 * HQ * S * BS * 2 * D);
    }
    free(c.ws), free(q), free(k), free(v), free(o), free(mx), free(sm), free(idx);
}

void bench_nsa_select_infer(void)
{
    static const spa_dtype dts[2] = {SPA_FLOAT32, SPA_BFLOAT16};
    for (int i = 0; i < 2; i++) {
        bench_ctx(dts[i], 8192, "decode_8k");
        bench_ctx(dts[i], 32768, "decode_32k");
        bench_ctx(dts[i], 131072, "decode_128k");
        bench_prefix(dts[i], 8192, "decode_8k");
        bench_prefix(dts[i], 32768, "decode_32k");
    }
}
