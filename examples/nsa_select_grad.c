/* NsaSelectedAttentionGrad, bf16, after its forward: 12 query heads on 4 kv
 * heads, D 192 with Dv 128, two batches with different query and key lengths.
 * Prints one line of the demo table. The check uses two identities of the
 * gradient (each row of P sums to 1, so each row of dS sums to 0):
 *   sum over kv rows of dV = sum over queries of dY (per kv head, channel),
 *   sum over kv rows of dK = 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spattn/runner.h"
#include "spattn/spattn.h"

enum { SQ0 = 300, SQ1 = 212, SK0 = 512, SK1 = 384, T1 = SQ0 + SQ1, T2 = SK0 + SK1 };
enum { N1 = 12, N2 = 4, G = N1 / N2, D = 192, DV = 128, BS = 64, K = 4 };

static uint16_t bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t *filled(long n, float freq)
{
    uint16_t *p = malloc(sizeof(uint16_t) * (size_t)n);
    for (long i = 0; i < n; i++)
        p[i] = bf16(sinf(freq * (float)i + 0.3f));
    return p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void)
{
    uint16_t *q = filled((long)T1 * N1 * D, 0.29f), *k = filled((long)T2 * N2 * D, 0.13f);
    uint16_t *v = filled((long)T2 * N2 * DV, 0.07f), *dy = filled((long)T1 * N1 * DV, 0.41f);
    uint16_t *o = calloc((size_t)T1 * N1 * DV, 2), *dq = calloc((size_t)T1 * N1 * D, 2);
    uint16_t *dk = calloc((size_t)T2 * N2 * D, 2), *dv = calloc((size_t)T2 * N2 * DV, 2);
    float *smax = calloc((size_t)T1 * N1 * 8, 4), *ssum = calloc((size_t)T1 * N1 * 8, 4);
    int32_t *topk = malloc(sizeof(int32_t) * T1 * N2 * K);
    for (int t = 0; t < T1; t++) {
        int blocks = (t < SQ0 ? SK0 : SK1) / BS;
        for (int n2 = 0; n2 < N2; n2++)
            for (int i = 0; i < K; i++)
                topk[(t * N2 + n2) * K + i] = (t * 7 + n2 + i * 2) % blocks;
    }
    const int64_t seq_q_v[2] = {SQ0, T1}, seq_kv_v[2] = {SK0, T2};
    const spa_int_array seq_q = {seq_q_v, 2}, seq_kv = {seq_kv_v, 2};
    const int64_t qd[3] = {T1, N1, D}, kd[3] = {T2, N2, D}, vd[3] = {T2, N2, DV};
    const int64_t od[3] = {T1, N1, DV}, td[3] = {T1, N2, K}, sd[3] = {T1, N1, 8};
    spa_tensor tq, tk, tv, to, tdy, tmax, tsum, tt, tdq, tdk, tdv;
    spa_tensor_init(&tq, SPA_BFLOAT16, 3, qd, q);
    spa_tensor_init(&tk, SPA_BFLOAT16, 3, kd, k);
    spa_tensor_init(&tv, SPA_BFLOAT16, 3, vd, v);
    spa_tensor_init(&to, SPA_BFLOAT16, 3, od, o);
    spa_tensor_init(&tdy, SPA_BFLOAT16, 3, od, dy);
    spa_tensor_init(&tmax, SPA_FLOAT32, 3, sd, smax);
    spa_tensor_init(&tsum, SPA_FLOAT32, 3, sd, ssum);
    spa_tensor_init(&tt, SPA_INT32, 3, td, topk);
    spa_tensor_init(&tdq, SPA_BFLOAT16, 3, qd, dq);
    spa_tensor_init(&tdk, SPA_BFLOAT16, 3, kd, dk);
    spa_tensor_init(&tdv, SPA_BFLOAT16, 3, vd, dv);
    const double scale = 1.0 / sqrt((double)D);

    uint64_t fwd_ws, grad_ws;
    spa_executor fwd, grad;
    spa_status st = spa_nsa_select_get_workspace_size(&tq, &tk, &tv, &tt, NULL, &seq_q, &seq_kv,
                                                      scale, N1, "TND", 0, BS, K, &tmax, &tsum,
                                                      &to, &fwd_ws, &fwd);
    if (st == SPA_OK)
        st = spa_nsa_select_grad_get_workspace_size(&tq, &tk, &tv, &to, &tdy, &tmax, &tsum, &tt,
                                                    &seq_q, &seq_kv, NULL, scale, BS, K, N1, "TND",
                                                    0, &tdq, &tdk, &tdv, &grad_ws, &grad);
    if (st != SPA_OK) {
        printf("nsa_select_grad: phase 1 failed (status %d)\n", (int)st);
        return 1;
    }
    void *ws = malloc((fwd_ws > grad_ws ? fwd_ws : grad_ws) + 1);
    spa_pool pool;
    if (spa_pool_start(&pool, 2) != 0)
        return 1;
    spa_runner runner = spa_pool_runner(&pool);
    st = spa_nsa_select(ws, fwd_ws, &fwd, &runner);
    double t0 = now_s();
    const int reps = 3;
    for (int r = 0; r < reps && st == SPA_OK; r++)
        st = spa_nsa_select_grad(ws, grad_ws, &grad, &runner);
    double sec = (now_s() - t0) / reps;
    spa_pool_stop(&pool);
    if (st != SPA_OK) {
        printf("nsa_select_grad: phase 2 failed (status %d)\n", (int)st);
        return 1;
    }

    double worst = 0;
    for (int n2 = 0; n2 < N2; n2++) {
        for (int e = 0; e < DV; e++) {
            double got = 0, want = 0, mag = 0;
            for (int r = 0; r < T2; r++)
                got += from_bf16(dv[(r * N2 + n2) * DV + e]);
            for (int t = 0; t < T1; t++)
                for (int g = 0; g < G; g++) {
                    double y = from_bf16(dy[(t * N1 + n2 * G + g) * DV + e]);
                    want += y;
                    mag += fabs(y);
                }
            worst = fmax(worst, fabs(got - want) / mag);
        }
        for (int d = 0; d < D; d++) {
            double sum = 0, mag = 0;
            for (int r = 0; r < T2; r++) {
                double x = from_bf16(dk[(r * N2 + n2) * D + d]);
                sum += x;
                mag += fabs(x);
            }
            worst = fmax(worst, fabs(sum) / (mag + 1e-30));
        }
    }
    /* QK^T recompute, dQ, dK (D each) and dP, dV (Dv each) */
    double flops = 2.0 * T1 * N1 * (double)K * BS * (3.0 * D + 2.0 * DV);
    printf("%-20s %-5s %-28s %-4s rel sums %.1e  %8.3f ms  %6.1f GFLOP/s\n", "nsa_select_grad",
           "bf16", "2 batches N1=12 N2=4 192/128", worst < 2e-2 ? "ok" : "BAD", worst, sec * 1e3,
           flops / sec * 1e-9);
    free(q), free(k), free(v), free(dy), free(o), free(dq), free(dk), free(dv);
    free(smax), free(ssum), free(topk), free(ws);
    return worst < 2e-2 ? 0 : 1;
}
