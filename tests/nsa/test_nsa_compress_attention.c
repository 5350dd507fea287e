/* NsaCompressAttention and its backward: against the fp64 reference of
 * docs/nsa_compress_attention.md, on every rule, across runners. */
#include <CUnit/Basic.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_nsa_cattn.h"
#include "spa_dtypes.h"
#include "util.h"

#define NSCA_MAX_BATCHES 5

typedef struct nsca_case {
    spa_dtype dt;
    int64_t n1, n2, d, dv, l, st, ls, kc, sparse_mode;
    int64_t batches;
    int64_t qstart[NSCA_MAX_BATCHES], qlen[NSCA_MAX_BATCHES];
    int64_t cstart[NSCA_MAX_BATCHES], clen[NSCA_MAX_BATCHES];
    int64_t sq_vals[NSCA_MAX_BATCHES], sc_vals[NSCA_MAX_BATCHES];
    spa_int_array sq, sc;
    int64_t t1, t2, max_sq, max_cmp, max_sel;
    bool has_mask, has_tmask, strided;
    double scale;
    uint8_t *mask, *tmask; /* dense [max_sq][max_cmp] / [max_sq][max_sel] (+ extra cols) */
    int64_t mask_cols, tmask_cols;
} nsca_case;

typedef struct nsca_io {
    ttensor q, k, v, mask, tmask, mx, sm, o, topk, dy, dq, dk, dv;
} nsca_io;

static void case_finish(nsca_case *c, int64_t extra_rows)
{
    int64_t qs = 0, cs = 0;
    c->max_sq = c->max_cmp = 0;
    for (int64_t b = 0; b < c->batches; b++) {
        c->qstart[b] = qs, c->cstart[b] = cs;
        qs += c->qlen[b], cs += c->clen[b];
        c->sq_vals[b] = qs, c->sc_vals[b] = cs;
        c->max_sq = c->qlen[b] > c->max_sq ? c->qlen[b] : c->max_sq;
        c->max_cmp = c->clen[b] > c->max_cmp ? c->clen[b] : c->max_cmp;
    }
    const int64_t m = c->ls / c->st;
    c->max_sel = (c->max_cmp + m - 1) / m;
    c->t1 = qs, c->t2 = cs + extra_rows;
    c->sq = (spa_int_array){c->sq_vals, (uint64_t)c->batches};
    c->sc = (spa_int_array){c->sc_vals, (uint64_t)c->batches};
    c->mask_cols = c->max_cmp + 1;
    c->tmask_cols = c->max_sel + 2;
    c->mask = calloc((size_t)((c->max_sq + 1) * c->mask_cols), 1);
    c->tmask = calloc((size_t)((c->max_sq + 1) * c->tmask_cols), 1);
}

/* Random masks: atten mask mostly causal-like with holes (some rows fully
 * masked), topk mask forcing a few blocks. */
static void case_masks(nsca_case *c, rng *r)
{
    for (int64_t s = 0; s <= c->max_sq; s++) {
        const int kind = (int)rng_int(r, 0, 5);
        for (int64_t j = 0; j < c->mask_cols; j++)
            c->mask[s * c->mask_cols + j] = kind == 0 ? 1 : kind == 1 ? (uint8_t)(rng_int(r, 0, 3) == 0)
                                            : (uint8_t)(j * c->st + c->l - 1 > s + rng_int(r, 0, 8));
        for (int64_t j = 0; j < c->tmask_cols; j++)
            c->tmask[s * c->tmask_cols + j] = (uint8_t)(rng_int(r, 0, 9) == 0);
    }
}

static void case_fixed(nsca_case *c, spa_dtype dt, int64_t n1, int64_t n2, int64_t d, int64_t dv,
                       int64_t l, int64_t st, int64_t ls, int64_t kc, int64_t batches,
                       const int64_t *qlen, const int64_t *clen, rng *r)
{
    memset(c, 0, sizeof *c);
    c->dt = dt, c->n1 = n1, c->n2 = n2, c->d = d, c->dv = dv;
    c->l = l, c->st = st, c->ls = ls, c->kc = kc, c->batches = batches;
    for (int64_t b = 0; b < batches; b++)
        c->qlen[b] = qlen[b], c->clen[b] = clen[b];
    c->scale = 1.0 / sqrt((double)d);
    case_finish(c, 0);
    case_masks(c, r);
}

static void case_draw(nsca_case *c, int i, rng *r)
{
    static const spa_dtype dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};
    static const int64_t groups[] = {1, 2, 3, 4, 5, 8, 12, 16, 17, 24, 32};
    memset(c, 0, sizeof *c);
    c->dt = dts[i % (SPA_HAVE_F64 ? 4 : 3)];
    const int64_t g = groups[rng_int(r, 0, (int64_t)(sizeof groups / sizeof groups[0]) - 1)];
    c->n2 = rng_int(r, 1, g > 16 ? 1 : 2);
    c->n1 = c->n2 * g;
    c->d = rng_int(r, 0, 2) == 0 ? rng_int(r, 1, 40) : 16 * rng_int(r, 1, 4);
    c->dv = rng_int(r, 0, 2) == 0 ? rng_int(r, 1, 40) : 16 * rng_int(r, 1, 3);
    c->st = rng_int(r, 1, 4);
    c->l = c->st * rng_int(r, 1, 3) + rng_int(r, 0, 1);
    c->ls = c->st * rng_int(r, 1, 4);
    c->kc = rng_int(r, 1, 6);
    c->batches = rng_int(r, 1, NSCA_MAX_BATCHES);
    for (int64_t b = 0; b < c->batches; b++) {
        c->qlen[b] = rng_int(r, 0, 14);
        c->clen[b] = rng_int(r, 0, 4) == 0 ? rng_int(r, 0, 3) : rng_int(r, 1, 40);
    }
    c->sparse_mode = rng_int(r, 0, 2);
    c->has_mask = rng_int(r, 0, 2) != 0;
    c->has_tmask = rng_int(r, 0, 1) != 0;
    c->strided = rng_int(r, 0, 1) != 0;
    c->scale = (0.5 + rng_unit(r)) / sqrt((double)c->d);
    case_finish(c, rng_int(r, 0, 3));
    case_masks(c, r);
}

