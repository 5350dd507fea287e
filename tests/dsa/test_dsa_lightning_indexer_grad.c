/* The lightning indexer's gradient (spattn/dsa.h): against the fp64
 * reference on contiguous and TND keys, every dtype, weights and
 * indices_grad in FLOAT32 or the query's dtype, INT32 and INT64 indices
 * with -1 (their indices_grad NaN: never read) and duplicates, both sparse
 * modes, N2 1 .. 3, G up to 128, odd D and 128; exact results where every
 * score is exact (a score of 0 gives no dquery / dkey term); NaN scores,
 * queries, weights and indices_grad; bit-identical on every runner; every
 * refusal with nothing written; phase-2 errors; edges. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_dsa_lightning_indexer.h"
#include "ref/ref_dsa_lightning_indexer_grad.h"
#include "ref/ref_nsa_select.h"
#include "spa_dtypes.h"
#include "spattn/dsa.h"
#include "util.h"

enum { LIG_MAX_B = 4 };

typedef struct lig_case {
    spa_dtype dt;  /* query and key; dquery and dkey */
    spa_dtype wdt; /* weights and dweights */
    spa_dtype gdt; /* indices_grad */
    spa_dtype idt; /* sparse_indices: INT32 or INT64 */
    int64_t b, n1, n2, d, kc, t, mode;
    int64_t sq[LIG_MAX_B], len[LIG_MAX_B];
    bool tnd, strided, sq_null, kv_null; /* kv_null: [B, S, N2, D], every L_b = S */
    int64_t hot; /* > 0: indices among the first hot keys a query sees (many queries on one key) */
} lig_case;

typedef struct lig_io {
    ttensor q, k, w, idx, dy, dq, dk, dw;
    int64_t lmax;              /* the longest sequence */
    int64_t srows;             /* contiguous key: dim 1; TND: T2 */
    int64_t start[LIG_MAX_B];  /* TND: batch b's first row */
    spa_int_array sq, len;
} lig_io;

static const spa_dtype dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};
#define N_DTS (SPA_HAVE_F64 ? 4 : 3)

static int64_t max_len(const lig_case *c)
{
    int64_t m = 0;
    for (int64_t b = 0; b < c->b; b++)
        m = c->len[b] > m ? c->len[b] : m;
    return m;
}

static void case_sum(lig_case *c)
{
    c->t = 0;
    for (int64_t b = 0; b < c->b; b++)
        c->t += c->sq[b];
}

/* Case i of a sweep: dtype dts[i % N], the rest drawn, cut to the case
 * set's budget (the reference's T N1 K D multiply-adds, three times). */
static void case_draw(lig_case *c, int i, rng *r)
{
    static const int64_t groups[] = {1, 2, 3, 4, 7, 8, 16, 17, 32, 64, 128};
    memset(c, 0, sizeof *c);
    c->dt = dts[i % N_DTS];
    c->n2 = rng_int(r, 1, 3);
    int64_t g = groups[rng_int(r, 0, 10)];
    if (c->n2 * g > 256)
        g = 256 / c->n2;
    c->n1 = c->n2 * g;
    switch (rng_int(r, 0, 7)) {
    case 0: case 1: c->d = 128; break;
    case 2: case 3: c->d = 2 * rng_int(r, 0, 79) + 1; break; /* odd, up to 159 */
    case 4: c->d = rng_int(r, 1, 8); break;
    case 5: c->d = 64 * rng_int(r, 1, 4); break;
    default: c->d = rng_int(r, 1, 160); break;
    }
    c->mode = rng_int(r, 0, 1) ? 3 : 0;
    c->tnd = rng_int(r, 0, 1) != 0;
    c->kv_null = !c->tnd && rng_int(r, 0, 2) == 0;
    c->sq_null = rng_int(r, 0, 4) == 0;
    c->strided = rng_int(r, 0, 1) != 0;
    c->b = rng_int(r, 1, LIG_MAX_B);
    /* a crowd: many queries on few keys (dkey's sums in several token ranges) */
    const bool crowd = rng_int(r, 0, 5) == 0;
    const int64_t s_common = crowd ? rng_int(r, 8, TEST_SIZE(40, 16)) : rng_int(r, 0, 4);
    for (int64_t b = 0; b < c->b; b++) {
        const bool before = !c->sq_null && rng_int(r, 0, 5) == 0; /* causal: S_b > L_b */
        switch (before ? 1 : crowd ? 2 : rng_int(r, 0, 7)) {
        case 0: c->len[b] = 0; break;
        case 1: c->len[b] = rng_int(r, 1, 10); break;
        case 2: c->len[b] = rng_int(r, 1, 40); break;
        default: c->len[b] = rng_int(r, 1, TEST_SIZE(300, 64)); break;
        }
        if (c->kv_null)
            c->len[b] = c->len[0];
        if (c->sq_null)
            c->sq[b] = s_common;
        else if (before)
            c->sq[b] = c->len[b] + rng_int(r, 1, 3); /* the first queries see nothing */
        else
            c->sq[b] = crowd ? rng_int(r, 8, TEST_SIZE(40, 16)) : rng_int(r, 0, 6);
    }
    case_sum(c);
    const int64_t lm = max_len(c);
    switch (crowd ? 5 : rng_int(r, 0, 4)) {
    case 0: c->kc = 1; break;
    case 1: c->kc = rng_int(r, 1, 8); break;
    case 2: c->kc = rng_int(r, 1, lm / 2 + 1); break;
    case 3: c->kc = lm + rng_int(r, 1, 30); break; /* more slots than keys: duplicates */
    case 4: c->kc = rng_int(r, 1, TEST_SIZE(600, 128)); break;
    default: c->kc = rng_int(r, 16, 96); break;
    }
    const double budget = TEST_SIZE(4e6, 4e5);
    while ((double)c->t * (double)c->n1 * (double)c->kc * (double)c->d > budget) {
        if (c->kc > 16) {
            c->kc = (c->kc + 1) / 2;
        } else if (c->t > c->b) {
            for (int64_t b = 0; b < c->b; b++)
                c->sq[b] = (c->sq[b] + 1) / 2;
            case_sum(c);
        } else if (c->n1 > c->n2) {
            c->n1 = c->n2 * ((c->n1 / c->n2 + 1) / 2);
        } else {
            c->d = (c->d + 1) / 2;
        }
    }
    /* memory: the key's rows and the queries, times D */
    while (((c->b * (lm + 3)) * c->n2 + c->t * c->n1) * c->d > TEST_SIZE(1 << 21, 1 << 16) && c->d > 1)
        c->d = (c->d + 1) / 2;
    c->wdt = rng_int(r, 0, 1) ? c->dt : SPA_FLOAT32;
    c->gdt = rng_int(r, 0, 1) ? c->dt : SPA_FLOAT32;
    c->idt = rng_int(r, 0, 1) ? SPA_INT64 : SPA_INT32;
    c->hot = rng_int(r, 0, 4) == 0 ? rng_int(r, 1, 4) : 0;
}

static void case_describe(const lig_case *c, char *buf, size_t n)
{
    int k = snprintf(buf, n, "%s w %s dy %s idx %s N1 %lld N2 %lld D %lld K %lld mode %lld %s strided %d hot %lld%s%s lens",
                     dtype_name(c->dt), dtype_name(c->wdt), dtype_name(c->gdt), dtype_name(c->idt), (long long)c->n1,
                     (long long)c->n2, (long long)c->d, (long long)c->kc, (long long)c->mode,
                     c->tnd ? "TND" : "contiguous", c->strided, (long long)c->hot, c->sq_null ? " q_len NULL" : "",
                     c->kv_null ? " kv_len NULL" : "");
    for (int64_t b = 0; b < c->b && k > 0 && (size_t)k < n; b++)
        k += snprintf(buf + k, n - (size_t)k, " %lld/%lld", (long long)c->sq[b], (long long)c->len[b]);
}

