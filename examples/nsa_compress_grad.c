/* NsaCompressGrad with bf16 tensors on a thread pool (the pthread runner that
 * ships beside the core), with a workspace sized by phase 1.
 *
 * One batch of 4096 tokens, 8 heads of 128 channels, windows of 64 every 32.
 * Prints one line of the demo table: the largest relative difference of
 * weightGrad from a direct fp64 evaluation, and the throughput. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spattn/runner.h"
#include "spattn/spattn.h"

enum { T = 4096, N = 8, D = 128, BS = 64, ST = 32, M = (T - BS) / ST + 1 };

static uint16_t to_bf16(float f) /* round to nearest even (finite inputs) */
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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void)
{
    uint16_t *x = malloc(sizeof(uint16_t) * T * N * D), *dy = malloc(sizeof(uint16_t) * M * N * D);
    uint16_t *dx = malloc(sizeof(uint16_t) * T * N * D), w[BS * N], dw[BS * N];
    for (long i = 0; i < (long)T * N * D; i++)
        x[i] = to_bf16(cosf(0.001f * (float)i));
    for (long i = 0; i < (long)M * N * D; i++)
        dy[i] = to_bf16(sinf(0.003f * (float)i));
    for (int i = 0; i < BS * N; i++)
        w[i] = to_bf16(0.01f * (float)(i % 13));

    const int64_t seq_ends[1] = {T};
    const spa_int_array seq = {seq_ends, 1};
    const int64_t xd[3] = {T, N, D}, wd[2] = {BS, N}, yd[3] = {M, N, D};
    spa_tensor tdy, tx, tw, tdx, tdw;
    spa_tensor_init(&tdy, SPA_BFLOAT16, 3, yd, dy);
    spa_tensor_init(&tx, SPA_BFLOAT16, 3, xd, x);
    spa_tensor_init(&tw, SPA_BFLOAT16, 2, wd, w);
    spa_tensor_init(&tdx, SPA_BFLOAT16, 3, xd, dx);
    spa_tensor_init(&tdw, SPA_BFLOAT16, 2, wd, dw);

    uint64_t ws_size;
    spa_executor ex;
    spa_status st = spa_nsa_compress_grad_get_workspace_size(&tdy, &tx, &tw, &seq, BS, ST, 0, "TND",
                                                             &tdx, &tdw, &ws_size, &ex);
    if (st != SPA_OK) {
        printf("nsa_compress_grad: phase 1 failed (status %d)\n", (int)st);
        return 1;
    }
    void *ws = malloc(ws_size);
    spa_pool pool;
    if (spa_pool_start(&pool, 2) != 0)
        return 1;
    spa_runner runner = spa_pool_runner(&pool);
    double t0 = now_s();
    int reps = 20;
    for (int r = 0; r < reps && st == SPA_OK; r++)
        st = spa_nsa_compress_grad(ws, ws_size, &ex, &runner);
    double sec = (now_s() - t0) / reps;
    spa_pool_stop(&pool);
    if (st != SPA_OK) {
        printf("nsa_compress_grad: phase 2 failed (status %d)\n", (int)st);
        return 1;
    }

    double max_rel = 0;
    for (int j = 0; j < BS; j++)
        for (int n = 0; n < N; n++) {
            double want = 0, mag = 0;
            for (int i = 0; i < M; i++)
                for (int d = 0; d < D; d++) {
                    double term = (double)from_bf16(dy[((long)i * N + n) * D + d]) *
                                  from_bf16(x[((long)(i * ST + j) * N + n) * D + d]);
                    want += term;
                    mag += fabs(term);
                }
            double rel = fabs(want - from_bf16(dw[j * N + n])) / (fabs(want) + 1e-6 * mag);
            max_rel = rel > max_rel ? rel : max_rel;
        }
    double bytes = 2.0 * ((double)T * N * D * 2 + (double)M * N * D + 2.0 * BS * N);
    printf("%-20s %-5s %-28s %-4s max rel %.1e  %8.4f ms  %6.2f GB/s\n", "nsa_compress_grad",
           "bf16", "T=4096 N=8 D=128 bs=64 st=32", max_rel < 1e-2 ? "ok" : "BAD", max_rel,
           sec * 1e3, bytes / sec * 1e-9);
    free(x), free(dy), free(dx), free(ws);
    return max_rel < 1e-2 ? 0 : 1;
}
