/* Sliding-window attention forward and grad: the fp64 reference against
 * finite differences, then the library against the reference (every dtype,
 * varlen batches shorter and longer than the window, W = 1 and W >= T, G 1
 * to 40, D != Dv, strided views, both window and sequence conventions),
 * bit-identical across runners, one refusal per rule, hostile memory. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_swa.h"
#include "spa_dtypes.h"
#include "util.h"

#define SWA_MAX_B 5

typedef struct swa_case {
    spa_dtype dt;
    int64_t n1, n2, d, dv, t;
    int64_t batches, start[SWA_MAX_B + 1], len[SWA_MAX_B + 1];
    int64_t seq_vals[SWA_MAX_B + 1];
    spa_int_array seq;
    int64_t seq_type;
    int64_t w;                   /* keys of the band (the reference's W); INT64_MAX: unbounded */
    int64_t window, window_type; /* as passed */
    double scale;                /* as passed (NaN: default) */
    int32_t stat_rank;
    bool strided;
} swa_case;

static double *dalloc(int64_t n)
{
    return calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

static void case_finish(swa_case *c, bool leading_zero)
{
    int64_t s = 0, n = 0;
    if (leading_zero && c->seq_type == 0)
        c->seq_vals[n++] = 0;
    for (int64_t b = 0; b < c->batches; b++) {
        c->start[b] = s;
        s += c->len[b];
        c->seq_vals[n++] = c->seq_type == 0 ? s : c->len[b];
    }
    c->t = s;
    c->seq.data = c->seq_vals;
    c->seq.size = (uint64_t)n;
}

/* window / window_type for a band of w keys (INT64_MAX: unbounded), in one
 * of the conventions */
static void set_window(swa_case *c, int64_t w, int conv)
{
    c->w = w;
    if (conv == 0 && w != INT64_MAX) {
        c->window_type = SPA_SWA_WINDOW_KEYS, c->window = w;
    } else {
        c->window_type = SPA_SWA_WINDOW_LEFT, c->window = w == INT64_MAX ? -1 : w - 1;
    }
}

static void case_draw(swa_case *c, int i, rng *r)
{
    static const spa_dtype dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};
    static const int64_t groups[] = {1, 2, 3, 4, 5, 8, 12, 16, 17, 24, 32};
    memset(c, 0, sizeof *c);
    c->dt = dts[i % (SPA_HAVE_F64 ? 4 : 3)];
    const int64_t g = groups[rng_int(r, 0, (int64_t)(sizeof groups / sizeof groups[0]) - 1)];
    c->n2 = rng_int(r, 1, g > 8 ? 1 : 2);
    c->n1 = g * c->n2;
    c->d = rng_int(r, 0, 2) == 0 ? 16 * rng_int(r, 1, 4) : rng_int(r, 1, 70);
    c->dv = rng_int(r, 0, 1) ? c->d : rng_int(r, 1, 70);
    c->batches = rng_int(r, 1, SWA_MAX_B - 1);
    for (int64_t b = 0; b < c->batches; b++)
        c->len[b] = rng_int(r, 0, 5) == 0 ? rng_int(r, 0, 3) : rng_int(r, 1, TEST_SIZE(70, 24));
    c->seq_type = rng_int(r, 0, 1);
    case_finish(c, rng_int(r, 0, 2) == 0);
    const int64_t kind = rng_int(r, 0, 5);
    const int64_t w = kind == 0 ? 1 : kind == 1 ? INT64_MAX : kind == 2 ? c->t + rng_int(r, 0, 5)
                                                                          : rng_int(r, 2, 40);
    set_window(c, w, (int)rng_int(r, 0, 1));
    c->scale = rng_int(r, 0, 3) == 0 ? SPA_SWA_SCALE_DEFAULT : 0.05 + 0.3 * rng_unit(r);
    c->stat_rank = rng_int(r, 0, 1) ? 3 : 2;
    c->strided = rng_int(r, 0, 2) == 0;
}

static void case_describe(const swa_case *c, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s N1 %lld N2 %lld D %lld Dv %lld W %lld (window %lld type %lld) "
                                "seq_type %lld stats rank %d%s lens",
                     dtype_name(c->dt), (long long)c->n1, (long long)c->n2, (long long)c->d,
                     (long long)c->dv, (long long)c->w, (long long)c->window,
                     (long long)c->window_type, (long long)c->seq_type, c->stat_rank,
                     c->strided ? " strided" : "");
    for (int64_t b = 0; b < c->batches && n > 0 && (size_t)n < size; b++)
        n += snprintf(buf + n, size - (size_t)n, " %lld", (long long)c->len[b]);
}

static ref_swa_problem case_problem(const swa_case *c)
{
    ref_swa_problem p = {c->t, c->n1, c->n2, c->d, c->dv, c->batches, c->start, c->len,
                         c->w == INT64_MAX ? c->t + 1 : c->w,
                         isnan(c->scale) ? 1.0 / sqrt((double)c->d) : c->scale};
    return p;
}

