/* DSA sparse attention's gradient (spattn/dsa.h): the fp64 reference against
 * central finite differences of the fp64 forward, then the library against
 * that reference on contiguous and TND keys, every dtype, both sparse
 * modes, with and without the rope part (its gradients given or NULL),
 * value separate, the key itself or a view of its first Dv elements
 * (dvalue NULL: dkey holds both; or given), any G, block sizes with partial
 * last blocks, indices with -1, duplicates, blocks past the query's
 * position and tokens no query sees (their gradient exactly +0, as the rows
 * past L_b); decode steps of thousands of rows; bit-identical results on
 * every runner; every refusal writes nothing; phase-2 errors; edges.
 * The statistics and attention_out the grad reads are the library's
 * forward's outputs for the same inputs (tests/dsa/test_dsa_sparse_attention.c
 * checks them); the reference reads them back from those tensors. */
#include <CUnit/Basic.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsa_case.h"
#include "ref/ref_dsa_sparse_attention.h"
#include "ref/ref_nsa_select.h"
#include "spa_dtypes.h"
#include "spattn/dsa.h"
#include "util.h"

/* f32 sums against the magnitudes (P's and dS's recomputation included);
 * for f16 / bf16 P and dS are rounded to the dtype by both, so that a
 * rounding that goes the other way costs one ulp of the dtype, and the
 * output's rounding besides: ref_nsa_select_grad's tolerances. */
static tol grad_tol(spa_dtype dt)
{
    tol t = tol_for(dt, 0x1p-16);
    if (dt == SPA_FLOAT16)
        t.atol = t.rtol = 0x1p-9;
    else if (dt == SPA_BFLOAT16)
        t.atol = t.rtol = 0x1p-6;
    else if (dt == SPA_FLOAT32)
        t.rtol = 0x1p-22;
    return t;
}