static void case_free(nsca_case *c)
{
    free(c->mask), free(c->tmask);
}

static void case_describe(const nsca_case *c, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s N1 %lld N2 %lld D %lld Dv %lld l %lld d %lld l' %lld K %lld mode %lld mask %d tmask %d strided %d lens",
                     dtype_name(c->dt), (long long)c->n1, (long long)c->n2, (long long)c->d,
                     (long long)c->dv, (long long)c->l, (long long)c->st, (long long)c->ls,
                     (long long)c->kc, (long long)c->sparse_mode, c->has_mask, c->has_tmask,
                     c->strided);
    for (int64_t b = 0; b < c->batches && n > 0 && (size_t)n < size; b++)
        n += snprintf(buf + n, size - (size_t)n, " %lld/%lld", (long long)c->qlen[b],
                      (long long)c->clen[b]);
}

static spa_dtype stat_dt(spa_dtype dt)
{
    return dt == SPA_FLOAT64 ? SPA_FLOAT64 : SPA_FLOAT32;
}

static void io_make(nsca_io *io, const nsca_case *c, rng *r)
{
    memset(io, 0, sizeof *io);
    const int64_t qd[3] = {c->t1, c->n1, c->d}, kd[3] = {c->t2, c->n2, c->d},
                  vd[3] = {c->t2, c->n2, c->dv}, od[3] = {c->t1, c->n1, c->dv},
                  sd[3] = {c->t1, c->n1, 8}, td[3] = {c->t1, c->n2, c->kc},
                  md[2] = {c->max_sq + 1, c->mask_cols}, tmd[2] = {c->max_sq + 1, c->tmask_cols};
    tt_make(&io->q, c->dt, 3, qd, c->strided, r);
    tt_make(&io->k, c->dt, 3, kd, c->strided, r);
    tt_make(&io->v, c->dt, 3, vd, c->strided, r);
    tt_fill_random(&io->q, r, -1.0, 1.0);
    tt_fill_random(&io->k, r, -1.0, 1.0);
    tt_fill_random(&io->v, r, -1.0, 1.0);
    tt_make(&io->mask, SPA_BOOL, 2, md, c->strided, r);
    tt_make(&io->tmask, SPA_UINT8, 2, tmd, c->strided, r);
    for (int64_t i = 0; i < md[0] * md[1]; i++)
        tt_set_int(&io->mask, i, c->mask[i] ? 1 : 0);
    for (int64_t i = 0; i < tmd[0] * tmd[1]; i++) /* any nonzero byte forces */
        tt_set_int(&io->tmask, i, c->tmask[i] ? 1 + (i % 200) : 0);
    tt_make(&io->mx, stat_dt(c->dt), 3, sd, c->strided, r);
    tt_make(&io->sm, stat_dt(c->dt), 3, sd, c->strided, r);
    tt_make(&io->o, c->dt, 3, od, c->strided, r);
    tt_make(&io->topk, SPA_INT32, 3, td, c->strided, r);
    tt_make(&io->dy, c->dt, 3, od, c->strided, r);
    tt_fill_random(&io->dy, r, -1.0, 1.0);
    tt_make(&io->dq, c->dt, 3, qd, c->strided, r);
    tt_make(&io->dk, c->dt, 3, kd, c->strided, r);
    tt_make(&io->dv, c->dt, 3, vd, c->strided, r);
}

