/* Multi-scale deformable attention, forward and grad, f32, on the
 * Deformable-DETR encoder's four levels (half the batch of the benchmark):
 * 8 heads of 32 channels, 4 points per level, every query of the map
 * sampling around its own position. Prints two lines of the demo table; the
 * forward is checked against a direct bilinear evaluation of a few queries,
 * the grad through gradAttnWeight = gradOutput . sampled value. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "spattn/runner.h"
#include "spattn/spattn.h"

enum { NH = 8, C = 32, NL = 4, NP = 4 };
static const int64_t H[NL] = {100, 50, 25, 13}, W[NL] = {150, 75, 38, 19};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Bilinear sample of channel c of head h at normalised (x, y), zero outside. */
static double sample(const float *value, int64_t nk, int64_t start, int64_t hl, int64_t wl,
                     int h, int c, double x, double y)
{
    double px = x * (double)wl - 0.5, py = y * (double)hl - 0.5;
    double x0 = floor(px), y0 = floor(py), out = 0;
    for (int dy = 0; dy < 2; dy++)
        for (int dx = 0; dx < 2; dx++) {
            double cx = x0 + dx, cy = y0 + dy;
            if (cx < 0 || cy < 0 || cx >= (double)wl || cy >= (double)hl)
                continue;
            double wgt = (dx ? px - x0 : 1 - (px - x0)) * (dy ? py - y0 : 1 - (py - y0));
            int64_t key = start + (int64_t)cy * wl + (int64_t)cx;
            out += wgt * value[(key * NH + h) * C + c];
        }
    (void)nk;
    return out;
}

