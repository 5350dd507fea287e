/* Compressed attention on a cache of compressed keys, one decode step
 * (spa_nsa_compress_attention_infer, both phases, as a decode step runs
 * it). NSA's paper configuration: one sequence, one new query, HQ 16, H 1,
 * D = Dv = 128, compression blocks l 32 with stride d 16, selection blocks
 * l' 64, K 16, causal; a paged cache of (ctx - l) / d + 1 compressed keys in
 * 128-row pages in a shuffled order, at contexts 8k, 32k and 128k. The bytes
 * are what the step must read (every compressed key and value row, q, the
 * pages' table entries) and write (o, the top-K); FLOPs count each
 * multiply-add as 2 (scores and P V). The roofline bound printed under each
 * line is max(bytes / triad, FLOPs / FMA peak), both measured in this run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { HQ = 16, HK = 1, D = 128, L = 32, ST = 16, LS = 64, K = 16, PAGE = 128 };

typedef struct cattn_infer_bench {
    spa_tensor q, k, v, table, o, topk;
    spa_int_array sq, cmp, len;
    int64_t qn[1], cn[1], ln[1];
    void *ws;
    uint64_t ws_size;
    const spa_runner *runner;
} cattn_infer_bench;

static void step(void *arg)
{
    cattn_infer_bench *b = arg;
    spa_executor ex;
    uint64_t size;
    if (spa_nsa_compress_attention_infer_get_workspace_size(&b->q, &b->k, &b->v, &b->table, &b->sq, &b->cmp, &b->len,
                                                            0.08838834764831845, 1, L, ST, LS, K, &b->o, &b->topk,
                                                            &size, &ex) != SPA_OK ||
        size > b->ws_size || spa_nsa_compress_attention_infer(b->ws, size, &ex, b->runner) != SPA_OK) {
        fprintf(stderr, "nsa_cattn_infer bench: call failed\n");
        exit(1);
    }
}

static void bench_ctx(spa_dtype dt, int64_t ctx, const char *shape)
{
    if (!bench_wanted(dt, shape))
        return;
    const size_t es = bench_dtype_size(dt);
    const int64_t cmp = (ctx - L) / ST + 1, pages = (cmp + PAGE - 1) / PAGE;
    cattn_infer_bench b;
    memset(&b, 0, sizeof b);
    const int64_t qd[3] = {1, HQ, D}, kd[4] = {pages, PAGE, HK, D}, od[3] = {1, HQ, D}, id[3] = {1, HK, K};
    const int64_t td[2] = {1, pages};
    void *q = bench_alloc_random(dt, (size_t)(HQ * D), 1);
    void *k = bench_alloc_random(dt, (size_t)(pages * PAGE * HK * D), 2);
    void *v = bench_alloc_random(dt, (size_t)(pages * PAGE * HK * D), 3);
    void *o = bench_alloc_zero((size_t)(HQ * D) * es);
    int32_t *topk = bench_alloc_zero(sizeof(int32_t) * K);
    int32_t *table = bench_alloc_zero(sizeof(int32_t) * (size_t)pages);
    uint64_t seed = 11;
    bench_shuffled_pages(table, pages, &seed);
    b.q = bench_tensor(dt, 3, qd, q), b.k = bench_tensor(dt, 4, kd, k), b.v = bench_tensor(dt, 4, kd, v);
    b.o = bench_tensor(dt, 3, od, o), b.topk = bench_tensor(SPA_INT32, 3, id, topk);
    b.table = bench_tensor(SPA_INT32, 2, td, table);
    b.qn[0] = 1, b.cn[0] = cmp, b.ln[0] = ctx;
    b.sq.data = b.qn, b.sq.size = 1, b.cmp.data = b.cn, b.cmp.size = 1, b.len.data = b.ln, b.len.size = 1;
    spa_executor ex;
    if (spa_nsa_compress_attention_infer_get_workspace_size(&b.q, &b.k, &b.v, &b.table, &b.sq, &b.cmp, &b.len,
                                                            0.08838834764831845, 1, L, ST, LS, K, &b.o, &b.topk,
                                                            &b.ws_size, &ex) != SPA_OK) {
        fprintf(stderr, "nsa_cattn_infer bench: phase 1 failed\n");
        exit(1);
    }
    b.ws = bench_alloc_zero(b.ws_size);
    const double bytes = (double)(HQ * D) * (double)es * 2 + (double)cmp * HK * 2 * D * (double)es +
                         (double)pages * 4.0 + K * 4.0;
    const double flops = 2.0 * HQ * (double)cmp * (2 * D);
    unsigned threads[8];
    const int nt = bench_thread_counts(threads, 8);
    for (int i = 0; i < nt; i++) {
        b.runner = bench_runner(threads[i]);
        const double ms = bench_time_ms(step, &b);
        bench_report("nsa_cattn_infer", dt, shape, threads[i], ms, bytes, flops);
        const double t_mem = bytes / (bench_live_triad_gbps(threads[i]) * 1e6);
        const double t_fma = flops / (bench_live_fma_gflops(threads[i]) * 1e6);
        const double bound = t_mem > t_fma ? t_mem : t_fma;
        printf("#   decode step: %lld compressed keys, %.0f KiB read, %.2f MFLOP; roofline bound %.4f ms (%s), "
               "the step %.1fx of it\n",
               (long long)cmp, bytes / 1024.0, flops / 1e6, bound, t_mem > t_fma ? "memory" : "FMA", ms / bound);
    }
    free(b.ws), free(q), free(k), free(v), free(o), free(topk), free(table);
}

void bench_nsa_cattn_infer(void)
{
    static const spa_dtype dts[2] = {SPA_FLOAT32, SPA_BFLOAT16};
    for (int i = 0; i < 2; i++) {
        bench_ctx(dts[i], 8192, "decode_8k");
        bench_ctx(dts[i], 32768, "decode_32k");
        bench_ctx(dts[i], 131072, "decode_128k");
    }
}