static void io_free(nsca_io *io)
{
    ttensor *all[] = {&io->q, &io->k, &io->v, &io->mask, &io->tmask, &io->mx, &io->sm,
                      &io->o, &io->topk, &io->dy, &io->dq, &io->dk, &io->dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tt_free(all[i]);
}

/* The forward's phase 1 plans for a runner of this many threads where it is
 * not 0 (spa_nsa_compress_attention_get_workspace_size_for). */
static uint32_t plan_workers;

static spa_status fwd_phase1(const nsca_case *c, nsca_io *io, uint64_t *size, spa_executor *ex)
{
    return spa_nsa_compress_attention_get_workspace_size_for(
        &io->q.t, &io->k.t, &io->v.t, c->has_mask ? &io->mask.t : NULL,
        c->has_tmask ? &io->tmask.t : NULL, &c->sq, &c->sc, NULL, c->scale, c->n1, "TND",
        c->sparse_mode, c->l, c->st, c->ls, c->kc, &io->mx.t, &io->sm.t, &io->o.t, &io->topk.t,
        plan_workers, size, ex);
}

static spa_status grad_phase1(const nsca_case *c, nsca_io *io, uint64_t *size, spa_executor *ex)
{
    return spa_nsa_compress_attention_grad_get_workspace_size(
        &io->q.t, &io->k.t, &io->v.t, &io->o.t, &io->dy.t, &io->mx.t, &io->sm.t,
        c->has_mask ? &io->mask.t : NULL, &c->sq, &c->sc, c->scale, c->n1, "TND",
        c->sparse_mode, c->l, c->st, &io->dq.t, &io->dk.t, &io->dv.t, size, ex);
}

static spa_status run_phase(bool grad, const nsca_case *c, nsca_io *io, int runner, size_t skew)
{
    uint64_t ws_size = 0;
    spa_executor ex;
    spa_status st = grad ? grad_phase1(c, io, &ws_size, &ex) : fwd_phase1(c, io, &ws_size, &ex);
    if (st != SPA_OK)
        return st;
    tws ws;
    tws_make(&ws, ws_size, skew);
    st = grad ? spa_nsa_compress_attention_grad(ws.ptr, ws.size, &ex, test_runner(runner))
              : spa_nsa_compress_attention(ws.ptr, ws.size, &ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

static ref_nsca_problem problem_of(const nsca_case *c)
{
    ref_nsca_problem p;
    memset(&p, 0, sizeof p);
    p.t1 = c->t1, p.t2 = c->t2, p.n1 = c->n1, p.n2 = c->n2, p.d = c->d, p.dv = c->dv;
    p.l = c->l, p.st = c->st, p.ls = c->ls, p.kc = c->kc, p.batches = c->batches;
    p.qstart = c->qstart, p.qlen = c->qlen, p.cstart = c->cstart, p.clen = c->clen;
    p.mask = c->has_mask ? c->mask : NULL, p.mask_cols = c->mask_cols;
    p.tmask = c->has_tmask ? c->tmask : NULL, p.tmask_cols = c->tmask_cols;
    p.causal = c->sparse_mode == 2;
    p.scale = c->scale;
    p.round = c->dt == SPA_FLOAT16 ? REF_ROUND_F16 : c->dt == SPA_BFLOAT16 ? REF_ROUND_BF16 : REF_ROUND_NONE;
    return p;
}

static tol attn_tol(spa_dtype dt)
{
    tol t = tol_for(dt, 0x1p-16);
    if (dt == SPA_FLOAT16)
        t.atol = t.rtol = 0x1p-9;
    else if (dt == SPA_BFLOAT16)
        t.atol = t.rtol = 0x1p-6;
    else if (dt == SPA_FLOAT32)
        t.atol = 0x1p-16, t.rtol = 0x1p-22;
    return t;
}

/* A statistic's 8 equal lanes against the reference; where the reference
 * is NaN, a NaN (nan_any: any value, the max of a NaN row being
 * unspecified). */
static int64_t check_stat(const char *what, const ttensor *tt, const double *ref, int64_t count,
                          double rel, bool nan_any)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < count; i++) {
        const double got = tt_get(tt, i * 8);
        bool ok = got == ref[i] || fabs(got - ref[i]) <= rel * (1.0 + fabs(ref[i]));
        if (isnan(ref[i]))
            ok = nan_any || isnan(got);
        else if (isnan(got))
            ok = false;
        for (int64_t l = 1; l < 8; l++) {
            const double x = tt_get(tt, i * 8 + l);
            ok = ok && (x == got || (isnan(x) && isnan(got)));
        }
        if (!ok && bad++ < 5)
            fprintf(stderr, "  %s[%lld]: got %.9g want %.9g\n", what, (long long)i, got, ref[i]);
    }
    return bad;
}

/* Top-K: each slot names the reference's block or one of (nearly) equal
 * importance; slots past the batch's blocks are -1. */
static int64_t check_topk(const nsca_case *c, const ttensor *tt, const double *imp,
                          int64_t imp_cols, const int32_t *ref, double tolv)
{
    int64_t bad = 0;
    for (int64_t b = 0; b < c->batches; b++)
        for (int64_t t = c->qstart[b]; t < c->qstart[b] + c->qlen[b]; t++)
            for (int64_t n2 = 0; n2 < c->n2; n2++) {
                const int64_t u = t * c->n2 + n2;
                for (int64_t i = 0; i < c->kc; i++) {
                    const int64_t got = (int64_t)tt_get(tt, u * c->kc + i), want = ref[u * c->kc + i];
                    bool ok = got == want;
                    if (!ok && got >= 0 && want >= 0 && got < imp_cols) {
                        const double ig = imp[u * imp_cols + got], iw = imp[u * imp_cols + want];
                        ok = fabs(ig - iw) <= tolv || (isnan(ig) && isnan(iw)); /* NaN ties NaN */
                    }
                    for (int64_t j = 0; j < i && ok && got >= 0; j++) /* distinct blocks */
                        ok = (int64_t)tt_get(tt, u * c->kc + j) != got;
                    if (!ok && bad++ < 5)
                        fprintf(stderr, "  topk[%lld][%lld][%lld]: got %lld want %lld\n",
                                (long long)t, (long long)n2, (long long)i, (long long)got,
                                (long long)want);
                }
            }
    return bad;
}

static double *alloc_d(int64_t n)
{
    return calloc((size_t)(n + 1), sizeof(double));
}

static int64_t compare_fwd(const nsca_case *c, const nsca_io *io)
{
    double *q = tt_to_doubles(&io->q), *k = tt_to_doubles(&io->k), *v = tt_to_doubles(&io->v);
    double *got = tt_to_doubles(&io->o);
    const int64_t no = c->t1 * c->n1 * c->dv, ns = c->t1 * c->n1, cols = c->max_sel + 1;
    double *o = alloc_d(no), *o_mag = alloc_d(no), *mx = alloc_d(ns), *sm = alloc_d(ns);
    double *imp = alloc_d(c->t1 * c->n2 * cols);
    int32_t *topk = calloc((size_t)(c->t1 * c->n2 * c->kc + 1), sizeof(int32_t));
    ref_nsca_problem p = problem_of(c);
    ref_nsa_cattn(&p, q, k, v, o, o_mag, mx, sm, imp, cols, topk);
    const double rel = c->dt == SPA_FLOAT64 ? 1e-12 : 1e-5;
    int64_t bad = check_close("attentionOut", got, o, o_mag, no, attn_tol(c->dt));
    bad += check_stat("softmaxMax", &io->mx, mx, ns, rel, true);
    bad += check_stat("softmaxSum", &io->sm, sm, ns, rel, false);
    bad += check_topk(c, &io->topk, imp, cols, topk, c->dt == SPA_FLOAT64 ? 1e-12 : 1e-4 * (double)(c->n1 / c->n2));
    free(q), free(k), free(v), free(got), free(o), free(o_mag), free(mx), free(sm), free(imp), free(topk);
    return bad;
}

static int64_t compare_grad(const nsca_case *c, const nsca_io *io)
{
    double *q = tt_to_doubles(&io->q), *k = tt_to_doubles(&io->k), *v = tt_to_doubles(&io->v);
    double *o = tt_to_doubles(&io->o), *dy = tt_to_doubles(&io->dy);
    double *gq = tt_to_doubles(&io->dq), *gk = tt_to_doubles(&io->dk), *gv = tt_to_doubles(&io->dv);
    const int64_t ns = c->t1 * c->n1, nq = ns * c->d, nk = c->t2 * c->n2 * c->d,
                  nv = c->t2 * c->n2 * c->dv;
    double *mx = alloc_d(ns), *sm = alloc_d(ns);
    for (int64_t i = 0; i < ns; i++)
        mx[i] = tt_get(&io->mx, i * 8), sm[i] = tt_get(&io->sm, i * 8);
    double *dq = alloc_d(nq), *dqm = alloc_d(nq), *dk = alloc_d(nk), *dkm = alloc_d(nk),
           *dv = alloc_d(nv), *dvm = alloc_d(nv);
    ref_nsca_problem p = problem_of(c);
    ref_nsa_cattn_grad(&p, q, k, v, o, dy, mx, sm, dq, dqm, dk, dkm, dv, dvm);
    const tol t = attn_tol(c->dt);
    int64_t bad = check_close("dq", gq, dq, dqm, nq, t);
    bad += check_close("dk", gk, dk, dkm, nk, t);
    bad += check_close("dv", gv, dv, dvm, nv, t);
    free(q), free(k), free(v), free(o), free(dy), free(gq), free(gk), free(gv), free(mx), free(sm);
    free(dq), free(dqm), free(dk), free(dkm), free(dv), free(dvm);
    return bad;
}

static bool guards_ok(const nsca_io *io)
{
    const ttensor *all[] = {&io->q, &io->k, &io->v, &io->mask, &io->tmask, &io->mx, &io->sm,
                            &io->o, &io->topk, &io->dy, &io->dq, &io->dk, &io->dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!tt_guard_ok(all[i]))
            return false;
    return true;
}

/* Set by test_nonfinite: NaN / Inf in q, k, v or dy of every case. */
static bool poison_inputs;

/* Forward against the reference, then the grad on the forward's outputs. */
static void check_case(nsca_case *c, rng *r, int runner, const char *label, int i)
{
    nsca_io io;
    io_make(&io, c, r);
    if (poison_inputs) {
        ttensor *const pick[4] = {&io.q, &io.k, &io.v, &io.dy};
        tt_poison(pick[rng_int(r, 0, 3)], r, (int)rng_int(r, 1, 2), true);
    }
    char desc[400];
    case_describe(c, desc, sizeof desc);
    spa_status st = run_phase(false, c, &io, runner, (size_t)rng_int(r, 0, 63));
    int64_t bad = st == SPA_OK ? compare_fwd(c, &io) : -1;
    case_verdict(label, i, desc, st, bad, guards_ok(&io));
    if (st == SPA_OK) {
        st = run_phase(true, c, &io, (runner + 1) % N_RUNNERS, (size_t)rng_int(r, 0, 63));
        bad = st == SPA_OK ? compare_grad(c, &io) : -1;
        case_verdict(label, i, desc, st, bad, guards_ok(&io));
    }
    io_free(&io);
}

static void test_random_shapes(void)
{
    rng r = rng_seed(2101);
    for (int i = 0; i < TEST_COUNT(96, 16); i++) {
        nsca_case c;
        case_draw(&c, i, &r);
        check_case(&c, &r, i % N_RUNNERS, "case", i);
        case_free(&c);
    }
}

/* NaN and Inf in q, k, v or dy: NaN in every output row whose softmax
 * attends the element, NaN importance ranked below every number, the grads
 * as the math gives them (a masked key takes no part), against the
 * reference. */
static void test_nonfinite(void)
{
    rng r = rng_seed(2109);
    poison_inputs = true;
    for (int i = 0; i < TEST_SIZE(32, 12); i++) {
        nsca_case c;
        case_draw(&c, i, &r);
        check_case(&c, &r, i % N_RUNNERS, "nonfinite", i);
        case_free(&c);
    }
    poison_inputs = false;
}

/* G 1 to 32 in every dtype (and 48, 64: lane chunks of 32 heads), causal,
 * head dims with tails, lengths with partial selection blocks. */
static void test_groups(void)
{
    static const int64_t gs[] = {1, 2, 3, 6, 7, 16, 31, 32, 48, 64};
    rng r = rng_seed(2102);
    int i = 0;
    for (size_t gi = 0; gi < sizeof gs / sizeof gs[0]; gi++)
        for (int dk = 0; dk < (SPA_HAVE_F64 ? 4 : 3); dk++, i++) {
            static const spa_dtype dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};
            if (!TEST_THIN_DTYPE((int)gi, dk, SPA_HAVE_F64 ? 4 : 3))
                continue;
            const int64_t ql[2] = {19, 33}, cl[2] = {13, 30};
            nsca_case c;
            case_fixed(&c, dts[dk], gs[gi] * (gs[gi] > 16 ? 1 : 2), gs[gi] > 16 ? 1 : 2, 24 + 8 * dk,
                       20, 4, 2, 6, 3, 2, ql, cl, &r);
            c.sparse_mode = 2;
            c.has_mask = (i % 2) == 0;
            c.has_tmask = (i % 3) == 0;
            c.strided = (i % 2) == 1;
            check_case(&c, &r, i % N_RUNNERS, "group", i);
            case_free(&c);
        }
}