/* The indices of every token and key head: -1 (a fifth of the slots, and
 * every slot of a query that sees nothing), a copy of an earlier slot, the
 * last key the query sees (its causal boundary), or any key it sees (among
 * the first hot ones); indices_grad NaN at the -1 slots (not read). */
static void draw_indices(const lig_case *c, lig_io *io, rng *r)
{
    for (int64_t b = 0, t = 0; b < c->b; b++)
        for (int64_t i = 0; i < c->sq[b]; i++, t++) {
            const int64_t ns = ref_dsa_li_seen(c->sq[b], c->len[b], i, c->mode == 3);
            const int64_t pick = c->hot > 0 && c->hot < ns ? c->hot : ns;
            for (int64_t n = 0; n < c->n2; n++)
                for (int64_t j = 0; j < c->kc; j++) {
                    const int64_t at = (t * c->n2 + n) * c->kc + j, kind = rng_int(r, 0, 9);
                    int64_t x;
                    if (ns == 0 || kind < 2)
                        x = -1;
                    else if (kind == 2 && j > 0)
                        x = (int64_t)tt_get(&io->idx, at - rng_int(r, 1, j));
                    else if (kind == 3)
                        x = ns - 1;
                    else
                        x = rng_int(r, 0, pick - 1);
                    tt_set_int(&io->idx, at, x);
                    if (x == -1)
                        tt_set_nonfinite(&io->dy, at, NAN);
                }
        }
}

/* The tensors of a case; inputs random in [-1, 1), exact in their dtype,
 * outputs canary-filled. */
static void io_make(lig_io *io, const lig_case *c, rng *r)
{
    memset(io, 0, sizeof *io);
    io->lmax = max_len(c);
    if (c->tnd) {
        for (int64_t b = 0; b < c->b; b++)
            io->start[b] = io->srows, io->srows += c->len[b];
        io->srows += rng_int(r, 0, 3);
        const int64_t kd[3] = {io->srows, c->n2, c->d};
        tt_make(&io->k, c->dt, 3, kd, c->strided, r);
        tt_make(&io->dk, c->dt, 3, kd, c->strided, r);
    } else {
        io->srows = c->kv_null ? c->len[0] : io->lmax + rng_int(r, 0, 3);
        const int64_t kd[4] = {c->b, io->srows, c->n2, c->d};
        tt_make(&io->k, c->dt, 4, kd, c->strided, r);
        tt_make(&io->dk, c->dt, 4, kd, c->strided, r);
    }
    tt_fill_random(&io->k, r, -1.0, 1.0);
    const int64_t qd[3] = {c->t, c->n1, c->d}, wd[2] = {c->t, c->n1}, id[3] = {c->t, c->n2, c->kc};
    tt_make(&io->q, c->dt, 3, qd, c->strided, r);
    tt_fill_random(&io->q, r, -1.0, 1.0);
    tt_make(&io->w, c->wdt, 2, wd, c->strided, r);
    tt_fill_random(&io->w, r, -1.0, 1.0);
    tt_make(&io->dy, c->gdt, 3, id, c->strided, r);
    tt_fill_random(&io->dy, r, -1.0, 1.0);
    tt_make(&io->idx, c->idt, 3, id, c->strided, r);
    draw_indices(c, io, r);
    tt_make(&io->dq, c->dt, 3, qd, c->strided, r);
    tt_make(&io->dw, c->wdt, 2, wd, c->strided, r);
    io->sq.data = c->sq, io->sq.size = (uint64_t)c->b;
    io->len.data = c->len, io->len.size = (uint64_t)c->b;
}

static void io_free(lig_io *io)
{
    tt_free(&io->q), tt_free(&io->k), tt_free(&io->w), tt_free(&io->idx), tt_free(&io->dy);
    tt_free(&io->dq), tt_free(&io->dk), tt_free(&io->dw);
}

static bool guards_ok(const lig_io *io)
{
    return tt_guard_ok(&io->q) && tt_guard_ok(&io->k) && tt_guard_ok(&io->w) && tt_guard_ok(&io->idx) &&
           tt_guard_ok(&io->dy) && tt_guard_ok(&io->dq) && tt_guard_ok(&io->dk) && tt_guard_ok(&io->dw);
}

static void fill_outputs_canary(lig_io *io)
{
    tt_fill_canary(&io->dq), tt_fill_canary(&io->dk), tt_fill_canary(&io->dw);
}

static void snapshot_outputs(const lig_io *io, unsigned char **snap)
{
    snap[0] = tt_snapshot(&io->dq), snap[1] = tt_snapshot(&io->dk), snap[2] = tt_snapshot(&io->dw);
}

static bool outputs_same(const lig_io *io, unsigned char *const *snap)
{
    return tt_same_bytes(&io->dq, snap[0]) && tt_same_bytes(&io->dk, snap[1]) && tt_same_bytes(&io->dw, snap[2]);
}

static void free_snapshot(unsigned char **snap)
{
    free(snap[0]), free(snap[1]), free(snap[2]);
}

static spa_status phase1(const lig_case *c, lig_io *io, uint64_t *size, spa_executor *ex)
{
    return spa_dsa_lightning_indexer_grad_get_workspace_size(
        &io->q.t, &io->k.t, &io->w.t, &io->idx.t, &io->dy.t, c->sq_null ? NULL : &io->sq,
        c->kv_null ? NULL : &io->len, c->mode, &io->dq.t, &io->dk.t, &io->dw.t, size, ex);
}

static spa_status run(const lig_case *c, lig_io *io, int runner, size_t skew)
{
    uint64_t size = 0;
    spa_executor ex;
    spa_status st = phase1(c, io, &size, &ex);
    if (st != SPA_OK) {
        fprintf(stderr, "  phase 1 refused: %s\n", spa_executor_reason(&ex, NULL));
        return st;
    }
    tws ws;
    tws_make(&ws, size, skew);
    st = spa_dsa_lightning_indexer_grad(ws.ptr, ws.size, &ex, test_runner(runner));
    if (st != SPA_OK)
        fprintf(stderr, "  phase 2 refused: %s\n", spa_executor_reason(&ex, NULL));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

/* ---- the comparison with the reference ---- */

/* Batch b's row p of a key-shaped tensor: its first flat element (head 0,
 * element 0). */
static int64_t row_flat(const lig_case *c, const lig_io *io, int64_t b, int64_t p)
{
    return ((c->tnd ? io->start[b] + p : b * io->srows + p) * c->n2) * c->d;
}

/* The logical row [b][lmax][n2][d] of physical row f / (N2 D) of a
 * key-shaped tensor, or -1 where none is (rows past L_b, TND rows past the
 * batches). */
static int64_t logical_of(const lig_case *c, const lig_io *io, int64_t f)
{
    const int64_t row = f / (c->n2 * c->d), rest = f % (c->n2 * c->d);
    for (int64_t b = 0; b < c->b; b++) {
        const int64_t p = c->tnd ? row - io->start[b] : row - b * io->srows;
        if (p >= 0 && p < c->len[b] && (c->tnd || row / io->srows == b))
            return (b * io->lmax + p) * c->n2 * c->d + rest;
    }
    return -1;
}

static double *logical_key(const lig_case *c, const lig_io *io)
{
    const int64_t nk = c->b * io->lmax * c->n2 * c->d;
    double *k = calloc((size_t)(nk + 1), sizeof(double));
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t p = 0; p < c->len[b]; p++)
            for (int64_t e = 0; e < c->n2 * c->d; e++)
                k[(b * io->lmax + p) * c->n2 * c->d + e] = tt_get(&io->k, row_flat(c, io, b, p) + e);
    return k;
}

typedef struct lig_ref {
    ref_dsa_lig_grads g;
    int64_t *idx;
    int64_t *occ;  /* [b][lmax][n2]: the slots selecting each key row */
    int64_t *live; /* [t][n2]: the slots not -1 */
} lig_ref;

/* s_unc < 0: the library's f32 (double for f64) score error, 2 (D + 4)
 * units of its rounding, marks the uncertain indicators; 0: none
 * (exact scores). */
