/* NsaSelectedAttention forward, f32, causal, GQA (16 query heads on 2
 * kv heads), one batch of 1024 tokens: each query attends to 8 blocks of
 * 64 keys chosen by topkIndices. Prints one line of the demo table: the
 * largest difference from a direct evaluation of a few rows, and GFLOP/s on
 * the pthread runner. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "spattn/runner.h"
#include "spattn/spattn.h"

enum { S = 1024, N1 = 16, N2 = 2, G = N1 / N2, D = 128, BS = 64, K = 8 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Direct evaluation of one output row (spec/nsa.md 3.2, f32 data). */
static double check_row(const float *q, const float *k, const float *v, const int32_t *topk,
                        const float *out, int t, int h, float scale)
{
    int n2 = h / G;
    double z[K * BS], m = -DBL_MAX, l = 0;
    for (int i = 0; i < K; i++)
        for (int j = 0; j < BS; j++) {
            int p = topk[(t * N2 + n2) * K + i] * BS + j;
            double s = 0;
            for (int d = 0; d < D; d++)
                s += (double)q[(t * N1 + h) * D + d] * k[(p * N2 + n2) * D + d];
            z[i * BS + j] = p > t ? -FLT_MAX : scale * s; /* causal */
            m = z[i * BS + j] > m ? z[i * BS + j] : m;
        }
    for (int c = 0; c < K * BS; c++)
        l += exp(z[c] - m);
    double err = 0;
    for (int e = 0; e < D; e++) {
        double o = 0;
        for (int c = 0; c < K * BS; c++) {
            int p = topk[(t * N2 + n2) * K + c / BS] * BS + c % BS;
            o += exp(z[c] - m) / l * v[(p * N2 + n2) * D + e];
        }
        double diff = fabs(o - out[(t * N1 + h) * D + e]);
        err = diff > err ? diff : err;
    }
    return err;
}

int main(void)
{
    float *q = malloc(sizeof(float) * S * N1 * D), *k = malloc(sizeof(float) * S * N2 * D);
    float *v = malloc(sizeof(float) * S * N2 * D), *out = malloc(sizeof(float) * S * N1 * D);
    float *smax = malloc(sizeof(float) * S * N1 * 8), *ssum = malloc(sizeof(float) * S * N1 * 8);
    int32_t *topk = malloc(sizeof(int32_t) * S * N2 * K);
    for (long i = 0; i < (long)S * N1 * D; i++)
        q[i] = sinf(0.37f * (float)i);
    for (long i = 0; i < (long)S * N2 * D; i++) {
        k[i] = cosf(0.11f * (float)i);
        v[i] = sinf(0.05f * (float)i + 1.0f);
    }
    /* The query's own block first, then earlier blocks (and later ones, which
     * the causal mask hides), as NSA's selection would give. */
    for (int t = 0; t < S; t++)
        for (int n2 = 0; n2 < N2; n2++)
            for (int i = 0; i < K; i++)
                topk[(t * N2 + n2) * K + i] = (t / BS + 4 * (S / BS) - i * 3 + n2) % (S / BS);
    uint8_t mask[1] = {1}; /* present: with sparseMode 2 it selects causal masking */

    const int64_t seq[1] = {S};
    const spa_int_array seq_q = {seq, 1}, seq_kv = {seq, 1};
    const int64_t qd[3] = {S, N1, D}, kd[3] = {S, N2, D}, td[3] = {S, N2, K}, sd[3] = {S, N1, 8};
    const int64_t md[2] = {1, 1};
    spa_tensor tq, tk, tv, tt, tm, tmax, tsum, to;
    spa_tensor_init(&tq, SPA_FLOAT32, 3, qd, q);
    spa_tensor_init(&tk, SPA_FLOAT32, 3, kd, k);
    spa_tensor_init(&tv, SPA_FLOAT32, 3, kd, v);
    spa_tensor_init(&tt, SPA_INT32, 3, td, topk);
    spa_tensor_init(&tm, SPA_UINT8, 2, md, mask);
    spa_tensor_init(&tmax, SPA_FLOAT32, 3, sd, smax);
    spa_tensor_init(&tsum, SPA_FLOAT32, 3, sd, ssum);
    spa_tensor_init(&to, SPA_FLOAT32, 3, qd, out);
    const float scale = 1.0f / sqrtf((float)D);

    uint64_t ws_size;
    spa_executor ex;
    spa_status st = spa_nsa_select_get_workspace_size(&tq, &tk, &tv, &tt, &tm, &seq_q, &seq_kv, scale,
                                                      N1, "TND", 2, BS, K, &tmax, &tsum, &to,
                                                      &ws_size, &ex);
    if (st != SPA_OK) {
        printf("nsa_select: phase 1 failed (status %d)\n", (int)st);
        return 1;
    }
    void *ws = malloc(ws_size ? ws_size : 1);
    spa_pool pool;
    if (spa_pool_start(&pool, 2) != 0)
        return 1;
    spa_runner runner = spa_pool_runner(&pool);
    double t0 = now_s();
    const int reps = 5;
    for (int r = 0; r < reps && st == SPA_OK; r++)
        st = spa_nsa_select(ws, ws_size, &ex, &runner);
    double sec = (now_s() - t0) / reps;
    spa_pool_stop(&pool);
    if (st != SPA_OK) {
        printf("nsa_select: phase 2 failed (status %d)\n", (int)st);
        return 1;
    }
    double err = 0;
    const int rows[4][2] = {{0, 0}, {63, 5}, {700, 9}, {1023, 15}};
    for (int i = 0; i < 4; i++) {
        double e = check_row(q, k, v, topk, out, rows[i][0], rows[i][1], scale);
        err = e > err ? e : err;
    }
    double flops = 2.0 * 2.0 * S * N1 * (double)K * BS * D; /* QK^T and PV */
    printf("%-20s %-5s %-28s %-4s max|err| %.1e  %8.3f ms  %6.1f GFLOP/s\n", "nsa_select", "f32",
           "S=1024 N1=16 N2=2 D=128 8x64", err < 1e-4 ? "ok" : "BAD", err, sec * 1e3,
           flops / sec * 1e-9);
    free(q), free(k), free(v), free(out), free(smax), free(ssum), free(topk), free(ws);
    return err < 1e-4 ? 0 : 1;
}