/* The importance indexing on a hand-worked case (docs 2): l 32, d 16, l' 64
 * -> M 4, Nn 2; one query, one head, 6 compressed keys, 2 selection blocks.
 * With D 1, q = 1 and key c = log(c + 1) (scale 1), P(c) = (c + 1) / 21:
 *   P_slc(0) = P4 + 2 P3 + 2 P2 + 2 P1 + P0 = (5 + 8 + 6 + 4 + 1) / 21 = 24/21
 *   P_slc(1) = 2 P5 + P4 (indices 8..4, 6..8 dropped) = (12 + 5) / 21 = 17/21
 * so block 0 ranks first, then block 1; with K 3 the last slot is -1. A
 * topk mask forcing block 1 reverses them. (f32; the keys are exact f32
 * values, so only the exp and the sums round.) */
static void test_importance_hand(void)
{
    rng r = rng_seed(2103);
    for (int forced = 0; forced < 2; forced++) {
        const int64_t ql[1] = {1}, cl[1] = {6};
        nsca_case c;
        case_fixed(&c, SPA_FLOAT32, 1, 1, 1, 1, 32, 16, 64, 3, 1, ql, cl, &r);
        c.scale = 1.0;
        c.has_tmask = forced != 0;
        memset(c.tmask, 0, (size_t)((c.max_sq + 1) * c.tmask_cols));
        c.tmask[1] = 1;
        nsca_io io;
        io_make(&io, &c, &r);
        for (int64_t i = 0; i < 6; i++) {
            /* key c = log(c + 1) rounded to f32; q = 1: z = that value */
            float x = (float)log((double)(i + 1));
            ((float *)io.k.t.data)[i * io.k.t.strides[0]] = x;
        }
        ((float *)io.q.t.data)[0] = 1.0f;
        CU_ASSERT_EQUAL(run_phase(false, &c, &io, 0, 0), SPA_OK);
        if (forced == 0) {
            CU_ASSERT_EQUAL(tt_get(&io.topk, 0), 0);
            CU_ASSERT_EQUAL(tt_get(&io.topk, 1), 1);
        } else {
            CU_ASSERT_EQUAL(tt_get(&io.topk, 0), 1);
            CU_ASSERT_EQUAL(tt_get(&io.topk, 1), 0);
        }
        CU_ASSERT_EQUAL(tt_get(&io.topk, 2), -1);
        /* the hand values through the reference too */
        double q1 = 1.0, kk[6], v1[6] = {0}, o, om, mx, sm, imp[3];
        int32_t tk[3];
        for (int i = 0; i < 6; i++)
            kk[i] = (double)(float)log((double)(i + 1));
        ref_nsca_problem p = problem_of(&c);
        p.tmask = NULL;
        p.t2 = 6;
        ref_nsa_cattn(&p, &q1, kk, v1, &o, &om, &mx, &sm, imp, 3, tk);
        CU_ASSERT(fabs(imp[0] - 24.0 / 21.0) < 1e-6);
        CU_ASSERT(fabs(imp[1] - 17.0 / 21.0) < 1e-6);
        CU_ASSERT(tk[0] == 0 && tk[1] == 1 && tk[2] == -1);
        io_free(&io);
        case_free(&c);
    }
}

