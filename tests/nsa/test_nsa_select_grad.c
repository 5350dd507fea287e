/* NsaSelectedAttentionGrad: the fp64 gradient reference against central
 * finite differences of the fp64 forward, then the library against that
 * reference, on every rule, across runners. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nsas_case.h"

/* spec/nsa.md 5 point 12 (the reference rounds P and dS like the op); f32 as
 * in the forward suite. */
static tol grad_tol(spa_dtype dt)
{
    /* floor: half the spacing of the dtype's subnormals (util.h); it was left
     * unset, an uninitialised read that passed or failed with the compiler */
    tol t;
    if (dt == SPA_FLOAT16)
        t.atol = t.rtol = 0x1p-9, t.floor = 0x1p-25;
    else if (dt == SPA_BFLOAT16)
        t.atol = t.rtol = 0x1p-6, t.floor = 0x1p-134;
    else
        t.atol = 0x1p-16, t.rtol = 0x1p-22, t.floor = 0x1p-150;
    return t;
}

static double *dalloc(int64_t n)
{
    return calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

/* ---- the reference itself: analytic gradient vs finite differences ---- */

/* L = sum O * dY of the exact (unrounded) fp64 forward. */
static double loss(const ref_nsas_problem *p, const double *q, const double *k, const double *v,
                   const double *dy)
{
    const int64_t no = p->t1 * p->n1 * p->dv, ns = p->t1 * p->n1;
    double *o = dalloc(no), *om = dalloc(no), *mx = dalloc(ns), *mm = dalloc(ns), *sm = dalloc(ns),
           *sg = dalloc(ns);
    ref_nsa_select(p, q, k, v, o, om, mx, mm, sm, sg);
    double l = 0.0;
    for (int64_t i = 0; i < no; i++)
        l += o[i] * dy[i];
    free(o), free(om), free(mx), free(mm), free(sm), free(sg);
    return l;
}

static int64_t fd_check(const char *what, const ref_nsas_problem *p, double *x, int64_t n,
                        const double *an, double *q, double *k, double *v, const double *dy)
{
    int64_t bad = 0;
    const double h = 1e-5;
    for (int64_t i = 0; i < n; i++) {
        const double keep = x[i];
        x[i] = keep + h;
        const double lp = loss(p, q, k, v, dy);
        x[i] = keep - h;
        const double lm = loss(p, q, k, v, dy);
        x[i] = keep;
        const double fd = (lp - lm) / (2 * h);
        if (!(fabs(fd - an[i]) <= 1e-7 + 1e-6 * fabs(an[i])) && bad++ < 5)
            fprintf(stderr, "  %s[%lld]: analytic %.12g finite difference %.12g\n", what,
                    (long long)i, an[i], fd);
    }
    return bad;
}

static void test_reference_vs_finite_differences(void)
{
    rng r = rng_seed(401);
    const int64_t ql[2] = {4, 3}, kl[2] = {48, 40};
    for (int pass = 0; pass < 2; pass++) {
        nsas_case c;
        /* pass 0: causal (early tokens fully masked), duplicates; pass 1: no mask, G 3 */
        nsas_case_fixed(&c, SPA_FLOAT32, pass ? 3 : 4, pass ? 1 : 2, 16, 16, 16, 3, 2, ql, kl,
                        2, pass == 0, &r, true);
        c.t2 += 2; /* rows past the last batch: never selected, zero gradient */
        ref_nsas_problem p = nsas_case_problem(&c);
        p.t2 = c.t2;
        const int64_t nq = c.t1 * c.n1 * c.d, nk = c.t2 * c.n2 * c.d, nv = c.t2 * c.n2 * c.dv;
        const int64_t no = c.t1 * c.n1 * c.dv, ns = c.t1 * c.n1;
        double *q = dalloc(nq), *k = dalloc(nk), *v = dalloc(nv), *dy = dalloc(no);
        for (int64_t i = 0; i < nq; i++) q[i] = 2 * rng_unit(&r) - 1;
        for (int64_t i = 0; i < nk; i++) k[i] = 2 * rng_unit(&r) - 1;
        for (int64_t i = 0; i < nv; i++) v[i] = 2 * rng_unit(&r) - 1;
        for (int64_t i = 0; i < no; i++) dy[i] = 2 * rng_unit(&r) - 1;
        double *o = dalloc(no), *om = dalloc(no), *mx = dalloc(ns), *mm = dalloc(ns),
               *sm = dalloc(ns), *sg = dalloc(ns);
        ref_nsa_select(&p, q, k, v, o, om, mx, mm, sm, sg);
        double *dq = dalloc(nq), *dqm = dalloc(nq), *dk = dalloc(nk), *dkm = dalloc(nk),
               *dv = dalloc(nv), *dvm = dalloc(nv);
        ref_nsa_select_grad(&p, q, k, v, o, dy, mx, sm, dq, dqm, dk, dkm, dv, dvm);
        CU_ASSERT_EQUAL(fd_check("dq", &p, q, nq, dq, q, k, v, dy), 0);
        CU_ASSERT_EQUAL(fd_check("dk", &p, k, nk, dk, q, k, v, dy), 0);
        CU_ASSERT_EQUAL(fd_check("dv", &p, v, nv, dv, q, k, v, dy), 0);
        free(q), free(k), free(v), free(dy), free(o), free(om), free(mx), free(mm), free(sm), free(sg);
        free(dq), free(dqm), free(dk), free(dkm), free(dv), free(dvm);
        nsas_case_free(&c);
    }
}

/* ---- the library ---- */

static spa_status phase1(const nsas_case *c, nsas_io *io, uint64_t *size, spa_executor *ex)
{
    return spa_nsa_select_grad_get_workspace_size(
        &io->q.t, &io->k.t, &io->v.t, &io->o.t, &io->dy.t, &io->mx.t, &io->sm.t, &io->topk.t,
        &c->sq, &c->skv, c->has_mask ? &io->mask.t : NULL, c->scale, c->bs, c->kc, c->n1, "TND",
        c->sparse_mode, &io->dq.t, &io->dk.t, &io->dv.t, size, ex);
}

static spa_status run_grad(const nsas_case *c, nsas_io *io, int runner, size_t skew)
{
    uint64_t ws_size = 0;
    spa_executor ex;
    spa_status st = phase1(c, io, &ws_size, &ex);
    if (st != SPA_OK)
        return st;
    tws ws;
    tws_make(&ws, ws_size, skew);
    st = spa_nsa_select_grad(ws.ptr, ws.size, &ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

/* Grad inputs: random O and dY; softmax statistics of the fp64 forward,
 * stored as the f32 the forward would write. */
/* o random, softmaxMax / softmaxSum the reference's for the inputs in io. */
static void fill_stats(const nsas_case *c, nsas_io *io, rng *r)
{
    tt_fill_random(&io->o, r, -1.0, 1.0);
    double *q = tt_to_doubles(&io->q), *k = tt_to_doubles(&io->k), *v = tt_to_doubles(&io->v);
    const int64_t no = c->t1 * c->n1 * c->dv, ns = c->t1 * c->n1;
    double *o = dalloc(no), *om = dalloc(no), *mx = dalloc(ns), *mm = dalloc(ns), *sm = dalloc(ns),
           *sg = dalloc(ns);
    ref_nsas_problem p = nsas_case_problem(c);
    ref_nsa_select(&p, q, k, v, o, om, mx, mm, sm, sg);
    nsas_io_set_stat(&io->mx, mx, ns);
    nsas_io_set_stat(&io->sm, sm, ns);
    free(q), free(k), free(v), free(o), free(om), free(mx), free(mm), free(sm), free(sg);
}

/* Set by test_nonfinite: NaN / Inf in the inputs of every case. */
static bool poison_inputs;

static void make_inputs(const nsas_case *c, nsas_io *io, rng *r)
{
    nsas_io_make(io, c, r);
    /* q, k, v poisoned before the statistics (as the forward of those
     * inputs gives them), dy and o after (fill_stats draws o) */
    const bool fwd_side = poison_inputs && rng_int(r, 0, 1) == 0;
    if (fwd_side)
        nsas_io_poison(io, r);
    fill_stats(c, io, r);
    if (poison_inputs && !fwd_side)
        tt_poison(rng_int(r, 0, 1) ? &io->dy : &io->o, r, (int)rng_int(r, 1, 2), true);
}

static int64_t compare_with_ref(const nsas_case *c, const nsas_io *io)
{
    double *q = tt_to_doubles(&io->q), *k = tt_to_doubles(&io->k), *v = tt_to_doubles(&io->v);
    double *o = tt_to_doubles(&io->o), *dy = tt_to_doubles(&io->dy);
    const int64_t nq = c->t1 * c->n1 * c->d, nk = c->t2 * c->n2 * c->d, nv = c->t2 * c->n2 * c->dv,
                  ns = c->t1 * c->n1;
    double *mx = dalloc(ns), *sm = dalloc(ns);
    for (int64_t i = 0; i < ns; i++) {
        mx[i] = tt_get(&io->mx, i * 8);
        sm[i] = tt_get(&io->sm, i * 8);
    }
    double *dq = dalloc(nq), *dqm = dalloc(nq), *dk = dalloc(nk), *dkm = dalloc(nk), *dv = dalloc(nv),
           *dvm = dalloc(nv);
    ref_nsas_problem p = nsas_case_problem(c);
    ref_nsa_select_grad(&p, q, k, v, o, dy, mx, sm, dq, dqm, dk, dkm, dv, dvm);
    double *gq = tt_to_doubles(&io->dq), *gk = tt_to_doubles(&io->dk), *gv = tt_to_doubles(&io->dv);
    const tol t = grad_tol(c->dt);
    int64_t bad = check_close("dq", gq, dq, dqm, nq, t) + check_close("dk", gk, dk, dkm, nk, t) +
                  check_close("dv", gv, dv, dvm, nv, t);
    free(q), free(k), free(v), free(o), free(dy), free(mx), free(sm), free(dq), free(dqm), free(dk);
    free(dkm), free(dv), free(dvm), free(gq), free(gk), free(gv);
    return bad;
}

static bool guarded(const nsas_io *io)
{
    return tt_guard_ok(&io->dq) && tt_guard_ok(&io->dk) && tt_guard_ok(&io->dv) &&
           tt_guard_ok(&io->q) && tt_guard_ok(&io->o) && tt_guard_ok(&io->mx);
}

static void check_case(nsas_case *c, rng *r, int runner, const char *label, int i)
{
    nsas_io io;
    make_inputs(c, &io, r);
    spa_status st = run_grad(c, &io, runner, (size_t)rng_int(r, 0, 63));
    int64_t bad = st == SPA_OK ? compare_with_ref(c, &io) : -1;
    char desc[400];
    nsas_case_describe(c, desc, sizeof desc);
    case_verdict(label, i, desc, st, bad, guarded(&io));
    nsas_io_free(&io);
}

static void test_random_shapes(void)
{
    rng r = rng_seed(402);
    for (int i = 0; i < TEST_COUNT(48, 8); i++) {
        nsas_case c;
        nsas_case_draw(&c, i, &r);
        check_case(&c, &r, i % N_RUNNERS, "case", i);
        nsas_case_free(&c);
    }
}

/* NaN and Inf in q, k, v (the statistics from the forward of those inputs),
 * dy or o: the grads as the reference computes them, NaN
 * wherever a NaN reaches. */
static void test_nonfinite(void)
{
    rng r = rng_seed(409);
    poison_inputs = true;
    for (int i = 0; i < TEST_COUNT(24, 6); i++) {
        nsas_case c;
        nsas_case_draw(&c, i, &r);
        check_case(&c, &r, i % N_RUNNERS, "nonfinite", i);
        nsas_case_free(&c);
    }
    poison_inputs = false;
}

/* The named features of nsas_case.h. */
static void test_features(void)
{
    rng r = rng_seed(403);
    for (int i = 0; i < nsas_feature_count(); i++) {
        nsas_case c;
        nsas_case_feature(&c, i, &r);
        check_case(&c, &r, i % N_RUNNERS, "feature", i);
        nsas_case_free(&c);
    }
}

/* Every selected key in the future: dq and dk are exactly +0 (a masked score
 * is a constant), dv gets the uniform share of dY; no NaN or Inf. */
static void test_fully_masked(void)
{
    rng r = rng_seed(404);
    const int64_t ql[1] = {3};
    for (int k = 0; k < 6; k++) {
        static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
        /* KV 90 from k 3: block 5 is partial (10 rows), its 6 rows past the
         * end stay out of the average */
        const int64_t kl[1] = {k < 3 ? 96 : 90};
        nsas_case c;
        nsas_case_fixed(&c, dts[k % 3], 4, 2, 32, 32, 16, 3, 1, ql, kl, 2, true, &r, true);
        for (int64_t i = 0; i < c.t1 * c.n2 * c.kc; i++)
            c.idx[i] = (int32_t)(1 + i % 5);
        nsas_io io;
        make_inputs(&c, &io, &r);
        CU_ASSERT_EQUAL(run_grad(&c, &io, k % 3, 5), SPA_OK);
        CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
        for (int64_t i = 0; i < tt_numel(&io.dq); i++)
            CU_ASSERT(tt_get(&io.dq, i) == 0.0 && !signbit(tt_get(&io.dq, i)));
        for (int64_t i = 0; i < tt_numel(&io.dk); i++)
            CU_ASSERT(tt_get(&io.dk, i) == 0.0 && !signbit(tt_get(&io.dk, i)));
        for (int64_t i = 0; i < tt_numel(&io.dv); i++)
            CU_ASSERT(isfinite(tt_get(&io.dv, i)));
        nsas_io_free(&io);
        nsas_case_free(&c);
    }
}

/* A partial last block, no mask, every score very negative (q, k ~ 1,
 * scale -4: m about -110): the rows past the batch's KV must weigh exactly 0
 * in the grad too (exp(-m) overflows), so dq stays finite and matches. */
static void test_partial_block_low_scores(void)
{
    rng r = rng_seed(409);
    const int64_t ql[1] = {4}, kl[1] = {40};
    for (int k = 0; k < 3; k++) {
        static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
        nsas_case c;
        nsas_case_fixed(&c, dts[k], 4, 2, 32, 32, 16, 2, 1, ql, kl, 0, false, &r, true);
        c.scale = -4.0;
        for (int64_t i = 0; i < c.t1 * c.n2 * c.kc; i++)
            c.idx[i] = (int32_t)(2 - i % 2); /* block 2 (8 of 16 rows) and block 1 */
        nsas_io io;
        nsas_io_make(&io, &c, &r);
        tt_fill_random(&io.q, &r, 0.9, 1.0);
        tt_fill_random(&io.k, &r, 0.9, 1.0);
        fill_stats(&c, &io, &r);
        CU_ASSERT_EQUAL(run_grad(&c, &io, k, 3), SPA_OK);
        CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
        for (int64_t i = 0; i < tt_numel(&io.dq); i++)
            CU_ASSERT(isfinite(tt_get(&io.dq, i)));
        nsas_io_free(&io);
        nsas_case_free(&c);
    }
}

static void test_deterministic_across_runners(void)
{
    const int64_t ql[3] = {37, 0, 50}, kl[3] = {300, 64, 129};
    for (int k = 0; k < 3; k++) {
        static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
        rng r = rng_seed(405);
        nsas_case c;
        nsas_case_fixed(&c, dts[k], 8, 2, 64, 32, 32, 4, 3, ql, kl, 2, true, &r, true);
        nsas_io io;
        make_inputs(&c, &io, &r);
        CU_ASSERT_EQUAL(run_grad(&c, &io, 0, 0), SPA_OK);
        unsigned char *q1 = tt_snapshot(&io.dq), *k1 = tt_snapshot(&io.dk), *v1 = tt_snapshot(&io.dv);
        for (int run = 1; run < N_RUNNERS; run++) {
            tt_fill_canary(&io.dq);
            tt_fill_canary(&io.dk);
            tt_fill_canary(&io.dv);
            CU_ASSERT_EQUAL(run_grad(&c, &io, run, (size_t)run * 8), SPA_OK);
            CU_ASSERT(tt_same_bytes(&io.dq, q1));
            CU_ASSERT(tt_same_bytes(&io.dk, k1));
            CU_ASSERT(tt_same_bytes(&io.dv, v1));
        }
        free(q1), free(k1), free(v1);
        nsas_io_free(&io);
        nsas_case_free(&c);
    }
}

/* The upstream example (spec/nsa.md 4.5), one query: K 16 blocks 0..15 of 64,
 * D = Dv = 192, everything 2.0 (statistics too, not from a forward). All
 * scores equal, so P = exp(2*2*192 - 2)/2 overflows to +Inf in f32 as it would
 * upstream; here with max/sum from the forward instead: P = 1/1024, dP = D,
 * so dS = 0, dq = dk = 0 and dv = P*dY = 2/1024. */
static void test_upstream_example(void)
{
    rng r = rng_seed(406);
    const int64_t ql[1] = {1}, kl[1] = {1024};
    nsas_case c;
    nsas_case_fixed(&c, SPA_FLOAT16, 1, 1, 192, 192, 64, 16, 1, ql, kl, 0, false, &r, false);
    c.scale = 1.0;
    for (int64_t i = 0; i < c.kc; i++)
        c.idx[i] = (int32_t)i;
    nsas_io io;
    nsas_io_make(&io, &c, &r);
    tt_fill_random(&io.q, &r, 2.0, 2.0);
    tt_fill_random(&io.k, &r, 2.0, 2.0);
    tt_fill_random(&io.v, &r, 2.0, 2.0);
    tt_fill_random(&io.o, &r, 2.0, 2.0);
    tt_fill_random(&io.dy, &r, 2.0, 2.0);
    nsas_io_set_indices(&io, &c);
    const double mx = 768.0, sm = 1024.0;
    nsas_io_set_stat(&io.mx, &mx, 1);
    nsas_io_set_stat(&io.sm, &sm, 1);
    CU_ASSERT_EQUAL(run_grad(&c, &io, 0, 0), SPA_OK);
    for (int64_t i = 0; i < tt_numel(&io.dq); i++)
        CU_ASSERT_EQUAL(tt_get(&io.dq, i), 0.0);
    for (int64_t i = 0; i < tt_numel(&io.dk); i++)
        CU_ASSERT_EQUAL(tt_get(&io.dk, i), 0.0);
    for (int64_t i = 0; i < tt_numel(&io.dv); i++)
        CU_ASSERT_EQUAL(tt_get(&io.dv, i), 2.0 / 1024.0);
    nsas_io_free(&io);
    nsas_case_free(&c);
}

/* ---- validation ---- */

typedef struct grad_args {
    spa_tensor q, k, v, o, dy, mx, sm, topk, mask, dq, dk, dv;
    spa_int_array sq, skv;
    const char *layout;
    double scale;
    int64_t head_num, mode, bs, kc;
    bool use_mask;
    unsigned nulls; /* bit i: the i-th pointer argument is NULL */
} grad_args;

static spa_status call_phase1(const grad_args *a, uint64_t *size, spa_executor *ex)
{
#define P(i, x) ((a->nulls >> (i)) & 1u ? NULL : (x))
    return spa_nsa_select_grad_get_workspace_size(
        P(0, &a->q), P(1, &a->k), P(2, &a->v), P(3, &a->o), P(4, &a->dy), P(5, &a->mx),
        P(6, &a->sm), P(7, &a->topk), P(8, &a->sq), P(9, &a->skv), a->use_mask ? &a->mask : NULL,
        a->scale, a->bs, a->kc, a->head_num, a->layout, a->mode, P(10, &a->dq), P(11, &a->dk),
        P(12, &a->dv), P(13, size), P(14, ex));
#undef P
}

typedef void (*mutate_fn)(grad_args *a);
#define MUT(name, body) static void name(grad_args *a) { body; }
static int64_t seq_bad[2];
MUT(m_null_layout, a->layout = NULL)
MUT(m_null_o_data, a->o.data = NULL)
MUT(m_layout, a->layout = "BSH")
MUT(m_mode_1, a->mode = 1)
MUT(m_bs_24, a->bs = 24)
MUT(m_bs_256, a->bs = 256)
MUT(m_kc_0, a->kc = 0; a->topk.dims[2] = 0)
MUT(m_kc_33, a->kc = 33; a->topk.dims[2] = 33)
MUT(m_dtype_o, a->o.dtype = SPA_FLOAT16)
MUT(m_dtype_dy, a->dy.dtype = SPA_BFLOAT16)
MUT(m_dtype_dq, a->dq.dtype = SPA_FLOAT16)
MUT(m_dtype_dk, a->dk.dtype = SPA_FLOAT16)
MUT(m_dtype_dv, a->dv.dtype = SPA_FLOAT16)
MUT(m_dtype_mx, a->mx.dtype = SPA_FLOAT16)
MUT(m_dtype_sm, a->sm.dtype = SPA_INT32)
MUT(m_dtype_topk, a->topk.dtype = SPA_FLOAT32)
MUT(m_dtype_q_int, a->q.dtype = SPA_INT32)
MUT(m_mask_dtype, a->use_mask = true; a->mask.dtype = SPA_FLOAT16)
MUT(m_mask_rank, a->use_mask = true; a->mask.rank = 1)
MUT(m_o_shape, a->o.dims[2] = 16)
MUT(m_dy_shape, a->dy.dims[1] = 4)
MUT(m_mx_shape, a->mx.dims[2] = 1)
MUT(m_sm_shape, a->sm.dims[0] = 9)
MUT(m_dq_shape, a->dq.dims[2] = 48)
MUT(m_dk_shape, a->dk.dims[0] = 255)
MUT(m_dv_shape, a->dv.dims[1] = 1)
MUT(m_head_num, a->head_num = 16)
MUT(m_n1_not_multiple, a->q.dims[1] = 7; a->o.dims[1] = 7; a->dy.dims[1] = 7; a->mx.dims[1] = 7; a->sm.dims[1] = 7; a->dq.dims[1] = 7; a->head_num = 7)
MUT(m_seq_len_differ, a->sq.size = 1)
MUT(m_seq_q_total, seq_bad[0] = 5; seq_bad[1] = 9; a->sq.data = seq_bad)
MUT(m_seq_kv_total, seq_bad[0] = 128; seq_bad[1] = 300; a->skv.data = seq_bad)
MUT(m_seq_decreasing, seq_bad[0] = 6; seq_bad[1] = 5; a->sq.data = seq_bad)
MUT(m_seq_negative, seq_bad[0] = -2; seq_bad[1] = 8; a->sq.data = seq_bad)
MUT(m_seq_empty, a->sq.size = 0; a->skv.size = 0)
MUT(m_seq_1025, a->sq.size = 1025; a->skv.size = 1025)
MUT(m_n2_zero, a->k.dims[1] = 0; a->v.dims[1] = 0; a->topk.dims[1] = 0; a->dk.dims[1] = 0; a->dv.dims[1] = 0)
MUT(m_g_33, a->q.dims[1] = 66; a->k.dims[1] = 2; a->head_num = 66)
MUT(m_dq_ne_dk, a->k.dims[2] = 48; a->dk.dims[2] = 48)
MUT(m_d_784, a->q.dims[2] = 784; a->k.dims[2] = 784; a->dq.dims[2] = 784; a->dk.dims[2] = 784)
MUT(m_dv_8, a->v.dims[2] = 8; a->o.dims[2] = 8; a->dy.dims[2] = 8; a->dv.dims[2] = 8)
MUT(m_d_0, a->q.dims[2] = 0; a->k.dims[2] = 0; a->dq.dims[2] = 0; a->dk.dims[2] = 0)
MUT(m_dv_0, a->v.dims[2] = 0; a->o.dims[2] = 0; a->dy.dims[2] = 0; a->dv.dims[2] = 0)
MUT(m_dv_784, a->v.dims[2] = 784; a->o.dims[2] = 784; a->dy.dims[2] = 784; a->dv.dims[2] = 784)
MUT(m_topk_shape, a->topk.dims[2] = 3)
MUT(m_topk_rank, a->topk.rank = 4; a->topk.dims[3] = 1)
MUT(m_v_rows, a->v.dims[0] = 200; a->dv.dims[0] = 200)
MUT(m_stride_negative, a->dq.strides[1] = -4)
MUT(m_span_overflow, a->dk.strides[0] = INT64_MAX / 2)
MUT(m_null_seq_data, a->skv.data = NULL)

typedef struct rule {
    const char *name;
    mutate_fn fn;
    unsigned nulls;
    spa_status want;
} rule;

static const rule grad_rules[] = {
    {"NULL query", NULL, 1u << 0, SPA_ERR_NULLPTR},
    {"NULL key", NULL, 1u << 1, SPA_ERR_NULLPTR},
    {"NULL value", NULL, 1u << 2, SPA_ERR_NULLPTR},
    {"NULL attentionOut", NULL, 1u << 3, SPA_ERR_NULLPTR},
    {"NULL attentionOutGrad", NULL, 1u << 4, SPA_ERR_NULLPTR},
    {"NULL softmaxMax", NULL, 1u << 5, SPA_ERR_NULLPTR},
    {"NULL softmaxSum", NULL, 1u << 6, SPA_ERR_NULLPTR},
    {"NULL topkIndices", NULL, 1u << 7, SPA_ERR_NULLPTR},
    {"NULL actualSeqQLen", NULL, 1u << 8, SPA_ERR_NULLPTR},
    {"NULL actualSeqKvLen", NULL, 1u << 9, SPA_ERR_NULLPTR},
    {"NULL dqOut", NULL, 1u << 10, SPA_ERR_NULLPTR},
    {"NULL dkOut", NULL, 1u << 11, SPA_ERR_NULLPTR},
    {"NULL dvOut", NULL, 1u << 12, SPA_ERR_NULLPTR},
    {"NULL workspaceSize", NULL, 1u << 13, SPA_ERR_NULLPTR},
    {"NULL executor", NULL, 1u << 14, SPA_ERR_NULLPTR},
    {"NULL inputLayout", m_null_layout, 0, SPA_ERR_NULLPTR},
    {"NULL attentionOut data", m_null_o_data, 0, SPA_ERR_NULLPTR},
    {"layout BSH", m_layout, 0, SPA_ERR_INVALID},
    {"sparseMode 1", m_mode_1, 0, SPA_ERR_INVALID},
    {"blockSize 24", m_bs_24, 0, SPA_ERR_INVALID},
    {"blockSize 256", m_bs_256, 0, SPA_ERR_INVALID},
    {"blockCount 0", m_kc_0, 0, SPA_ERR_INVALID},
    {"blockCount 33", m_kc_33, 0, SPA_ERR_INVALID},
    {"attentionOut dtype", m_dtype_o, 0, SPA_ERR_INVALID},
    {"attentionOutGrad dtype", m_dtype_dy, 0, SPA_ERR_INVALID},
    {"dqOut dtype", m_dtype_dq, 0, SPA_ERR_INVALID},
    {"dkOut dtype", m_dtype_dk, 0, SPA_ERR_INVALID},
    {"dvOut dtype", m_dtype_dv, 0, SPA_ERR_INVALID},
    {"softmaxMax not float", m_dtype_mx, 0, SPA_ERR_INVALID},
    {"softmaxSum not float", m_dtype_sm, 0, SPA_ERR_INVALID},
    {"topk float", m_dtype_topk, 0, SPA_ERR_INVALID},
    {"query int32", m_dtype_q_int, 0, SPA_ERR_INVALID},
    {"mask float16", m_mask_dtype, 0, SPA_ERR_INVALID},
    {"mask rank 1", m_mask_rank, 0, SPA_ERR_INVALID},
    {"attentionOut shape", m_o_shape, 0, SPA_ERR_INVALID},
    {"attentionOutGrad shape", m_dy_shape, 0, SPA_ERR_INVALID},
    {"softmaxMax shape", m_mx_shape, 0, SPA_ERR_INVALID},
    {"softmaxSum shape", m_sm_shape, 0, SPA_ERR_INVALID},
    {"dqOut shape", m_dq_shape, 0, SPA_ERR_INVALID},
    {"dkOut shape", m_dk_shape, 0, SPA_ERR_INVALID},
    {"dvOut shape", m_dv_shape, 0, SPA_ERR_INVALID},
    {"headNum != N1", m_head_num, 0, SPA_ERR_INVALID},
    {"N1 % N2 != 0", m_n1_not_multiple, 0, SPA_ERR_INVALID},
    {"seq arrays of different length", m_seq_len_differ, 0, SPA_ERR_INVALID},
    {"a_q[B-1] != T1", m_seq_q_total, 0, SPA_ERR_INVALID},
    {"a_kv[B-1] > T2", m_seq_kv_total, 0, SPA_ERR_INVALID},
    {"seq decreasing", m_seq_decreasing, 0, SPA_ERR_INVALID},
    {"seq negative", m_seq_negative, 0, SPA_ERR_INVALID},
    {"seq arrays empty", m_seq_empty, 0, SPA_ERR_INVALID},
    {"B 1025", m_seq_1025, 0, SPA_ERR_INVALID},
    {"N2 0", m_n2_zero, 0, SPA_ERR_INVALID},
    {"G 33", m_g_33, 0, SPA_ERR_INVALID},
    {"Dq != Dk", m_dq_ne_dk, 0, SPA_ERR_INVALID},
    {"D 784", m_d_784, 0, SPA_ERR_INVALID},
    {"D 0", m_d_0, 0, SPA_ERR_INVALID},
    {"Dv 0", m_dv_0, 0, SPA_ERR_INVALID},
    {"Dv 784", m_dv_784, 0, SPA_ERR_INVALID},
    {"topk last dim != K", m_topk_shape, 0, SPA_ERR_INVALID},
    {"topk rank 4", m_topk_rank, 0, SPA_ERR_INVALID},
    {"value rows != key rows", m_v_rows, 0, SPA_ERR_INVALID},
    {"negative stride", m_stride_negative, 0, SPA_ERR_INVALID},
    {"span overflows", m_span_overflow, 0, SPA_ERR_INVALID},
    {"NULL seq data", m_null_seq_data, 0, SPA_ERR_NULLPTR},
};

/* Baseline: 2 batches (q 5 + 3, kv 128 + 128), N1 8, N2 2, D 32, Dv 32, bs 32, K 2. */
static void baseline(nsas_case *c, rng *r)
{
    const int64_t ql[2] = {5, 3}, kl[2] = {128, 128};
    nsas_case_fixed(c, SPA_FLOAT32, 8, 2, 32, 32, 32, 2, 2, ql, kl, 2, true, r, false);
}

static grad_args args_of(const nsas_case *c, const nsas_io *io)
{
    grad_args a;
    memset(&a, 0, sizeof a);
    a.q = io->q.t, a.k = io->k.t, a.v = io->v.t, a.o = io->o.t, a.dy = io->dy.t;
    a.mx = io->mx.t, a.sm = io->sm.t, a.topk = io->topk.t, a.mask = io->mask.t;
    a.dq = io->dq.t, a.dk = io->dk.t, a.dv = io->dv.t;
    a.sq = c->sq, a.skv = c->skv;
    a.layout = "TND";
    a.scale = c->scale, a.head_num = c->n1, a.mode = 2, a.bs = c->bs, a.kc = c->kc;
    a.use_mask = true;
    return a;
}

static void test_validation_rules(void)
{
    rng r = rng_seed(407);
    nsas_case c;
    baseline(&c, &r);
    nsas_io io;
    make_inputs(&c, &io, &r);
    unsigned char *q0 = tt_snapshot(&io.dq), *k0 = tt_snapshot(&io.dk), *v0 = tt_snapshot(&io.dv);
    for (size_t k = 0; k < sizeof grad_rules / sizeof grad_rules[0]; k++) {
        grad_args a = args_of(&c, &io);
        a.nulls = grad_rules[k].nulls;
        if (grad_rules[k].fn)
            grad_rules[k].fn(&a);
        uint64_t size = 0x5A5A5A5A5A5A5A5Aull;
        spa_executor ex, ex_before;
        memset(&ex, 0x5A, sizeof ex);
        ex_before = ex;
        spa_status st = call_phase1(&a, &size, &ex);
        if (st != grad_rules[k].want)
            fprintf(stderr, "  rule '%s': got %d want %d\n", grad_rules[k].name, st, grad_rules[k].want);
        CU_ASSERT_EQUAL(st, grad_rules[k].want);
        CU_ASSERT_EQUAL(size, 0x5A5A5A5A5A5A5A5Aull);
        CU_ASSERT(refusal_recorded(&ex, &ex_before, st));
        CU_ASSERT(tt_same_bytes(&io.dq, q0) && tt_same_bytes(&io.dk, k0) && tt_same_bytes(&io.dv, v0));
    }
    /* the baseline is valid; so are a UINT8 mask, no mask, and sparseMode 0 */
    grad_args a = args_of(&c, &io);
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL(call_phase1(&a, &size, &ex), SPA_OK);
    a.mask.dtype = SPA_UINT8;
    CU_ASSERT_EQUAL(call_phase1(&a, &size, &ex), SPA_OK);
    a.use_mask = false;
    CU_ASSERT_EQUAL(call_phase1(&a, &size, &ex), SPA_OK);
    a.mode = 0;
    CU_ASSERT_EQUAL(call_phase1(&a, &size, &ex), SPA_OK);
    /* lifted NPU rules (spec/nsa.md 0.3b): Dv not a multiple of 16 (head-dim
     * tails and Dv > D are run by the numeric tests) */
    a = args_of(&c, &io);
    m_dv_8(&a);
    CU_ASSERT_EQUAL(call_phase1(&a, &size, &ex), SPA_OK);
    /* untrusted indices: out of the batch in phase 1 (-1 is padding) */
    const int32_t bad_vals[3] = {-2, 4, INT32_MAX};
    for (int k = 0; k < 3; k++) {
        const int64_t at = rng_int(&r, 0, c.t1 * c.n2 * c.kc - 1);
        tt_set_int(&io.topk, at, bad_vals[k]);
        uint64_t sz = 9;
        CU_ASSERT_EQUAL(phase1(&c, &io, &sz, &ex), SPA_ERR_INVALID);
        CU_ASSERT_EQUAL(sz, 9);
        tt_set_int(&io.topk, at, c.idx[at]);
    }
    free(q0), free(k0), free(v0);
    nsas_io_free(&io);
    nsas_case_free(&c);
}

static void test_phase2_errors(void)
{
    rng r = rng_seed(408);
    nsas_case c;
    baseline(&c, &r);
    nsas_io io;
    make_inputs(&c, &io, &r);
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL_FATAL(phase1(&c, &io, &size, &ex), SPA_OK);
    CU_ASSERT(size > 0);
    unsigned char *q0 = tt_snapshot(&io.dq), *k0 = tt_snapshot(&io.dk);
    tws ws;
    tws_make(&ws, size, 1);
    CU_ASSERT_EQUAL(spa_nsa_select_grad(ws.ptr, size, NULL, NULL), SPA_ERR_NULLPTR);
    CU_ASSERT_EQUAL(spa_nsa_select_grad(NULL, size, &ex, NULL), SPA_ERR_NULLPTR);
    CU_ASSERT_EQUAL(spa_nsa_select_grad(ws.ptr, size - 1, &ex, NULL), SPA_ERR_WORKSPACE);
    spa_executor bad = ex;
    bad.u.bytes[300] ^= 4;
    CU_ASSERT_EQUAL(spa_nsa_select_grad(ws.ptr, size, &bad, NULL), SPA_ERR_INVALID);
    CU_ASSERT_EQUAL(spa_nsa_select(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    tt_set_int(&io.topk, 3, 4);
    CU_ASSERT_EQUAL(spa_nsa_select_grad(ws.ptr, size, &ex, test_runner(1)), SPA_ERR_INVALID);
    tt_set_int(&io.topk, 3, c.idx[3]);
    c.skv_vals[0] = 60; /* batch 0 shrinks under its indices */
    CU_ASSERT_EQUAL(spa_nsa_select_grad(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    c.skv_vals[0] = 128;
    CU_ASSERT(tt_same_bytes(&io.dq, q0) && tt_same_bytes(&io.dk, k0));
    CU_ASSERT(tws_guard_ok(&ws));
    CU_ASSERT_EQUAL(spa_nsa_select_grad(ws.ptr, size, &ex, NULL), SPA_OK);
    unsigned char *q1 = tt_snapshot(&io.dq), *k1 = tt_snapshot(&io.dk);
    CU_ASSERT_EQUAL(spa_nsa_select_grad(ws.ptr, size, &ex, test_runner(3)), SPA_OK);
    CU_ASSERT(tt_same_bytes(&io.dq, q1) && tt_same_bytes(&io.dk, k1));
    CU_ASSERT(tws_guard_ok(&ws));
    CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
    free(q0), free(k0), free(q1), free(k1);
    tws_free(&ws);
    nsas_io_free(&io);
    nsas_case_free(&c);
}

/* T1 == 0: dk and dv are zero-filled (every row +0), dq is empty. */
static void test_empty_query(void)
{
    rng r = rng_seed(409);
    const int64_t ql[2] = {0, 0}, kl[2] = {64, 40};
    for (int k = 0; k < 3; k++) {
        static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
        nsas_case c;
        nsas_case_fixed(&c, dts[k], 4, 2, 32, 16, 16, 2, 2, ql, kl, 2, true, &r, false);
        c.t2 += 3;
        nsas_io io;
        make_inputs(&c, &io, &r);
        CU_ASSERT_EQUAL(run_grad(&c, &io, k, 0), SPA_OK);
        for (int64_t i = 0; i < tt_numel(&io.dk); i++)
            CU_ASSERT(tt_get(&io.dk, i) == 0.0 && !signbit(tt_get(&io.dk, i)));
        for (int64_t i = 0; i < tt_numel(&io.dv); i++)
            CU_ASSERT(tt_get(&io.dv, i) == 0.0 && !signbit(tt_get(&io.dv, i)));
        CU_ASSERT(guarded(&io));
        nsas_io_free(&io);
        nsas_case_free(&c);
    }
}

void suite_nsa_select_grad(void)
{
    CU_pSuite s = CU_add_suite("nsa_select_grad", NULL, NULL);
    /* The reference's own check (no library call): the full set runs it; the
     * quick one, for emulators, sanitizers and valgrind, has nothing to learn there. */
    if (!test_quick)
        CU_add_test(s, "fp64 reference vs finite differences", test_reference_vs_finite_differences);
    CU_add_test(s, "random shapes, all dtypes, strided", test_random_shapes);
    CU_add_test(s, "NaN and Inf inputs", test_nonfinite);
    /* The named cases need more heap than a Cortex-M board under QEMU has;
     * every hosted target (aarch64 and riscv64 included) runs them. */
    if (!SPA_TEST_SMALL)
        CU_add_test(s, "named features", test_features);
    CU_add_test(s, "fully masked rows", test_fully_masked);
    CU_add_test(s, "partial block, very negative scores", test_partial_block_low_scores);
    CU_add_test(s, "bit-identical across runners", test_deterministic_across_runners);
    CU_add_test(s, "upstream example", test_upstream_example);
    CU_add_test(s, "validation rules", test_validation_rules);
    CU_add_test(s, "phase 2 errors", test_phase2_errors);
    CU_add_test(s, "empty query", test_empty_query);
}