typedef struct swa_io {
    ttensor q, k, v, mx, sm, o, dy, dq, dk, dv;
} swa_io;

static spa_dtype stat_dt(spa_dtype dt)
{
    return dt == SPA_FLOAT64 ? SPA_FLOAT64 : SPA_FLOAT32;
}

static void io_make(swa_io *io, const swa_case *c, rng *r)
{
    const int64_t qd[3] = {c->t, c->n1, c->d}, kd[3] = {c->t, c->n2, c->d},
                  vd[3] = {c->t, c->n2, c->dv}, od[3] = {c->t, c->n1, c->dv},
                  sd[3] = {c->t, c->n1, 8};
    tt_make(&io->q, c->dt, 3, qd, c->strided, r);
    tt_make(&io->k, c->dt, 3, kd, c->strided, r);
    tt_make(&io->v, c->dt, 3, vd, c->strided, r);
    tt_make(&io->dy, c->dt, 3, od, c->strided, r);
    tt_make(&io->o, c->dt, 3, od, c->strided, r);
    tt_make(&io->mx, stat_dt(c->dt), c->stat_rank, sd, c->strided, r);
    tt_make(&io->sm, stat_dt(c->dt), c->stat_rank, sd, c->strided, r);
    tt_make(&io->dq, c->dt, 3, qd, c->strided, r);
    tt_make(&io->dk, c->dt, 3, kd, c->strided, r);
    tt_make(&io->dv, c->dt, 3, vd, c->strided, r);
    tt_fill_random(&io->q, r, -1.0, 1.0);
    tt_fill_random(&io->k, r, -1.0, 1.0);
    tt_fill_random(&io->v, r, -1.0, 1.0);
    tt_fill_random(&io->dy, r, -1.0, 1.0);
}

