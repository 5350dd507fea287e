/* Sliding-window attention and its grad. Shape "bench": one sequence of
 * T 8192, N1 16, N2 1, D = Dv = 128, window 512 (fla's convention: the
 * query's own key and the 511 before it). FLOPs count each multiply-add as
 * 2 and only the products over the band (a token t < 511 sees t + 1 keys):
 * forward QKᵀ and PV; grad QKᵀ (recomputed), dP, dV, dQ and dK. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

enum { N1 = 16, N2 = 1, W = 512 };

typedef struct swa_bench {
    void *ws;
    uint64_t ws_size;
    spa_executor ex;
    const spa_runner *runner;
    spa_status (*run)(void *, uint64_t, const spa_executor *, const spa_runner *);
} swa_bench;

static void run_once(void *arg)
{
    swa_bench *b = arg;
    if (b->run(b->ws, b->ws_size, &b->ex, b->runner) != SPA_OK) {
        fprintf(stderr, "swa bench: run failed\n");
        exit(1);
    }
}

static void time_threads(const char *op, spa_dtype dt, const char *shape, swa_bench *b,
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

static void bench_shape(spa_dtype dt, const char *shape, int64_t t, int64_t d, int64_t dv, int grad)
{
    if (!bench_wanted(dt, shape))
        return;
    const size_t es = bench_dtype_size(dt);
    const int64_t seq_vals[1] = {t};
    const spa_int_array seq = {seq_vals, 1};
    const int64_t qd[3] = {t, N1, d}, kd[3] = {t, N2, d}, vd[3] = {t, N2, dv}, od[3] = {t, N1, dv},
                  sd[3] = {t, N1, 8};
    void *q = bench_alloc_random(dt, (size_t)(t * N1 * d), 1);
    void *k = bench_alloc_random(dt, (size_t)(t * N2 * d), 2);
    void *v = bench_alloc_random(dt, (size_t)(t * N2 * dv), 3);
    void *o = bench_alloc_zero((size_t)(t * N1 * dv) * es);
    const spa_dtype st = dt == SPA_FLOAT64 ? SPA_FLOAT64 : SPA_FLOAT32;
    void *mx = bench_alloc_zero((size_t)(t * N1 * 8) * bench_dtype_size(st));
    void *sm = bench_alloc_zero((size_t)(t * N1 * 8) * bench_dtype_size(st));
    spa_tensor tq = bench_tensor(dt, 3, qd, q), tk = bench_tensor(dt, 3, kd, k),
               tv = bench_tensor(dt, 3, vd, v), to = bench_tensor(dt, 3, od, o),
               tmx = bench_tensor(st, 3, sd, mx), tsm = bench_tensor(st, 3, sd, sm);
    swa_bench b;
    if (spa_swa_get_workspace_size(&tq, &tk, &tv, &seq, 0, SPA_SWA_SCALE_DEFAULT, N1, "TND", W,
                                   SPA_SWA_WINDOW_KEYS, &tmx, &tsm, &to, &b.ws_size, &b.ex) != SPA_OK) {
        fprintf(stderr, "swa bench: phase 1 failed\n");
        exit(1);
    }
    b.run = spa_swa;
    double keys = 0.0; /* (query token, key) pairs of the bands */
    for (int64_t i = 0; i < t; i++)
        keys += (double)(i + 1 < W ? i + 1 : W);
    const double pairs = keys * N1;
    const double in_bytes = (double)(t * N1 * d + t * N2 * (d + dv)) * (double)es;
    const double out_bytes = (double)(t * N1 * dv) * (double)es + 2.0 * (double)(t * N1 * 8) * 4;
    if (!grad) {
        time_threads("swa", dt, shape, &b, in_bytes + out_bytes, 2 * pairs * (double)(d + dv));
    } else {
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
        if (spa_swa_grad_get_workspace_size(&tq, &tk, &tv, &to, &tdy, &tmx, &tsm, &seq, 0,
                                            SPA_SWA_SCALE_DEFAULT, N1, "TND", W, SPA_SWA_WINDOW_KEYS,
                                            &tdq, &tdk, &tdv, &b.ws_size, &b.ex) != SPA_OK) {
            fprintf(stderr, "swa_grad bench: phase 1 failed\n");
            exit(1);
        }
        b.run = spa_swa_grad;
        const double bytes = in_bytes + out_bytes + (double)(t * N1 * dv) * (double)es +
                             (double)(t * N1 * d + t * N2 * (d + dv)) * (double)es;
        time_threads("swa_grad", dt, shape, &b, bytes, 2 * pairs * (double)(3 * d + 2 * dv));
        free(dy), free(dq), free(dk), free(dvv);
    }
    free(q), free(k), free(v), free(o), free(mx), free(sm);
}

static const spa_dtype bench_dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};

void bench_swa(void)
{
    for (int i = 0; i < 3; i++)
        bench_shape(bench_dts[i], "bench", 8192, 128, 128, 0);
}

void bench_swa_grad(void)
{
    for (int i = 0; i < 3; i++)
        bench_shape(bench_dts[i], "bench", 8192, 128, 128, 1);
}