static void ref_make(lig_ref *rf, const lig_case *c, const lig_io *io, double s_unc, int zero_terms)
{
    const size_t nq = (size_t)(c->t * c->n1 * c->d + 1), nk = (size_t)(c->b * io->lmax * c->n2 * c->d + 1);
    const size_t nw = (size_t)(c->t * c->n1 + 1), ni = (size_t)(c->t * c->n2 * c->kc + 1);
    ref_dsa_lig_grads *g = &rf->g;
    g->dq = malloc(nq * sizeof(double)), g->dq_mag = malloc(nq * sizeof(double)), g->dq_unc = malloc(nq * sizeof(double));
    g->dk = malloc(nk * sizeof(double)), g->dk_mag = malloc(nk * sizeof(double)), g->dk_unc = malloc(nk * sizeof(double));
    g->dw = malloc(nw * sizeof(double)), g->dw_mag = malloc(nw * sizeof(double));
    rf->idx = malloc(ni * sizeof(int64_t));
    rf->occ = calloc((size_t)(c->b * io->lmax * c->n2 + 1), sizeof(int64_t));
    rf->live = calloc((size_t)(c->t * c->n2 + 1), sizeof(int64_t));
    for (int64_t b = 0, t = 0; b < c->b; b++)
        for (int64_t i = 0; i < c->sq[b]; i++, t++)
            for (int64_t n = 0; n < c->n2; n++)
                for (int64_t j = 0; j < c->kc; j++) {
                    const int64_t at = (t * c->n2 + n) * c->kc + j, x = (int64_t)tt_get(&io->idx, at);
                    rf->idx[at] = x;
                    if (x >= 0 && x < c->len[b]) {
                        rf->occ[(b * io->lmax + x) * c->n2 + n]++;
                        rf->live[t * c->n2 + n]++;
                    }
                }
    double *q = tt_to_doubles(&io->q), *w = tt_to_doubles(&io->w), *dy = tt_to_doubles(&io->dy);
    double *k = logical_key(c, io);
    const double u = io->q.t.dtype == SPA_FLOAT64 ? 0x1p-53 : 0x1p-24;
    const ref_dsa_lig_problem p = {c->t, c->n1, c->n2, c->d, c->kc, c->b, io->lmax, c->sq, c->len, rf->idx,
                                   s_unc < 0.0 ? 2.0 * (double)(c->d + 4) * u : s_unc, zero_terms};
    CU_ASSERT_EQUAL(ref_dsa_lightning_indexer_grad(&p, q, k, w, dy, g), 0);
    free(q), free(w), free(dy), free(k);
}

static void ref_free(lig_ref *rf)
{
    ref_dsa_lig_grads *g = &rf->g;
    free(g->dq), free(g->dq_mag), free(g->dq_unc), free(g->dk), free(g->dk_mag), free(g->dk_unc);
    free(g->dw), free(g->dw_mag);
    free(rf->idx), free(rf->occ), free(rf->live);
}

/* One output's tolerance: the sums' error, 2 (depth + 4) units of the
 * compute precision per magnitude (depth: the terms of the sum), the
 * uncertain terms in full, one rounding to the output's dtype. */
typedef struct lig_tol {
    double u, rtol, floor;
    int round; /* REF_ROUND_*, or 3: to f32 (a FLOAT32 output of f64 inputs) */
} lig_tol;

static lig_tol tol_of(spa_dtype compute, spa_dtype out)
{
    lig_tol t = {compute == SPA_FLOAT64 ? 0x1p-53 : 0x1p-24, 0.0, compute == SPA_FLOAT64 ? 0x1p-1074 : 0x1p-150,
                 REF_ROUND_NONE};
    if (out == SPA_FLOAT16)
        t.rtol = 0x1p-10, t.floor = 0x1p-25, t.round = REF_ROUND_F16;
    else if (out == SPA_BFLOAT16)
        t.rtol = 0x1p-7, t.floor = 0x1p-134, t.round = REF_ROUND_BF16;
    else if (out == SPA_FLOAT32 && compute == SPA_FLOAT64)
        t.rtol = 0x1p-23, t.floor = 0x1p-150, t.round = 3;
    return t;
}

static double round_out(double x, const lig_tol *t)
{
    return t->round == 3 ? (double)(float)x : ref_round_to(x, t->round);
}

/* got against ref. none: no term at all (no slot selects the row): +0
 * exactly. exact: the sums are exact, so got is ref rounded once to the
 * output's dtype, or (alt given) alt so rounded. */
static bool element_ok(double got, double ref, double mag, double unc, double depth, bool none, const lig_tol *t,
                       bool exact, const double *alt)
{
    if (none)
        return got == 0.0 && !signbit(got);
    if (exact) {
        if (equal_or_nan(got, round_out(ref, t)))
            return true;
        return alt != NULL && equal_or_nan(got, round_out(*alt, t));
    }
    if (isnan(ref))
        return isnan(got) != 0;
    if (isinf(ref))
        return got == ref;
    if (mag == 0.0 && unc == 0.0) /* terms, all 0 */
        return got == 0.0;
    return fabs(got - ref) <= 2.0 * (depth + 4.0) * t->u * (mag + unc) + unc + t->rtol * fabs(ref) + t->floor;
}

#define REPORT(bad, what, i, got, ref, mag, unc)                                                                   \
    do {                                                                                                           \
        if ((bad)++ < 5)                                                                                           \
            fprintf(stderr, "  %s[%lld]: got %.9g want %.9g (mag %.3g, uncertain %.3g)\n", what, (long long)(i), \
                    got, ref, mag, unc);                                                                           \
    } while (0)

/* Every element of the three outputs against the reference (exact: inputs
 * whose every sum is exact; the values of a library that multiplies the
 * terms of a 0 indicator in, rather than skipping them, accepted too:
 * they differ where such a term holds a NaN). */
static int64_t compare(const lig_case *c, const lig_io *io, bool exact)
{
    lig_ref rf, alt;
    ref_make(&rf, c, io, exact ? 0.0 : -1.0, 0);
    if (exact)
        ref_make(&alt, c, io, 0.0, 1);
    const spa_dtype compute = (spa_dtype)io->q.t.dtype;
    const lig_tol tq = tol_of(compute, (spa_dtype)io->dq.t.dtype), tw = tol_of(compute, (spa_dtype)io->dw.t.dtype);
    const int64_t g = c->n1 / c->n2;
    int64_t bad = 0;
    for (int64_t f = 0; f < c->t * c->n1 * c->d; f++) {
        const int64_t t = f / (c->n1 * c->d), n = f / c->d % c->n1 / g;
        const double got = tt_get(&io->dq, f);
        if (!element_ok(got, rf.g.dq[f], rf.g.dq_mag[f], rf.g.dq_unc[f], (double)c->kc, rf.live[t * c->n2 + n] == 0,
                        &tq, exact, exact ? &alt.g.dq[f] : NULL))
            REPORT(bad, "dquery", f, got, rf.g.dq[f], rf.g.dq_mag[f], rf.g.dq_unc[f]);
    }
    for (int64_t f = 0; f < c->t * c->n1; f++) {
        const int64_t t = f / c->n1, n = f % c->n1 / g;
        const double got = tt_get(&io->dw, f);
        if (!element_ok(got, rf.g.dw[f], rf.g.dw_mag[f], 0.0, (double)(c->kc + c->d), rf.live[t * c->n2 + n] == 0,
                        &tw, exact, NULL))
            REPORT(bad, "dweights", f, got, rf.g.dw[f], rf.g.dw_mag[f], 0.0);
    }
    for (int64_t f = 0; f < tt_numel(&io->dk); f++) {
        const double got = tt_get(&io->dk, f);
        const int64_t l = logical_of(c, io, f);
        const int64_t occ = l < 0 ? 0 : rf.occ[l / c->d];
        const double want = l < 0 ? 0.0 : rf.g.dk[l], mag = l < 0 ? 0.0 : rf.g.dk_mag[l];
        const double unc = l < 0 ? 0.0 : rf.g.dk_unc[l];
        if (!element_ok(got, want, mag, unc, (double)(occ * g), occ == 0, &tq, exact, exact ? &alt.g.dk[l] : NULL))
            REPORT(bad, "dkey", f, got, want, mag, unc);
    }
    ref_free(&rf);
    if (exact)
        ref_free(&alt);
    return bad;
}

