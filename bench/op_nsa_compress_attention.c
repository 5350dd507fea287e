/* NsaCompressAttention and its grad. Shape "bench": one batch of T = 8192
 * query tokens, N1 16, N2 1, D = Dv = 128, compression block 32 stride 16
 * (511 compressed keys), selection block 64, K 16, the causal rule
 * (sparse_mode 2: query s sees key c iff 16 c + 31 <= s). "bench_half":
 * T 2048 (127 keys). FLOPs count each multiply-add as 2 and only the
 * products of the keys each query attends (every key for the 31 fully
 * masked rows): forward QKᵀ and PV; grad QKᵀ (recomputed), dP, dQ, dK, dV. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

enum { N1 = 16, N2 = 1, L = 32, ST = 16, LS = 64, KC = 16 };

typedef struct nsca_bench {
    void *ws;
    uint64_t ws_size;
    spa_executor ex;
    const spa_runner *runner;
    spa_status (*run)(void *, uint64_t, const spa_executor *, const spa_runner *);
} nsca_bench;

static void run_once(void *arg)
{
    nsca_bench *b = arg;
    if (b->run(b->ws, b->ws_size, &b->ex, b->runner) != SPA_OK) {
        fprintf(stderr, "nsa_compress_attention bench: run failed\n");
        exit(1);
    }
}

static void time_threads(const char *op, spa_dtype dt, const char *shape, nsca_bench *b,
                         double bytes, double flops)
{
    unsigned threads[8];
    const int nt = bench_thread_counts(threads, 8);
    b->ws = bench_alloc_zero(b->ws_size);
    for (int i = 0; i < nt; i++) {
        b->runner = bench_runner(threads[i]);
        bench_report(op, dt, shape, threads[i], bench_time_ms(run_once, b), bytes, flops);
    }
    free(b->ws);
}

/* (query token, key) pairs the causal rule attends in one batch of t tokens
 * over c keys; fully masked rows attend every key. */
static double attended_pairs(int64_t t, int64_t c)
{
    double pairs = 0.0;
    for (int64_t s = 0; s < t; s++) {
        int64_t vis = s - L + 1 < 0 ? 0 : (s - L + 1) / ST + 1;
        vis = vis < c ? vis : c;
        pairs += (double)(vis > 0 ? vis : c);
    }
    return pairs;
}

