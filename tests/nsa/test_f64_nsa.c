/* float64 NSA ops: against the fp64 references (tests/ref/) at 1e-12
 * relative, random inputs, D tails, bit-identical across runners; where the
 * build has no float64 path (src/core/f64.h), the refusal that names it. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "f64.h"
#include "nsac_case.h"
#include "nsas_case.h"
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
    for (int i = 0; i < TEST_COUNT(24, 6); i++) {
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
        double *row = malloc(sizeof(double) * (size_t)(c.n * c.d)); /* the scratch: one window row */
        SPA_K_NSA_COMPRESS_F64(&a, 0, 0, c.windows, (float *)(void *)row);
        free(row);
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

/* ---------------- NsaSelectedAttention / Grad ---------------- */

/* nsas_io_make with float64 softmax statistics (the float64 ops' rule). */
static void nsas_io_make_f64(nsas_io *io, const nsas_case *c, rng *r)
{
    nsas_io_make(io, c, r);
    const int64_t sd[3] = {c->t1, c->n1, 8};
    tt_free(&io->mx), tt_free(&io->sm);
    tt_make(&io->mx, SPA_FLOAT64, 3, sd, c->strided, r);
    tt_make(&io->sm, SPA_FLOAT64, 3, sd, c->strided, r);
}

static ref_nsas_problem nsas_problem_f64(const nsas_case *c)
{
    ref_nsas_problem p = nsas_case_problem(c);
    p.scale = c->scale; /* float64: scaleValue as given */
    p.round = REF_ROUND_NONE;
    return p;
}