static double *dalloc(int64_t n)
{
    return calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

/* ---- the reference itself: analytic gradient vs finite differences ---- */

typedef struct fd_problem {
    ref_dsa_sa_problem p;
    double *q, *qr, *k, *kr, *v, *dy;
    bool absorb; /* v is k's first dv elements: a change of k changes v */
} fd_problem;

/* L = sum O * dY of the exact (unrounded) fp64 forward. */
static double fd_loss(const fd_problem *f)
{
    const ref_dsa_sa_problem *p = &f->p;
    const int64_t no = p->t * p->n1 * p->dv, ns = p->t * p->n1;
    double *o = dalloc(no), *om = dalloc(no), *mx = dalloc(ns), *mm = dalloc(ns), *sm = dalloc(ns),
           *sg = dalloc(ns);
    ref_dsa_sparse_attention(p, f->q, f->qr, f->k, f->kr, f->v, o, om, mx, mm, sm, sg);
    double l = 0.0;
    for (int64_t i = 0; i < no; i++)
        l += o[i] * f->dy[i];
    free(o), free(om), free(mx), free(mm), free(sm), free(sg);
    return l;
}

/* Sets x[i] (and, absorb, the value's copy of a key element). */
static void fd_set(fd_problem *f, double *x, int64_t i, double val)
{
    x[i] = val;
    if (f->absorb && x == f->k) {
        const int64_t e = i % f->p.d;
        if (e < f->p.dv)
            f->v[i / f->p.d * f->p.dv + e] = val;
    }
}

static int64_t fd_check(const char *what, fd_problem *f, double *x, int64_t n, const double *an)
{
    int64_t bad = 0;
    const double h = 1e-5;
    for (int64_t i = 0; i < n; i++) {
        const double keep = x[i];
        fd_set(f, x, i, keep + h);
        const double lp = fd_loss(f);
        fd_set(f, x, i, keep - h);
        const double lm = fd_loss(f);
        fd_set(f, x, i, keep);
        const double fd = (lp - lm) / (2 * h);
        if (!(fabs(fd - an[i]) <= 1e-7 + 1e-6 * fabs(an[i])) && bad++ < 5)
            fprintf(stderr, "  %s[%lld]: analytic %.12g finite difference %.12g\n", what, (long long)i, an[i], fd);
    }
    return bad;
}

/* Three batches (13, 9 and 1 keys; 3, 2 and 3 queries: causal, batch 2's
 * first two see nothing), N1 4 over N2 2, D 5 + Dr 3, Dv 4, blocks of 3
 * (the last ones partial), K 4 with -1, duplicates and blocks past the
 * query; pass 2 causal with the value the key's first 4 elements (the
 * gradient of the key: dk + dv), pass 0 causal, pass 1 not. The thin set
 * (the same double arithmetic on every target) runs pass 2 only. */
static void test_reference_vs_finite_differences(void)
{
    rng r = rng_seed(3301);
    const int64_t sq[3] = {3, 2, 3}, len[3] = {13, 9, 1};
    static const int passes[3] = {2, 0, 1};
    for (int np = 0; np < TEST_COUNT(3, 1); np++) {
        const int pass = passes[np];
        fd_problem f;
        memset(&f, 0, sizeof f);
        f.absorb = pass == 2;
        const int64_t t = 8, n1 = 4, n2 = 2, d = 5, dr = 3, dv = 4, kc = 4, bs = 3, lmax = 13;
        int32_t *idx = malloc(sizeof(int32_t) * (size_t)(t * n2 * kc));
        for (int64_t b = 0, tok = 0; b < 3; b++)
            for (int64_t i = 0; i < sq[b]; i++, tok++)
                for (int64_t j = 0; j < n2 * kc; j++) {
                    const int64_t nblk = (len[b] + bs - 1) / bs, at = tok * n2 * kc + j;
                    const int64_t kind = rng_int(&r, 0, 5);
                    idx[at] = kind == 0 || nblk == 0 ? -1
                              : kind == 1 && j % kc > 0 ? idx[at - 1]
                                                        : (int32_t)rng_int(&r, 0, nblk - 1);
                }
        const ref_dsa_sa_problem p = {.t = t, .n1 = n1, .n2 = n2, .d = d, .dr = dr, .dv = dv, .kc = kc, .bs = bs,
                                      .batches = 3, .lmax = lmax, .sq = sq, .len = len, .idx = idx,
                                      .scale = pass == 1 ? -0.7 : 0.45, .causal = pass != 1,
                                      .round = REF_ROUND_NONE};
        f.p = p;
        const int64_t nq = t * n1 * d, nqr = t * n1 * dr, krows = 3 * lmax * n2;
        const int64_t nk = krows * d, nkr = krows * dr, nv = krows * dv, no = t * n1 * dv, ns = t * n1;
        f.q = dalloc(nq), f.qr = dalloc(nqr), f.k = dalloc(nk), f.kr = dalloc(nkr), f.v = dalloc(nv);
        f.dy = dalloc(no);
        double *const all[6] = {f.q, f.qr, f.k, f.kr, f.v, f.dy};
        const int64_t counts[6] = {nq, nqr, nk, nkr, nv, no};
        for (int a = 0; a < 6; a++)
            for (int64_t i = 0; i < counts[a]; i++)
                all[a][i] = 2 * rng_unit(&r) - 1;
        if (f.absorb)
            for (int64_t row = 0; row < krows; row++)
                for (int64_t e = 0; e < dv; e++)
                    f.v[row * dv + e] = f.k[row * d + e];
        double *o = dalloc(no), *om = dalloc(no), *mx = dalloc(ns), *mm = dalloc(ns), *sm = dalloc(ns),
               *sg = dalloc(ns);
        ref_dsa_sparse_attention(&f.p, f.q, f.qr, f.k, f.kr, f.v, o, om, mx, mm, sm, sg);
        ref_dsa_sa_grads gr = {dalloc(nq), dalloc(nq), dalloc(nqr), dalloc(nqr), dalloc(nk),
                               dalloc(nk), dalloc(nkr), dalloc(nkr), dalloc(nv), dalloc(nv)};
        ref_dsa_sparse_attention_grad(&f.p, f.q, f.qr, f.k, f.kr, f.v, o, f.dy, mx, sm, &gr);
        /* causal: the queries that see nothing (tokens 5, 6), dq exactly 0, magnitude 0 */
        for (int64_t e = 0; e < 2 * n1 * d && f.p.causal; e++)
            CU_ASSERT(gr.dq[5 * n1 * d + e] == 0.0 && gr.dq_mag[5 * n1 * d + e] == 0.0);
        if (f.absorb) /* the key's whole gradient */
            for (int64_t row = 0; row < krows; row++)
                for (int64_t e = 0; e < dv; e++)
                    gr.dk[row * d + e] += gr.dv[row * dv + e];
        CU_ASSERT_EQUAL(fd_check("dq", &f, f.q, nq, gr.dq), 0);
        CU_ASSERT_EQUAL(fd_check("dqr", &f, f.qr, nqr, gr.dqr), 0);
        CU_ASSERT_EQUAL(fd_check("dk", &f, f.k, nk, gr.dk), 0);
        CU_ASSERT_EQUAL(fd_check("dkr", &f, f.kr, nkr, gr.dkr), 0);
        if (!f.absorb)
            CU_ASSERT_EQUAL(fd_check("dv", &f, f.v, nv, gr.dv), 0);
        for (int a = 0; a < 6; a++)
            free(all[a]);
        free(o), free(om), free(mx), free(mm), free(sm), free(sg), free(idx);
        free(gr.dq), free(gr.dq_mag), free(gr.dqr), free(gr.dqr_mag), free(gr.dk), free(gr.dk_mag);
        free(gr.dkr), free(gr.dkr_mag), free(gr.dv), free(gr.dv_mag);
    }
}

/* ---- the library ---- */

/* A grad problem: the forward's case, and which gradients are asked for. */
typedef struct gcase {
    dsa_case c;
    bool dv_out;       /* dvalue_out given (always, for a value of its own) */
    bool dqr_on, dkr_on; /* dquery_rope_out / dkey_rope_out given (Dr > 0) */
} gcase;

typedef struct gio {
    dsa_io f; /* the forward's tensors: its outputs are the grad's inputs */
    ttensor dy, dq, dqr, dk, dkr, dv;
} gio;

static void gcase_describe(const gcase *g, char *buf, size_t n)
{
    char base[448];
    dsa_case_describe(&g->c, base, sizeof base);
    snprintf(buf, n, "%s%s%s%s", base, g->dv_out ? "" : " dvalue NULL",
             g->c.dr > 0 && !g->dqr_on ? " dquery_rope NULL" : "",
             g->c.dr > 0 && !g->dkr_on ? " dkey_rope NULL" : "");
}

/* The gradient options drawn for a case (value separate: dvalue given). */
static void gcase_options(gcase *g, rng *r)
{
    g->c.want_max = g->c.want_sum = true;
    g->dv_out = !g->c.absorb || rng_int(r, 0, 1) == 0;
    g->dqr_on = g->c.dr > 0 && rng_int(r, 0, 3) != 0;
    g->dkr_on = g->c.dr > 0 && rng_int(r, 0, 3) != 0;
}

/* An output with the key's leading dims and last dim `dim`. */
static void make_like_key(ttensor *tt, const dsa_case *c, const dsa_io *io, int64_t dim, rng *r)
{
    int64_t dims[4];
    const int32_t rank = io->k.t.rank;
    for (int32_t k = 0; k < rank; k++)
        dims[k] = io->k.t.dims[k];
    dims[rank - 1] = dim;
    tt_make(tt, c->dt, rank, dims, c->strided, r);
}

static void gio_make(gio *io, const gcase *g, rng *r)
{
    const dsa_case *c = &g->c;
    memset(io, 0, sizeof *io);
    dsa_io_make(&io->f, c, r);
    const int64_t od[3] = {c->t, c->n1, c->dv}, qd[3] = {c->t, c->n1, c->d}, qrd[3] = {c->t, c->n1, c->dr};
    tt_make(&io->dy, c->dt, 3, od, c->strided, r);
    tt_fill_random(&io->dy, r, -1.0, 1.0);
    tt_make(&io->dq, c->dt, 3, qd, c->strided, r);
    make_like_key(&io->dk, c, &io->f, c->d, r);
    if (c->dr > 0) {
        tt_make(&io->dqr, c->dt, 3, qrd, c->strided, r);
        make_like_key(&io->dkr, c, &io->f, c->dr, r);
    }
    if (g->dv_out)
        make_like_key(&io->dv, c, &io->f, c->dv, r);
}

static void gio_free(gio *io)
{
    dsa_io_free(&io->f);
    tt_free(&io->dy), tt_free(&io->dq), tt_free(&io->dqr), tt_free(&io->dk), tt_free(&io->dkr), tt_free(&io->dv);
}

/* The library's forward (inline): attention_out, softmax_max, softmax_sum. */
static spa_status forward(const gcase *g, gio *io)
{
    const dsa_case *c = &g->c;
    dsa_io *f = &io->f;
    uint64_t size = 0;
    spa_executor ex;
    spa_status st = spa_dsa_sparse_attention_get_workspace_size(
        &f->q.t, c->dr > 0 ? &f->qr.t : NULL, &f->k.t, c->dr > 0 ? &f->kr.t : NULL, dsa_value_of(c, f), &f->idx.t,
        NULL, c->sq_null ? NULL : &f->sq, c->kv_null ? NULL : &f->len, c->scale, c->bs, c->mode, &f->o.t, &f->mx.t,
        &f->sm.t, &size, &ex);
    if (st == SPA_OK) {
        tws ws;
        tws_make(&ws, size, 0);
        st = spa_dsa_sparse_attention(ws.ptr, ws.size, &ex, NULL);
        tws_free(&ws);
    }
    if (st != SPA_OK)
        fprintf(stderr, "  the forward refused (status %d): %s\n", (int)st, spa_executor_reason(&ex, NULL));
    return st;
}

static spa_status phase1(const gcase *g, gio *io, uint64_t *size, spa_executor *ex)
{
    const dsa_case *c = &g->c;
    dsa_io *f = &io->f;
    return spa_dsa_sparse_attention_grad_get_workspace_size(
        &f->q.t, c->dr > 0 ? &f->qr.t : NULL, &f->k.t, c->dr > 0 ? &f->kr.t : NULL, dsa_value_of(c, f), &f->idx.t,
        c->sq_null ? NULL : &f->sq, c->kv_null ? NULL : &f->len, &f->o.t, &io->dy.t, &f->mx.t, &f->sm.t, c->scale,
        c->bs, c->mode, &io->dq.t, g->dqr_on ? &io->dqr.t : NULL, &io->dk.t, g->dkr_on ? &io->dkr.t : NULL,
        g->dv_out ? &io->dv.t : NULL, size, ex);
}

static spa_status run_grad(const gcase *g, gio *io, int runner, size_t skew)
{
    uint64_t size = 0;
    spa_executor ex;
    spa_status st = phase1(g, io, &size, &ex);
    if (st != SPA_OK) {
        fprintf(stderr, "  grad phase 1 refused: %s\n", spa_executor_reason(&ex, NULL));
        return st;
    }
    tws ws;
    tws_make(&ws, size, skew);
    st = spa_dsa_sparse_attention_grad(ws.ptr, ws.size, &ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

/* A key-shaped gradient from the reference's logical rows: every element
 * of the tensor (rows past L_b, rows of no batch: 0 with magnitude 0, which
 * check_close reads as exactly +0). add: a second gradient summed in over
 * its first dim_add elements (dvalue NULL: dk + dv). */
static void physical(const dsa_case *c, const dsa_io *io, int64_t dim, const double *val, const double *mag,
                     int64_t dim_add, const double *add, const double *add_mag, double *out, double *out_mag)
{
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t p = 0; p < c->len[b]; p++)
            for (int64_t n = 0; n < c->n2; n++) {
                const int64_t row = (b * io->lmax + p) * c->n2 + n;
                for (int64_t e = 0; e < dim; e++) {
                    const int64_t at = dsa_row_flat(c, io, b, p, n, dim, e);
                    out[at] = val[row * dim + e], out_mag[at] = mag[row * dim + e];
                    if (e < dim_add)
                        out[at] += add[row * dim_add + e], out_mag[at] += add_mag[row * dim_add + e];
                }
            }
}

static int64_t check_key_like(const char *what, const gcase *g, const gio *io, const ttensor *got_t, int64_t dim,
                              const double *val, const double *mag, int64_t dim_add, const double *add,
                              const double *add_mag)
{
    const int64_t n = tt_numel(got_t);
    double *want = dalloc(n), *want_mag = dalloc(n), *got = tt_to_doubles(got_t);
    physical(&g->c, &io->f, dim, val, mag, dim_add, add, add_mag, want, want_mag);
    const int64_t bad = check_close(what, got, want, want_mag, n, grad_tol(g->c.dt));
    free(want), free(want_mag), free(got);
    return bad;
}

static int64_t compare(const gcase *g, const gio *io)
{
    const dsa_case *c = &g->c;
    const dsa_io *f = &io->f;
    double *q = tt_to_doubles(&f->q), *qr = c->dr > 0 ? tt_to_doubles(&f->qr) : NULL;
    double *k = dsa_logical_rows(c, f, DSA_PART_KEY);
    double *kr = c->dr > 0 ? dsa_logical_rows(c, f, DSA_PART_ROPE) : NULL;
    double *v = dsa_logical_rows(c, f, DSA_PART_VALUE);
    double *o = tt_to_doubles(&f->o), *dy = tt_to_doubles(&io->dy);
    double *mx = tt_to_doubles(&f->mx), *sm = tt_to_doubles(&f->sm);
    int32_t *idx = dsa_indices_of(c, f);
    const int64_t nq = c->t * c->n1 * c->d, nqr = c->t * c->n1 * c->dr, krows = c->b * f->lmax * c->n2;
    const int64_t nk = krows * c->d, nkr = krows * c->dr, nv = krows * c->dv;
    ref_dsa_sa_grads gr = {dalloc(nq), dalloc(nq), dalloc(nqr), dalloc(nqr), dalloc(nk),
                           dalloc(nk), dalloc(nkr), dalloc(nkr), dalloc(nv), dalloc(nv)};
    const ref_dsa_sa_problem p = dsa_problem_of(c, f, idx);
    ref_dsa_sparse_attention_grad(&p, q, qr, k, kr, v, o, dy, mx, sm, &gr);
    const tol t = grad_tol(c->dt);
    double *got = tt_to_doubles(&io->dq);
    int64_t bad = check_close("dquery", got, gr.dq, gr.dq_mag, nq, t);
    free(got);
    if (g->dqr_on) {
        got = tt_to_doubles(&io->dqr);
        bad += check_close("dquery_rope", got, gr.dqr, gr.dqr_mag, nqr, t);
        free(got);
    }
    if (g->dv_out) {
        bad += check_key_like("dkey", g, io, &io->dk, c->d, gr.dk, gr.dk_mag, 0, NULL, NULL);
        bad += check_key_like("dvalue", g, io, &io->dv, c->dv, gr.dv, gr.dv_mag, 0, NULL, NULL);
    } else { /* dkey holds dk + dv */
        bad += check_key_like("dkey (+ dvalue)", g, io, &io->dk, c->d, gr.dk, gr.dk_mag, c->dv, gr.dv, gr.dv_mag);
    }
    if (g->dkr_on)
        bad += check_key_like("dkey_rope", g, io, &io->dkr, c->dr, gr.dkr, gr.dkr_mag, 0, NULL, NULL);
    free(q), free(qr), free(k), free(kr), free(v), free(o), free(dy), free(mx), free(sm), free(idx);
    free(gr.dq), free(gr.dq_mag), free(gr.dqr), free(gr.dqr_mag), free(gr.dk), free(gr.dk_mag);
    free(gr.dkr), free(gr.dkr_mag), free(gr.dv), free(gr.dv_mag);
    return bad;
}

/* Red zones and gaps of every tensor; an output not asked for untouched
 * (canary). */
static bool guards_ok(const gcase *g, const gio *io)
{
    const dsa_case *c = &g->c;
    const dsa_io *f = &io->f;
    return tt_guard_ok(&f->q) && tt_guard_ok(&f->k) && tt_guard_ok(&f->idx) && tt_guard_ok(&f->o) &&
           tt_guard_ok(&f->mx) && tt_guard_ok(&f->sm) && (c->dr == 0 || tt_guard_ok(&f->qr)) &&
           (c->dr == 0 || tt_guard_ok(&f->kr)) && (c->absorb || tt_guard_ok(&f->v)) && tt_guard_ok(&io->dy) &&
           tt_guard_ok(&io->dq) && tt_guard_ok(&io->dk) && (c->dr == 0 || tt_guard_ok(&io->dqr)) &&
           (c->dr == 0 || tt_guard_ok(&io->dkr)) && (!g->dv_out || tt_guard_ok(&io->dv));
}

/* Whether the block of an output not asked for still holds the canary
 * everywhere. */
static bool all_canary(const ttensor *tt)
{
    for (size_t i = 0; i < tt->span + 2 * RED_ZONE; i++)
        if (tt->block[i] != CANARY)
            return false;
    return true;
}

/* The forward, then the grad on runner `runner`, against the reference. */
static void check_case(const char *label, int i, const gcase *g, gio *io, int runner, size_t skew)
{
    char desc[512];
    gcase_describe(g, desc, sizeof desc);
    spa_status st = forward(g, io);
    if (st == SPA_OK)
        st = run_grad(g, io, runner, skew);
    const bool unasked = (g->c.dr == 0 || g->dqr_on || all_canary(&io->dqr)) &&
                         (g->c.dr == 0 || g->dkr_on || all_canary(&io->dkr));
    if (!unasked)
        fprintf(stderr, "  %s %d: a rope gradient given as NULL was written\n", label, i);
    case_verdict(label, i, desc, st, st == SPA_OK ? compare(g, io) : -1, guards_ok(g, io) && unasked);
}

static void test_random(void)
{
    rng r = rng_seed(3302);
    for (int i = 0; i < TEST_COUNT(24, 8); i++) {
        gcase g;
        dsa_case_draw(&g.c, i, &r, DSA_DRAW_GRAD);
        gcase_options(&g, &r);
        gio io;
        gio_make(&io, &g, &r);
        check_case("case", i, &g, &io, i % N_RUNNERS, (size_t)rng_int(&r, 0, 63));
        gio_free(&io);
    }
}

/* ---- bit-identical results on every runner ---- */

/* The five outputs; those a case has no tensor for (no rope part, dvalue
 * NULL) have no block and are skipped. */
static const ttensor *output_at(const gio *io, int k)
{
    const ttensor *outs[5] = {&io->dq, &io->dqr, &io->dk, &io->dkr, &io->dv};
    return outs[k];
}

static void snapshot_outputs(const gio *io, unsigned char **snap)
{
    for (int k = 0; k < 5; k++)
        snap[k] = output_at(io, k)->block != NULL ? tt_snapshot(output_at(io, k)) : NULL;
}

static bool outputs_same(const gio *io, unsigned char *const *snap)
{
    bool same = true;
    for (int k = 0; k < 5; k++)
        same = same && (snap[k] == NULL || tt_same_bytes(output_at(io, k), snap[k]));
    return same;
}

static void free_snapshot(unsigned char **snap)
{
    for (int k = 0; k < 5; k++)
        free(snap[k]);
}

static void fill_outputs_canary(gio *io)
{
    ttensor *outs[5] = {&io->dq, &io->dqr, &io->dk, &io->dkr, &io->dv};
    for (int k = 0; k < 5; k++)
        if (outs[k]->block != NULL)
            tt_fill_canary(outs[k]);
}

/* Runs g on runners 1 .. N_RUNNERS - 1 (outputs refilled with the canary
 * each time, the workspace skewed k bytes) and checks that they write the
 * bytes the inline run wrote. */
static void same_on_every_runner(const gcase *g, gio *io)
{
    unsigned char *first[5];
    snapshot_outputs(io, first);
    for (int k = 1; k < N_RUNNERS; k++) {
        fill_outputs_canary(io);
        CU_ASSERT_EQUAL(run_grad(g, io, k, (size_t)(k * 3)), SPA_OK);
        const bool same = outputs_same(io, first);
        if (!same)
            fprintf(stderr, "  runner %d (%u threads) wrote other bytes than the inline run\n", k, runner_threads[k]);
        CU_ASSERT(same);
    }
    free_snapshot(first);
}

/* Many queries selecting the same rows (every dk and dv row a sum over
 * queries and heads), units of up to 1024 rows (blocks of 1 and of 16, K
 * past the blocks: duplicates) in more than one round, with and without
 * rope, value separate, the key (dvalue NULL) and a view of it (dvalue
 * given); contiguous and TND: the same bytes on every runner. */
static void test_deterministic(void)
{
    rng r = rng_seed(3303);
    for (int i = 0; i < TEST_COUNT(2 * DSA_N_DTS, 4); i++) {
        gcase g;
        dsa_case *c = &g.c;
        dsa_case_draw(c, i, &r, DSA_DRAW_GRAD);
        c->b = 2, c->n2 = TEST_SIZE(4, 2), c->n1 = c->n2 * (1 + 2 * (i % 2)), c->d = 48, c->dr = i % 2 ? 16 : 0;
        c->absorb = i % 4 != 0, c->dv = c->absorb && i % 4 == 1 ? 48 : 32;
        c->bs = i % 3 == 0 ? 1 : 16, c->tnd = i % 2 == 0, c->strided = i % 4 == 2;
        c->len[0] = TEST_SIZE(200, 100), c->len[1] = TEST_SIZE(90, 40);
        c->sq[0] = TEST_SIZE(6, 3), c->sq[1] = TEST_SIZE(5, 2), c->sq_null = c->kv_null = false;
        c->mode = i % 3 == 2 ? 0 : 3;
        dsa_case_sum(c);
        c->kc = TEST_SIZE(1024, 256) / c->bs;
        c->scale = dsa_draw_scale(c->d, c->dr, &r);
        gcase_options(&g, &r);
        g.dv_out = !c->absorb || i % 4 == 3, g.dqr_on = g.dkr_on = c->dr > 0;
        gio io;
        gio_make(&io, &g, &r);
        check_case("deterministic", i, &g, &io, 0, 0);
        same_on_every_runner(&g, &io);
        gio_free(&io);
    }
}

/* Many queries on few rows, so that the token ranges a call splits them
 * into cut through batches and several ranges add into the same key rows
 * (a batch of one query between two long ones, L_b short of a block):
 * every dtype, both modes, contiguous and TND, against the reference and
 * the same bytes on every runner. */
static void test_many_queries(void)
{
    rng r = rng_seed(3308);
    for (int i = 0; i < TEST_COUNT(DSA_N_DTS, 2); i++) {
        gcase g;
        dsa_case *c = &g.c;
        memset(&g, 0, sizeof g);
        c->dt = dsa_dts[i % DSA_N_DTS];
        c->b = 3, c->n2 = 2, c->n1 = 2 * (1 + i % 3), c->d = 16, c->dr = i % 2 ? 8 : 0, c->dv = 12;
        c->absorb = i == 2, c->bs = 4, c->kc = 8, c->tnd = i % 2 == 1, c->strided = i == 3;
        c->sq[0] = TEST_SIZE(40, 12), c->sq[1] = 1, c->sq[2] = TEST_SIZE(30, 9);
        c->len[0] = 50, c->len[1] = 7, c->len[2] = 90;
        c->mode = i % 2 ? 0 : 3;
        dsa_case_sum(c);
        c->scale = dsa_draw_scale(c->d, c->dr, &r);
        gcase_options(&g, &r);
        g.dv_out = i != 2, g.dqr_on = g.dkr_on = c->dr > 0;
        gio io;
        gio_make(&io, &g, &r);
        check_case("many queries", i, &g, &io, 3, 5);
        same_on_every_runner(&g, &io);
        gio_free(&io);
    }
}

/* ---- decode: one query's unit selecting thousands of rows ---- */

typedef struct decode_shape {
    spa_dtype dt;
    int64_t n2, g, d, dr, dv, kc, bs, len;
    bool tnd, absorb, dv_out;
} decode_shape;

/* DeepSeek's sparse MLA decode step (K 2048 single tokens, D 512 + Dr 64,
 * value the key itself, dvalue NULL), G 64 in bf16 on blocks of 4, f16 and
 * f64 with a value of its own. The quick set keeps the shapes with half the
 * rows and D <= 64. */
static const decode_shape decodes[] = {
    {SPA_FLOAT32, 1, 16, 512, 64, 512, 2048, 1, 2400, false, true, false},
    {SPA_BFLOAT16, 1, 64, 64, 32, 48, 256, 4, 1200, true, true, true},
    {SPA_FLOAT16, 2, 8, 64, 0, 48, 512, 2, 1200, false, false, true},
    {SPA_FLOAT64, 1, 33, 96, 32, 80, 600, 2, 1500, true, false, true},
};
#define N_DECODES ((int)(sizeof decodes / sizeof decodes[0]))

static void test_decode(void)
{
    rng r = rng_seed(3304);
    for (int i = 0; i < TEST_COUNT(N_DECODES, 2); i++) {
        const decode_shape *s = &decodes[i];
        if (s->dt == SPA_FLOAT64 && !SPA_HAVE_F64)
            continue;
        gcase g;
        dsa_case *c = &g.c;
        memset(&g, 0, sizeof g);
        c->dt = s->dt, c->n2 = s->n2, c->n1 = s->n2 * s->g;
        c->d = TEST_CAP(s->d, 64), c->dr = s->dr, c->dv = TEST_CAP(s->dv, c->d), c->absorb = s->absorb;
        c->kc = TEST_SIZE(s->kc, s->kc / 2), c->bs = s->bs, c->tnd = s->tnd;
        c->b = 1, c->len[0] = TEST_SIZE(s->len, s->len / 2), c->sq[0] = 1, c->mode = 0;
        dsa_case_sum(c);
        c->scale = dsa_draw_scale(c->d, c->dr, &r);
        gcase_options(&g, &r);
        g.dv_out = s->dv_out, g.dqr_on = g.dkr_on = c->dr > 0;
        gio io;
        gio_make(&io, &g, &r);
        check_case("decode", i, &g, &io, 0, 0);
        same_on_every_runner(&g, &io);
        gio_free(&io);
    }
}

/* ---- refusals: one per rule, nothing written, a reason recorded ---- */

typedef struct gargs {
    spa_tensor q, qr, k, kr, v, idx, o, dy, mx, sm, dq, dqr, dk, dkr, dv;
    spa_int_array sq, len;
    double scale;
    int64_t bs, mode;
    bool qr_on, kr_on, sq_on, len_on, dqr_on, dkr_on, dv_on;
    /* 1 query, 2 key, 3 value, 4 indices, 5 attention_out, 6 attention_out_grad,
     * 7 softmax_max, 8 softmax_sum, 9 dquery_out, 10 dkey_out, 11 workspace_size, 12 executor */
    int null_arg;
} gargs;

static spa_status call(const gargs *a, uint64_t *size, spa_executor *ex)
{
    return spa_dsa_sparse_attention_grad_get_workspace_size(
        a->null_arg == 1 ? NULL : &a->q, a->qr_on ? &a->qr : NULL, a->null_arg == 2 ? NULL : &a->k,
        a->kr_on ? &a->kr : NULL, a->null_arg == 3 ? NULL : &a->v, a->null_arg == 4 ? NULL : &a->idx,
        a->sq_on ? &a->sq : NULL, a->len_on ? &a->len : NULL, a->null_arg == 5 ? NULL : &a->o,
        a->null_arg == 6 ? NULL : &a->dy, a->null_arg == 7 ? NULL : &a->mx, a->null_arg == 8 ? NULL : &a->sm,
        a->scale, a->bs, a->mode, a->null_arg == 9 ? NULL : &a->dq, a->dqr_on ? &a->dqr : NULL,
        a->null_arg == 10 ? NULL : &a->dk, a->dkr_on ? &a->dkr : NULL, a->dv_on ? &a->dv : NULL,
        a->null_arg == 11 ? NULL : size, a->null_arg == 12 ? NULL : ex);
}

static void expect_refusal(const gargs *a, const gio *io, spa_status want, const char *what)
{
    uint64_t size = 12345;
    spa_executor ex, before;
    memset(&ex, 0x5A, sizeof ex);
    before = ex;
    unsigned char *snap[5];
    snapshot_outputs(io, snap);
    const spa_status st = call(a, &size, &ex);
    if (st != want)
        fprintf(stderr, "  dsa_sparse_attention_grad rule '%s': status %d, expected %d\n", what, (int)st, (int)want);
    CU_ASSERT_EQUAL(st, want);
    CU_ASSERT_EQUAL(size, 12345);
    CU_ASSERT(refusal_recorded(&ex, &before, st));
    CU_ASSERT(outputs_same(io, snap));
    free_snapshot(snap);
}

static void expect_ok(const gargs *a, const char *what)
{
    uint64_t size;
    spa_executor ex;
    const spa_status st = call(a, &size, &ex);
    if (st != SPA_OK)
        fprintf(stderr, "  dsa_sparse_attention_grad '%s' refused: %s\n", what, spa_executor_reason(&ex, NULL));
    CU_ASSERT_EQUAL(st, SPA_OK);
}

/* dsa_refusal_case's shape (f32, B 2 with 40 and 20 keys, 2 and 1 queries,
 * N1 4, N2 2, D 32 + Dr 16, Dv 24, S 4, K 6, causal) on a contiguous
 * (layout 1) or TND (2) key, every gradient given. */
static void grad_refusal_case(gcase *g, int layout)
{
    memset(g, 0, sizeof *g);
    dsa_refusal_case(&g->c, layout);
    g->dv_out = g->dqr_on = g->dkr_on = true;
}

static gargs args_of(const gcase *g, const gio *io)
{
    const dsa_case *c = &g->c;
    const dsa_io *f = &io->f;
    gargs a;
    memset(&a, 0, sizeof a);
    a.q = f->q.t, a.k = f->k.t, a.v = *dsa_value_of(c, f), a.idx = f->idx.t, a.o = f->o.t, a.dy = io->dy.t;
    a.mx = f->mx.t, a.sm = f->sm.t, a.dq = io->dq.t, a.dk = io->dk.t;
    if (c->dr > 0)
        a.qr = f->qr.t, a.kr = f->kr.t, a.dqr = io->dqr.t, a.dkr = io->dkr.t;
    if (g->dv_out)
        a.dv = io->dv.t;
    a.sq = f->sq, a.len = f->len;
    a.scale = c->scale, a.bs = c->bs, a.mode = c->mode;
    a.qr_on = a.kr_on = c->dr > 0;
    a.dqr_on = g->dqr_on && c->dr > 0, a.dkr_on = g->dkr_on && c->dr > 0, a.dv_on = g->dv_out;
    a.sq_on = !c->sq_null, a.len_on = !c->kv_null;
    return a;
}

#define RULE(what, edit, want)              \
    do {                                    \
        a = *from;                          \
        edit;                               \
        expect_refusal(&a, io, want, what); \
    } while (0)

/* The rules of the arguments themselves, on the contiguous base case:
 * NULLs, dtypes, ranks and shapes, attributes, values. */
static void argument_rules(const gargs *from, const gio *io)
{
    gargs a;
    static const char *nulls[12] = {"query",       "key",         "value",          "sparse_indices",
                                    "attention_out", "attention_out_grad", "softmax_max", "softmax_sum",
                                    "dquery_out",  "dkey_out",    "workspace_size", "executor"};
    for (int k = 0; k < 12; k++) {
        char what[64];
        snprintf(what, sizeof what, "%s NULL", nulls[k]);
        RULE(what, a.null_arg = k + 1, SPA_ERR_NULLPTR);
    }
    RULE("actual_seq_q_len data NULL", a.sq.data = NULL, SPA_ERR_NULLPTR);
    RULE("dvalue_out NULL with a value of its own", a.dv_on = false, SPA_ERR_INVALID);
    /* dtypes */
    RULE("query int32", (a.q.dtype = SPA_INT32, a.k.dtype = SPA_INT32), SPA_ERR_INVALID);
    RULE("key f16 with an f32 query", a.k.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("value bf16 with an f32 query", a.v.dtype = SPA_BFLOAT16, SPA_ERR_INVALID);
    RULE("query_rope bf16 with an f32 query", a.qr.dtype = SPA_BFLOAT16, SPA_ERR_INVALID);
    RULE("key_rope f16 with an f32 query", a.kr.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("attention_out f16 with an f32 query", a.o.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("attention_out_grad bf16 with an f32 query", a.dy.dtype = SPA_BFLOAT16, SPA_ERR_INVALID);
    RULE("indices int64", a.idx.dtype = SPA_INT64, SPA_ERR_INVALID);
    RULE("softmax_max f16", a.mx.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("softmax_sum bf16", a.sm.dtype = SPA_BFLOAT16, SPA_ERR_INVALID);
    RULE("softmax_sum int32", a.sm.dtype = SPA_INT32, SPA_ERR_INVALID);
    RULE("dquery_out f16 with an f32 query", a.dq.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("dquery_rope_out bf16 with an f32 query", a.dqr.dtype = SPA_BFLOAT16, SPA_ERR_INVALID);
    RULE("dkey_out bf16 with an f32 query", a.dk.dtype = SPA_BFLOAT16, SPA_ERR_INVALID);
    RULE("dkey_rope_out f16 with an f32 query", a.dkr.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("dvalue_out f16 with an f32 query", a.dv.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("dquery_out int32", a.dq.dtype = SPA_INT32, SPA_ERR_INVALID);
    if (SPA_HAVE_F64) {
        RULE("softmax_max f64 for f32 inputs", a.mx.dtype = SPA_FLOAT64, SPA_ERR_INVALID);
        RULE("softmax_sum f32 for f64 inputs",
             (a.q.dtype = a.qr.dtype = a.k.dtype = a.kr.dtype = a.v.dtype = a.o.dtype = a.dy.dtype = SPA_FLOAT64,
              a.dq.dtype = a.dqr.dtype = a.dk.dtype = a.dkr.dtype = a.dv.dtype = SPA_FLOAT64,
              a.mx.dtype = SPA_FLOAT64),
             SPA_ERR_INVALID);
    } else {
        RULE("float64 not built",
             (a.q.dtype = a.qr.dtype = a.k.dtype = a.kr.dtype = a.v.dtype = a.o.dtype = a.dy.dtype = SPA_FLOAT64,
              a.dq.dtype = a.dqr.dtype = a.dk.dtype = a.dkr.dtype = a.dv.dtype = SPA_FLOAT64,
              a.mx.dtype = a.sm.dtype = SPA_FLOAT64),
             SPA_ERR_INVALID);
    }
    /* ranks and shapes */
    RULE("query rank 2", a.q.rank = 2, SPA_ERR_INVALID);
    RULE("key rank 5", (a.k.rank = 5, a.k.dims[4] = 1, a.k.strides[4] = 1), SPA_ERR_INVALID);
    RULE("a 4-dim key whose dim 0 is not B (the forward's paged form)", a.k.dims[0] = 3, SPA_ERR_INVALID);
    RULE("key D differs from the query's", a.k.dims[3] = 16, SPA_ERR_INVALID);
    RULE("key_rope heads differ", a.kr.dims[2] = 1, SPA_ERR_INVALID);
    RULE("value rows differ from the key's", a.v.dims[1] = a.k.dims[1] + 1, SPA_ERR_INVALID);
    RULE("value heads differ", a.v.dims[2] = 1, SPA_ERR_INVALID);
    RULE("attention_out Dv differs from the value's", a.o.dims[2] = 23, SPA_ERR_INVALID);
    RULE("attention_out tokens", a.o.dims[0] = 2, SPA_ERR_INVALID);
    RULE("attention_out_grad Dv differs", a.dy.dims[2] = 25, SPA_ERR_INVALID);
    RULE("attention_out_grad heads", a.dy.dims[1] = 2, SPA_ERR_INVALID);
    RULE("attention_out_grad rank 2", a.dy.rank = 2, SPA_ERR_INVALID);
    RULE("softmax_max [T, N2, G]", (a.mx.dims[0] = 3, a.mx.dims[1] = 2), SPA_ERR_INVALID);
    RULE("softmax_sum G", a.sm.dims[2] = 3, SPA_ERR_INVALID);
    RULE("softmax_sum rank 2", a.sm.rank = 2, SPA_ERR_INVALID);
    RULE("dquery_out D", a.dq.dims[2] = 31, SPA_ERR_INVALID);
    RULE("dquery_out tokens", a.dq.dims[0] = 4, SPA_ERR_INVALID);
    RULE("dquery_out heads", a.dq.dims[1] = 2, SPA_ERR_INVALID);
    RULE("dquery_out rank 2", a.dq.rank = 2, SPA_ERR_INVALID);
    RULE("dquery_rope_out Dr", a.dqr.dims[2] = 8, SPA_ERR_INVALID);
    RULE("dkey_out rows differ from the key's", a.dk.dims[1] = a.k.dims[1] - 1, SPA_ERR_INVALID);
    RULE("dkey_out D", a.dk.dims[3] = 33, SPA_ERR_INVALID);
    RULE("dkey_out rank 3", a.dk.rank = 3, SPA_ERR_INVALID);
    RULE("dkey_rope_out heads", a.dkr.dims[2] = 1, SPA_ERR_INVALID);
    RULE("dvalue_out Dv", a.dv.dims[3] = 23, SPA_ERR_INVALID);
    RULE("dvalue_out batches", a.dv.dims[0] = 1, SPA_ERR_INVALID);
    RULE("dquery_out reaches an element twice", a.dq.strides[0] = 0, SPA_ERR_INVALID);
    RULE("dkey_out reaches an element twice", a.dk.strides[1] = 0, SPA_ERR_INVALID);
    RULE("dvalue_out reaches an element twice", a.dv.strides[2] = 0, SPA_ERR_INVALID);
    RULE("dkey_rope_out reaches an element twice", a.dkr.strides[0] = 0, SPA_ERR_INVALID);
    RULE("indices heads differ from the key's", a.idx.dims[1] = 1, SPA_ERR_INVALID);
    RULE("N1 % N2", (a.q.dims[1] = a.qr.dims[1] = a.o.dims[1] = a.dy.dims[1] = a.dq.dims[1] = a.dqr.dims[1] = 3),
         SPA_ERR_INVALID);
    RULE("query_rope without key_rope", a.kr_on = false, SPA_ERR_INVALID);
    RULE("dquery_rope_out without rope parts", (a.qr_on = a.kr_on = false, a.dkr_on = false), SPA_ERR_INVALID);
    RULE("dkey_rope_out without rope parts", (a.qr_on = a.kr_on = false, a.dqr_on = false), SPA_ERR_INVALID);
    /* attributes */
    RULE("sparse_block_size 0", a.bs = 0, SPA_ERR_INVALID);
    RULE("sparse_block_size 4097", a.bs = 4097, SPA_ERR_INVALID);
    RULE("K 0", a.idx.dims[2] = 0, SPA_ERR_INVALID);
    RULE("sparse_mode 1", a.mode = 1, SPA_ERR_INVALID);
    RULE("sparse_mode 4", a.mode = 4, SPA_ERR_INVALID);
    RULE("scale NaN", a.scale = NAN, SPA_ERR_INVALID);
    RULE("scale -inf", a.scale = -INFINITY, SPA_ERR_INVALID);
}

/* The sequence arrays and the indices' values (contiguous base case). */
static void value_rules(const gargs *from, gio *io)
{
    gargs a;
    const int64_t sq_short[2] = {2, 2}, len_neg[2] = {40, -1}, len_past[2] = {io->f.srows + 1, 20};
    RULE("sum of S_b != T", a.sq.data = sq_short, SPA_ERR_INVALID);
    RULE("actual_seq_kv_len size != B", a.len.size = 1, SPA_ERR_INVALID);
    RULE("L_b negative", a.len.data = len_neg, SPA_ERR_INVALID);
    RULE("L_b beyond key dim 1", a.len.data = len_past, SPA_ERR_INVALID);
    RULE("T not a multiple of B (both arrays NULL)", (a.sq_on = false, a.len_on = false), SPA_ERR_INVALID);
    /* token 0 (batch 0, L 40, S 4: blocks 0 .. 9), token 2 (batch 1, L 20:
     * blocks 0 .. 4); slot 3 of key head 1 */
    const int64_t at[5] = {0, 0, 2 * 12 + 6 + 3, 2 * 12, 6 + 3};
    const int64_t v[5] = {-2, 10, 5, INT32_MAX, 11};
    static const char *what[5] = {"index -2", "index 10 of batch 0 (10 S = L_b)", "index 5 of batch 1 (5 S = L_b)",
                                  "index INT32_MAX", "index 11 of batch 0, slot 3 of head 1"};
    for (int m = 0; m < 5; m++) {
        const int64_t keep = (int64_t)tt_get(&io->f.idx, at[m]);
        tt_set_int(&io->f.idx, at[m], v[m]);
        RULE(what[m], (void)0, SPA_ERR_INVALID);
        tt_set_int(&io->f.idx, at[m], keep);
    }
    const int64_t keep0 = (int64_t)tt_get(&io->f.idx, 0), keep2 = (int64_t)tt_get(&io->f.idx, 2 * 12);
    tt_set_int(&io->f.idx, 0, 9), tt_set_int(&io->f.idx, 2 * 12, 4);
    expect_ok(from, "the last blocks, past the query's position");
    tt_set_int(&io->f.idx, 0, keep0), tt_set_int(&io->f.idx, 2 * 12, keep2);
}

/* MLA-absorb on the contiguous base case: value a view of the key's first
 * Dv elements or the key itself, dvalue NULL or given; a value with the
 * key's descriptor but data of its own is a separate value. */
static void absorb_rules(const gargs *from, const gio *io, rng *r)
{
    gargs a = *from;
    a.v = a.k, a.v.dims[3] = 24, a.dv_on = false;
    expect_ok(&a, "value the key's first Dv elements, dvalue NULL");
    a.dv_on = true;
    expect_ok(&a, "value the key's first Dv elements, dvalue given");
    ttensor o32, dy32, dv32, other;
    const int64_t od[3] = {io->f.q.t.dims[0], io->f.q.t.dims[1], 32};
    const int64_t kd[4] = {io->f.k.t.dims[0], io->f.k.t.dims[1], io->f.k.t.dims[2], 32};
    tt_make(&o32, SPA_FLOAT32, 3, od, false, r), tt_make(&dy32, SPA_FLOAT32, 3, od, false, r);
    tt_make(&dv32, SPA_FLOAT32, 4, kd, false, r), tt_make(&other, SPA_FLOAT32, 4, kd, false, r);
    a = *from, a.v = a.k, a.o = o32.t, a.dy = dy32.t, a.dv_on = false;
    expect_ok(&a, "value the key itself, dvalue NULL");
    a.dv = dv32.t, a.dv_on = true;
    expect_ok(&a, "value the key itself, dvalue given");
    RULE("dvalue NULL, value the key's shape on other memory",
         (a.v = other.t, a.o = o32.t, a.dy = dy32.t, a.dv_on = false), SPA_ERR_INVALID);
    RULE("dvalue NULL, value a view of the key at an offset",
         (a.v = a.k, a.v.dims[3] = 24, a.v.data = (float *)a.k.data + 1, a.dv_on = false), SPA_ERR_INVALID);
    tt_free(&o32), tt_free(&dy32), tt_free(&dv32), tt_free(&other);
}

/* A TND key [T2, N2, D]. */
static void tnd_rules(rng *r)
{
    gcase g;
    grad_refusal_case(&g, 2);
    gio store, *io = &store;
    gio_make(io, &g, r);
    const gargs base = args_of(&g, io), *from = &base;
    const int64_t len_over[2] = {40, io->f.srows - 40 + 1};
    expect_ok(&base, "the TND base case");
    gargs a;
    RULE("actual_seq_kv_len NULL with a TND key", a.len_on = false, SPA_ERR_NULLPTR);
    RULE("TND: L_0 + L_1 beyond T2", a.len.data = len_over, SPA_ERR_INVALID);
    RULE("TND key D differs", a.k.dims[2] = 16, SPA_ERR_INVALID);
    RULE("TND value rows differ from the key's", a.v.dims[0] = a.k.dims[0] - 1, SPA_ERR_INVALID);
    RULE("TND dkey_out rows differ from the key's", a.dk.dims[0] = a.k.dims[0] + 1, SPA_ERR_INVALID);
    RULE("TND dkey_out rank 4", (a.dk.rank = 4, a.dk.dims[3] = 1, a.dk.strides[3] = 1), SPA_ERR_INVALID);
    RULE("TND dvalue_out Dv", a.dv.dims[2] = 25, SPA_ERR_INVALID);
    RULE("TND dkey_rope_out rows", a.dkr.dims[0] = 1, SPA_ERR_INVALID);
    gio_free(io);
}

static void test_refusals(void)
{
    rng r = rng_seed(3305);
    gcase g;
    grad_refusal_case(&g, 1);
    gio store, *io = &store;
    gio_make(io, &g, &r);
    const gargs base = args_of(&g, io);
    expect_ok(&base, "the contiguous base case");
    argument_rules(&base, io);
    value_rules(&base, io);
    absorb_rules(&base, io, &r);
    gargs a = base;
    a.len_on = false;
    expect_ok(&a, "a contiguous key without actual_seq_kv_len");
    a = base, a.dqr_on = a.dkr_on = false;
    expect_ok(&a, "no rope gradients");
    a = base, a.qr_on = a.kr_on = a.dqr_on = a.dkr_on = false;
    expect_ok(&a, "no rope parts");
    gio_free(io);
    tnd_rules(&r);
}
#undef RULE

/* ---- phase 2 ---- */

/* An index or a length made invalid between the phases, a workspace too
 * small or NULL, a workspace over an output or the statistics: refused,
 * nothing written; then the call as planned, against the reference. */
static void test_phase2(void)
{
    rng r = rng_seed(3306);
    gcase g;
    grad_refusal_case(&g, 1);
    gio io;
    gio_make(&io, &g, &r);
    CU_ASSERT_EQUAL_FATAL(forward(&g, &io), SPA_OK);
    unsigned char *snap[5];
    snapshot_outputs(&io, snap);
    uint64_t size;
    spa_executor ex;
    tws ws;
    CU_ASSERT_EQUAL(phase1(&g, &io, &size, &ex), SPA_OK);
    tws_make(&ws, size, 0);
    const int64_t keep = (int64_t)tt_get(&io.f.idx, 2 * 12 + 1); /* token 2 (batch 1): blocks 0 .. 4 */
    tt_set_int(&io.f.idx, 2 * 12 + 1, 5);
    CU_ASSERT_EQUAL(spa_dsa_sparse_attention_grad(ws.ptr, ws.size, &ex, test_runner(1)), SPA_ERR_INVALID);
    tt_set_int(&io.f.idx, 2 * 12 + 1, -2);
    CU_ASSERT_EQUAL(spa_dsa_sparse_attention_grad(ws.ptr, ws.size, &ex, NULL), SPA_ERR_INVALID);
    tt_set_int(&io.f.idx, 2 * 12 + 1, keep);
    g.c.len[1] = io.f.srows + 1; /* the array read again in phase 2 */
    CU_ASSERT_EQUAL(spa_dsa_sparse_attention_grad(ws.ptr, ws.size, &ex, test_runner(3)), SPA_ERR_INVALID);
    g.c.len[1] = 20;
    CU_ASSERT(outputs_same(&io, snap));
    if (size > 0) {
        CU_ASSERT_EQUAL(spa_dsa_sparse_attention_grad(ws.ptr, size - 1, &ex, NULL), SPA_ERR_WORKSPACE);
        CU_ASSERT_EQUAL(spa_dsa_sparse_attention_grad(NULL, size, &ex, NULL), SPA_ERR_NULLPTR);
        CU_ASSERT(outputs_same(&io, snap));
    } else {
        fprintf(stderr, "  dsa_sparse_attention_grad: workspace 0 bytes, its phase-2 size checks skipped\n");
    }
    CU_ASSERT(tws_guard_ok(&ws));
    CU_ASSERT_EQUAL(spa_dsa_sparse_attention_grad(ws.ptr, ws.size, &ex, test_runner(2)), SPA_OK);
    CU_ASSERT_EQUAL(compare(&g, &io), 0);
    tws_free(&ws);
    free_snapshot(snap);

    /* the workspace over dkey, dvalue, softmax_sum: the tensor laid at the
     * workspace's start (a block large enough for both) */
    for (int o = 0; o < 3 && size > 0; o++) {
        ttensor *tt = o == 0 ? &io.dk : o == 1 ? &io.dv : &io.f.sm;
        const size_t span = tt->span;
        tws_make(&ws, size + span, 0);
        void *keep_data = tt->t.data;
        if (o == 2)
            memcpy(ws.ptr, keep_data, span);
        tt->t.data = ws.ptr;
        uint64_t size2 = 0;
        CU_ASSERT_EQUAL(phase1(&g, &io, &size2, &ex), SPA_OK);
        CU_ASSERT_EQUAL(size2, size);
        unsigned char *wsnap = malloc((size_t)size + span);
        memcpy(wsnap, ws.ptr, (size_t)size + span);
        unsigned char *osnap[5];
        fill_outputs_canary(&io);
        snapshot_outputs(&io, osnap);
        const spa_status st = spa_dsa_sparse_attention_grad(ws.ptr, size, &ex, NULL);
        if (st != SPA_ERR_INVALID)
            fprintf(stderr, "  workspace over %s: status %d\n", o == 0 ? "dkey" : o == 1 ? "dvalue" : "softmax_sum",
                    (int)st);
        CU_ASSERT_EQUAL(st, SPA_ERR_INVALID);
        CU_ASSERT(memcmp(wsnap, ws.ptr, (size_t)size + span) == 0); /* nothing written */
        CU_ASSERT(outputs_same(&io, osnap));
        free(wsnap), free_snapshot(osnap);
        tt->t.data = keep_data;
        tws_free(&ws);
    }
    gio_free(&io);
}

/* ---- edges ---- */

/* T = 0 (q_len given and NULL): nothing to read, the key's gradients all
 * +0 (no query sees a row). */
static void edge_no_query(spa_dtype dt, int k, rng *r)
{
    for (int v = 0; v < 2; v++) {
        gcase g;
        grad_refusal_case(&g, 1 + (k + v) % 2);
        g.c.dt = dt;
        g.c.sq[0] = g.c.sq[1] = 0;
        g.c.sq_null = v == 1;
        dsa_case_sum(&g.c);
        gio io;
        gio_make(&io, &g, r);
        check_case("T = 0", k * 2 + v, &g, &io, k % N_RUNNERS, (size_t)v);
        gio_free(&io);
    }
}

/* L_0 = 0 (batch 0's queries see nothing; their indices all -1), K = 1
 * and larger, both modes; token 4 of batch 1 selecting nothing; block 1
 * of batch 1 selected by no query. */
static void edge_empty_batch(spa_dtype dt, int k, rng *r)
{
    for (int m = 0; m < 4; m++) {
        if (!TEST_THIN_DTYPE(m, k, DSA_N_DTS))
            continue;
        gcase g;
        grad_refusal_case(&g, 1 + m % 2);
        dsa_case *c = &g.c;
        c->dt = dt;
        c->len[0] = 0, c->sq[0] = 3, c->len[1] = 9, c->sq[1] = 2;
        c->mode = m % 2 ? 0 : 3;
        c->kc = m < 2 ? 1 : 12;
        c->absorb = m == 2, c->dv = m == 2 ? 20 : 24, g.dv_out = m != 2;
        dsa_case_sum(c);
        gio io;
        gio_make(&io, &g, r);
        for (int64_t j = 0; j < c->n2 * c->kc; j++) /* token 4's slots: all -1 */
            tt_set_int(&io.f.idx, 4 * c->n2 * c->kc + j, -1);
        for (int64_t j = 0; j < c->n2 * c->kc; j++) /* token 3: block 1 nowhere */
            if ((int64_t)tt_get(&io.f.idx, 3 * c->n2 * c->kc + j) == 1)
                tt_set_int(&io.f.idx, 3 * c->n2 * c->kc + j, j % 2 ? 0 : -1);
        check_case("L_b = 0", k * 4 + m, &g, &io, (k + m) % N_RUNNERS, (size_t)m);
        gio_free(&io);
    }
}

/* Causal, S_b > L_b: of 4 queries on 2 keys, 0 and 1 see nothing (dq +0),
 * 2 sees key 0, 3 keys 0 and 1; S 1, K 3 (blocks 0, 1, -1 in some order). */
static void edge_before_keys(spa_dtype dt, int k, rng *r)
{
    gcase g;
    grad_refusal_case(&g, 1 + k % 2);
    dsa_case *c = &g.c;
    c->dt = dt;
    c->b = 1, c->len[0] = 2, c->sq[0] = 4, c->kc = 3, c->bs = 1;
    dsa_case_sum(c);
    gio io;
    gio_make(&io, &g, r);
    for (int64_t row = 0; row < c->t * c->n2; row++) {
        const int64_t first = rng_int(r, 0, 2);
        for (int64_t j = 0; j < 3; j++)
            tt_set_int(&io.f.idx, row * 3 + (first + j) % 3, j == 2 ? -1 : j);
    }
    check_case("before the keys", k, &g, &io, k % N_RUNNERS, 0);
    gio_free(&io);
}

/* The largest head dims: D + Dr = 768 with Dv 768 of its own, and value
 * the key itself at D 768 without rope (dvalue NULL). */
static void edge_widest(spa_dtype dt, int k, rng *r)
{
    for (int m = 0; m < 2; m++) {
        gcase g;
        grad_refusal_case(&g, 1 + (k + m) % 2);
        dsa_case *c = &g.c;
        c->dt = dt;
        c->n1 = 2, c->n2 = 1, c->kc = 3, c->bs = 5;
        c->d = m == 0 ? 704 : 768, c->dr = m == 0 ? 64 : 0, c->dv = 768, c->absorb = m == 1;
        c->len[0] = 33, c->len[1] = 12, c->sq[0] = 2, c->sq[1] = 1;
        dsa_case_sum(c);
        c->scale = dsa_draw_scale(c->d, c->dr, r);
        g.dv_out = m == 0, g.dqr_on = g.dkr_on = c->dr > 0;
        gio io;
        gio_make(&io, &g, r);
        check_case("widest", k * 2 + m, &g, &io, (k + m) % N_RUNNERS, 7);
        gio_free(&io);
    }
}

static void test_edges(void)
{
    rng r = rng_seed(3307);
    for (int k = 0; k < DSA_N_DTS; k++) {
        edge_no_query(dsa_dts[k], k, &r);
        edge_empty_batch(dsa_dts[k], k, &r);
        edge_before_keys(dsa_dts[k], k, &r);
        if (TEST_THIN_DTYPE(1, k, DSA_N_DTS))
            edge_widest(dsa_dts[k], k, &r);
    }
}

void suite_dsa_sparse_attention_grad(void)
{
    CU_pSuite s = CU_add_suite("dsa_sparse_attention_grad", NULL, NULL);
    CU_add_test(s, "reference against finite differences (rope, absorb, causal)",
                test_reference_vs_finite_differences);
    CU_add_test(s, "random shapes, contiguous and TND keys, all dtypes, absorb with dvalue NULL or given",
                test_random);
    CU_add_test(s, "bit-identical across runners", test_deterministic);
    CU_add_test(s, "many queries on few rows: token ranges across batches", test_many_queries);
    CU_add_test(s, "decode: thousands of rows for one query, G up to 64", test_decode);
    CU_add_test(s, "refusals: NULLs, dtypes, shapes, dvalue NULL, indices; nothing written", test_refusals);
    CU_add_test(s, "phase 2: changed arguments, workspace", test_phase2);
    CU_add_test(s, "edges: T = 0, L_b = 0, K = 1, causal before the keys, widest heads", test_edges);
}