static void io_free(swa_io *io)
{
    ttensor *all[] = {&io->q, &io->k, &io->v, &io->mx, &io->sm, &io->o, &io->dy, &io->dq, &io->dk, &io->dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tt_free(all[i]);
}

static bool io_guarded(const swa_io *io)
{
    const ttensor *all[] = {&io->q, &io->k, &io->v, &io->mx, &io->sm, &io->o, &io->dy, &io->dq, &io->dk, &io->dv};
    bool ok = true;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ok &= tt_guard_ok(all[i]);
    return ok;
}

/* The forward's phase 1 plans for a runner of this many threads where it is
 * not 0 (spa_swa_get_workspace_size_for). */
static uint32_t plan_workers;

static spa_status fwd_phase1(const swa_case *c, swa_io *io, uint64_t *size, spa_executor *ex)
{
    return spa_swa_get_workspace_size_for(&io->q.t, &io->k.t, &io->v.t, &c->seq, c->seq_type, c->scale,
                                          c->n1, "TND", c->window, c->window_type, &io->mx.t,
                                          &io->sm.t, &io->o.t, plan_workers, size, ex);
}

static spa_status grad_phase1(const swa_case *c, swa_io *io, uint64_t *size, spa_executor *ex)
{
    return spa_swa_grad_get_workspace_size(&io->q.t, &io->k.t, &io->v.t, &io->o.t, &io->dy.t,
                                           &io->mx.t, &io->sm.t, &c->seq, c->seq_type, c->scale,
                                           c->n1, NULL, c->window, c->window_type, &io->dq.t,
                                           &io->dk.t, &io->dv.t, size, ex);
}

static spa_status run_op(const swa_case *c, swa_io *io, bool grad, int runner, size_t skew)
{
    uint64_t size = 0;
    spa_executor ex;
    spa_status st = grad ? grad_phase1(c, io, &size, &ex) : fwd_phase1(c, io, &size, &ex);
    if (st != SPA_OK)
        return st;
    tws ws;
    tws_make(&ws, size, skew);
    st = grad ? spa_swa_grad(ws.ptr, ws.size, &ex, test_runner(runner))
              : spa_swa(ws.ptr, ws.size, &ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

/* statistic [T, N1] of a rank-2 or rank-3 (lane 0) tensor */
static double *stat_of(const ttensor *tt, int64_t n)
{
    double *s = dalloc(n);
    const int64_t lanes = tt->t.rank == 3 ? 8 : 1;
    for (int64_t i = 0; i < n; i++)
        s[i] = tt_get(tt, i * lanes);
    return s;
}

/* Forward against the reference; the lanes of a rank-3 statistic equal. */
static int64_t check_forward(const swa_case *c, const swa_io *io)
{
    const int64_t no = c->t * c->n1 * c->dv, ns = c->t * c->n1;
    double *q = tt_to_doubles(&io->q), *k = tt_to_doubles(&io->k), *v = tt_to_doubles(&io->v);
    double *o = dalloc(no), *om = dalloc(no), *mx = dalloc(ns), *mm = dalloc(ns), *sm = dalloc(ns),
           *smm = dalloc(ns);
    ref_swa_problem p = case_problem(c);
    ref_swa(&p, q, k, v, o, om, mx, mm, sm, smm);
    double *go = tt_to_doubles(&io->o), *gm = stat_of(&io->mx, ns), *gs = stat_of(&io->sm, ns);
    const tol to = tol_for(c->dt, 0x1p-14), ts = tol_for(stat_dt(c->dt), 0x1p-14);
    int64_t bad = 0;
    if (c->stat_rank == 3)
        for (int64_t i = 0; i < ns * 8; i++)
            if (!equal_or_nan(tt_get(&io->mx, i), gm[i / 8]) || !equal_or_nan(tt_get(&io->sm, i), gs[i / 8]))
                bad++;
    max_unspecified_where_nan(gm, mx, ns);
    bad += check_close("attentionOut", go, o, om, no, to) + check_close("softmaxMax", gm, mx, mm, ns, ts) +
           check_close("softmaxSum", gs, sm, smm, ns, ts);
    free(q), free(k), free(v), free(o), free(om), free(mx), free(mm), free(sm), free(smm);
    free(go), free(gm), free(gs);
    return bad;
}

/* Grad against the reference, from the statistics in io. */
static int64_t check_grad(const swa_case *c, const swa_io *io)
{
    const int64_t nq = c->t * c->n1 * c->d, nk = c->t * c->n2 * c->d, nv = c->t * c->n2 * c->dv,
                  ns = c->t * c->n1;
    double *q = tt_to_doubles(&io->q), *k = tt_to_doubles(&io->k), *v = tt_to_doubles(&io->v);
    double *o = tt_to_doubles(&io->o), *dy = tt_to_doubles(&io->dy);
    double *mx = stat_of(&io->mx, ns), *sm = stat_of(&io->sm, ns);
    double *dq = dalloc(nq), *dqm = dalloc(nq), *dk = dalloc(nk), *dkm = dalloc(nk), *dv = dalloc(nv),
           *dvm = dalloc(nv);
    ref_swa_problem p = case_problem(c);
    ref_swa_grad(&p, q, k, v, o, dy, mx, sm, dq, dqm, dk, dkm, dv, dvm);
    double *gq = tt_to_doubles(&io->dq), *gk = tt_to_doubles(&io->dk), *gv = tt_to_doubles(&io->dv);
    const tol t = tol_for(c->dt, 0x1p-14);
    int64_t bad = check_close("dq", gq, dq, dqm, nq, t) + check_close("dk", gk, dk, dkm, nk, t) +
                  check_close("dv", gv, dv, dvm, nv, t);
    free(q), free(k), free(v), free(o), free(dy), free(mx), free(sm), free(dq), free(dqm), free(dk);
    free(dkm), free(dv), free(dvm), free(gq), free(gk), free(gv);
    return bad;
}

/* Forward, then the grad from its outputs, each against the reference and
 * repeated on another runner bit for bit. */
/* Set by test_nonfinite: NaN / Inf in q, k, v or dy of every case. */
static bool poison_inputs;

static void check_case(const swa_case *c, rng *r, int runner, const char *label, int i)
{
    swa_io io;
    io_make(&io, c, r);
    if (poison_inputs) {
        ttensor *const pick[4] = {&io.q, &io.k, &io.v, &io.dy};
        tt_poison(pick[rng_int(r, 0, 3)], r, (int)rng_int(r, 1, 2), true);
    }
    char desc[300];
    case_describe(c, desc, sizeof desc);
    spa_status st = run_op(c, &io, false, runner, (size_t)rng_int(r, 0, 63));
    int64_t bad = st == SPA_OK ? check_forward(c, &io) : -1;
    unsigned char *o1 = tt_snapshot(&io.o), *m1 = tt_snapshot(&io.mx);
    if (st == SPA_OK) {
        CU_ASSERT_EQUAL(run_op(c, &io, false, (runner + 2) % N_RUNNERS, 3), SPA_OK);
        CU_ASSERT(tt_same_bytes(&io.o, o1) && tt_same_bytes(&io.mx, m1));
    }
    case_verdict(label, i, desc, st, bad, io_guarded(&io));
    st = run_op(c, &io, true, runner, (size_t)rng_int(r, 0, 63));
    bad = st == SPA_OK ? check_grad(c, &io) : -1;
    unsigned char *q1 = tt_snapshot(&io.dq), *k1 = tt_snapshot(&io.dk), *v1 = tt_snapshot(&io.dv);
    if (st == SPA_OK) {
        CU_ASSERT_EQUAL(run_op(c, &io, true, (runner + 1) % N_RUNNERS, 5), SPA_OK);
        CU_ASSERT(tt_same_bytes(&io.dq, q1) && tt_same_bytes(&io.dk, k1) && tt_same_bytes(&io.dv, v1));
    }
    case_verdict(label, i, desc, st, bad, io_guarded(&io));
    free(o1), free(m1), free(q1), free(k1), free(v1);
    io_free(&io);
}

/* ---- the reference itself: analytic gradient vs finite differences ---- */
static double loss(const ref_swa_problem *p, const double *q, const double *k, const double *v,
                   const double *dy)
{
    const int64_t no = p->t * p->n1 * p->dv, ns = p->t * p->n1;
    double *o = dalloc(no), *om = dalloc(no), *mx = dalloc(ns), *mm = dalloc(ns), *sm = dalloc(ns),
           *sg = dalloc(ns);
    ref_swa(p, q, k, v, o, om, mx, mm, sm, sg);
    double l = 0.0;
    for (int64_t i = 0; i < no; i++)
        l += o[i] * dy[i];
    free(o), free(om), free(mx), free(mm), free(sm), free(sg);
    return l;
}

static void test_reference_vs_finite_differences(void)
{
    rng r = rng_seed(2101);
    const int64_t len[2] = {5, 3};
    const int64_t start[2] = {0, 5};
    const ref_swa_problem p = {8, 4, 2, 5, 3, 2, start, len, 3, 0.7};
    const int64_t nq = 8 * 4 * 5, nk = 8 * 2 * 5, nv = 8 * 2 * 3, no = 8 * 4 * 3, ns = 8 * 4;
    double *q = dalloc(nq), *k = dalloc(nk), *v = dalloc(nv), *dy = dalloc(no);
    for (int64_t i = 0; i < nq; i++) q[i] = 2 * rng_unit(&r) - 1;
    for (int64_t i = 0; i < nk; i++) k[i] = 2 * rng_unit(&r) - 1;
    for (int64_t i = 0; i < nv; i++) v[i] = 2 * rng_unit(&r) - 1;
    for (int64_t i = 0; i < no; i++) dy[i] = 2 * rng_unit(&r) - 1;
    double *o = dalloc(no), *om = dalloc(no), *mx = dalloc(ns), *mm = dalloc(ns), *sm = dalloc(ns),
           *sg = dalloc(ns);
    ref_swa(&p, q, k, v, o, om, mx, mm, sm, sg);
    double *g[3], *gm[3];
    const int64_t n[3] = {nq, nk, nv};
    for (int j = 0; j < 3; j++)
        g[j] = dalloc(n[j]), gm[j] = dalloc(n[j]);
    ref_swa_grad(&p, q, k, v, o, dy, mx, sm, g[0], gm[0], g[1], gm[1], g[2], gm[2]);
    double *x[3] = {q, k, v};
    int64_t bad = 0;
    for (int j = 0; j < 3; j++)
        for (int64_t i = 0; i < n[j]; i++) {
            const double keep = x[j][i], h = 1e-5;
            x[j][i] = keep + h;
            const double lp = loss(&p, q, k, v, dy);
            x[j][i] = keep - h;
            const double lm = loss(&p, q, k, v, dy);
            x[j][i] = keep;
            const double fd = (lp - lm) / (2 * h);
            if (!(fabs(fd - g[j][i]) <= 1e-7 + 1e-6 * fabs(g[j][i])) && bad++ < 5)
                fprintf(stderr, "  grad %d [%lld]: analytic %.12g fd %.12g\n", j, (long long)i,
                        g[j][i], fd);
        }
    CU_ASSERT_EQUAL(bad, 0);
    /* a band of 3 keys: token 4 of batch 0 sees keys 2..4, not 1 */
    CU_ASSERT(g[1][(1 * 2 + 0) * 5] != 0.0);
    for (int j = 0; j < 3; j++)
        free(g[j]), free(gm[j]);
    free(q), free(k), free(v), free(dy), free(o), free(om), free(mx), free(mm), free(sm), free(sg);
}

static void test_random_shapes(void)
{
    rng r = rng_seed(2102);
    for (int i = 0; i < TEST_COUNT(40, 8); i++) {
        swa_case c;
        case_draw(&c, i, &r);
        plan_workers = (uint32_t)(i % 3); /* the forward planned for 0 (any), 1 or 2 threads */
        check_case(&c, &r, i % N_RUNNERS, "case", i);
    }
    plan_workers = 0;
}

/* NaN and Inf in q, k, v or dy: forward and grad as the reference computes
 * them (a NaN key makes NaN the rows whose band holds it, and no other). */
static void test_nonfinite(void)
{
    rng r = rng_seed(2109);
    poison_inputs = true;
    for (int i = 0; i < TEST_COUNT(24, 6); i++) {
        swa_case c;
        case_draw(&c, i, &r);
        check_case(&c, &r, i % N_RUNNERS, "nonfinite", i);
    }
    poison_inputs = false;
}

/* Named shapes: W = 1, W = T (full causal), sequences shorter than W, G 1
 * to 40 (sub-groups of 32 heads), D != Dv both ways, head-dim tails, keys
 * crossing whole key tiles (T > 256), every dtype. */
static void test_features(void)
{
    rng r = rng_seed(2103);
    static const struct {
        int64_t n1, n2, d, dv, w, conv, nb, l0, l1, l2;
    } f[] = {
        {4, 1, 32, 32, 1, 0, 2, 9, 17, 0},      {3, 3, 16, 48, INT64_MAX, 1, 2, 40, 33, 0},
        {8, 2, 24, 8, 64, 0, 3, 10, 1, 30},     {1, 1, 64, 64, 300, 1, 1, 290, 0, 0},
        {40, 1, 16, 16, 7, 0, 2, 12, 5, 0},     {32, 1, 128, 64, 20, 1, 1, 45, 0, 0},
        {16, 1, 128, 128, 48, 0, 1, 100, 0, 0}, {6, 2, 100, 36, 5, 0, 3, 0, 23, 4},
    };
    const int nf = (int)(sizeof f / sizeof f[0]);
    static const spa_dtype dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};
    int i = 0;
    for (int j = 0; j < nf; j++)
        for (int k = 0; k < (SPA_HAVE_F64 ? 4 : 3); k++, i++) {
            /* small targets: the short features in f32 alone (so the thin
             * set's turning dtype would drop most of them); elsewhere the
             * thin set turns the dtype with the feature */
            if (SPA_TEST_SMALL ? f[j].l0 > 100 || k > 0 : !TEST_THIN_DTYPE(j, k, SPA_HAVE_F64 ? 4 : 3))
                continue;
            swa_case c;
            memset(&c, 0, sizeof c);
            c.dt = dts[k];
            c.n1 = f[j].n1, c.n2 = f[j].n2, c.d = f[j].d, c.dv = f[j].dv;
            c.batches = f[j].nb;
            c.len[0] = f[j].l0, c.len[1] = f[j].l1, c.len[2] = f[j].l2;
            c.seq_type = k % 2;
            case_finish(&c, k == 2);
            set_window(&c, f[j].w, (int)f[j].conv);
            c.scale = k == 0 ? SPA_SWA_SCALE_DEFAULT : 0.125;
            c.stat_rank = k % 2 ? 2 : 3;
            c.strided = j % 2 == 1;
            check_case(&c, &r, i % N_RUNNERS, "feature", i);
        }
}

/* Large, distinct scores make the online softmax rescale: a later key tile
 * holds the band max. */
static void test_online_rescale(void)
{
    rng r = rng_seed(2104);
    swa_case c;
    memset(&c, 0, sizeof c);
    c.dt = SPA_FLOAT32, c.n1 = 2, c.n2 = 1, c.d = 16, c.dv = 16, c.batches = 1;
    c.len[0] = TEST_SIZE(600, 300);
    case_finish(&c, false);
    set_window(&c, INT64_MAX, 1);
    c.scale = 3.0, c.stat_rank = 3;
    swa_io io;
    io_make(&io, &c, &r);
    /* keys growing along the sequence: every later tile has larger scores */
    for (int64_t t = 0; t < c.t; t++)
        for (int64_t e = 0; e < c.d; e++)
            ((float *)io.k.t.data)[t * io.k.t.strides[0] + e * io.k.t.strides[2]] = (float)t / 100.0f;
    for (int64_t i = 0; i < tt_numel(&io.q); i++)
        ((float *)io.q.t.data)[tt_offset(&io.q, i)] = 0.25f;
    CU_ASSERT_EQUAL(run_op(&c, &io, false, 1, 0), SPA_OK);
    CU_ASSERT_EQUAL(check_forward(&c, &io), 0);
    CU_ASSERT_EQUAL(run_op(&c, &io, true, 2, 0), SPA_OK);
    CU_ASSERT_EQUAL(check_grad(&c, &io), 0);
    io_free(&io);
}

/* ---- refusals: one per rule, nothing written, a reason recorded ---- */
static void base_case(swa_case *c)
{
    memset(c, 0, sizeof *c);
    c->dt = SPA_FLOAT32, c->n1 = 4, c->n2 = 2, c->d = 16, c->dv = 8, c->batches = 2;
    c->len[0] = 5, c->len[1] = 7;
    case_finish(c, false);
    set_window(c, 4, 0);
    c->scale = 0.25, c->stat_rank = 3;
}

typedef struct swa_args {
    spa_tensor q, k, v, o, dy, mx, sm, dq, dk, dv;
    spa_int_array seq;
    int64_t seq_type, head_num, window, window_type;
    double scale;
    const char *layout;
} swa_args;

static spa_status call(const swa_args *a, bool grad, uint64_t *size, spa_executor *ex)
{
    if (grad)
        return spa_swa_grad_get_workspace_size(&a->q, &a->k, &a->v, &a->o, &a->dy, &a->mx, &a->sm,
                                               &a->seq, a->seq_type, a->scale, a->head_num,
                                               a->layout, a->window, a->window_type, &a->dq,
                                               &a->dk, &a->dv, size, ex);
    return spa_swa_get_workspace_size(&a->q, &a->k, &a->v, &a->seq, a->seq_type, a->scale,
                                      a->head_num, a->layout, a->window, a->window_type, &a->mx,
                                      &a->sm, &a->o, size, ex);
}

static void expect_refusal(const swa_args *a, bool grad, spa_status want, const char *what)
{
    uint64_t size = 12345;
    spa_executor ex, before;
    memset(&ex, 0x5A, sizeof ex);
    before = ex;
    const spa_status st = call(a, grad, &size, &ex);
    if (st != want)
        fprintf(stderr, "swa %s rule '%s': status %d, expected %d\n", grad ? "grad" : "fwd", what,
                (int)st, (int)want);
    CU_ASSERT_EQUAL(st, want);
    CU_ASSERT_EQUAL(size, 12345);
    CU_ASSERT(refusal_recorded(&ex, &before, st));
}

static void test_validation_rules(void)
{
    rng r = rng_seed(2105);
    swa_case c;
    base_case(&c);
    swa_io io;
    io_make(&io, &c, &r);
    swa_args base = {io.q.t, io.k.t, io.v.t, io.o.t, io.dy.t, io.mx.t, io.sm.t, io.dq.t, io.dk.t,
                     io.dv.t, c.seq, 0, 4, 4, SPA_SWA_WINDOW_KEYS, 0.25, "TND"};
    const int64_t bad_seq[2] = {5, 4}, short_seq[2] = {5, 11}, neg_len[2] = {-1, 13};
    for (int grad = 0; grad < 2; grad++) {
        uint64_t size;
        spa_executor ex;
        const spa_status st0 = call(&base, grad, &size, &ex);
        if (st0 != SPA_OK)
            fprintf(stderr, "swa base call refused: %s\n", spa_executor_reason(&ex, NULL));
        CU_ASSERT_EQUAL(st0, SPA_OK);
        swa_args a;
#define RULE(what, edit, want)                \
    do {                                      \
        a = base;                             \
        edit;                                 \
        expect_refusal(&a, grad, want, what); \
    } while (0)
        RULE("layout", a.layout = "BSND", SPA_ERR_INVALID);
        RULE("seq_len_type", a.seq_type = 2, SPA_ERR_INVALID);
        RULE("window_type", a.window_type = 2, SPA_ERR_INVALID);
        RULE("keys window >= 1", a.window = 0, SPA_ERR_INVALID);
        RULE("left window >= -1", (a.window_type = SPA_SWA_WINDOW_LEFT, a.window = -2), SPA_ERR_INVALID);
        RULE("scale not inf", a.scale = INFINITY, SPA_ERR_INVALID);
        RULE("query rank", a.q.rank = 2, SPA_ERR_INVALID);
        RULE("query negative stride", a.q.strides[1] = -1, SPA_ERR_INVALID);
        RULE("query dtype", a.q.dtype = SPA_INT32, SPA_ERR_INVALID);
        RULE("key dtype", a.k.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
        RULE("value dtype", a.v.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
        RULE("N1 % N2", (a.q.dims[1] = 3, a.head_num = 3), SPA_ERR_INVALID);
        RULE("head_num", a.head_num = 2, SPA_ERR_INVALID);
        RULE("key head dim", a.k.dims[2] = 8, SPA_ERR_INVALID);
        RULE("key tokens", a.k.dims[0] = 11, SPA_ERR_INVALID);
        RULE("value tokens", a.v.dims[0] = 11, SPA_ERR_INVALID);
        RULE("value heads", a.v.dims[1] = 1, SPA_ERR_INVALID);
        RULE("N2 >= 1", (a.k.dims[1] = 0, a.v.dims[1] = 0), SPA_ERR_INVALID);
        RULE("D >= 1", (a.q.dims[2] = 0, a.k.dims[2] = 0), SPA_ERR_INVALID);
        RULE("D <= 2^24", (a.q.dims[2] = a.k.dims[2] = ((int64_t)1 << 24) + 1), SPA_ERR_INVALID);
        RULE("Dv <= 2^24", (a.v.dims[2] = ((int64_t)1 << 24) + 1, a.o.dims[2] = a.dy.dims[2] = a.v.dims[2],
                            a.dv.dims[2] = a.v.dims[2]), SPA_ERR_INVALID);
        RULE("softmaxMax shape", a.mx.dims[2] = 4, SPA_ERR_INVALID);
        RULE("softmaxSum dtype", a.sm.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
        RULE("statistics ranks differ", (a.sm.rank = 2, a.sm.strides[1] = 1, a.sm.strides[0] = 4), SPA_ERR_INVALID);
        RULE("seq size", a.seq.size = 0, SPA_ERR_INVALID);
        RULE("seq data", a.seq.data = NULL, SPA_ERR_NULLPTR);
        RULE("seq decreasing", a.seq.data = bad_seq, SPA_ERR_INVALID);
        RULE("seq total", a.seq.data = short_seq, SPA_ERR_INVALID);
        RULE("seq negative length", (a.seq.data = neg_len, a.seq_type = 1), SPA_ERR_INVALID);
        if (!grad) {
            RULE("attentionOut shape", a.o.dims[2] = 4, SPA_ERR_INVALID);
            RULE("attentionOut dtype", a.o.dtype = SPA_BFLOAT16, SPA_ERR_INVALID);
            RULE("output reaches an element twice", a.o.strides[1] = 0, SPA_ERR_INVALID);
        } else {
            RULE("attentionOut shape", a.o.dims[2] = 4, SPA_ERR_INVALID);
            RULE("attentionOutGrad shape", a.dy.dims[0] = 11, SPA_ERR_INVALID);
            RULE("dq dtype", a.dq.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
            RULE("dk shape", a.dk.dims[1] = 1, SPA_ERR_INVALID);
            RULE("dv shape", a.dv.dims[0] = 11, SPA_ERR_INVALID);
            RULE("dv overlaps itself", a.dv.strides[0] = 0, SPA_ERR_INVALID);
        }
#undef RULE
        /* NULLs */
        const spa_tensor *keep;
        spa_status st;
        CU_ASSERT_EQUAL(grad ? spa_swa_grad_get_workspace_size(&base.q, &base.k, &base.v, &base.o, &base.dy,
                                                               &base.mx, &base.sm, NULL, 0, 0.25, 4, "TND", 4, 0,
                                                               &base.dq, &base.dk, &base.dv, &size, &ex)
                             : spa_swa_get_workspace_size(&base.q, &base.k, &base.v, NULL, 0, 0.25, 4, "TND", 4,
                                                          0, &base.mx, &base.sm, &base.o, &size, &ex),
                        SPA_ERR_NULLPTR);
        keep = NULL;
        st = grad ? spa_swa_grad_get_workspace_size(&base.q, &base.k, keep, &base.o, &base.dy, &base.mx,
                                                    &base.sm, &base.seq, 0, 0.25, 4, "TND", 4, 0, &base.dq,
                                                    &base.dk, &base.dv, &size, &ex)
                  : spa_swa_get_workspace_size(&base.q, &base.k, &base.v, &base.seq, 0, 0.25, 4, "TND", 4, 0,
                                               &base.mx, &base.sm, keep, &size, &ex);
        CU_ASSERT_EQUAL(st, SPA_ERR_NULLPTR);
        CU_ASSERT_EQUAL(call(&base, grad, NULL, &ex), SPA_ERR_NULLPTR);
        CU_ASSERT_EQUAL(call(&base, grad, &size, NULL), SPA_ERR_NULLPTR);
    }
    /* a workspace whose size overflows (rule 11): T = 2^59 tokens of one head
     * dim, inputs read with stride 0, outputs dense (never touched: phase 1
     * reads no tensor) */
    {
        const int64_t t = (int64_t)1 << 59;
        static float dummy[1];
        spa_tensor q = {SPA_FLOAT32, 3, {t, 1, 1}, {0, 0, 0}, dummy};
        spa_tensor o = {SPA_FLOAT32, 3, {t, 1, 1}, {1, 1, 1}, dummy};
        spa_tensor st = {SPA_FLOAT32, 2, {t, 1}, {1, 1}, dummy};
        const int64_t end[1] = {t};
        swa_args a = {q, q, q, o, q, st, st, o, o, o, {end, 1}, 0, 1, 4, SPA_SWA_WINDOW_KEYS, 1.0, "TND"};
        a.o.data = a.dq.data = a.dk.data = a.dv.data = (void *)dummy; /* same span, distinct roles */
        a.mx = a.sm = st;
        expect_refusal(&a, false, SPA_ERR_INVALID, "workspace size overflows");
        a.mx = a.sm = st;
        a.mx.strides[0] = a.sm.strides[0] = 0; /* grad inputs: any strides */
        expect_refusal(&a, true, SPA_ERR_INVALID, "grad workspace size overflows");
    }
    /* float64 where the build leaves it out */
    if (!SPA_HAVE_F64) {
        swa_args a = base;
        a.q.dtype = a.k.dtype = a.v.dtype = a.o.dtype = SPA_FLOAT64;
        a.mx.dtype = a.sm.dtype = SPA_FLOAT64;
        expect_refusal(&a, false, SPA_ERR_INVALID, "float64 not built");
    }
    io_free(&io);
}

/* Phase 2: workspace too small, NULL, overlapping a tensor or the array;
 * spa_executor_run runs either op; an empty call. */
static void test_phase2(void)
{
    rng r = rng_seed(2106);
    swa_case c;
    base_case(&c);
    swa_io io;
    io_make(&io, &c, &r);
    for (int grad = 0; grad < 2; grad++) {
        uint64_t size;
        spa_executor ex;
        CU_ASSERT_EQUAL(grad ? grad_phase1(&c, &io, &size, &ex) : fwd_phase1(&c, &io, &size, &ex), SPA_OK);
        tws ws;
        tws_make(&ws, size, 1);
        if (grad) {
            CU_ASSERT_EQUAL(spa_swa_grad(ws.ptr, size - 1, &ex, NULL), SPA_ERR_WORKSPACE);
            CU_ASSERT_EQUAL(spa_swa_grad(NULL, size, &ex, NULL), SPA_ERR_NULLPTR);
            CU_ASSERT_EQUAL(spa_swa(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID); /* another op's plan */
        } else {
            CU_ASSERT_EQUAL(spa_swa(ws.ptr, size - 1, &ex, NULL), SPA_ERR_WORKSPACE);
            CU_ASSERT_EQUAL(spa_swa(NULL, size, &ex, NULL), SPA_ERR_NULLPTR);
            CU_ASSERT_EQUAL(spa_swa_grad(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
        }
        CU_ASSERT_EQUAL(spa_executor_run(ws.ptr, size, &ex, test_runner(2)), SPA_OK);
        CU_ASSERT(grad ? check_grad(&c, &io) == 0 : check_forward(&c, &io) == 0);
        /* the workspace over an input: refused before anything is written */
        unsigned char *snap = tt_snapshot(grad ? &io.dq : &io.o);
        void *keep = io.k.t.data;
        io.k.t.data = ws.ptr;
        CU_ASSERT_EQUAL(grad ? grad_phase1(&c, &io, &size, &ex) : fwd_phase1(&c, &io, &size, &ex), SPA_OK);
        CU_ASSERT_EQUAL(grad ? spa_swa_grad(ws.ptr, size, &ex, NULL) : spa_swa(ws.ptr, size, &ex, NULL),
                        SPA_ERR_INVALID);
        CU_ASSERT(tt_same_bytes(grad ? &io.dq : &io.o, snap));
        io.k.t.data = keep;
        free(snap);
        tws_free(&ws);
    }
    /* an empty call: T = 0 */
    swa_case e;
    base_case(&e);
    e.batches = 1, e.len[0] = 0;
    case_finish(&e, false);
    swa_io eio;
    io_make(&eio, &e, &r);
    uint64_t size = 99;
    spa_executor ex;
    CU_ASSERT_EQUAL(fwd_phase1(&e, &eio, &size, &ex), SPA_OK);
    CU_ASSERT_EQUAL(size, 0);
    CU_ASSERT_EQUAL(spa_swa(NULL, 0, &ex, NULL), SPA_OK);
    CU_ASSERT_EQUAL(grad_phase1(&e, &eio, &size, &ex), SPA_OK);
    CU_ASSERT_EQUAL(spa_swa_grad(NULL, 0, &ex, NULL), SPA_OK);
    io_free(&eio);
    io_free(&io);
}

/* The sequence array laid over an output: phase 2 reads it once into the
 * workspace before any output is written, so the results are right. And a
 * non-finite key outside every band of a token leaves that token finite. */
static void test_hostile_memory(void)
{
    rng r = rng_seed(2107);
    for (int grad = 0; grad < 2; grad++) {
        swa_case c;
        base_case(&c);
        swa_io io;
        io_make(&io, &c, &r);
        if (grad)
            CU_ASSERT_EQUAL(run_op(&c, &io, false, 0, 0), SPA_OK);
        /* the array in the first bytes of an output (f32 elements: 2 per int64) */
        ttensor *out = grad ? &io.dq : &io.o;
        int64_t *arr = out->t.data;
        memcpy(arr, c.seq_vals, sizeof(int64_t) * (size_t)c.seq.size);
        swa_case h = c;
        h.seq.data = arr;
        CU_ASSERT_EQUAL(run_op(&h, &io, grad, 1, 0), SPA_OK);
        CU_ASSERT_EQUAL(grad ? check_grad(&c, &io) : check_forward(&c, &io), 0);
        io_free(&io);
    }
    /* W = 4, 16 tokens of one batch, key and value of token 10 +inf: token 9
     * and tokens 14, 15 never see them */
    swa_case c;
    base_case(&c);
    c.batches = 1, c.len[0] = 16, c.n1 = 2, c.n2 = 1;
    case_finish(&c, false);
    swa_io io;
    io_make(&io, &c, &r);
    for (int64_t e = 0; e < c.d; e++)
        ((float *)io.k.t.data)[10 * io.k.t.strides[0] + e * io.k.t.strides[2]] = INFINITY;
    for (int64_t e = 0; e < c.dv; e++)
        ((float *)io.v.t.data)[10 * io.v.t.strides[0] + e * io.v.t.strides[2]] = INFINITY;
    CU_ASSERT_EQUAL(run_op(&c, &io, false, 0, 0), SPA_OK);
    for (int64_t t = 0; t < 16; t++)
        for (int64_t i = 0; i < c.n1 * c.dv; i++) {
            const double x = tt_get(&io.o, t * c.n1 * c.dv + i);
            if (t < 10 || t > 13)
                CU_ASSERT(isfinite(x));
        }
    io_free(&io);
}

void suite_swa(void)
{
    CU_pSuite s = CU_add_suite("swa", NULL, NULL);
    /* The reference's own check (no library call): the full set runs it; the
     * quick one, for emulators, sanitizers and valgrind, has nothing to learn there. */
    if (!test_quick)
        CU_add_test(s, "fp64 reference vs finite differences", test_reference_vs_finite_differences);
    CU_add_test(s, "random shapes, all dtypes, fwd and grad", test_random_shapes);
    CU_add_test(s, "NaN and Inf inputs, fwd and grad", test_nonfinite);
    CU_add_test(s, "named features", test_features);
    CU_add_test(s, "online softmax rescaling", test_online_rescale);
    CU_add_test(s, "validation rules", test_validation_rules);
    CU_add_test(s, "phase 2", test_phase2);
    CU_add_test(s, "hostile memory", test_hostile_memory);
}
