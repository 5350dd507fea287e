/* One multi-scale deformable attention call through an installed spattn
 * (tests/cmake/CMakeLists.txt): a value map of ramps sampled at pixel
 * centres, where bilinear sampling returns the pixel itself, so the output
 * is known exactly; with USE_POOL, on the pthread pool. Prints the result
 * and exits non-zero on any difference. */
#include <stdio.h>

#include "spattn/msda.h"
#ifndef USE_POOL
#define USE_POOL 0
#endif
#if USE_POOL
#include "spattn/runner.h"
#endif

enum { H = 4, W = 6, C = 3, NQ = 5 };

int main(void)
{
    static float value[H * W * C], loc[NQ * 2], attn[NQ], out[NQ * C];
    const int64_t shapes[2] = {H, W}, starts[1] = {0};
    for (int i = 0; i < H * W; i++)
        for (int c = 0; c < C; c++)
            value[i * C + c] = (float)(100 * c + i);
    for (int q = 0; q < NQ; q++) { /* pixel (x, y) = (q, q % H) at its centre */
        loc[2 * q] = ((float)q + 0.5f) / W;
        loc[2 * q + 1] = ((float)(q % H) + 0.5f) / H;
        attn[q] = 1.0f;
    }
    spa_tensor tv, ts, tl, tloc, ta, to;
    const int64_t vd[4] = {1, H * W, 1, C}, sd[2] = {1, 2}, ld[1] = {1}, locd[6] = {1, NQ, 1, 1, 1, 2},
                  ad[5] = {1, NQ, 1, 1, 1}, od[3] = {1, NQ, C};
    spa_tensor_init(&tv, SPA_FLOAT32, 4, vd, value);
    spa_tensor_init(&ts, SPA_INT64, 2, sd, (void *)shapes);
    spa_tensor_init(&tl, SPA_INT64, 1, ld, (void *)starts);
    spa_tensor_init(&tloc, SPA_FLOAT32, 6, locd, loc);
    spa_tensor_init(&ta, SPA_FLOAT32, 5, ad, attn);
    spa_tensor_init(&to, SPA_FLOAT32, 3, od, out);
    static unsigned char ws[1 << 16];
    uint64_t size = 0;
    spa_executor ex;
    spa_status st = spa_msda_get_workspace_size(&tv, &ts, &tl, &tloc, &ta, &to, &size, &ex);
    if (st != SPA_OK || size > sizeof ws) {
        printf("phase 1: status %ld, workspace %llu\n", (long)st, (unsigned long long)size);
        return 1;
    }
#if USE_POOL
    spa_pool pool;
    if (spa_pool_start(&pool, 2) != 0)
        return 1;
    const spa_runner runner = spa_pool_runner(&pool);
    st = spa_msda(ws, size, &ex, &runner);
    spa_pool_stop(&pool);
#else
    st = spa_msda(ws, size, &ex, NULL);
#endif
    int bad = st != SPA_OK;
    for (int q = 0; q < NQ; q++)
        for (int c = 0; c < C; c++)
            bad |= out[q * C + c] != (float)(100 * c + (q % H) * W + q);
    printf("msda through the installed package%s: out[4] = (%g, %g, %g): %s\n", USE_POOL ? " (pool)" : "",
           (double)out[12], (double)out[13], (double)out[14], bad ? "WRONG" : "exact");
    return bad;
}