int main(void)
{
    int64_t starts[NL], nk = 0;
    for (int l = 0; l < NL; l++) {
        starts[l] = nk;
        nk += H[l] * W[l];
    }
    const int64_t nq = nk;
    float *value = malloc(sizeof(float) * (size_t)(nk * NH * C));
    float *loc = malloc(sizeof(float) * (size_t)(nq * NH * NL * NP * 2));
    float *attn = malloc(sizeof(float) * (size_t)(nq * NH * NL * NP));
    float *out = malloc(sizeof(float) * (size_t)(nq * NH * C));
    float *gout = malloc(sizeof(float) * (size_t)(nq * NH * C));
    float *gvalue = malloc(sizeof(float) * (size_t)(nk * NH * C));
    float *gloc = malloc(sizeof(float) * (size_t)(nq * NH * NL * NP * 2));
    float *gattn = malloc(sizeof(float) * (size_t)(nq * NH * NL * NP));
    for (int64_t i = 0; i < nk * NH * C; i++)
        value[i] = sinf(0.001f * (float)i);
    for (int64_t i = 0; i < nq * NH * C; i++)
        gout[i] = cosf(0.003f * (float)i);
    for (int64_t q = 0; q < nq; q++) {
        int l0 = 0; /* the query's own position on its level, normalised */
        while (l0 + 1 < NL && q >= starts[l0 + 1])
            l0++;
        double qx = ((double)((q - starts[l0]) % W[l0]) + 0.5) / (double)W[l0];
        double qy = ((double)((q - starts[l0]) / W[l0]) + 0.5) / (double)H[l0];
        for (int64_t j = 0; j < NH * NL * NP; j++) {
            int64_t i = q * NH * NL * NP + j;
            loc[2 * i] = (float)(qx + 0.02 * sin(0.7 * (double)i));
            loc[2 * i + 1] = (float)(qy + 0.02 * cos(0.9 * (double)i));
            attn[i] = 1.0f / (NL * NP) + 0.01f * sinf((float)i);
        }
    }
    const int64_t shapes[NL * 2] = {H[0], W[0], H[1], W[1], H[2], W[2], H[3], W[3]};
    const int64_t vd[4] = {1, nk, NH, C}, sd[2] = {NL, 2}, ld[1] = {NL};
    const int64_t locd[6] = {1, nq, NH, NL, NP, 2}, ad[5] = {1, nq, NH, NL, NP}, od[3] = {1, nq, NH * C};
    spa_tensor tv, ts, tl, tloc, ta, to, tgo, tgv, tgl, tga;
    spa_tensor_init(&tv, SPA_FLOAT32, 4, vd, value);
    spa_tensor_init(&ts, SPA_INT64, 2, sd, (void *)shapes);
    spa_tensor_init(&tl, SPA_INT64, 1, ld, starts);
    spa_tensor_init(&tloc, SPA_FLOAT32, 6, locd, loc);
    spa_tensor_init(&ta, SPA_FLOAT32, 5, ad, attn);
    spa_tensor_init(&to, SPA_FLOAT32, 3, od, out);
    spa_tensor_init(&tgo, SPA_FLOAT32, 3, od, gout);
    spa_tensor_init(&tgv, SPA_FLOAT32, 4, vd, gvalue);
    spa_tensor_init(&tgl, SPA_FLOAT32, 6, locd, gloc);
    spa_tensor_init(&tga, SPA_FLOAT32, 5, ad, gattn);

    uint64_t fwd_ws, grad_ws;
    spa_executor fwd, grad;
    spa_status st = spa_msda_get_workspace_size(&tv, &ts, &tl, &tloc, &ta, &to, &fwd_ws, &fwd);
    if (st == SPA_OK)
        st = spa_msda_grad_get_workspace_size(&tv, &ts, &tl, &tloc, &ta, &tgo, &tgv, &tgl, &tga,
                                              &grad_ws, &grad);
    if (st != SPA_OK) {
        printf("msda: phase 1 failed (status %d)\n", (int)st);
        return 1;
    }
    void *ws = malloc((fwd_ws > grad_ws ? fwd_ws : grad_ws) + 1);
    spa_pool pool;
    if (spa_pool_start(&pool, 2) != 0)
        return 1;
    spa_runner runner = spa_pool_runner(&pool);
    const int reps = 5;
    double t0 = now_s();
    for (int r = 0; r < reps && st == SPA_OK; r++)
        st = spa_msda(ws, fwd_ws, &fwd, &runner);
    double t_fwd = (now_s() - t0) / reps;
    t0 = now_s();
    for (int r = 0; r < reps && st == SPA_OK; r++)
        st = spa_msda_grad(ws, grad_ws, &grad, &runner);
    double t_grad = (now_s() - t0) / reps;
    spa_pool_stop(&pool);
    if (st != SPA_OK) {
        printf("msda: phase 2 failed (status %d)\n", (int)st);
        return 1;
    }

    double err_fwd = 0, err_grad = 0;
    const int64_t queries[3] = {0, 9999, nq - 1};
    for (int qi = 0; qi < 3; qi++) {
        int64_t q = queries[qi];
        for (int h = 0; h < NH; h++) {
            double o[C] = {0};
            for (int l = 0; l < NL; l++)
                for (int p = 0; p < NP; p++) {
                    int64_t i = ((q * NH + h) * NL + l) * NP + p;
                    double ga = 0, mag = 0;
                    for (int c = 0; c < C; c++) {
                        double s = sample(value, nk, starts[l], H[l], W[l], h, c, loc[2 * i], loc[2 * i + 1]);
                        o[c] += attn[i] * s;
                        ga += gout[(q * NH + h) * C + c] * s;
                        mag += fabs(gout[(q * NH + h) * C + c] * s);
                    }
                    /* relative to the size of the terms: the f32 sample position (x*W - 0.5
                     * rounded) moves each sample by up to an ulp of the map size */
                    err_grad = fmax(err_grad, fabs(ga - gattn[i]) / (mag + 1e-3));
                }
            for (int c = 0; c < C; c++)
                err_fwd = fmax(err_fwd, fabs(o[c] - out[(q * NH + h) * C + c]));
        }
    }
    /* minimal bytes: forward reads value, locations, weights and writes output */
    double fwd_bytes = 4.0 * (double)(nk * NH * C + nq * NH * NL * NP * 3 + nq * NH * C);
    double grad_bytes = fwd_bytes + 4.0 * (double)(nk * NH * C + nq * NH * NL * NP * 3);
    printf("%-20s %-5s %-28s %-4s max|err| %.1e  %8.3f ms  %6.2f GB/s\n", "msda", "f32",
           "bs=1 DETR encoder 8x32 4x4", err_fwd < 1e-4 ? "ok" : "BAD", err_fwd, t_fwd * 1e3,
           fwd_bytes / t_fwd * 1e-9);
    printf("%-20s %-5s %-28s %-4s max rel %.1e   %8.3f ms  %6.2f GB/s\n", "msda_grad", "f32",
           "bs=1 DETR encoder 8x32 4x4", err_grad < 1e-3 ? "ok" : "BAD", err_grad, t_grad * 1e3,
           grad_bytes / t_grad * 1e-9);
    free(value), free(loc), free(attn), free(out), free(gout), free(gvalue), free(gloc), free(gattn);
    free(ws);
    return err_fwd < 1e-4 && err_grad < 1e-3 ? 0 : 1;
}