static spa_status nsas_fwd(const nsas_case *c, nsas_io *io, int runner, size_t skew, spa_executor *ex)
{
    uint64_t size = 0;
    spa_status st = spa_nsa_select_get_workspace_size(
        &io->q.t, &io->k.t, &io->v.t, &io->topk.t, c->has_mask ? &io->mask.t : NULL, &c->sq, &c->skv,
        c->scale, c->n1, "TND", c->sparse_mode, c->bs, c->kc, &io->mx.t, &io->sm.t, &io->o.t, &size, ex);
    if (st != SPA_OK)
        return st;
    tws ws;
    tws_make(&ws, size, skew);
    st = spa_nsa_select(ws.ptr, ws.size, ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

static spa_status nsas_grad(const nsas_case *c, nsas_io *io, int runner, size_t skew, spa_executor *ex)
{
    uint64_t size = 0;
    spa_status st = spa_nsa_select_grad_get_workspace_size(
        &io->q.t, &io->k.t, &io->v.t, &io->o.t, &io->dy.t, &io->mx.t, &io->sm.t, &io->topk.t, &c->sq,
        &c->skv, c->has_mask ? &io->mask.t : NULL, c->scale, c->bs, c->kc, c->n1, "TND",
        c->sparse_mode, &io->dq.t, &io->dk.t, &io->dv.t, &size, ex);
    if (st != SPA_OK)
        return st;
    tws ws;
    tws_make(&ws, size, skew);
    st = spa_nsa_select_grad(ws.ptr, ws.size, ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

/* Statistics: all 8 lanes equal and within 1e-12 of the reference. */
/* A statistic's 8 equal lanes; where the reference is NaN, NaN (nan_any:
 * any value: the max of a NaN row is unspecified). */
static int64_t nsas_check_stat(const char *what, const ttensor *tt, const double *ref, int64_t count, bool nan_any)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < count; i++) {
        const double got = tt_get(tt, i * 8);
        bool ok = got == ref[i] || fabs(got - ref[i]) <= 1e-12 * fabs(ref[i]);
        if (isnan(ref[i]))
            ok = nan_any || isnan(got);
        for (int64_t l = 1; l < 8; l++)
            ok = ok && equal_or_nan(tt_get(tt, i * 8 + l), got);
        if (!ok && bad++ < 5)
            fprintf(stderr, "  %s[%lld]: got %.17g want %.17g\n", what, (long long)i, got, ref[i]);
    }
    return bad;
}

static int64_t nsas_compare_fwd(const nsas_case *c, const nsas_io *io)
{
    double *q = tt_to_doubles(&io->q), *k = tt_to_doubles(&io->k), *v = tt_to_doubles(&io->v);
    double *got = tt_to_doubles(&io->o);
    const int64_t no = c->t1 * c->n1 * c->dv, ns = c->t1 * c->n1;
    double *o = malloc(sizeof(double) * (size_t)(no + 1)), *om = malloc(sizeof(double) * (size_t)(no + 1));
    double *mx = malloc(sizeof(double) * (size_t)(ns + 1)), *mxm = malloc(sizeof(double) * (size_t)(ns + 1));
    double *sm = malloc(sizeof(double) * (size_t)(ns + 1)), *smm = malloc(sizeof(double) * (size_t)(ns + 1));
    ref_nsas_problem p = nsas_problem_f64(c);
    ref_nsa_select(&p, q, k, v, o, om, mx, mxm, sm, smm);
    int64_t bad = check_close("o", got, o, om, no, tol_for(SPA_FLOAT64, 0.0));
    bad += nsas_check_stat("max", &io->mx, mx, ns, true) + nsas_check_stat("sum", &io->sm, sm, ns, false);
    free(q), free(k), free(v), free(got), free(o), free(om), free(mx), free(mxm), free(sm), free(smm);
    return bad;
}

/* The grad against the reference, from the statistics and output the
 * forward wrote (io->mx, sm, o). */
static int64_t nsas_compare_grad(const nsas_case *c, const nsas_io *io)
{
    double *q = tt_to_doubles(&io->q), *k = tt_to_doubles(&io->k), *v = tt_to_doubles(&io->v);
    double *o = tt_to_doubles(&io->o), *dy = tt_to_doubles(&io->dy);
    double *dq = tt_to_doubles(&io->dq), *dk = tt_to_doubles(&io->dk), *dv = tt_to_doubles(&io->dv);
    const int64_t ns = c->t1 * c->n1, nq = c->t1 * c->n1 * c->d, nk = c->t2 * c->n2 * c->d,
                  nv = c->t2 * c->n2 * c->dv;
    double *mx = malloc(sizeof(double) * (size_t)(ns + 1)), *sm = malloc(sizeof(double) * (size_t)(ns + 1));
    for (int64_t i = 0; i < ns; i++)
        mx[i] = tt_get(&io->mx, i * 8), sm[i] = tt_get(&io->sm, i * 8);
    double *r[6];
    const int64_t len[6] = {nq, nq, nk, nk, nv, nv};
    for (int i = 0; i < 6; i++)
        r[i] = malloc(sizeof(double) * (size_t)(len[i] + 1));
    ref_nsas_problem p = nsas_problem_f64(c);
    ref_nsa_select_grad(&p, q, k, v, o, dy, mx, sm, r[0], r[1], r[2], r[3], r[4], r[5]);
    const tol t = tol_for(SPA_FLOAT64, 0.0);
    int64_t bad = check_close("dq", dq, r[0], r[1], nq, t) + check_close("dk", dk, r[2], r[3], nk, t) +
                  check_close("dv", dv, r[4], r[5], nv, t);
    for (int i = 0; i < 6; i++)
        free(r[i]);
    free(q), free(k), free(v), free(o), free(dy), free(dq), free(dk), free(dv), free(mx), free(sm);
    return bad;
}

/* Forward, then (grad) the grad from its outputs; a build without the path
 * must refuse float64 naming its flag. */
static bool nsas_poison; /* NaN / Inf in q, k or v of every case (test_nsas_nonfinite) */

static void nsas_case_run(const nsas_case *c, int i, int grad, rng *r)
{
    nsas_io io;
    nsas_io_make_f64(&io, c, r);
    if (nsas_poison)
        nsas_io_poison(&io, r);
    spa_executor ex;
    char desc[320];
    nsas_case_describe(c, desc, sizeof desc);
    spa_status st = nsas_fwd(c, &io, i % N_RUNNERS, (size_t)rng_int(r, 0, 63), &ex);
    if (!SPA_FLOAT64_NSA_SELECT) {
        expect_f64_refusal(st, &ex, "SPA_FLOAT64_NSA_SELECT");
    } else if (!grad) {
        case_verdict("f64 select", i, desc, st, nsas_compare_fwd(c, &io),
                     tt_guard_ok(&io.o) && tt_guard_ok(&io.mx) && tt_guard_ok(&io.sm));
    } else if (st == SPA_OK) {
        st = nsas_grad(c, &io, (i + 1) % N_RUNNERS, (size_t)rng_int(r, 0, 63), &ex);
        if (!SPA_FLOAT64_NSA_SELECT_GRAD)
            expect_f64_refusal(st, &ex, "SPA_FLOAT64_NSA_SELECT_GRAD");
        else
            case_verdict("f64 select grad", i, desc, st, nsas_compare_grad(c, &io),
                         tt_guard_ok(&io.dq) && tt_guard_ok(&io.dk) && tt_guard_ok(&io.dv));
    }
    nsas_io_free(&io);
}

/* The f32 suites' random sweep and named features (GQA ratios, causal with
 * Sq < Skv and Sq > Skv, duplicates, the largest K and head dims), in float64. */
static void nsas_sweep(int grad)
{
    rng r = rng_seed(grad ? 6412 : 6411);
    for (int i = 0; i < TEST_COUNT(16, 4); i++) {
        nsas_case c;
        nsas_case_draw(&c, i, &r);
        c.dt = SPA_FLOAT64;
        nsas_case_run(&c, i, grad, &r);
        nsas_case_free(&c);
    }
    for (int i = 0; i < nsas_feature_count(); i++) {
        nsas_case c;
        nsas_case_feature(&c, i, &r);
        c.dt = SPA_FLOAT64;
        nsas_case_run(&c, 100 + i, grad, &r);
        nsas_case_free(&c);
    }
}
/* NaN and Inf in q, k or v, forward and grad, in float64 (the f32 suites'
 * test_nonfinite). */
static void test_nsas_nonfinite(void)
{
    rng r = rng_seed(6413);
    nsas_poison = true;
    for (int i = 0; i < TEST_COUNT(12, 4); i++) {
        nsas_case c;
        nsas_case_draw(&c, i, &r);
        c.dt = SPA_FLOAT64;
        nsas_case_run(&c, i, i % 2, &r);
        nsas_case_free(&c);
    }
    nsas_poison = false;
}
static void test_nsas_random(void) { nsas_sweep(0); }
static void test_nsasg_random(void) { nsas_sweep(1); }

/* Head dims with tails on every layer (D 48 and 100, Dv 36), blocks of 5,
 * several G (up to 32: every tile of head lanes), causal and not: through
 * the kernels where the op's rules do not take the shape yet. */
#if SPA_FLOAT64_NSA_SELECT && SPA_FLOAT64_NSA_SELECT_GRAD
static void nsas_kernels(const nsas_case *c, nsas_io *io)
{
    spa_nsas_shape sh;
    memset(&sh, 0, sizeof sh);
    sh.n2 = c->n2, sh.g = c->n1 / c->n2, sh.gp = 1, sh.d = c->d, sh.dv = c->dv, sh.bs = c->bs,
    sh.kc = c->kc, sh.t1 = c->t1, sh.t2 = c->t2, sh.causal = nsas_case_causal(c);
    const spa_nsas_args a = spa_nsas_args_of(&sh, &io->q.t, c->idx, &io->o.t, &io->mx.t, &io->sm.t,
                                             &io->dy.t, &io->dq.t, c->scale);
    const spa_nsas_f64_args f = spa_nsas_f64_args_of(&a, &io->k.t, &io->v.t, c->scale);
    const int64_t g = c->n1 / c->n2;
    const int64_t fw = SPA_NSAS_F64_FWD_SCRATCH(g, c->d, c->dv, c->kc, c->bs),
                  gw = SPA_NSAS_F64_GRAD_SCRATCH(g, c->d, c->dv, c->kc, c->bs);
    double *scratch = malloc(sizeof(double) * (size_t)(fw > gw ? fw : gw));
    double *dkp = calloc((size_t)(c->t2 * (c->d + c->dv) + 1), sizeof(double));
    for (int64_t n2 = 0; n2 < c->n2; n2++)
        for (int64_t b = 0; b < c->batches; b++)
            SPA_K_NSA_SELECT_F64(&f, n2, c->qstart[b], c->qstart[b] + c->qlen[b], c->qstart[b],
                                 c->kstart[b], c->klen[b], scratch);
    for (int64_t n2 = 0; n2 < c->n2; n2++) {
        memset(dkp, 0, sizeof(double) * (size_t)(c->t2 * (c->d + c->dv)));
        for (int64_t b = 0; b < c->batches; b++)
            SPA_K_NSA_SELECT_GRAD_F64(&f, n2, c->qstart[b], c->qstart[b] + c->qlen[b], c->qstart[b],
                                      c->kstart[b], c->klen[b], 0, dkp, dkp + c->t2 * c->d, scratch);
        for (int64_t row = 0; row < c->t2; row++) /* dk = scale * partial, dv = partial */
            for (int64_t e = 0; e < c->d + c->dv; e++) {
                const bool is_k = e < c->d;
                ttensor *out = is_k ? &io->dk : &io->dv;
                const int64_t col = is_k ? e : e - c->d, w = is_k ? c->d : c->dv;
                const double x = is_k ? c->scale * dkp[row * c->d + e] + 0.0
                                      : dkp[c->t2 * c->d + row * c->dv + col];
                memcpy((double *)out->t.data + tt_offset(out, (row * c->n2 + n2) * w + col), &x, sizeof x);
            }
    }
    free(scratch), free(dkp);
}

static void test_nsas_kernel_tails(void)
{
    static const int64_t shapes[][6] = {/* n1, n2, d, dv, bs, causal */
                                        {4, 2, 48, 48, 16, 0}, {6, 2, 100, 36, 5, 1},
                                        {3, 1, 1, 3, 7, 1}, {8, 1, 100, 100, 5, 0},
                                        /* three and four vectors of head lanes (avx512) */
                                        {20, 1, 48, 36, 16, 1}, {32, 1, 24, 20, 5, 0}};
    rng r = rng_seed(6413);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t ql[2] = {9, 6}, kl[2] = {30, 41};
        nsas_case c;
        nsas_case_fixed(&c, SPA_FLOAT64, shapes[i][0], shapes[i][1], 16, 16, 16, 2, 2, ql, kl,
                        shapes[i][5] ? 2 : 0, shapes[i][5] != 0, &r, true);
        c.d = shapes[i][2], c.dv = shapes[i][3], c.bs = shapes[i][4];
        nsas_case_draw_indices(&c, &r, true);
        c.strided = i % 2 == 1;
        nsas_io io;
        nsas_io_make_f64(&io, &c, &r);
        nsas_kernels(&c, &io);
        CU_ASSERT_EQUAL(nsas_compare_fwd(&c, &io), 0);
        CU_ASSERT_EQUAL(nsas_compare_grad(&c, &io), 0);
        nsas_io_free(&io);
        nsas_case_free(&c);
    }
}

/* A topk slot of -1 selects nothing: the kernels give what they give with
 * that slot left out (same bytes). */
static void test_nsas_padding_slot(void)
{
    rng r = rng_seed(6414);
    const int64_t ql[1] = {12}, kl[1] = {64};
    nsas_case c;
    nsas_case_fixed(&c, SPA_FLOAT64, 4, 2, 32, 32, 16, 3, 1, ql, kl, 2, true, &r, false);
    nsas_io io, io2;
    nsas_io_make_f64(&io, &c, &r);
    rng r2 = rng_seed(6414);
    nsas_case c2;
    nsas_case_fixed(&c2, SPA_FLOAT64, 4, 2, 32, 32, 16, 3, 1, ql, kl, 2, true, &r2, false);
    nsas_io_make_f64(&io2, &c2, &r2);
    /* c: slots (a, -1, b); c2: slots (a, b), as K = 2 */
    for (int64_t t = 0; t < c.t1 * c.n2; t++)
        c.idx[t * 3 + 1] = -1;
    c2.kc = 2;
    for (int64_t t = 0; t < c.t1 * c.n2; t++)
        c2.idx[t * 2] = c.idx[t * 3], c2.idx[t * 2 + 1] = c.idx[t * 3 + 2];
    nsas_kernels(&c, &io);
    nsas_kernels(&c2, &io2);
    ttensor *outs[5][2] = {{&io.o, &io2.o}, {&io.mx, &io2.mx}, {&io.dq, &io2.dq}, {&io.dk, &io2.dk}, {&io.dv, &io2.dv}};
    for (int k = 0; k < 5; k++)
        for (int64_t e = 0; e < tt_numel(outs[k][0]); e++)
            CU_ASSERT_EQUAL(tt_get(outs[k][0], e), tt_get(outs[k][1], e));
    nsas_io_free(&io), nsas_io_free(&io2);
    nsas_case_free(&c), nsas_case_free(&c2);
}
#endif

/* Bit-identical outputs for every runner. */
static void test_nsas_deterministic(void)
{
    rng r = rng_seed(6415);
    const int64_t ql[2] = {TEST_SIZE(70, 20), 33}, kl[2] = {256, 97};
    nsas_case c;
    nsas_case_fixed(&c, SPA_FLOAT64, 8, 2, 48, 32, 16, 4, 2, ql, kl, 2, true, &r, true);
    nsas_io io;
    nsas_io_make_f64(&io, &c, &r);
    spa_executor ex;
    spa_status st = nsas_fwd(&c, &io, 0, 0, &ex);
    if (!SPA_FLOAT64_NSA_SELECT || !SPA_FLOAT64_NSA_SELECT_GRAD) {
        CU_ASSERT_EQUAL(st, SPA_ERR_INVALID);
        nsas_io_free(&io), nsas_case_free(&c);
        return;
    }
    CU_ASSERT_EQUAL(nsas_grad(&c, &io, 0, 0, &ex), SPA_OK);
    ttensor *outs[6] = {&io.o, &io.mx, &io.sm, &io.dq, &io.dk, &io.dv};
    unsigned char *first[6];
    for (int k = 0; k < 6; k++)
        first[k] = tt_snapshot(outs[k]);
    for (int run = 1; run < N_RUNNERS; run++) {
        for (int k = 0; k < 6; k++)
            tt_fill_canary(outs[k]);
        CU_ASSERT_EQUAL(nsas_fwd(&c, &io, run, (size_t)run * 8, &ex), SPA_OK);
        CU_ASSERT_EQUAL(nsas_grad(&c, &io, run, (size_t)run * 8, &ex), SPA_OK);
        for (int k = 0; k < 6; k++)
            CU_ASSERT(tt_same_bytes(outs[k], first[k]));
    }
    for (int k = 0; k < 6; k++)
        free(first[k]);
    nsas_io_free(&io), nsas_case_free(&c);
}

/* The quick case set runs these suites whole: their draws (nsas_case.c and
 * the sizes here) reach the float64 kernels' row tails only at full size
 * (tools/case_coverage.sh), and they cost little. Each suite turns the
 * quick sizes off while it runs. */
static bool quick_before;
static int full_sizes_on(void)
{
    quick_before = test_quick;
    test_quick = false;
    return 0;
}
static int full_sizes_off(void)
{
    test_quick = quick_before;
    return 0;
}

void suite_f64_nsa(void);
void suite_f64_nsa(void)
{
    CU_pSuite s = CU_add_suite("f64_nsa_compress", full_sizes_on, full_sizes_off);
    CU_add_test(s, "random shapes vs fp64 reference", test_nsac_random);
    CU_add_test(s, "bit-identical across runners", test_nsac_deterministic);
#if SPA_FLOAT64_NSA_COMPRESS && SPA_FLOAT64_NSA_COMPRESS_GRAD
    CU_add_test(s, "kernels: D tails, any block and stride", test_nsac_kernel_tails);
#endif
    s = CU_add_suite("f64_nsa_compress_grad", full_sizes_on, full_sizes_off);
    CU_add_test(s, "random shapes vs fp64 reference", test_nsacg_random);
    CU_add_test(s, "bit-identical across runners", test_nsacg_deterministic);
    s = CU_add_suite("f64_nsa_select", full_sizes_on, full_sizes_off);
    CU_add_test(s, "random shapes and features vs fp64 reference", test_nsas_random);
    CU_add_test(s, "grad: random shapes and features vs fp64 reference", test_nsasg_random);
    CU_add_test(s, "NaN and Inf inputs, forward and grad", test_nsas_nonfinite);
    CU_add_test(s, "forward and grad bit-identical across runners", test_nsas_deterministic);
#if SPA_FLOAT64_NSA_SELECT && SPA_FLOAT64_NSA_SELECT_GRAD
    CU_add_test(s, "kernels: D tails, any block, several G, causal", test_nsas_kernel_tails);
    CU_add_test(s, "kernels: a topk slot of -1 selects nothing", test_nsas_padding_slot);
#endif
}