static void check_case(const char *label, int i, const lig_case *c, lig_io *io, int runner, size_t skew, bool exact)
{
    char desc[512];
    case_describe(c, desc, sizeof desc);
    const spa_status st = run(c, io, runner, skew);
    case_verdict(label, i, desc, st, st == SPA_OK ? compare(c, io, exact) : -1, guards_ok(io));
}

static void test_random(void)
{
    rng r = rng_seed(3401);
    for (int i = 0; i < TEST_COUNT(28, 10); i++) {
        lig_case c;
        case_draw(&c, i, &r);
        lig_io io;
        io_make(&io, &c, &r);
        check_case("case", i, &c, &io, i % N_RUNNERS, (size_t)rng_int(&r, 0, 63), false);
        io_free(&io);
    }
}

/* ---- inputs whose every score and sum is exact ---- */

/* Element flat = v, v 0 or +-2^e (-14 <= e <= 15): exact in every float
 * dtype. */
static void set_pow2(ttensor *tt, int64_t flat, double v)
{
    const size_t es = tt->t.dtype == SPA_FLOAT64 ? 8u : tt->t.dtype == SPA_FLOAT32 ? 4u : 2u;
    unsigned char *p = (unsigned char *)tt->t.data + (size_t)tt_offset(tt, flat) * es;
    const float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t h = (uint16_t)(u >> 16); /* bfloat16: the top half */
    if (tt->t.dtype == SPA_FLOAT16) {
        int e;
        frexp(v, &e); /* |v| = 2^(e - 1) */
        h = (uint16_t)((v == 0.0 ? 0 : (e - 1 + 15) << 10) | (signbit(v) ? 0x8000 : 0));
    }
    if (tt->t.dtype == SPA_FLOAT64)
        memcpy(p, &v, 8);
    else if (tt->t.dtype == SPA_FLOAT32)
        memcpy(p, &f, 4);
    else
        memcpy(p, &h, 2);
    CU_ASSERT(tt_get(tt, flat) == v);
}

/* q, k in {-1, 0, 1} (D <= 6: many scores exactly 0), w in {+-1/2, +-1,
 * +-2}, indices_grad in {0, +-1/2, +-1, +-2} (NaN at the -1 slots, as
 * drawn): every score, and every sum of at most 2^20 quarters, exact in f32. */
static void fill_exact(lig_io *io, rng *r)
{
    static const double ws[7] = {0.0, -2, -1, -0.5, 0.5, 1, 2};
    for (int64_t i = 0; i < tt_numel(&io->q); i++)
        set_pow2(&io->q, i, (double)rng_int(r, -1, 1));
    for (int64_t i = 0; i < tt_numel(&io->k); i++)
        set_pow2(&io->k, i, (double)rng_int(r, -1, 1));
    for (int64_t i = 0; i < tt_numel(&io->w); i++)
        set_pow2(&io->w, i, ws[rng_int(r, 1, 6)]);
    for (int64_t i = 0; i < tt_numel(&io->dy); i++)
        if (!isnan(tt_get(&io->dy, i)))
            set_pow2(&io->dy, i, ws[rng_int(r, 0, 6)]);
}

/* Two batches (37 keys, 5 queries; 12 keys, 3 queries), N1 up to 8, D 1 .. 6,
 * K 9 or 40 (more slots than keys: duplicates), the layouts and dtypes in
 * turn. */
static void exact_case(lig_case *c, int i, spa_dtype dt, rng *r)
{
    memset(c, 0, sizeof *c);
    c->dt = c->wdt = c->gdt = dt;
    if (i % 3 == 1)
        c->wdt = SPA_FLOAT32;
    if (i % 2 == 1)
        c->gdt = SPA_FLOAT32;
    c->idt = i % 2 ? SPA_INT32 : SPA_INT64;
    c->n2 = 1 + i % 2;
    c->n1 = c->n2 * (1 + i % 4);
    c->d = rng_int(r, 1, 6);
    c->mode = i % 2 ? 0 : 3;
    c->tnd = i % 3 == 2;
    c->strided = i % 4 == 1;
    c->hot = i % 3 == 0 ? 5 : 0;
    c->b = 2;
    c->len[0] = 37, c->len[1] = 12;
    c->sq[0] = 5, c->sq[1] = 3;
    case_sum(c);
    c->kc = i % 2 ? 9 : 40;
}

/* Many scores exactly 0 (no dquery or dkey term: ReLU'(0) = 0) and keys
 * selected by many queries: every output exactly the reference rounded
 * once. */
static void test_exact(void)
{
    rng r = rng_seed(3402);
    for (int i = 0; i < 6; i++)
        for (int k = 0; k < N_DTS; k++) {
            if (!TEST_THIN_DTYPE(i, k, N_DTS))
                continue;
            lig_case c;
            exact_case(&c, i, dts[k], &r);
            lig_io io;
            io_make(&io, &c, &r);
            fill_exact(&io, &r);
            check_case("exact", i * 4 + k, &c, &io, (i + k) % N_RUNNERS, (size_t)i, true);
            io_free(&io);
        }
}

/* The first slot of token t, head n, that is not -1 (or -1). */
static int64_t first_live(const lig_case *c, const lig_io *io, int64_t t, int64_t n)
{
    for (int64_t j = 0; j < c->kc; j++)
        if (tt_get(&io->idx, (t * c->n2 + n) * c->kc + j) >= 0)
            return j;
    return -1;
}

/* NaN where a query sees it: a key element (every score of that key NaN:
 * its ReLU NaN in dweights, its indicator 0), a query element (every score
 * of that head), an indices_grad entry, a weight. Exact inputs otherwise:
 * every output exactly the reference's, NaN where it is; where a term of
 * indicator 0 meets a NaN, either the term's absence or NaN. */
static void test_nan(void)
{
    rng r = rng_seed(3403);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < N_DTS; k++) {
            if (!TEST_THIN_DTYPE(i, k, N_DTS))
                continue;
            lig_case c;
            exact_case(&c, i, dts[k], &r);
            lig_io io;
            io_make(&io, &c, &r);
            fill_exact(&io, &r);
            const int64_t t0 = c.sq[0] - 1, t1 = c.t - 1; /* the last query of each batch: sees keys */
            const int64_t j0 = first_live(&c, &io, t0, 0), j1 = first_live(&c, &io, t1, c.n2 - 1);
            CU_ASSERT(j0 >= 0 && j1 >= 0);
            if (j0 < 0 || j1 < 0) {
                io_free(&io);
                continue;
            }
            if (i == 0) { /* the key of token t0's first slot, element D - 1 */
                const int64_t x = (int64_t)tt_get(&io.idx, t0 * c.n2 * c.kc + j0);
                tt_set_nonfinite(&io.k, row_flat(&c, &io, 0, x) + c.d - 1, NAN);
            } else if (i == 1) { /* query t1, its last head, element 0 */
                tt_set_nonfinite(&io.q, (t1 * c.n1 + c.n1 - 1) * c.d, NAN);
            } else if (i == 2) { /* indices_grad of token t1's first live slot */
                tt_set_nonfinite(&io.dy, (t1 * c.n2 + c.n2 - 1) * c.kc + j1, NAN);
            } else { /* the weight of token t0, head 0 */
                tt_set_nonfinite(&io.w, t0 * c.n1, NAN);
            }
            check_case("nan", i * 4 + k, &c, &io, (i + k) % N_RUNNERS, 3, true);
            bool nan_seen = false; /* dweights NaN where a NaN score or dy met it */
            for (int64_t f = 0; f < c.t * c.n1; f++)
                nan_seen = nan_seen || isnan(tt_get(&io.dw, f));
            CU_ASSERT(nan_seen == (i < 3));
            io_free(&io);
        }
}

