/* NsaCompress in a firmware-style program: every buffer is static, the
 * executor lives on the stack, and each call's status is checked.
 *
 * Two batches (100 and 60 tokens), 4 heads of 64 channels, windows of 32
 * tokens every 16: 5 + 2 = 7 compressed rows. Prints one line of the demo
 * table: the largest difference from a direct evaluation of the formula,
 * and the throughput of a larger run. */
#include <math.h>
#include <stdio.h>
#include <time.h>

#include "spattn/spattn.h"

enum { T = 160, N = 4, D = 64, BS = 32, ST = 16, M = 7 };

static float input[T][N][D];
static float weight[BS][N];
static float output[M][N][D];
static unsigned char workspace[16 << 10]; /* caller-owned scratch */

static int run(void)
{
    const int64_t seq_ends[2] = {100, 160}; /* cumulative: batch 0 = [0,100), batch 1 = [100,160) */
    const spa_int_array seq = {seq_ends, 2};
    const int64_t in_dims[3] = {T, N, D}, w_dims[2] = {BS, N}, out_dims[3] = {M, N, D};
    spa_tensor in, w, out;
    spa_tensor_init(&in, SPA_FLOAT32, 3, in_dims, input);
    spa_tensor_init(&w, SPA_FLOAT32, 2, w_dims, weight);
    spa_tensor_init(&out, SPA_FLOAT32, 3, out_dims, output);

    uint64_t ws_size = 0;
    spa_executor ex;
    spa_status st = spa_nsa_compress_get_workspace_size(&in, &w, &seq, "TND", BS, ST, 0, &out,
                                                        &ws_size, &ex);
    if (st != SPA_OK || ws_size > sizeof workspace) {
        printf("nsa_compress: phase 1 failed (status %d, workspace %llu)\n", (int)st,
               (unsigned long long)ws_size);
        return 1;
    }
    st = spa_nsa_compress(workspace, ws_size, &ex, NULL); /* NULL: run on this thread */
    if (st != SPA_OK) {
        printf("nsa_compress: phase 2 failed (status %d)\n", (int)st);
        return 1;
    }
    return 0;
}

int main(void)
{
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++)
            for (int d = 0; d < D; d++)
                input[t][n][d] = sinf(0.01f * (float)(t * 131 + n * 17 + d));
    for (int j = 0; j < BS; j++)
        for (int n = 0; n < N; n++)
            weight[j][n] = 1.0f / BS + 0.001f * (float)(j - n);

    clock_t c0 = clock();
    int reps = 2000;
    for (int r = 0; r < reps; r++)
        if (run() != 0)
            return 1;
    double sec = (double)(clock() - c0) / CLOCKS_PER_SEC / reps;

    /* Check against the formula: window i of batch b starts at start_b + i*16. */
    const int starts[M] = {0, 16, 32, 48, 64, 100, 116};
    double max_err = 0;
    for (int i = 0; i < M; i++)
        for (int n = 0; n < N; n++)
            for (int d = 0; d < D; d++) {
                double want = 0;
                for (int j = 0; j < BS; j++)
                    want += (double)input[starts[i] + j][n][d] * weight[j][n];
                double err = fabs(want - output[i][n][d]);
                max_err = err > max_err ? err : max_err;
            }
    double bytes = (double)(sizeof input + sizeof weight + sizeof output);
    printf("%-20s %-5s %-28s %-4s max|err| %.1e  %8.4f ms  %6.2f GB/s\n", "nsa_compress", "f32",
           "T=160 N=4 D=64 bs=32 st=16", max_err < 1e-5 ? "ok" : "BAD", max_err, sec * 1e3,
           bytes / sec * 1e-9);
    return max_err < 1e-5 ? 0 : 1;
}
