/* NsaCompress and NsaCompressGrad at shape `bench`: T 65536 (4 batches of
 * 16384), N 4, D 128, blockSize 32, stride 16. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

enum { T = 65536, B = 4, N = 4, D = 128, BS = 32, ST = 16 };

typedef struct nsac_bench {
    void *ws;
    uint64_t ws_size;
    spa_executor ex;
    const spa_runner *runner;
    spa_status (*run)(void *, uint64_t, const spa_executor *, const spa_runner *);
} nsac_bench;

static void run_once(void *arg)
{
    nsac_bench *b = arg;
    if (b->run(b->ws, b->ws_size, &b->ex, b->runner) != SPA_OK) {
        fprintf(stderr, "nsa_compress bench: run failed\n");
        exit(1);
    }
}

static void time_threads(const char *op, spa_dtype dt, nsac_bench *b, double bytes, double flops)
{
    unsigned threads[8];
    int nt = bench_thread_counts(threads, 8);
    b->ws = bench_alloc_zero(b->ws_size);
    for (int i = 0; i < nt; i++) {
        b->runner = bench_runner(threads[i]);
        bench_report(op, dt, "bench", threads[i], bench_time_ms(run_once, b), bytes, flops);
    }
    free(b->ws);
}

static void bench_dtype(spa_dtype dt, int grad)
{
    if (!bench_wanted(dt, "bench"))
        return;
    const int64_t seq_vals[B] = {T / 4, T / 2, 3 * T / 4, T};
    const spa_int_array seq = {seq_vals, B};
    const int64_t windows = B * ((T / B - BS) / ST + 1);
    const size_t es = bench_dtype_size(dt);
    const int64_t xd[3] = {T, N, D}, wd[2] = {BS, N}, yd[3] = {windows, N, D};
    void *x = bench_alloc_random(dt, (size_t)(T * N * D), 1);
    void *w = bench_alloc_random(dt, (size_t)(BS * N), 2);
    void *y = bench_alloc_random(dt, (size_t)(windows * N * D), 3);
    spa_tensor tx = bench_tensor(dt, 3, xd, x), tw = bench_tensor(dt, 2, wd, w),
               ty = bench_tensor(dt, 3, yd, y);
    nsac_bench b;
    const double x_bytes = (double)(T * N * D) * (double)es, y_bytes = (double)(windows * N * D) * (double)es;
    const double w_bytes = (double)(BS * N) * (double)es;
    const double macs = (double)windows * BS * N * D;
    if (!grad) {
        if (spa_nsa_compress_get_workspace_size(&tx, &tw, &seq, "TND", BS, ST, 0, &ty, &b.ws_size,
                                                &b.ex) != SPA_OK) {
            fprintf(stderr, "nsa_compress bench: phase 1 failed\n");
            exit(1);
        }
        b.run = spa_nsa_compress;
        /* reads input and weight, writes output */
        time_threads("nsa_compress", dt, &b, x_bytes + w_bytes + y_bytes, 2 * macs);
    } else {
        void *dx = bench_alloc_zero((size_t)(T * N * D) * es);
        void *dw = bench_alloc_zero((size_t)(BS * N) * es);
        spa_tensor tdx = bench_tensor(dt, 3, xd, dx), tdw = bench_tensor(dt, 2, wd, dw);
        if (spa_nsa_compress_grad_get_workspace_size(&ty, &tx, &tw, &seq, BS, ST, 0, "TND", &tdx,
                                                     &tdw, &b.ws_size, &b.ex) != SPA_OK) {
            fprintf(stderr, "nsa_compress_grad bench: phase 1 failed\n");
            exit(1);
        }
        b.run = spa_nsa_compress_grad;
        /* reads outputGrad, input, weight; writes inputGrad and weightGrad;
         * a multiply-add for inputGrad and one for weightGrad per (window, j, h, d) */
        time_threads("nsa_compress_grad", dt, &b, y_bytes + 2 * x_bytes + 2 * w_bytes, 4 * macs);
        free(dx);
        free(dw);
    }
    free(x);
    free(w);
    free(y);
}

void bench_nsa_compress(void)
{
    static const spa_dtype dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};
    for (int k = 0; k < 4; k++)
        bench_dtype(dts[k], 0);
}

void bench_nsa_compress_grad(void)
{
    static const spa_dtype dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};
    for (int k = 0; k < 4; k++)
        bench_dtype(dts[k], 1);
}