static void bench_shape(spa_dtype dt, const char *shape, int64_t t, int grad)
{
    if (!bench_wanted(dt, shape))
        return;
    const int64_t d = 128, dv = 128, c = (t - L) / ST + 1;
    const size_t es = bench_dtype_size(dt);
    const spa_dtype st = dt == SPA_FLOAT64 ? SPA_FLOAT64 : SPA_FLOAT32;
    const int64_t sq_vals[1] = {t}, sc_vals[1] = {c};
    const spa_int_array sq = {sq_vals, 1}, sc = {sc_vals, 1};
    const int64_t qd[3] = {t, N1, d}, kd[3] = {c, N2, d}, vd[3] = {c, N2, dv}, od[3] = {t, N1, dv},
                  sd[3] = {t, N1, 8}, td[3] = {t, N2, KC};
    void *q = bench_alloc_random(dt, (size_t)(t * N1 * d), 1);
    void *k = bench_alloc_random(dt, (size_t)(c * N2 * d), 2);
    void *v = bench_alloc_random(dt, (size_t)(c * N2 * dv), 3);
    void *o = bench_alloc_zero((size_t)(t * N1 * dv) * es);
    void *mx = bench_alloc_zero((size_t)(t * N1 * 8) * bench_dtype_size(st));
    void *sm = bench_alloc_zero((size_t)(t * N1 * 8) * bench_dtype_size(st));
    void *topk = bench_alloc_zero((size_t)(t * N2 * KC) * 4);
    spa_tensor tq = bench_tensor(dt, 3, qd, q), tk = bench_tensor(dt, 3, kd, k),
               tv = bench_tensor(dt, 3, vd, v), to = bench_tensor(dt, 3, od, o),
               tmx = bench_tensor(st, 3, sd, mx), tsm = bench_tensor(st, 3, sd, sm),
               tt = bench_tensor(SPA_INT32, 3, td, topk);
    const double scale = 1.0 / 11.3137;
    nsca_bench b;
    if (spa_nsa_compress_attention_get_workspace_size(&tq, &tk, &tv, NULL, NULL, &sq, &sc, NULL,
                                                      scale, N1, "TND", 2, L, ST, LS, KC, &tmx,
                                                      &tsm, &to, &tt, &b.ws_size, &b.ex) != SPA_OK) {
        fprintf(stderr, "nsa_compress_attention bench: phase 1 failed\n");
        exit(1);
    }
    b.run = spa_nsa_compress_attention;
    const double pairs = attended_pairs(t, c) * N1;
    const double in_bytes = (double)(t * N1 * d + c * N2 * (d + dv)) * (double)es;
    const double out_bytes = (double)(t * N1 * dv) * (double)es + 2.0 * (double)(t * N1 * 8) * 4 +
                             (double)(t * N2 * KC) * 4;
    if (!grad) {
        time_threads("nsa_compress_attention", dt, shape, &b, in_bytes + out_bytes,
                     2 * pairs * (double)(d + dv));
        /* the selection this op made (the NSA layer's own, on random q and k) */
        bench_block_overlap("the topk output", topk, N2, KC, sq_vals, 1, (t + LS - 1) / LS);
    } else {
        b.ws = bench_alloc_zero(b.ws_size);
        b.runner = bench_runner(2);
        run_once(&b);
        free(b.ws);
        void *dy = bench_alloc_random(dt, (size_t)(t * N1 * dv), 5);
        void *dq = bench_alloc_zero((size_t)(t * N1 * d) * es);
        void *dk = bench_alloc_zero((size_t)(c * N2 * d) * es);
        void *dvv = bench_alloc_zero((size_t)(c * N2 * dv) * es);
        spa_tensor tdy = bench_tensor(dt, 3, od, dy), tdq = bench_tensor(dt, 3, qd, dq),
                   tdk = bench_tensor(dt, 3, kd, dk), tdv = bench_tensor(dt, 3, vd, dvv);
        if (spa_nsa_compress_attention_grad_get_workspace_size(
                &tq, &tk, &tv, &to, &tdy, &tmx, &tsm, NULL, &sq, &sc, scale, N1, "TND", 2, L, ST,
                &tdq, &tdk, &tdv, &b.ws_size, &b.ex) != SPA_OK) {
            fprintf(stderr, "nsa_compress_attention_grad bench: phase 1 failed\n");
            exit(1);
        }
        b.run = spa_nsa_compress_attention_grad;
        const double bytes = in_bytes + out_bytes + (double)(t * N1 * dv) * (double)es +
                             (double)(t * N1 * d + c * N2 * (d + dv)) * (double)es;
        time_threads("nsa_compress_attention_grad", dt, shape, &b, bytes,
                     2 * pairs * (double)(3 * d + 2 * dv));
        free(dy), free(dq), free(dk), free(dvv);
    }
    free(q), free(k), free(v), free(o), free(mx), free(sm), free(topk);
}

static const spa_dtype bench_dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};

void bench_nsa_compress_attention(void)
{
    for (int i = 0; i < 4; i++)
        bench_shape(bench_dts[i], i < 3 ? "bench" : "bench_half", i < 3 ? 8192 : 2048, 0);
}

void bench_nsa_compress_attention_grad(void)
{
    for (int i = 0; i < 4; i++)
        bench_shape(bench_dts[i], i < 3 ? "bench" : "bench_half", i < 3 ? 8192 : 2048, 1);
}
