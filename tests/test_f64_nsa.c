/* float64 NSA ops: against the fp64 references (tests/ref/) at 1e-12
 * relative, random inputs, D tails, bit-identical across runners; where the
 * build has no float64 path (src/f64.h), the refusal that names it. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "f64.h"
#include "nsac_case.h"
#include "spa_kernels.h"

/* Phase 1 refused float64 with 161002 and a reason naming the op's flag. */
static void expect_f64_refusal(spa_status st, const spa_executor *ex, const char *flag)
{
    CU_ASSERT_EQUAL(st, SPA_ERR_INVALID);
    const char *why = spa_executor_reason(ex, NULL);
    CU_ASSERT(strstr(why, flag) != NULL);
    if (strstr(why, flag) == NULL)
        fprintf(stderr, "  float64 refusal: '%s' names no %s\n", why, flag);
}

/* ---------------- NsaCompress / NsaCompressGrad ---------------- */

typedef struct nsac_io {
    ttensor x, w, y, dx, dw; /* y: the output (forward) or outputGrad (grad) */
} nsac_io;

static void nsac_io_make(nsac_io *io, const nsac_case *c, rng *r)
{
    const int64_t xd[3] = {c->tokens, c->n, c->d}, wd[2] = {c->bs, c->n},
                  yd[3] = {c->windows, c->n, c->d};
    tt_make(&io->x, c->dt, 3, xd, c->strided, r);
    tt_make(&io->w, c->dt, 2, wd, c->strided, r);
    tt_make(&io->y, c->dt, 3, yd, c->strided, r);
    tt_make(&io->dx, c->dt, 3, xd, c->strided, r);
    tt_make(&io->dw, c->dt, 2, wd, c->strided, r);
    tt_fill_random(&io->x, r, -1.0, 1.0);
    tt_fill_random(&io->w, r, -1.0, 1.0);
    tt_fill_random(&io->y, r, -1.0, 1.0);
}

static void nsac_io_free(nsac_io *io)
{
    tt_free(&io->x), tt_free(&io->w), tt_free(&io->y), tt_free(&io->dx), tt_free(&io->dw);
}

static bool nsac_io_guards(const nsac_io *io)
{
    return tt_guard_ok(&io->x) && tt_guard_ok(&io->w) && tt_guard_ok(&io->y) &&
           tt_guard_ok(&io->dx) && tt_guard_ok(&io->dw);
}