/* Exact ties: every key and query equal, so every P is equal and the
 * interior blocks tie exactly; they must come in ascending block order
 * (after the blocks with more weight). l = d = l' (M = Nn = 1): every block
 * weighs one P, all equal: the top-K is 0, 1, 2, ... */
static void test_ties(void)
{
    rng r = rng_seed(2104);
    for (int dk = 0; dk < 3; dk++) {
        static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
        const int64_t ql[2] = {5, 7}, cl[2] = {9, 20};
        nsca_case c;
        case_fixed(&c, dts[dk], 4, 2, 16, 16, 8, 8, 8, 6, 2, ql, cl, &r);
        nsca_io io;
        io_make(&io, &c, &r);
        for (int64_t i = 0; i < tt_numel(&io.k); i++) /* 0.5 in every dtype */
            tt_set_int(&io.k, 0, 0);
        const uint16_t half = dts[dk] == SPA_FLOAT16 ? 0x3800 : 0x3f00;
        for (int64_t i = 0; i < tt_numel(&io.k); i++) {
            const int64_t off = tt_offset(&io.k, i);
            if (dts[dk] == SPA_FLOAT32)
                ((float *)io.k.t.data)[off] = 0.5f;
            else
                ((uint16_t *)io.k.t.data)[off] = half;
        }
        CU_ASSERT_EQUAL(run_phase(false, &c, &io, dk, 0), SPA_OK);
        for (int64_t t = 0; t < c.t1; t++)
            for (int64_t n2 = 0; n2 < c.n2; n2++)
                for (int64_t i = 0; i < c.kc; i++) {
                    const int64_t blocks = t < 5 ? 9 : 20;
                    CU_ASSERT_EQUAL(tt_get(&io.topk, (t * c.n2 + n2) * c.kc + i), (double)(i < blocks ? i : -1));
                }
        CU_ASSERT_EQUAL(compare_fwd(&c, &io), 0);
        io_free(&io);
        case_free(&c);
    }
}

/* Fully masked rows (the causal rule before the first whole block, and an
 * all-ones mask row): uniform P over the batch's keys, max -FLT_MAX, sum
 * C_b; their dq is 0 (masked scores have no gradient). Batches without keys:
 * O = 0, sum 0, every slot -1. */
static void test_fully_masked(void)
{
    rng r = rng_seed(2105);
    for (int dk = 0; dk < 3; dk++) {
        static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
        const int64_t ql[3] = {6, 4, 3}, cl[3] = {5, 0, 7};
        nsca_case c;
        case_fixed(&c, dts[dk], 4, 1, 16, 8, 8, 4, 8, 2, 3, ql, cl, &r);
        c.sparse_mode = 2; /* s < 7: every key masked */
        nsca_io io;
        io_make(&io, &c, &r);
        CU_ASSERT_EQUAL(run_phase(false, &c, &io, dk, 3), SPA_OK);
        CU_ASSERT_EQUAL(compare_fwd(&c, &io), 0);
        for (int64_t t = 0; t < c.t1; t++)
            for (int64_t h = 0; h < c.n1; h++) {
                const double want = t < 6 ? 5.0 : t < 10 ? 0.0 : 7.0;
                CU_ASSERT_EQUAL(tt_get(&io.mx, (t * c.n1 + h) * 8), -(double)FLT_MAX);
                CU_ASSERT_EQUAL(tt_get(&io.sm, (t * c.n1 + h) * 8), want);
            }
        for (int64_t t = 6; t < 10; t++)
            for (int64_t i = 0; i < c.kc; i++)
                CU_ASSERT_EQUAL(tt_get(&io.topk, t * c.kc + i), -1);
        CU_ASSERT_EQUAL(run_phase(true, &c, &io, dk, 3), SPA_OK);
        CU_ASSERT_EQUAL(compare_grad(&c, &io), 0);
        for (int64_t i = 0; i < tt_numel(&io.dq); i++)
            CU_ASSERT_EQUAL(tt_get(&io.dq, i), 0.0);
        io_free(&io);
        case_free(&c);
    }
}

