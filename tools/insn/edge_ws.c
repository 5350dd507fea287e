/* The workspace phase 1 asks for at a typical edge shape, per op and dtype,
 * on the target it runs on (make TARGET=<t> edge-ws; under qemu on the
 * emulated targets). Phase 1 only: nothing runs.
 *   msda(_grad): one level 40x40 (nq = nk = 1600), 4 heads, C 32, 4 points, batch 1;
 *   nsa_compress(_grad): T 1024, N 1 kv head, D 64, block 32, stride 16;
 *   nsa_select(_grad): T 1024, N1 4 query heads over N2 1 kv head, D = Dv = 64,
 *   selected blocks of 64, K 4, no mask.
 * Prints "ws op=<op> dtype=<dt> shape=edge bytes=<n>". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "spattn/spattn.h"

/* report() reads the size through a pointer: the phase-1 call among its
 * arguments has run by then, whatever order the arguments were evaluated. */

static void *zeros(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size);
    if (p == NULL) {
        fprintf(stderr, "edge_ws: out of memory\n");
        exit(2);
    }
    return p;
}

static spa_tensor tensor(spa_dtype dt, int32_t rank, const int64_t *dims, void *data)
{
    spa_tensor t;
    spa_tensor_init(&t, dt, rank, dims, data);
    return t;
}

static size_t esize(spa_dtype dt)
{
    return dt == SPA_FLOAT32 ? 4 : 2;
}

static const char *dname(spa_dtype dt)
{
    return dt == SPA_FLOAT32 ? "f32" : dt == SPA_FLOAT16 ? "f16" : "bf16";
}

static void report(const char *op, spa_dtype dt, spa_status st, const uint64_t *ws)
{
    if (st != SPA_OK) {
        fprintf(stderr, "edge_ws: %s %s: phase 1 refused (%d)\n", op, dname(dt), (int)st);
        exit(1);
    }
    printf("ws op=%s dtype=%s shape=edge bytes=%llu\n", op, dname(dt), (unsigned long long)*ws);
}

static void msda(spa_dtype dt)
{
    enum { NH = 4, C = 32, NP = 4, HW = 40, NK = HW * HW, NQ = NK };
    int64_t ss[2] = {HW, HW}, lsi[1] = {0};
    const int64_t vd[4] = {1, NK, NH, C}, ssd[2] = {1, 2}, lsid[1] = {1};
    const int64_t ld[6] = {1, NQ, NH, 1, NP, 2}, ad[5] = {1, NQ, NH, 1, NP}, od[3] = {1, NQ, NH * C};
    const size_t e = esize(dt), nv = (size_t)NK * NH * C, na = (size_t)NQ * NH * NP, no = (size_t)NQ * NH * C;
    void *v = zeros(nv, e), *loc = zeros(2 * na, e), *att = zeros(na, e), *o = zeros(no, e);
    spa_tensor tv = tensor(dt, 4, vd, v), tss = tensor(SPA_INT64, 2, ssd, ss),
               tlsi = tensor(SPA_INT64, 1, lsid, lsi), tl = tensor(dt, 6, ld, loc),
               ta = tensor(dt, 5, ad, att), to = tensor(dt, 3, od, o);
    uint64_t ws;
    spa_executor ex;
    report("msda", dt, spa_msda_get_workspace_size(&tv, &tss, &tlsi, &tl, &ta, &to, &ws, &ex), &ws);
    void *gv = zeros(nv, e), *gl = zeros(2 * na, e), *ga = zeros(na, e);
    spa_tensor tgv = tensor(dt, 4, vd, gv), tgl = tensor(dt, 6, ld, gl), tga = tensor(dt, 5, ad, ga);
    report("msda_grad", dt,
           spa_msda_grad_get_workspace_size(&tv, &tss, &tlsi, &tl, &ta, &to, &tgv, &tgl, &tga, &ws, &ex), &ws);
    free(v), free(loc), free(att), free(o), free(gv), free(gl), free(ga);
}