/* Both phases of the forward (grad 0) or the grad (grad 1). */
static spa_status nsac_run(const nsac_case *c, nsac_io *io, int grad, int runner, size_t skew,
                           spa_executor *ex)
{
    uint64_t size = 0;
    spa_status st =
        grad ? spa_nsa_compress_grad_get_workspace_size(&io->y.t, &io->x.t, &io->w.t, &c->seq, c->bs,
                                                        c->st, c->seq_type, "TND", &io->dx.t,
                                                        &io->dw.t, &size, ex)
             : spa_nsa_compress_get_workspace_size(&io->x.t, &io->w.t, &c->seq, "TND", c->bs, c->st,
                                                   c->seq_type, &io->y.t, &size, ex);
    if (st != SPA_OK)
        return st;
    tws ws;
    tws_make(&ws, size, skew);
    st = grad ? spa_nsa_compress_grad(ws.ptr, ws.size, ex, test_runner(runner))
              : spa_nsa_compress(ws.ptr, ws.size, ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

static int64_t nsac_compare(const nsac_case *c, const nsac_io *io, int grad)
{
    double *x = tt_to_doubles(&io->x), *w = tt_to_doubles(&io->w), *y = tt_to_doubles(&io->y);
    const int64_t nx = c->tokens * c->n * c->d, ny = c->windows * c->n * c->d, nw = c->bs * c->n;
    const ref_batches bt = nsac_case_batches(c);
    const tol t = tol_for(SPA_FLOAT64, 0.0);
    int64_t bad;
    if (!grad) {
        double *ref = malloc(sizeof(double) * (size_t)(ny + 1)), *mag = malloc(sizeof(double) * (size_t)(ny + 1));
        ref_nsa_compress(x, w, &bt, c->n, c->d, c->bs, c->st, ref, mag);
        bad = check_close("output", y, ref, mag, ny, t);
        free(ref), free(mag);
    } else {
        double *dx = tt_to_doubles(&io->dx), *dw = tt_to_doubles(&io->dw);
        double *rdx = malloc(sizeof(double) * (size_t)(nx + 1)), *mdx = malloc(sizeof(double) * (size_t)(nx + 1));
        double *rdw = malloc(sizeof(double) * (size_t)nw), *mdw = malloc(sizeof(double) * (size_t)nw);
        ref_nsa_compress_grad(y, x, w, &bt, c->tokens, c->n, c->d, c->bs, c->st, rdx, mdx, rdw, mdw);
        bad = check_close("inputGrad", dx, rdx, mdx, nx, t) + check_close("weightGrad", dw, rdw, mdw, nw, t);
        free(dx), free(dw), free(rdx), free(mdx), free(rdw), free(mdw);
    }
    free(x), free(w), free(y);
    return bad;
}

/* The random sweep of the f32 suites (every D the contract takes, batches
 * shorter than a window, strided views), in float64. */
static void nsac_random(int grad)
{
    rng r = rng_seed(grad ? 6402 : 6401);
    for (int i = 0; i < TEST_SIZE(24, 6); i++) {
        nsac_case c;
        nsac_case_draw(&c, i, &r);
        c.dt = SPA_FLOAT64;
        nsac_io io;
        nsac_io_make(&io, &c, &r);
        spa_executor ex;
        spa_status st = nsac_run(&c, &io, grad, i % N_RUNNERS, (size_t)rng_int(&r, 0, 63), &ex);
        char desc[256];
        nsac_case_describe(&c, desc, sizeof desc);
        if (!(grad ? SPA_FLOAT64_NSA_COMPRESS_GRAD : SPA_FLOAT64_NSA_COMPRESS)) {
            expect_f64_refusal(st, &ex, grad ? "SPA_FLOAT64_NSA_COMPRESS_GRAD" : "SPA_FLOAT64_NSA_COMPRESS");
        } else {
            case_verdict(grad ? "f64 grad" : "f64 fwd", i, desc, st, nsac_compare(&c, &io, grad),
                         nsac_io_guards(&io));
        }
        nsac_io_free(&io);
    }
}
static void test_nsac_random(void) { nsac_random(0); }
static void test_nsacg_random(void) { nsac_random(1); }

#if SPA_FLOAT64_NSA_COMPRESS && SPA_FLOAT64_NSA_COMPRESS_GRAD
/* The kernels alone (one batch), on shapes the op's rules may not take yet:
 * D 48 and 100 (tails of every layer's chunk), bs and st not multiples of
 * 16, views with padded strides. */
static void test_nsac_kernel_tails(void)
{
    static const int64_t shapes[][4] = {{48, 32, 16, 2}, {100, 5, 3, 3}, {1, 7, 7, 1}, {100, 16, 1, 2}};
    rng r = rng_seed(6403);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t len = 41;
        nsac_case c;
        nsac_case_fixed(&c, SPA_FLOAT32, shapes[i][3], 16, 16, 16, 1, &len, 0);
        c.dt = SPA_FLOAT64;
        c.d = shapes[i][0];
        c.bs = shapes[i][1];
        c.st = shapes[i][2];
        c.windows = ref_nsa_compress_windows(&(ref_batches){1, c.start, c.len}, c.bs, c.st);
        c.strided = i % 2 == 1;
        nsac_io io;
        nsac_io_make(&io, &c, &r);
        spa_nsac_args a;
        memset(&a, 0, sizeof a);
        a.x = io.x.t.data, a.xs0 = io.x.t.strides[0], a.xs1 = io.x.t.strides[1], a.xs2 = io.x.t.strides[2];
        a.w = io.w.t.data, a.ws0 = io.w.t.strides[0], a.ws1 = io.w.t.strides[1];
        a.y = io.y.t.data, a.ys0 = io.y.t.strides[0], a.ys1 = io.y.t.strides[1], a.ys2 = io.y.t.strides[2];
        a.dx = io.dx.t.data, a.dxs0 = io.dx.t.strides[0], a.dxs1 = io.dx.t.strides[1],
        a.dxs2 = io.dx.t.strides[2];
        a.n = c.n, a.d = c.d, a.bs = c.bs, a.st = c.st;
        /* grad first: it reads y as outputGrad */
        double *wpart = calloc((size_t)(c.bs * c.n), sizeof(double));
        SPA_K_NSA_COMPRESS_GRAD_F64(&a, 0, 0, c.windows, 0, 20, wpart);
        SPA_K_NSA_COMPRESS_GRAD_F64(&a, 0, 0, c.windows, 20, len, wpart);
        for (int64_t k = 0; k < c.bs * c.n; k++) /* weightGrad [bs, N] from the partial */
            memcpy((double *)io.dw.t.data + (k / c.n) * io.dw.t.strides[0] + (k % c.n) * io.dw.t.strides[1],
                   &wpart[k], sizeof(double));
        free(wpart);
        CU_ASSERT_EQUAL(nsac_compare(&c, &io, 1), 0);
        SPA_K_NSA_COMPRESS_F64(&a, 0, 0, c.windows, NULL);
        CU_ASSERT_EQUAL(nsac_compare(&c, &io, 0), 0);
        CU_ASSERT(nsac_io_guards(&io));
        nsac_io_free(&io);
    }
}
#endif

/* Bit-identical outputs for every runner (the grad's weightGrad sums its
 * block partials in block order). */
static void nsac_deterministic(int grad)
{
    const int64_t lens[4] = {0, TEST_SIZE(700, 200), 37, TEST_SIZE(900, 300)};
    nsac_case c;
    nsac_case_fixed(&c, SPA_FLOAT64, 3, 48, 64, 16, 4, lens, 0);
    rng r = rng_seed(6404);
    nsac_io io;
    nsac_io_make(&io, &c, &r);
    spa_executor ex;
    spa_status st = nsac_run(&c, &io, grad, 0, 0, &ex);
    if (!(grad ? SPA_FLOAT64_NSA_COMPRESS_GRAD : SPA_FLOAT64_NSA_COMPRESS)) {
        CU_ASSERT_EQUAL(st, SPA_ERR_INVALID);
        nsac_io_free(&io);
        return;
    }
    CU_ASSERT_EQUAL(st, SPA_OK);
    ttensor *out[2] = {grad ? &io.dx : &io.y, grad ? &io.dw : &io.y};
    unsigned char *first[2] = {tt_snapshot(out[0]), tt_snapshot(out[1])};
    for (int run = 1; run < N_RUNNERS; run++) {
        tt_fill_canary(out[0]), tt_fill_canary(out[1]);
        CU_ASSERT_EQUAL(nsac_run(&c, &io, grad, run, (size_t)run * 8, &ex), SPA_OK);
        CU_ASSERT(tt_same_bytes(out[0], first[0]) && tt_same_bytes(out[1], first[1]));
    }
    free(first[0]), free(first[1]);
    nsac_io_free(&io);
}
static void test_nsac_deterministic(void) { nsac_deterministic(0); }
static void test_nsacg_deterministic(void) { nsac_deterministic(1); }

void suite_f64_nsa(void);
void suite_f64_nsa(void)
{
    CU_pSuite s = CU_add_suite("f64_nsa_compress", NULL, NULL);
    CU_add_test(s, "random shapes vs fp64 reference", test_nsac_random);
    CU_add_test(s, "bit-identical across runners", test_nsac_deterministic);
#if SPA_FLOAT64_NSA_COMPRESS && SPA_FLOAT64_NSA_COMPRESS_GRAD
    CU_add_test(s, "kernels: D tails, any block and stride", test_nsac_kernel_tails);
#endif
    s = CU_add_suite("f64_nsa_compress_grad", NULL, NULL);
    CU_add_test(s, "random shapes vs fp64 reference", test_nsacg_random);
    CU_add_test(s, "bit-identical across runners", test_nsacg_deterministic);
}