/* Bit-identical outputs for the inline runner and pools of 1, 2 and 7 threads. */
static void test_deterministic(void)
{
    const int64_t ql[3] = {70, 0, 45}, cl[3] = {40, 9, 61};
    for (int dk = 0; dk < 3; dk++) {
        static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
        rng r = rng_seed(2106);
        nsca_case c;
        case_fixed(&c, dts[dk], 8, 2, 32, 24, 4, 2, 8, 4, 3, ql, cl, &r);
        c.sparse_mode = 2;
        c.has_mask = c.has_tmask = true;
        nsca_io io;
        io_make(&io, &c, &r);
        CU_ASSERT_EQUAL(run_phase(false, &c, &io, 0, 0), SPA_OK);
        CU_ASSERT_EQUAL(run_phase(true, &c, &io, 0, 0), SPA_OK);
        const ttensor *outs[] = {&io.o, &io.mx, &io.sm, &io.topk, &io.dq, &io.dk, &io.dv};
        unsigned char *snap[7];
        for (int i = 0; i < 7; i++)
            snap[i] = tt_snapshot(outs[i]);
        for (int run = 1; run < N_RUNNERS; run++) {
            for (int i = 0; i < 7; i++)
                tt_fill_canary((ttensor *)outs[i]);
            CU_ASSERT_EQUAL(run_phase(false, &c, &io, run, (size_t)run * 8), SPA_OK);
            CU_ASSERT_EQUAL(run_phase(true, &c, &io, run, (size_t)run * 8), SPA_OK);
            for (int i = 0; i < 7; i++)
                CU_ASSERT(tt_same_bytes(outs[i], snap[i]));
        }
        /* the forward planned for 1 and 2 threads: a smaller workspace (the
         * boards build fewer blocks), the same bits */
        uint64_t full = 0, size = 0;
        spa_executor ex;
        CU_ASSERT_EQUAL(fwd_phase1(&c, &io, &full, &ex), SPA_OK);
        for (plan_workers = 1; plan_workers <= 2; plan_workers++) {
            CU_ASSERT_EQUAL(fwd_phase1(&c, &io, &size, &ex), SPA_OK);
            CU_ASSERT(size > 0 && size <= full);
            if (!TEST_SMALL_SIZES)
                CU_ASSERT(size < full);
            for (int i = 0; i < 4; i++)
                tt_fill_canary((ttensor *)outs[i]);
            CU_ASSERT_EQUAL(run_phase(false, &c, &io, (int)plan_workers, 8), SPA_OK);
            for (int i = 0; i < 4; i++)
                CU_ASSERT(tt_same_bytes(outs[i], snap[i]));
        }
        plan_workers = 0;
        for (int i = 0; i < 7; i++)
            free(snap[i]);
        io_free(&io);
        case_free(&c);
    }
}

/* One refusal per rule of docs 4: 161002 (161001 for NULL), the executor's
 * plan untouched, a reason recorded, no output written. */
typedef struct fwd_args {
    const spa_tensor *q, *k, *v, *mask, *tmask, *mx, *sm, *o, *topk;
    const spa_int_array *sq, *sc, *ssel;
    const char *layout;
    int64_t head_num, mode, l, st, ls, kc;
} fwd_args;

static spa_status call_fwd(const fwd_args *a, spa_executor *ex)
{
    uint64_t size;
    return spa_nsa_compress_attention_get_workspace_size(
        a->q, a->k, a->v, a->mask, a->tmask, a->sq, a->sc, a->ssel, 0.5, a->head_num, a->layout,
        a->mode, a->l, a->st, a->ls, a->kc, a->mx, a->sm, a->o, a->topk, &size, ex);
}

static void expect_refusal(const fwd_args *a, spa_status want, const char *what)
{
    spa_executor ex, before;
    memset(&ex, 0x5a, sizeof ex);
    before = ex;
    const spa_status st = call_fwd(a, &ex);
    if (st != want)
        fprintf(stderr, "  rule '%s': status %d, want %d\n", what, (int)st, (int)want);
    CU_ASSERT_EQUAL(st, want);
    CU_ASSERT(refusal_recorded(&ex, &before, st));
}