static void nsa_compress(spa_dtype dt)
{
    enum { T = 1024, N = 1, D = 64, BS = 32, ST = 16, M = (T - BS) / ST + 1 };
    const int64_t seq_vals[1] = {T};
    const spa_int_array seq = {seq_vals, 1};
    const int64_t xd[3] = {T, N, D}, wd[2] = {BS, N}, yd[3] = {M, N, D};
    const size_t e = esize(dt);
    void *x = zeros((size_t)T * N * D, e), *w = zeros((size_t)BS * N, e), *y = zeros((size_t)M * N * D, e);
    void *dx = zeros((size_t)T * N * D, e), *dw = zeros((size_t)BS * N, e);
    spa_tensor tx = tensor(dt, 3, xd, x), tw = tensor(dt, 2, wd, w), ty = tensor(dt, 3, yd, y),
               tdx = tensor(dt, 3, xd, dx), tdw = tensor(dt, 2, wd, dw);
    uint64_t ws;
    spa_executor ex;
    report("nsa_compress", dt,
           spa_nsa_compress_get_workspace_size(&tx, &tw, &seq, "TND", BS, ST, 0, &ty, &ws, &ex), &ws);
    report("nsa_compress_grad", dt,
           spa_nsa_compress_grad_get_workspace_size(&ty, &tx, &tw, &seq, BS, ST, 0, "TND", &tdx, &tdw,
                                                    &ws, &ex),
           &ws);
    free(x), free(w), free(y), free(dx), free(dw);
}

static void nsa_select(spa_dtype dt)
{
    enum { T = 1024, N1 = 4, N2 = 1, D = 64, DV = 64, BS = 64, KC = 4 };
    const int64_t seq_vals[1] = {T};
    const spa_int_array seq = {seq_vals, 1};
    const int64_t qd[3] = {T, N1, D}, kd[3] = {T, N2, D}, vd[3] = {T, N2, DV}, id[3] = {T, N2, KC},
                  od[3] = {T, N1, DV}, sd[3] = {T, N1, 8};
    const size_t e = esize(dt);
    int32_t *idx = zeros((size_t)T * N2 * KC, sizeof(int32_t));
    for (int i = 0; i < T * N2; i++)
        for (int k = 0; k < KC; k++)
            idx[i * KC + k] = (int32_t)k;
    void *q = zeros((size_t)T * N1 * D, e), *k = zeros((size_t)T * N2 * D, e), *v = zeros((size_t)T * N2 * DV, e);
    void *o = zeros((size_t)T * N1 * DV, e), *dy = zeros((size_t)T * N1 * DV, e);
    void *dq = zeros((size_t)T * N1 * D, e), *dk = zeros((size_t)T * N2 * D, e), *dv = zeros((size_t)T * N2 * DV, e);
    float *mx = zeros((size_t)T * N1 * 8, 4), *sm = zeros((size_t)T * N1 * 8, 4);
    spa_tensor tq = tensor(dt, 3, qd, q), tk = tensor(dt, 3, kd, k), tv = tensor(dt, 3, vd, v),
               ti = tensor(SPA_INT32, 3, id, idx), to = tensor(dt, 3, od, o), tdy = tensor(dt, 3, od, dy),
               tmx = tensor(SPA_FLOAT32, 3, sd, mx), tsm = tensor(SPA_FLOAT32, 3, sd, sm),
               tdq = tensor(dt, 3, qd, dq), tdk = tensor(dt, 3, kd, dk), tdv = tensor(dt, 3, vd, dv);
    uint64_t ws;
    spa_executor ex;
    report("nsa_select", dt,
           spa_nsa_select_get_workspace_size(&tq, &tk, &tv, &ti, NULL, &seq, &seq, 0.125, N1, "TND", 0, BS, KC,
                                             &tmx, &tsm, &to, &ws, &ex),
           &ws);
    report("nsa_select_grad", dt,
           spa_nsa_select_grad_get_workspace_size(&tq, &tk, &tv, &to, &tdy, &tmx, &tsm, &ti, &seq, &seq, NULL,
                                                  0.125, BS, KC, N1, "TND", 0, &tdq, &tdk, &tdv, &ws, &ex),
           &ws);
    free(idx), free(q), free(k), free(v), free(o), free(dy), free(dq), free(dk), free(dv), free(mx), free(sm);
}

int main(void)
{
    const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
    for (int i = 0; i < 3; i++) {
        msda(dts[i]);
        nsa_compress(dts[i]);
        nsa_select(dts[i]);
    }
    return 0;
}
