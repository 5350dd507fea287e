/* One multi-scale deformable attention call on a ramp map sampled at pixel
 * centres, where bilinear sampling returns the pixel itself, so the output
 * is known exactly; prints the result, exits non-zero on any difference.
 * Built by two checks:
 *  - cmake-install-check (tests/cmake/CMakeLists.txt): through an installed
 *    package, alone and with USE_POOL on the pthread pool;
 *  - dtypes-check, with HALVES_REFUSED: against a DTYPES=f32 archive, which
 *    must also refuse float16 and bfloat16 in phase 1 with 161002 and write
 *    nothing;
 *  - ops-check, with ABSENT_REFUSED too: against an OPS="nsa_select msda"
 *    archive, whose NsaCompress must answer 161002, "operator not built", in
 *    both phases. */
#include <stdio.h>
#include <string.h>

#include "spattn/executor.h"
#include "spattn/msda.h"
#ifndef USE_POOL
#define USE_POOL 0
#endif
#ifndef HALVES_REFUSED
#define HALVES_REFUSED 0
#endif
#ifndef ABSENT_REFUSED
#define ABSENT_REFUSED 0
#endif
#if ABSENT_REFUSED
#include "spattn/nsa.h"
#endif
#if USE_POOL
#include "spattn/runner.h"
#endif

enum { H = 4, W = 6, C = 3, NQ = 5 };

static int run(spa_dtype dt, const spa_runner *runner)
{
    static float value[H * W * C], loc[NQ * 2], attn[NQ], out[NQ * C];
    const int64_t shapes[2] = {H, W}, starts[1] = {0};
    for (int i = 0; i < H * W * C; i++)
        value[i] = (float)(100 * (i % C) + i / C);
    for (int q = 0; q < NQ; q++) { /* pixel (x, y) = (q, q % H) at its centre */
        loc[2 * q] = ((float)q + 0.5f) / W;
        loc[2 * q + 1] = ((float)(q % H) + 0.5f) / H;
        attn[q] = 1.0f;
    }
    for (int i = 0; i < NQ * C; i++)
        out[i] = -1.0f;
    spa_tensor tv, ts, tl, tloc, ta, to;
    const int64_t vd[4] = {1, H * W, 1, C}, sd[2] = {1, 2}, ld[1] = {1}, locd[6] = {1, NQ, 1, 1, 1, 2},
                  ad[5] = {1, NQ, 1, 1, 1}, od[3] = {1, NQ, C};
    spa_tensor_init(&tv, dt, 4, vd, value); /* halves: refused before any byte is read */
    spa_tensor_init(&ts, SPA_INT64, 2, sd, (void *)shapes);
    spa_tensor_init(&tl, SPA_INT64, 1, ld, (void *)starts);
    spa_tensor_init(&tloc, dt, 6, locd, loc);
    spa_tensor_init(&ta, dt, 5, ad, attn);
    spa_tensor_init(&to, dt, 3, od, out);
    static unsigned char ws[1 << 16];
    uint64_t size = 0;
    spa_executor ex;
    const spa_status st = spa_msda_get_workspace_size(&tv, &ts, &tl, &tloc, &ta, &to, &size, &ex);
    if (dt != SPA_FLOAT32) {
        const char *reason = spa_executor_reason(&ex, NULL);
        int untouched = 1;
        for (int i = 0; i < NQ * C; i++)
            untouched &= out[i] == -1.0f;
        const int ok = st == SPA_ERR_INVALID && strstr(reason, "float_dtype") != NULL && untouched;
        printf("msda %s: status %ld (%s)%s: %s\n", dt == SPA_FLOAT16 ? "float16" : "bfloat16", (long)st, reason,
               untouched ? ", nothing written" : ", OUTPUT WRITTEN", ok ? "refused, ok" : "FAILED");
        return !ok;
    }
    int bad = st != SPA_OK || size > sizeof ws || spa_msda(ws, size, &ex, runner) != SPA_OK;
    for (int q = 0; q < NQ && !bad; q++)
        for (int c = 0; c < C; c++)
            bad |= out[q * C + c] != (float)(100 * c + (q % H) * W + q);
    printf("msda float32%s: out[4] = (%g, %g, %g): %s\n", runner != NULL ? " (pool)" : "", (double)out[12],
           (double)out[13], (double)out[14], bad ? "WRONG" : "exact");
    return bad;
}

#if ABSENT_REFUSED
/* An operator the archive does not hold: refused in phase 1 and phase 2. */
static int absent(void)
{
    static float x[16], y[16];
    const int64_t d[4] = {1, 1, 1, 16};
    spa_tensor in, out;
    spa_tensor_init(&in, SPA_FLOAT32, 4, d, x);
    spa_tensor_init(&out, SPA_FLOAT32, 4, d, y);
    uint64_t size = 12345;
    spa_executor ex;
    const spa_status st = spa_nsa_compress_get_workspace_size(&in, &in, NULL, "TND", 16, 16, 0, &out, &size, &ex);
    const char *reason = spa_executor_reason(&ex, NULL);
    const spa_status st2 = spa_nsa_compress(y, sizeof y, &ex, NULL);
    const int ok = st == SPA_ERR_INVALID && st2 == SPA_ERR_INVALID && size == 12345 && strstr(reason, "not built") != NULL;
    printf("nsa_compress (not in OPS): status %ld / %ld (%s): %s\n", (long)st, (long)st2, reason,
           ok ? "refused, ok" : "FAILED");
    return !ok;
}
#endif

int main(void)
{
    int bad = 0;
#if USE_POOL
    spa_pool pool;
    if (spa_pool_start(&pool, 2) != 0)
        return 1;
    const spa_runner runner = spa_pool_runner(&pool);
    bad |= run(SPA_FLOAT32, &runner);
    spa_pool_stop(&pool);
#else
    bad |= run(SPA_FLOAT32, NULL);
#endif
    if (HALVES_REFUSED)
        bad |= run(SPA_FLOAT16, NULL) | run(SPA_BFLOAT16, NULL);
#if ABSENT_REFUSED
    bad |= absent();
#endif
    return bad;
}