static void test_validation_rules(void)
{
    rng r = rng_seed(2107);
    const int64_t ql[2] = {6, 5}, cl[2] = {9, 12};
    nsca_case c;
    case_fixed(&c, SPA_FLOAT16, 4, 2, 16, 16, 4, 2, 8, 2, 2, ql, cl, &r);
    nsca_io io;
    io_make(&io, &c, &r);
    const fwd_args good = {&io.q.t, &io.k.t, &io.v.t, &io.mask.t, &io.tmask.t, &io.mx.t,
                           &io.sm.t, &io.o.t, &io.topk.t, &c.sq, &c.sc, &c.sc, "TND",
                           4, 2, 4, 2, 8, 2};
    spa_executor ex;
    CU_ASSERT_EQUAL(call_fwd(&good, &ex), SPA_OK);
    fwd_args a;
    /* N1 NULLs */
    a = good, a.q = NULL, expect_refusal(&a, SPA_ERR_NULLPTR, "query NULL");
    a = good, a.sq = NULL, expect_refusal(&a, SPA_ERR_NULLPTR, "seq q NULL");
    a = good, a.topk = NULL, expect_refusal(&a, SPA_ERR_NULLPTR, "topk NULL");
    a = good, a.layout = NULL, expect_refusal(&a, SPA_ERR_NULLPTR, "layout NULL");
    /* N2 layout, N3 sparse mode */
    a = good, a.layout = "BSND", expect_refusal(&a, SPA_ERR_INVALID, "layout");
    a = good, a.mode = 3, expect_refusal(&a, SPA_ERR_INVALID, "sparse mode 3");
    a = good, a.mode = -1, expect_refusal(&a, SPA_ERR_INVALID, "sparse mode -1");
    /* N4 block sizes */
    a = good, a.st = 0, expect_refusal(&a, SPA_ERR_INVALID, "stride 0");
    a = good, a.l = 1, expect_refusal(&a, SPA_ERR_INVALID, "l < d");
    a = good, a.ls = 1, expect_refusal(&a, SPA_ERR_INVALID, "l' < d");
    a = good, a.ls = 7, expect_refusal(&a, SPA_ERR_INVALID, "l' % d");
    a = good, a.kc = 0, expect_refusal(&a, SPA_ERR_INVALID, "K 0");
    /* N5 dtypes */
    spa_tensor t = io.k.t;
    t.dtype = SPA_BFLOAT16;
    a = good, a.k = &t, expect_refusal(&a, SPA_ERR_INVALID, "key dtype");
    spa_tensor ts = io.mx.t;
    ts.dtype = SPA_FLOAT16;
    a = good, a.mx = &ts, expect_refusal(&a, SPA_ERR_INVALID, "stat dtype");
    spa_tensor ti = io.topk.t;
    ti.dtype = SPA_INT64;
    a = good, a.topk = &ti, expect_refusal(&a, SPA_ERR_INVALID, "topk dtype");
    spa_tensor tm = io.mask.t;
    tm.dtype = SPA_FLOAT32;
    a = good, a.mask = &tm, expect_refusal(&a, SPA_ERR_INVALID, "mask dtype");
    spa_tensor ttm = io.tmask.t;
    ttm.dtype = SPA_INT32;
    a = good, a.tmask = &ttm, expect_refusal(&a, SPA_ERR_INVALID, "topk mask dtype");
    /* N6 shapes */
    a = good, a.head_num = 2, expect_refusal(&a, SPA_ERR_INVALID, "head_num");
    spa_tensor tk = io.k.t;
    tk.dims[1] = 3;
    a = good, a.k = &tk, expect_refusal(&a, SPA_ERR_INVALID, "N1 % N2");
    spa_tensor tv = io.v.t;
    tv.dims[0] -= 1;
    a = good, a.v = &tv, expect_refusal(&a, SPA_ERR_INVALID, "value rows");
    spa_tensor tq = io.q.t;
    tq.dims[2] = 8;
    a = good, a.q = &tq, expect_refusal(&a, SPA_ERR_INVALID, "D1 of q vs k");
    spa_tensor to = io.o.t;
    to.dims[2] = 8;
    a = good, a.o = &to, expect_refusal(&a, SPA_ERR_INVALID, "out dims");
    spa_tensor tt2 = io.topk.t;
    tt2.dims[2] = 3;
    a = good, a.topk = &tt2, expect_refusal(&a, SPA_ERR_INVALID, "topk dims");
    spa_tensor tsd = io.sm.t;
    tsd.dims[2] = 4;
    a = good, a.sm = &tsd, expect_refusal(&a, SPA_ERR_INVALID, "stat dims");
    /* N7 arrays */
    const int64_t dec[2] = {6, 5}, over[2] = {9, 30}, shortq[2] = {6, 10}, neg[2] = {-1, 11};
    const spa_int_array a_dec = {dec, 2}, a_over = {over, 2}, a_short = {shortq, 2},
                        a_neg = {neg, 2}, a_one = {c.sq_vals, 1}, a_empty = {c.sq_vals, 0};
    a = good, a.sq = &a_dec, expect_refusal(&a, SPA_ERR_INVALID, "decreasing q ends");
    a = good, a.sq = &a_short, expect_refusal(&a, SPA_ERR_INVALID, "q ends != T1");
    a = good, a.sc = &a_over, expect_refusal(&a, SPA_ERR_INVALID, "cmp ends > T2");
    a = good, a.sc = &a_neg, expect_refusal(&a, SPA_ERR_INVALID, "negative end");
    a = good, a.sc = &a_one, expect_refusal(&a, SPA_ERR_INVALID, "array sizes differ");
    a = good, a.sq = &a_empty, expect_refusal(&a, SPA_ERR_INVALID, "empty array");
    a = good, a.ssel = &a_dec, expect_refusal(&a, SPA_ERR_INVALID, "sel array decreasing");
    a = good, a.ssel = &a_one, expect_refusal(&a, SPA_ERR_INVALID, "sel array size");
    /* N8 mask dims */
    spa_tensor tmd = io.mask.t;
    tmd.dims[1] = c.max_cmp - 1;
    a = good, a.mask = &tmd, expect_refusal(&a, SPA_ERR_INVALID, "mask cols");
    spa_tensor tmr = io.mask.t;
    tmr.dims[0] = c.max_sq - 1;
    a = good, a.mask = &tmr, expect_refusal(&a, SPA_ERR_INVALID, "mask rows");
    spa_tensor ttd = io.tmask.t;
    ttd.dims[1] = c.max_sel - 1;
    a = good, a.tmask = &ttd, expect_refusal(&a, SPA_ERR_INVALID, "topk mask cols");
    spa_tensor tmrank = io.mask.t;
    tmrank.rank = 3;
    a = good, a.mask = &tmrank, expect_refusal(&a, SPA_ERR_INVALID, "mask rank");
    /* N10 overflowing sizes */
    spa_tensor tbig = io.q.t;
    tbig.strides[0] = INT64_MAX / 2;
    a = good, a.q = &tbig, expect_refusal(&a, SPA_ERR_INVALID, "span overflow");
    /* outputs never written by a refusal */
    CU_ASSERT(guards_ok(&io));
    /* grad: a few of its own rules */
    uint64_t size;
    spa_executor gx, gb;
    memset(&gx, 0x5a, sizeof gx);
    gb = gx;
    spa_tensor tdq = io.dq.t;
    tdq.dims[2] = 8;
    spa_status st = spa_nsa_compress_attention_grad_get_workspace_size(
        &io.q.t, &io.k.t, &io.v.t, &io.o.t, &io.dy.t, &io.mx.t, &io.sm.t, NULL, &c.sq, &c.sc, 0.5,
        4, "TND", 0, 4, 2, &tdq, &io.dk.t, &io.dv.t, &size, &gx);
    CU_ASSERT_EQUAL(st, SPA_ERR_INVALID);
    CU_ASSERT(refusal_recorded(&gx, &gb, st));
    st = spa_nsa_compress_attention_grad_get_workspace_size(
        &io.q.t, &io.k.t, &io.v.t, &io.o.t, NULL, &io.mx.t, &io.sm.t, NULL, &c.sq, &c.sc, 0.5, 4,
        "TND", 0, 4, 2, &io.dq.t, &io.dk.t, &io.dv.t, &size, &gx);
    CU_ASSERT_EQUAL(st, SPA_ERR_NULLPTR);
    st = spa_nsa_compress_attention_grad_get_workspace_size(
        &io.q.t, &io.k.t, &io.v.t, &io.o.t, &io.dy.t, &io.sm.t, &io.sm.t, NULL, &c.sq, &c.sc, 0.5,
        4, "TND", 5, 4, 2, &io.dq.t, &io.dk.t, &io.dv.t, &size, &gx);
    CU_ASSERT_EQUAL(st, SPA_ERR_INVALID);
    spa_tensor tdy = io.dy.t;
    tdy.dtype = SPA_FLOAT32;
    st = spa_nsa_compress_attention_grad_get_workspace_size(
        &io.q.t, &io.k.t, &io.v.t, &io.o.t, &tdy, &io.mx.t, &io.sm.t, NULL, &c.sq, &c.sc, 0.5, 4,
        "TND", 0, 4, 2, &io.dq.t, &io.dk.t, &io.dv.t, &size, &gx);
    CU_ASSERT_EQUAL(st, SPA_ERR_INVALID);
    io_free(&io);
    case_free(&c);
}