/* ---- bit-identical results on every runner ---- */

/* Runs c on runners 1 .. N_RUNNERS - 1 (outputs refilled with the canary,
 * the workspace misaligned by k) and checks they write the bytes of the
 * run before. */
static void same_on_every_runner(const lig_case *c, lig_io *io)
{
    unsigned char *first[3];
    snapshot_outputs(io, first);
    for (int k = 1; k < N_RUNNERS; k++) {
        fill_outputs_canary(io);
        CU_ASSERT_EQUAL(run(c, io, k, (size_t)k), SPA_OK);
        const bool same = outputs_same(io, first);
        if (!same)
            fprintf(stderr, "  runner %d (%u threads) wrote other bytes than the inline run\n", k, runner_threads[k]);
        CU_ASSERT(same);
    }
    free_snapshot(first);
}

/* Many queries on few keys, each key selected many times (dkey's sums over
 * the tokens of several token ranges, their partials added in range order;
 * indices among the first 6 keys or any), D odd and 128, both layouts and
 * modes: the same bytes on every runner. */
static void test_deterministic(void)
{
    rng r = rng_seed(3404);
    for (int i = 0; i < TEST_COUNT(2 * N_DTS, N_DTS); i++) {
        lig_case c;
        case_draw(&c, i, &r);
        c.b = 2, c.n2 = 2, c.n1 = 16, c.d = i % 2 ? 128 : 71;
        c.len[0] = TEST_SIZE(40, 20), c.len[1] = TEST_SIZE(24, 12);
        c.sq[0] = TEST_SIZE(48, 24), c.sq[1] = TEST_SIZE(16, 8);
        c.sq_null = c.kv_null = false;
        c.tnd = i / N_DTS == 1, c.mode = i % 2 ? 3 : 0;
        c.kc = TEST_SIZE(64, 48), c.hot = i % 2 ? 6 : 0;
        case_sum(&c);
        lig_io io;
        io_make(&io, &c, &r);
        check_case("deterministic", i, &c, &io, 0, 0, false);
        same_on_every_runner(&c, &io);
        io_free(&io);
    }
}

/* ---- refusals: one per rule, nothing written, a reason recorded ---- */

typedef struct lig_args {
    spa_tensor q, k, w, idx, dy, dq, dk, dw;
    spa_int_array sq, len;
    int64_t mode;
    bool sq_on, len_on;
    /* 1 query, 2 key, 3 weights, 4 indices, 5 indices_grad, 6 dquery, 7 dkey,
     * 8 dweights, 9 workspace_size, 10 executor */
    int null_arg;
} lig_args;

static spa_status call(const lig_args *a, uint64_t *size, spa_executor *ex)
{
    const int z = a->null_arg;
    return spa_dsa_lightning_indexer_grad_get_workspace_size(
        z == 1 ? NULL : &a->q, z == 2 ? NULL : &a->k, z == 3 ? NULL : &a->w, z == 4 ? NULL : &a->idx,
        z == 5 ? NULL : &a->dy, a->sq_on ? &a->sq : NULL, a->len_on ? &a->len : NULL, a->mode,
        z == 6 ? NULL : &a->dq, z == 7 ? NULL : &a->dk, z == 8 ? NULL : &a->dw, z == 9 ? NULL : size,
        z == 10 ? NULL : ex);
}

static void expect_refusal(const lig_args *a, const lig_io *io, spa_status want, const char *what)
{
    uint64_t size = 12345;
    spa_executor ex, before;
    memset(&ex, 0x5A, sizeof ex);
    before = ex;
    unsigned char *snap[3];
    snapshot_outputs(io, snap);
    const spa_status st = call(a, &size, &ex);
    if (st != want)
        fprintf(stderr, "  dsa_lightning_indexer_grad rule '%s': status %d, expected %d\n", what, (int)st, (int)want);
    CU_ASSERT_EQUAL(st, want);
    CU_ASSERT_EQUAL(size, 12345);
    CU_ASSERT(refusal_recorded(&ex, &before, st));
    CU_ASSERT(outputs_same(io, snap));
    free_snapshot(snap);
}

static void expect_ok(const lig_args *a, const char *what)
{
    uint64_t size;
    spa_executor ex;
    const spa_status st = call(a, &size, &ex);
    if (st != SPA_OK)
        fprintf(stderr, "  dsa_lightning_indexer_grad '%s' refused: %s\n", what, spa_executor_reason(&ex, NULL));
    CU_ASSERT_EQUAL(st, SPA_OK);
}

/* f32, two batches (40 keys, 2 queries; 20 keys, 1 query), N1 4, N2 2, D
 * 32, K 8, causal; contiguous (key dim 1: 43) or TND (T2 63). */
static void refusal_case(lig_case *c, bool tnd)
{
    memset(c, 0, sizeof *c);
    c->dt = c->wdt = c->gdt = SPA_FLOAT32;
    c->idt = SPA_INT32;
    c->b = 2, c->n1 = 4, c->n2 = 2, c->d = 32, c->kc = 8, c->mode = 3;
    c->len[0] = 40, c->len[1] = 20, c->sq[0] = 2, c->sq[1] = 1;
    c->tnd = tnd;
    case_sum(c);
}

static void refusal_io(lig_io *io, const lig_case *c, rng *r)
{
    io_make(io, c, r);
    if (c->tnd) /* a fixed T2 for the rules: 3 rows past the batches */
        CU_ASSERT(io->srows >= 60);
}

static lig_args args_of(const lig_case *c, const lig_io *io)
{
    lig_args a;
    memset(&a, 0, sizeof a);
    a.q = io->q.t, a.k = io->k.t, a.w = io->w.t, a.idx = io->idx.t, a.dy = io->dy.t;
    a.dq = io->dq.t, a.dk = io->dk.t, a.dw = io->dw.t;
    a.sq = io->sq, a.len = io->len, a.mode = c->mode;
    a.sq_on = !c->sq_null, a.len_on = !c->kv_null;
    return a;
}

#define RULE(what, edit, want)               \
    do {                                     \
        a = *from;                           \
        edit;                                \
        expect_refusal(&a, io, want, what);  \
    } while (0)

/* The rules of the arguments themselves: NULLs, dtypes, ranks and shapes,
 * attributes, the sequence arrays (a contiguous key). */