/* Hostile memory: the workspace over an output or a mask input is refused
 * in phase 2 with nothing written; outputs over the masks and the index
 * output over an input keep phase 2 in bounds (the masks are read once into
 * checked copies); a mask changed between the phases is read afresh, a
 * length array changed so that the plan no longer fits is refused. */
static void test_hostile(void)
{
    rng r = rng_seed(2108);
    const int64_t ql[2] = {9, 7}, cl[2] = {11, 20};
    nsca_case c;
    case_fixed(&c, SPA_FLOAT32, 4, 2, 16, 16, 4, 2, 8, 3, 2, ql, cl, &r);
    c.has_mask = c.has_tmask = true;
    nsca_io io;
    io_make(&io, &c, &r);
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL(fwd_phase1(&c, &io, &size, &ex), SPA_OK);
    unsigned char *big = malloc((size_t)size + io.topk.span + io.mask.span + 4096);
    /* workspace over the topk output, then over the mask, then over the topk mask */
    ttensor *over[3] = {&io.topk, &io.mask, &io.tmask};
    for (int i = 0; i < 3; i++) {
        unsigned char *snap = tt_snapshot(&io.o);
        CU_ASSERT_EQUAL(spa_nsa_compress_attention(over[i]->t.data, size, &ex, NULL), SPA_ERR_INVALID);
        CU_ASSERT(tt_same_bytes(&io.o, snap));
        free(snap);
    }
    /* topk output laid over the mask input: in bounds, returns */
    nsca_io io2;
    io_make(&io2, &c, &r);
    spa_tensor topk_over = io2.topk.t, mask_over = io2.mask.t;
    mask_over.data = io2.topk.t.data; /* the mask the op reads is what it writes */
    mask_over.dims[0] = 1;
    mask_over.dims[1] = c.max_cmp;
    mask_over.strides[0] = c.max_cmp;
    mask_over.strides[1] = 1;
    if (io2.topk.span >= (size_t)(c.max_sq * c.max_cmp)) {
        mask_over.dims[0] = c.max_sq;
        spa_executor ex2;
        uint64_t s2;
        spa_status st = spa_nsa_compress_attention_get_workspace_size(
            &io2.q.t, &io2.k.t, &io2.v.t, &mask_over, NULL, &c.sq, &c.sc, NULL, 0.5, c.n1, "TND", 0,
            c.l, c.st, c.ls, c.kc, &io2.mx.t, &io2.sm.t, &io2.o.t, &topk_over, &s2, &ex2);
        CU_ASSERT_EQUAL(st, SPA_OK);
        if (st == SPA_OK) {
            tws ws;
            tws_make(&ws, s2, 3);
            CU_ASSERT_EQUAL(spa_nsa_compress_attention(ws.ptr, ws.size, &ex2, test_runner(2)), SPA_OK);
            CU_ASSERT(tws_guard_ok(&ws));
            tws_free(&ws);
        }
    }
    CU_ASSERT(guards_ok(&io2));
    io_free(&io2);
    /* a length array grown after phase 1: refused in phase 2 (plan mismatch) */
    int64_t saved = c.sc_vals[0];
    c.sc_vals[0] = 3;
    tws ws;
    tws_make(&ws, size, 0);
    const spa_status st = spa_nsa_compress_attention(ws.ptr, ws.size, &ex, NULL);
    CU_ASSERT(st == SPA_OK || st == SPA_ERR_INVALID);
    tws_free(&ws);
    c.sc_vals[0] = saved;
    /* a smaller workspace than planned */
    tws_make(&ws, size - 1, 0);
    CU_ASSERT_EQUAL(spa_nsa_compress_attention(ws.ptr, ws.size, &ex, NULL), SPA_ERR_WORKSPACE);
    tws_free(&ws);
    free(big);
    io_free(&io);
    case_free(&c);
}

/* T1 == 0: a legal no-op with no workspace. */
static void test_empty(void)
{
    rng r = rng_seed(2109);
    const int64_t ql[2] = {0, 0}, cl[2] = {5, 3};
    nsca_case c;
    case_fixed(&c, SPA_BFLOAT16, 4, 2, 16, 16, 4, 2, 8, 2, 2, ql, cl, &r);
    nsca_io io;
    io_make(&io, &c, &r);
    uint64_t size = 1;
    spa_executor ex;
    CU_ASSERT_EQUAL(fwd_phase1(&c, &io, &size, &ex), SPA_OK);
    CU_ASSERT_EQUAL(size, 0);
    CU_ASSERT_EQUAL(spa_nsa_compress_attention(NULL, 0, &ex, NULL), SPA_OK);
    io_free(&io);
    case_free(&c);
}

void suite_nsa_compress_attention(void)
{
    CU_pSuite s = CU_add_suite("nsa_compress_attention", NULL, NULL);
    CU_add_test(s, "random shapes, all dtypes, fwd + grad", test_random_shapes);
    CU_add_test(s, "G 1..64, causal, tails", test_groups);
    CU_add_test(s, "NaN and Inf inputs, fwd and grad", test_nonfinite);
    CU_add_test(s, "importance by hand", test_importance_hand);
    CU_add_test(s, "exact ties", test_ties);
    CU_add_test(s, "fully masked rows, no keys", test_fully_masked);
    CU_add_test(s, "bit-identical across runners", test_deterministic);
    CU_add_test(s, "validation rules", test_validation_rules);
    CU_add_test(s, "hostile memory", test_hostile);
    CU_add_test(s, "empty query", test_empty);
}