static void argument_rules(const lig_args *from, const lig_io *io)
{
    lig_args a;
    const int64_t sq_short[2] = {2, 2}, sq_neg[2] = {-1, 4}, one[1] = {3}, len_neg[2] = {40, -1};
    const int64_t len_past[2] = {io->srows + 1, 20};
    /* NULLs */
    static const char *nulls[10] = {"query",        "key",     "weights", "sparse_indices",
                                    "indices_grad", "dquery_out", "dkey_out", "dweights_out",
                                    "workspace_size", "executor"};
    for (int z = 1; z <= 10; z++) {
        char what[64];
        snprintf(what, sizeof what, "%s NULL", nulls[z - 1]);
        RULE(what, a.null_arg = z, SPA_ERR_NULLPTR);
    }
    RULE("actual_seq_q_len data NULL", a.sq.data = NULL, SPA_ERR_NULLPTR);
    RULE("actual_seq_kv_len data NULL", a.len.data = NULL, SPA_ERR_NULLPTR);
    /* dtypes */
    RULE("query int32", (a.q.dtype = SPA_INT32, a.k.dtype = SPA_INT32, a.dq.dtype = a.dk.dtype = SPA_INT32),
         SPA_ERR_INVALID);
    RULE("query uint8", a.q.dtype = SPA_UINT8, SPA_ERR_INVALID);
    RULE("key f16 with an f32 query", a.k.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("key bf16 with an f32 query", a.k.dtype = SPA_BFLOAT16, SPA_ERR_INVALID);
    RULE("weights bf16 with an f32 query", (a.w.dtype = SPA_BFLOAT16, a.dw.dtype = SPA_BFLOAT16), SPA_ERR_INVALID);
    RULE("weights int32", (a.w.dtype = SPA_INT32, a.dw.dtype = SPA_INT32), SPA_ERR_INVALID);
    RULE("indices f32", a.idx.dtype = SPA_FLOAT32, SPA_ERR_INVALID);
    RULE("indices uint8", a.idx.dtype = SPA_UINT8, SPA_ERR_INVALID);
    RULE("indices bool", a.idx.dtype = SPA_BOOL, SPA_ERR_INVALID);
    RULE("indices_grad f16 with an f32 query", a.dy.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("indices_grad int32", a.dy.dtype = SPA_INT32, SPA_ERR_INVALID);
    RULE("dquery f16 with an f32 query", a.dq.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("dkey bf16 with an f32 query", a.dk.dtype = SPA_BFLOAT16, SPA_ERR_INVALID);
    RULE("dweights f16 with f32 weights", a.dw.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("dquery, dkey f32 with an f16 query", (a.q.dtype = a.k.dtype = SPA_FLOAT16), SPA_ERR_INVALID);
    RULE("dweights f32 with f16 weights",
         (a.q.dtype = a.k.dtype = a.dq.dtype = a.dk.dtype = SPA_FLOAT16, a.w.dtype = SPA_FLOAT16), SPA_ERR_INVALID);
    RULE("dweights f16 with f32 weights of an f16 query",
         (a.q.dtype = a.k.dtype = a.dq.dtype = a.dk.dtype = SPA_FLOAT16, a.dw.dtype = SPA_FLOAT16), SPA_ERR_INVALID);
    if (SPA_HAVE_F64)
        RULE("indices_grad f64 with an f32 query", a.dy.dtype = SPA_FLOAT64, SPA_ERR_INVALID);
    else
        RULE("float64 not built", (a.q.dtype = a.k.dtype = a.dq.dtype = a.dk.dtype = SPA_FLOAT64), SPA_ERR_INVALID);
    /* ranks and shapes */
    RULE("query rank 2", a.q.rank = 2, SPA_ERR_INVALID);
    RULE("key rank 2", a.k.rank = 2, SPA_ERR_INVALID);
    RULE("key rank 5", (a.k.rank = a.dk.rank = 5, a.k.dims[4] = a.dk.dims[4] = 1, a.k.strides[4] = a.dk.strides[4] = 1),
         SPA_ERR_INVALID);
    RULE("weights rank 3", (a.w.rank = 3, a.w.dims[2] = 1, a.w.strides[2] = 1), SPA_ERR_INVALID);
    RULE("indices rank 2", a.idx.rank = 2, SPA_ERR_INVALID);
    RULE("indices_grad rank 2", a.dy.rank = 2, SPA_ERR_INVALID);
    RULE("dquery rank 2", a.dq.rank = 2, SPA_ERR_INVALID);
    RULE("dkey rank 3 for a 4-dim key", (a.dk.rank = 3, a.dk.dims[1] = 2 * a.dk.dims[1]), SPA_ERR_INVALID);
    RULE("dweights rank 1", a.dw.rank = 1, SPA_ERR_INVALID);
    RULE("query negative stride", a.q.strides[1] = -1, SPA_ERR_INVALID);
    RULE("key D differs", a.k.dims[3] = 16, SPA_ERR_INVALID);
    RULE("query D differs", (a.q.dims[2] = 16, a.dq.dims[2] = 16), SPA_ERR_INVALID);
    RULE("key heads differ from the indices'", (a.k.dims[2] = 1, a.dk.dims[2] = 1), SPA_ERR_INVALID);
    RULE("weights tokens", a.w.dims[0] = 2, SPA_ERR_INVALID);
    RULE("weights heads", a.w.dims[1] = 3, SPA_ERR_INVALID);
    RULE("indices tokens", a.idx.dims[0] = 2, SPA_ERR_INVALID);
    RULE("indices heads", a.idx.dims[1] = 1, SPA_ERR_INVALID);
    RULE("indices_grad K differs from the indices'", a.dy.dims[2] = 7, SPA_ERR_INVALID);
    RULE("indices_grad heads", a.dy.dims[1] = 1, SPA_ERR_INVALID);
    RULE("indices_grad tokens", a.dy.dims[0] = 2, SPA_ERR_INVALID);
    RULE("dquery tokens", a.dq.dims[0] = 2, SPA_ERR_INVALID);
    RULE("dquery heads", a.dq.dims[1] = 2, SPA_ERR_INVALID);
    RULE("dquery D", a.dq.dims[2] = 16, SPA_ERR_INVALID);
    RULE("dkey dim 0 differs from the key's", a.dk.dims[0] = 1, SPA_ERR_INVALID);
    RULE("dkey dim 1 differs from the key's", a.dk.dims[1] = a.k.dims[1] - 1, SPA_ERR_INVALID);
    RULE("dkey heads", a.dk.dims[2] = 1, SPA_ERR_INVALID);
    RULE("dkey D", a.dk.dims[3] = 16, SPA_ERR_INVALID);
    RULE("dweights tokens", a.dw.dims[0] = 2, SPA_ERR_INVALID);
    RULE("dweights heads", a.dw.dims[1] = 2, SPA_ERR_INVALID);
    RULE("dquery reaches an element twice", a.dq.strides[0] = 0, SPA_ERR_INVALID);
    RULE("dkey reaches an element twice", a.dk.strides[1] = 0, SPA_ERR_INVALID);
    RULE("dweights reaches an element twice", a.dw.strides[1] = 0, SPA_ERR_INVALID);
    RULE("N1 % N2", (a.q.dims[1] = a.dq.dims[1] = a.w.dims[1] = a.dw.dims[1] = 3), SPA_ERR_INVALID);
    RULE("N1 258", (a.q.dims[1] = a.dq.dims[1] = a.w.dims[1] = a.dw.dims[1] = 258), SPA_ERR_INVALID);
    RULE("N2 0", (a.k.dims[2] = a.dk.dims[2] = a.idx.dims[1] = a.dy.dims[1] = 0), SPA_ERR_INVALID);
    RULE("D 0", (a.q.dims[2] = a.dq.dims[2] = a.k.dims[3] = a.dk.dims[3] = 0), SPA_ERR_INVALID);
    RULE("D 769", (a.q.dims[2] = a.dq.dims[2] = a.k.dims[3] = a.dk.dims[3] = 769), SPA_ERR_INVALID);
    /* K 0; K 65537 on index tensors that hold it (every slot reads slot 0:
     * only the size is wrong) */
    RULE("K 0", (a.idx.dims[2] = a.dy.dims[2] = 0), SPA_ERR_INVALID);
    RULE("K 65537", (a.idx.dims[2] = a.dy.dims[2] = 65537, a.idx.strides[2] = a.dy.strides[2] = 0), SPA_ERR_INVALID);
    a = *from, a.idx.dims[2] = a.dy.dims[2] = 65536, a.idx.strides[2] = a.dy.strides[2] = 0;
    expect_ok(&a, "K 65536 (every slot the same)");
    /* attributes */
    RULE("sparse_mode 1", a.mode = 1, SPA_ERR_INVALID);
    RULE("sparse_mode 2", a.mode = 2, SPA_ERR_INVALID);
    RULE("sparse_mode 4", a.mode = 4, SPA_ERR_INVALID);
    RULE("sparse_mode -1", a.mode = -1, SPA_ERR_INVALID);
    /* sequence arrays; the key's layout */
    RULE("sum of S_b != T", a.sq.data = sq_short, SPA_ERR_INVALID);
    RULE("S_b negative", a.sq.data = sq_neg, SPA_ERR_INVALID);
    RULE("actual_seq_q_len size != B", (a.sq.data = one, a.sq.size = 1), SPA_ERR_INVALID);
    RULE("actual_seq_kv_len size != B", a.len.size = 1, SPA_ERR_INVALID);
    RULE("T not a multiple of B (q_len NULL)", a.sq_on = false, SPA_ERR_INVALID);
    RULE("T not a multiple of B (both arrays NULL)", (a.sq_on = false, a.len_on = false), SPA_ERR_INVALID);
    RULE("L_b negative", a.len.data = len_neg, SPA_ERR_INVALID);
    RULE("L_b beyond key dim 1", a.len.data = len_past, SPA_ERR_INVALID);
    RULE("key dim 0 != B (a paged cache's [pages, page_size, N2, D])",
         (a.k.dims[0] = a.dk.dims[0] = 5, a.k.dims[1] = a.dk.dims[1] = 64), SPA_ERR_INVALID);
    RULE("key dim 0 != B", (a.k.dims[0] = a.dk.dims[0] = 1), SPA_ERR_INVALID);
}

/* The indices' values: token 0 (batch 0, L 40, S 2: position 38, keys
 * 0 .. 38 seen in mode 3), token 2 (batch 1, L 20, S 1: keys 0 .. 19);
 * slot 3 of key head 1. In mode 0, key 39 of batch 0 is accepted. */
static void index_rules(const lig_args *from, lig_io *io)
{
    lig_args a;
    const int64_t k8 = 8, head1 = k8 + 3, tok2 = 2 * 2 * k8;
    const int64_t at[9] = {0, 0, head1, 0, tok2 + head1, tok2, tok2, 0, head1};
    const int64_t v[9] = {39, 40, 39, -2, 20, INT32_MAX, INT32_MIN, 1000, (int64_t)1 << 32};
    static const char *what[9] = {"index 39 unseen by token 0 (mode 3)", "index 40 = L_0", "index 39 of head 1, unseen",
                                  "index -2", "index 20 = L_1", "index INT32_MAX", "index INT32_MIN",
                                  "index 1000", "index 2^32 (int64: 0 if truncated)"};
    for (int m = 0; m < 9; m++) {
        if (m == 8 && io->idx.t.dtype != SPA_INT64)
            continue;
        const int64_t keep = (int64_t)tt_get(&io->idx, at[m]);
        tt_set_int(&io->idx, at[m], v[m]);
        RULE(what[m], (void)0, SPA_ERR_INVALID);
        if (m == 0 || m == 2) { /* mode 0: every key of the batch */
            a = *from, a.mode = 0;
            expect_ok(&a, "index 39 of batch 0, mode 0");
        }
        tt_set_int(&io->idx, at[m], keep);
    }
    if (io->idx.t.dtype == SPA_INT64) {
        const int64_t keep = (int64_t)tt_get(&io->idx, 1);
        tt_set_int(&io->idx, 1, (int64_t)0xFFFFFFFF); /* -1 if truncated to 32 bits */
        RULE("index 2^32 - 1 (int64: -1 if truncated)", (void)0, SPA_ERR_INVALID);
        tt_set_int(&io->idx, 1, -((int64_t)1 << 32) - 1);
        RULE("index -2^32 - 1 (int64)", (void)0, SPA_ERR_INVALID);
        tt_set_int(&io->idx, 1, keep);
    }
    /* token 0's last seen key, token 2's last key: accepted */
    const int64_t keep0 = (int64_t)tt_get(&io->idx, 0), keep2 = (int64_t)tt_get(&io->idx, tok2);
    tt_set_int(&io->idx, 0, 38), tt_set_int(&io->idx, tok2, 19);
    expect_ok(from, "the last keys each query sees");
    tt_set_int(&io->idx, 0, keep0), tt_set_int(&io->idx, tok2, keep2);
}

/* A TND key [T2, N2, D]. */
static void tnd_rules(lig_io *io)
{
    lig_case c;
    refusal_case(&c, true);
    const lig_args base = args_of(&c, io), *from = &base;
    const int64_t len_over[2] = {40, io->srows - 40 + 1}, len_neg[2] = {40, -1};
    expect_ok(&base, "the TND base case");
    lig_args a;
    RULE("actual_seq_kv_len NULL with a TND key", a.len_on = false, SPA_ERR_NULLPTR);
    RULE("TND: L_0 + L_1 beyond T2", a.len.data = len_over, SPA_ERR_INVALID);
    RULE("TND: L_b negative", a.len.data = len_neg, SPA_ERR_INVALID);
    RULE("TND key D differs", a.k.dims[2] = 16, SPA_ERR_INVALID);
    RULE("TND key heads differ from the indices'", (a.k.dims[1] = a.dk.dims[1] = 1), SPA_ERR_INVALID);
    RULE("TND dkey rows differ", a.dk.dims[0] = a.k.dims[0] - 1, SPA_ERR_INVALID);
    RULE("TND dkey rank 4", (a.dk.rank = 4, a.dk.dims[3] = 1, a.dk.strides[3] = 1), SPA_ERR_INVALID);
    RULE("TND dkey reaches an element twice", a.dk.strides[0] = 0, SPA_ERR_INVALID);
}

static void test_refusals(void)
{
    rng r = rng_seed(3405);
    for (int v = 0; v < 2; v++) { /* INT32, INT64 indices */
        lig_case c;
        refusal_case(&c, false);
        c.idt = v ? SPA_INT64 : SPA_INT32;
        lig_io store, *io = &store;
        refusal_io(io, &c, &r);
        const lig_args base = args_of(&c, io);
        expect_ok(&base, "the contiguous base case");
        lig_args a = base;
        a.len_on = false;
        expect_ok(&a, "a contiguous key without actual_seq_kv_len");
        if (v == 0)
            argument_rules(&base, io);
        index_rules(&base, io);
        io_free(io);
    }
    /* TND: the layout's rules; an index past L_1 (token 2, slot 0, head 0) */
    lig_case c;
    refusal_case(&c, true);
    lig_io io;
    refusal_io(&io, &c, &r);
    const int64_t keep = (int64_t)tt_get(&io.idx, 2 * 2 * 8);
    tt_set_int(&io.idx, 2 * 2 * 8, 20);
    const lig_args a = args_of(&c, &io);
    expect_refusal(&a, &io, SPA_ERR_INVALID, "TND: index 20 = L_1");
    tt_set_int(&io.idx, 2 * 2 * 8, keep);
    tnd_rules(&io);
    io_free(&io);
}
#undef RULE

/* ---- phase 2 ---- */

/* An index or a length made invalid between the phases, a workspace too
 * small or NULL, a workspace over an output or an input: refused, nothing
 * written; then the same executor runs. */
static void test_phase2(void)
{
    rng r = rng_seed(3406);
    for (int layout = 0; layout < 2; layout++) {
        lig_case c;
        refusal_case(&c, layout == 1);
        c.idt = layout ? SPA_INT64 : SPA_INT32;
        lig_io io;
        refusal_io(&io, &c, &r);
        unsigned char *snap[3];
        snapshot_outputs(&io, snap);
        uint64_t size;
        spa_executor ex;
        tws ws;
        CU_ASSERT_EQUAL(phase1(&c, &io, &size, &ex), SPA_OK);
        tws_make(&ws, size, 0);
        const int64_t at = 8 + 3, keep = (int64_t)tt_get(&io.idx, at); /* token 0, head 1, slot 3 */
        static const int64_t bad[3] = {39, 40, -2};                  /* unseen; L_0; below -1 */
        for (int m = 0; m < 3; m++) {
            tt_set_int(&io.idx, at, bad[m]);
            const spa_status st = spa_dsa_lightning_indexer_grad(ws.ptr, ws.size, &ex, test_runner(m));
            if (st != SPA_ERR_INVALID)
                fprintf(stderr, "  phase 2, index %lld: status %d\n", (long long)bad[m], (int)st);
            CU_ASSERT_EQUAL(st, SPA_ERR_INVALID);
        }
        tt_set_int(&io.idx, at, keep);
        c.len[1] = io.srows + 5; /* the array read again in phase 2 */
        CU_ASSERT_EQUAL(spa_dsa_lightning_indexer_grad(ws.ptr, ws.size, &ex, NULL), SPA_ERR_INVALID);
        c.len[1] = 20;
        CU_ASSERT(outputs_same(&io, snap));
        if (size > 0) {
            CU_ASSERT_EQUAL(spa_dsa_lightning_indexer_grad(ws.ptr, size - 1, &ex, NULL), SPA_ERR_WORKSPACE);
            CU_ASSERT_EQUAL(spa_dsa_lightning_indexer_grad(NULL, size, &ex, NULL), SPA_ERR_NULLPTR);
            CU_ASSERT(outputs_same(&io, snap));
        } else {
            fprintf(stderr, "  dsa_lightning_indexer_grad: workspace 0 bytes, its phase-2 size checks skipped\n");
        }
        CU_ASSERT(tws_guard_ok(&ws));
        CU_ASSERT_EQUAL(spa_dsa_lightning_indexer_grad(ws.ptr, ws.size, &ex, test_runner(3)), SPA_OK);
        CU_ASSERT_EQUAL(compare(&c, &io, false), 0);
        CU_ASSERT(guards_ok(&io));
        tws_free(&ws);
        free_snapshot(snap);

        /* the workspace over dquery, dkey, dweights, the query: the tensor
         * laid at the workspace's start (a block large enough for both) */
        for (int o = 0; o < 4 && size > 0; o++) {
            ttensor *tt = o == 0 ? &io.dq : o == 1 ? &io.dk : o == 2 ? &io.dw : &io.q;
            const size_t span = tt->span;
            tws_make(&ws, size + span, 0);
            void *keep_data = tt->t.data;
            if (o == 3)
                memcpy(ws.ptr, keep_data, span);
            tt->t.data = ws.ptr;
            uint64_t size2 = 0;
            CU_ASSERT_EQUAL(phase1(&c, &io, &size2, &ex), SPA_OK);
            CU_ASSERT_EQUAL(size2, size);
            unsigned char *wsnap = malloc((size_t)size + span), *osnap[3];
            memcpy(wsnap, ws.ptr, (size_t)size + span);
            fill_outputs_canary(&io);
            snapshot_outputs(&io, osnap);
            const spa_status st = spa_dsa_lightning_indexer_grad(ws.ptr, size, &ex, NULL);
            if (st != SPA_ERR_INVALID)
                fprintf(stderr, "  workspace over the %s: status %d\n",
                        o == 0 ? "dquery" : o == 1 ? "dkey" : o == 2 ? "dweights" : "query", (int)st);
            CU_ASSERT_EQUAL(st, SPA_ERR_INVALID);
            CU_ASSERT(memcmp(wsnap, ws.ptr, (size_t)size + span) == 0); /* nothing written */
            CU_ASSERT(outputs_same(&io, osnap));
            free(wsnap), free_snapshot(osnap);
            tt->t.data = keep_data;
            tws_free(&ws);
        }
        io_free(&io);
    }
}

/* ---- edges ---- */

/* Every element of dkey +0 (no query selects anything). */
static bool dkey_zero(const lig_io *io)
{
    for (int64_t f = 0; f < tt_numel(&io->dk); f++) {
        const double x = tt_get(&io->dk, f);
        if (x != 0.0 || signbit(x))
            return false;
    }
    return true;
}

/* T = 0 (dkey all zeros); a batch with L_b = 0 (its queries select
 * nothing), K = 1 and more; causal queries before the first key; K = 65536
 * on a single query; the widest heads (N1 256) and D 768. */
static void test_edges(void)
{
    rng r = rng_seed(3407);
    for (int k = 0; k < N_DTS; k++) {
        lig_case c;
        lig_io io;
        /* T = 0: no query in either batch; q_len NULL with no query */
        for (int v = 0; v < 4; v++) {
            refusal_case(&c, v >= 2);
            c.dt = c.wdt = c.gdt = dts[k];
            c.sq[0] = c.sq[1] = 0;
            c.sq_null = v % 2 == 1;
            case_sum(&c);
            io_make(&io, &c, &r);
            CU_ASSERT_EQUAL(run(&c, &io, (k + v) % N_RUNNERS, (size_t)v), SPA_OK);
            CU_ASSERT(dkey_zero(&io));
            CU_ASSERT(guards_ok(&io));
            io_free(&io);
        }
        /* L_b = 0 in batch 0 (3 queries), 9 keys in batch 1 (2 queries);
         * K 1 and 12; both modes, both layouts */
        for (int m = 0; m < 4; m++) {
            if (!TEST_THIN_DTYPE(m, k, N_DTS))
                continue;
            refusal_case(&c, m >= 2);
            c.dt = c.wdt = dts[k], c.gdt = m % 2 ? SPA_FLOAT32 : dts[k];
            c.idt = m % 2 ? SPA_INT64 : SPA_INT32;
            c.len[0] = 0, c.sq[0] = 3, c.len[1] = 9, c.sq[1] = 2;
            c.mode = m % 2 ? 0 : 3;
            c.kc = m < 2 ? 1 : 12;
            case_sum(&c);
            io_make(&io, &c, &r);
            check_case("L_b = 0", k * 4 + m, &c, &io, (k + m) % N_RUNNERS, (size_t)m, false);
            for (int64_t f = 0; f < 3 * c.n1; f++) /* batch 0's queries */
                CU_ASSERT(tt_get(&io.dw, f) == 0.0 && !signbit(tt_get(&io.dw, f)));
            io_free(&io);
        }
        /* causal, S_b > L_b: queries 0, 1 see nothing, 2 sees key 0, 3 keys 0, 1 */
        refusal_case(&c, k % 2 == 1);
        c.dt = c.wdt = c.gdt = dts[k];
        c.b = 1, c.len[0] = 2, c.sq[0] = 4, c.kc = 3;
        case_sum(&c);
        io_make(&io, &c, &r);
        CU_ASSERT_EQUAL(tt_get(&io.idx, 0), -1.0);
        CU_ASSERT_EQUAL(tt_get(&io.idx, c.n2 * c.kc), -1.0);
        check_case("causal before the keys", k, &c, &io, k % N_RUNNERS, 0, false);
        io_free(&io);
    }
    /* the largest K (on a board: 4096, its memory) on one query: every key
     * many times */
    lig_case c;
    refusal_case(&c, false);
    c.b = 1, c.n1 = 2, c.n2 = 1, c.d = 9, c.len[0] = 70, c.sq[0] = 1, c.mode = 0;
    c.kc = SPA_TEST_SMALL ? 4096 : 65536;
    case_sum(&c);
    lig_io io;
    io_make(&io, &c, &r);
    check_case("K 65536", 0, &c, &io, 3, 5, false);
    io_free(&io);
    /* N1 256 (G 256 over one key head, 128 over two), D 768 */
    for (int v = 0; v < 2; v++) {
        refusal_case(&c, v == 1);
        c.dt = c.wdt = c.gdt = dts[(v + 1) % N_DTS];
        c.n2 = 1 + v, c.n1 = 256, c.d = TEST_CAP(v ? 768 : 128, 64), c.kc = TEST_SIZE(24, 8);
        c.len[0] = TEST_SIZE(60, 30), c.len[1] = 20, c.sq[0] = TEST_SIZE(3, 2), c.sq[1] = 1;
        case_sum(&c);
        io_make(&io, &c, &r);
        check_case("widest", v, &c, &io, v + 1, 0, false);
        io_free(&io);
    }
}

void suite_dsa_lightning_indexer_grad(void)
{
    CU_pSuite s = CU_add_suite("dsa_lightning_indexer_grad", NULL, NULL);
    CU_add_test(s, "random shapes, contiguous and TND keys, all dtypes, INT32 and INT64 indices", test_random);
    CU_add_test(s, "exact scores: a score of 0 gives no dquery or dkey term", test_exact);
    CU_add_test(s, "NaN in a key, a query, indices_grad, weights", test_nan);
    CU_add_test(s, "bit-identical across runners", test_deterministic);
    CU_add_test(s, "refusals: NULLs, dtypes, shapes, indices; nothing written", test_refusals);
    CU_add_test(s, "phase 2: changed arguments, workspace", test_phase2);
    CU_add_test(s, "edges: T = 0, L_b = 0, K = 1, causal before the keys, K = 65536, N1 256, D 768", test_edges);
}
