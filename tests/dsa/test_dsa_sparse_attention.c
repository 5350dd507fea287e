/* DSA sparse attention (spattn/dsa.h): against the fp64 reference on paged,
 * contiguous and TND keys, every dtype, both sparse modes, with and without
 * the rope part, value separate or the key itself (MLA-absorb), any G, head
 * dims and block size, indices with -1, duplicates and masked tokens, the
 * softmax statistics; decode steps whose one unit selects thousands of rows;
 * bit-identical results on every runner; NaN and Inf where a query sees them
 * and where it does not; every refusal, phase-2 errors; edges. */
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

static spa_status phase1(const dsa_case *c, dsa_io *io, uint64_t *size, spa_executor *ex)
{
    return spa_dsa_sparse_attention_get_workspace_size(
        &io->q.t, c->dr > 0 ? &io->qr.t : NULL, &io->k.t, c->dr > 0 ? &io->kr.t : NULL, dsa_value_of(c, io),
        &io->idx.t, c->paged ? &io->table.t : NULL, c->sq_null ? NULL : &io->sq, c->kv_null ? NULL : &io->len,
        c->scale, c->bs, c->mode, &io->o.t, c->want_max ? &io->mx.t : NULL, c->want_sum ? &io->sm.t : NULL, size,
        ex);
}

static spa_status run(const dsa_case *c, dsa_io *io, int runner, size_t skew)
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
    st = spa_dsa_sparse_attention(ws.ptr, ws.size, &ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

/* f32 sums of the scores and of P V against the magnitudes; for f16 / bf16
 * the output's rounding besides. The reference rounds P to the dtype as the
 * kernels do (after the division by L), so the bound is that of the sums;
 * at four times one rounding of each term, it would hold without that. */
static tol attn_tol(spa_dtype dt)
{
    tol t = tol_for(dt, 0x1p-16);
    if (dt == SPA_FLOAT16)
        t.atol = t.rtol = 0x1p-9;
    else if (dt == SPA_BFLOAT16)
        t.atol = t.rtol = 0x1p-6;
    return t;
}

/* softmax_max / softmax_sum against the reference: exact where the
 * reference is (-FLT_MAX and 0 for a query that sees nothing), else f32
 * sums (double for FLOAT64) against the magnitude. Where a score is NaN,
 * L is NaN and M unspecified (util.h: the row's own numbers or NaN). */
static int64_t check_stat(const char *what, const ttensor *tt, const double *ref, const double *mag, int64_t n,
                          bool is_max)
{
    const bool f64 = tt->t.dtype == SPA_FLOAT64;
    const double atol = f64 ? 1e-12 : 0x1p-16, rtol = f64 ? 1e-12 : 0x1p-21;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const double got = tt_get(tt, i);
        bool ok;
        if (isnan(ref[i]))
            ok = is_max || isnan(got) != 0;
        else if (isinf(ref[i]))
            ok = got == ref[i];
        else
            ok = got == ref[i] || fabs(got - ref[i]) <= atol * mag[i] + rtol * fabs(ref[i]);
        if (!ok && bad++ < 5)
            fprintf(stderr, "  %s[%lld]: got %.9g want %.9g (mag %.3g)\n", what, (long long)i, got, ref[i], mag[i]);
    }
    return bad;
}

static int64_t compare(const dsa_case *c, const dsa_io *io)
{
    double *q = tt_to_doubles(&io->q), *qr = c->dr > 0 ? tt_to_doubles(&io->qr) : NULL;
    double *k = dsa_logical_rows(c, io, DSA_PART_KEY);
    double *kr = c->dr > 0 ? dsa_logical_rows(c, io, DSA_PART_ROPE) : NULL;
    double *v = dsa_logical_rows(c, io, DSA_PART_VALUE);
    int32_t *idx = dsa_indices_of(c, io);
    const int64_t no = c->t * c->n1 * c->dv, ns = c->t * c->n1;
    double *o = malloc(sizeof(double) * (size_t)(no + 1)), *omag = malloc(sizeof(double) * (size_t)(no + 1));
    double *mx = malloc(sizeof(double) * (size_t)(ns + 1)), *mxmag = malloc(sizeof(double) * (size_t)(ns + 1));
    double *sm = malloc(sizeof(double) * (size_t)(ns + 1)), *smmag = malloc(sizeof(double) * (size_t)(ns + 1));
    const ref_dsa_sa_problem p = dsa_problem_of(c, io, idx);
    ref_dsa_sparse_attention(&p, q, qr, k, kr, v, o, omag, mx, mxmag, sm, smmag);
    double *got = tt_to_doubles(&io->o);
    int64_t bad = check_close("attention_out", got, o, omag, no, attn_tol(c->dt));
    if (c->want_max)
        bad += check_stat("softmax_max", &io->mx, mx, mxmag, ns, true);
    if (c->want_sum)
        bad += check_stat("softmax_sum", &io->sm, sm, smmag, ns, false);
    free(q), free(qr), free(k), free(kr), free(v), free(idx), free(got);
    free(o), free(omag), free(mx), free(mxmag), free(sm), free(smmag);
    return bad;
}

static bool guards_ok(const dsa_case *c, const dsa_io *io)
{
    return tt_guard_ok(&io->q) && tt_guard_ok(&io->k) && tt_guard_ok(&io->idx) && tt_guard_ok(&io->o) &&
           tt_guard_ok(&io->mx) && tt_guard_ok(&io->sm) && (c->dr == 0 || tt_guard_ok(&io->qr)) &&
           (c->dr == 0 || tt_guard_ok(&io->kr)) && (c->absorb || tt_guard_ok(&io->v)) &&
           (io->page_of == NULL || tt_guard_ok(&io->table));
}

/* Runs a case on runner `runner` and checks it against the reference. */
static void check_case(const char *label, int i, const dsa_case *c, dsa_io *io, int runner, size_t skew)
{
    char desc[512];
    dsa_case_describe(c, desc, sizeof desc);
    const spa_status st = run(c, io, runner, skew);
    case_verdict(label, i, desc, st, st == SPA_OK ? compare(c, io) : -1, guards_ok(c, io));
}

static void test_random(void)
{
    rng r = rng_seed(3201);
    for (int i = 0; i < TEST_COUNT(48, 16); i++) {
        dsa_case c;
        dsa_case_draw(&c, i, &r, DSA_DRAW_FORWARD);
        dsa_io io;
        dsa_io_make(&io, &c, &r);
        check_case("case", i, &c, &io, i % N_RUNNERS, (size_t)rng_int(&r, 0, 63));
        dsa_io_free(&io);
    }
}

/* ---- bit-identical results on every runner ---- */

static void snapshot_outputs(const dsa_io *io, unsigned char **snap)
{
    snap[0] = tt_snapshot(&io->o), snap[1] = tt_snapshot(&io->mx), snap[2] = tt_snapshot(&io->sm);
}

/* Runs c on runners 1 .. N_RUNNERS - 1 (outputs refilled with the canary
 * each time) and checks that they write the bytes runner 0 wrote. */
static void same_on_every_runner(const dsa_case *c, dsa_io *io)
{
    unsigned char *first[3];
    snapshot_outputs(io, first);
    for (int k = 1; k < N_RUNNERS; k++) {
        tt_fill_canary(&io->o), tt_fill_canary(&io->mx), tt_fill_canary(&io->sm);
        CU_ASSERT_EQUAL(run(c, io, k, (size_t)k), SPA_OK);
        const bool same = tt_same_bytes(&io->o, first[0]) && tt_same_bytes(&io->mx, first[1]) &&
                          tt_same_bytes(&io->sm, first[2]);
        if (!same)
            fprintf(stderr, "  runner %d (%u threads) wrote other bytes than the inline run\n", k, runner_threads[k]);
        CU_ASSERT(same);
    }
    free(first[0]), free(first[1]), free(first[2]);
}

/* Units of 1024 selected rows at most (blocks of 1 and of 16, K above the
 * blocks: duplicates), of one or two heads, 18 of them (N2 6; the quick
 * set 6), so that a call runs its units' parts in more than one round;
 * with and without rope, value separate and the key itself: the same bytes
 * on every runner. */
static void test_deterministic(void)
{
    rng r = rng_seed(3202);
    for (int i = 0; i < TEST_COUNT(DSA_N_DTS, 2); i++) {
        dsa_case c;
        dsa_case_draw(&c, i, &r, DSA_DRAW_FORWARD);
        c.b = 2, c.n2 = TEST_SIZE(6, 2), c.n1 = c.n2 * (1 + i % 2), c.d = 48, c.dr = i % 2 ? 16 : 0, c.dv = 32;
        c.absorb = i % 2 == 1, c.bs = i < 2 ? 1 : 16;
        c.len[0] = TEST_SIZE(200, 100), c.len[1] = TEST_SIZE(90, 40);
        c.sq[0] = 2, c.sq[1] = 1, c.sq_null = c.kv_null = false;
        c.mode = 3, c.want_max = c.want_sum = true;
        dsa_case_sum(&c);
        c.kc = 1024 / c.bs;
        c.scale = dsa_draw_scale(c.d, c.dr, &r);
        dsa_io io;
        dsa_io_make(&io, &c, &r);
        check_case("deterministic", i, &c, &io, 0, 0);
        same_on_every_runner(&c, &io);
        dsa_io_free(&io);
    }
}

/* ---- decode: one unit selecting thousands of rows ---- */

typedef struct decode_shape {
    spa_dtype dt;
    int64_t n2, g, d, dr, dv, kc, bs, len, page;
    int layout; /* 0 paged, 1 contiguous, 2 TND */
    bool absorb, two; /* two: two batches, a query each */
} decode_shape;

/* DeepSeek's sparse MLA decode (K 2048 single tokens, D 512 + Dr 64, value
 * the key itself), the half dtypes with G above 32 (units of at most 32 of
 * their heads), blocks of several tokens: a unit's rows in several parts,
 * merged. The quick set keeps the shapes, with half the rows and D <= 64. */
static const decode_shape decodes[] = {
    {SPA_FLOAT32, 1, 16, 512, 64, 512, 2048, 1, 2400, 64, 0, true, false},
    {SPA_BFLOAT16, 1, 128, 32, 32, 32, 1024, 1, 1500, 64, 0, true, false},
    {SPA_FLOAT16, 1, 64, 64, 0, 48, 256, 4, 1200, 16, 2, false, false},
    {SPA_FLOAT64, 1, 33, 96, 32, 80, 600, 2, 1500, 0, 1, false, false},
    {SPA_BFLOAT16, 2, 33, 64, 16, 48, 256, 2, 1200, 128, 0, true, true},
    {SPA_FLOAT16, 1, 128, 32, 32, 32, 512, 1, 1200, 5, 0, false, false},
};
#define N_DECODES ((int)(sizeof decodes / sizeof decodes[0]))

static void decode_case(dsa_case *c, const decode_shape *s, rng *r)
{
    memset(c, 0, sizeof *c);
    c->dt = s->dt;
    c->n2 = s->n2, c->n1 = s->n2 * s->g;
    c->d = TEST_CAP(s->d, 64), c->dr = s->dr, c->dv = TEST_CAP(s->dv, c->d);
    c->absorb = s->absorb;
    c->kc = TEST_SIZE(s->kc, s->kc / 2), c->bs = s->bs;
    c->paged = s->layout == 0, c->tnd = s->layout == 2, c->page = s->page;
    c->b = s->two ? 2 : 1;
    c->len[0] = TEST_SIZE(s->len, s->len / 2), c->sq[0] = 1;
    c->len[1] = c->len[0] * 2 / 3, c->sq[1] = 1;
    dsa_case_sum(c);
    c->mode = s->two ? 3 : 0;
    c->strided = s->two;
    c->want_max = c->want_sum = true;
    c->scale = dsa_draw_scale(c->d, c->dr, r);
}

static void test_decode(void)
{
    rng r = rng_seed(3203);
    for (int i = 0; i < TEST_COUNT(N_DECODES, 2); i++) {
        if (decodes[i].dt == SPA_FLOAT64 && !SPA_HAVE_F64)
            continue;
        dsa_case c;
        decode_case(&c, &decodes[i], &r);
        dsa_io io;
        dsa_io_make(&io, &c, &r);
        /* slots K / 4 .. K / 2 - 1 all -1: a part of their own, or two, select nothing */
        for (int64_t row = 0; row < c.t * c.n2; row++)
            for (int64_t j = c.kc / 4; j < c.kc / 2; j++)
                tt_set_int(&io.idx, row * c.kc + j, -1);
        check_case("decode", i, &c, &io, 0, 0);
        same_on_every_runner(&c, &io);
        dsa_io_free(&io);
    }
}

/* ---- NaN and Inf ---- */

/* Every slot of token t, head n, that names block x: -1. */
static void unselect(dsa_io *io, const dsa_case *c, int64_t t, int64_t n, int64_t x)
{
    for (int64_t j = 0; j < c->kc; j++)
        if ((int64_t)tt_get(&io->idx, (t * c->n2 + n) * c->kc + j) == x)
            tt_set_int(&io->idx, (t * c->n2 + n) * c->kc + j, -1);
}

/* Whether every output element of token t is finite. */
static bool token_finite(const dsa_case *c, const dsa_io *io, int64_t t)
{
    for (int64_t e = 0; e < c->n1 * c->dv; e++)
        if (!isfinite(tt_get(&io->o, t * c->n1 * c->dv + e)))
            return false;
    return true;
}

static void nonfinite_case(dsa_case *c, int i, spa_dtype dt, rng *r)
{
    memset(c, 0, sizeof *c);
    c->dt = dt;
    c->n2 = 2, c->n1 = 2 * (1 + i % 3), c->d = 8 + i, c->dr = i % 2 ? 4 : 0, c->dv = 6;
    c->absorb = i == 2;
    c->bs = i % 2 ? 4 : 3, c->kc = 6;
    c->paged = i < 2, c->tnd = i == 3, c->page = i == 0 ? 16 : 5;
    c->strided = i % 2 == 1;
    c->b = 2, c->len[0] = 37, c->len[1] = 22, c->sq[0] = 3, c->sq[1] = 2;
    dsa_case_sum(c);
    c->mode = 3, c->want_max = c->want_sum = true;
    c->scale = dsa_draw_scale(c->d, c->dr, r);
}

/* Batch 0's query 0 (token 0) sees a NaN key row with head 0 and a value
 * row with NaN and +Inf with head 1 (blocks no other token selects); query
 * 1 (token 1) selects the last token of the batch, past its position, whose
 * key, rope and value rows hold +Inf and NaN (query 2, which sees it, does
 * not select it); batch 1's block 1 is selected by none of its queries and
 * holds +Inf; the rows past L_b on the last page of a batch or in the rows
 * after it hold +Inf and NaN. The reference says where NaN and Inf belong
 * (token 0); every other token's output is finite. */
static void poison(const dsa_case *c, dsa_io *io)
{
    const int64_t vd = c->absorb ? c->d : c->dv;
    ttensor *vt = c->absorb ? &io->k : &io->v;
    /* token 0 (last seen 34): head 0 slot 0 block 0 (rows 0 .. S - 1),
     * slot 1 and head 1 slot 0 the block of row 20 */
    const int64_t b20 = 20 / c->bs, late = 36 / c->bs;
    tt_set_int(&io->idx, 0, 0);
    tt_set_int(&io->idx, 1, b20);
    tt_set_int(&io->idx, c->kc, b20);
    for (int64_t t = 1; t < 3; t++)
        for (int64_t n = 0; n < c->n2; n++)
            unselect(io, c, t, n, 0), unselect(io, c, t, n, b20);
    tt_set_nonfinite(&io->k, dsa_row_flat(c, io, 0, 1, 0, c->d, c->d / 2), NAN);
    tt_set_nonfinite(vt, dsa_row_flat(c, io, 0, 20, 1, vd, 2), NAN);
    tt_set_nonfinite(vt, dsa_row_flat(c, io, 0, 20, 1, vd, 4), INFINITY);
    /* token 1 (last seen 35) selects row 36, which only token 2 sees */
    tt_set_int(&io->idx, (1 * c->n2 + 1) * c->kc + 3, late);
    for (int64_t n = 0; n < c->n2; n++) {
        unselect(io, c, 2, n, late);
        tt_set_nonfinite(&io->k, dsa_row_flat(c, io, 0, 36, n, c->d, 0), INFINITY);
        tt_set_nonfinite(vt, dsa_row_flat(c, io, 0, 36, n, vd, 1), INFINITY);
        tt_set_nonfinite(vt, dsa_row_flat(c, io, 0, 36, n, vd, 3), NAN);
        if (c->dr > 0)
            tt_set_nonfinite(&io->kr, dsa_row_flat(c, io, 0, 36, n, c->dr, 0), NAN);
    }
    /* batch 1 (tokens 3, 4): block 1 selected by nobody */
    for (int64_t t = 3; t < 5; t++)
        for (int64_t n = 0; n < c->n2; n++)
            unselect(io, c, t, n, 1);
    tt_set_nonfinite(&io->k, dsa_row_flat(c, io, 1, c->bs, 0, c->d, 0), INFINITY);
    tt_set_nonfinite(vt, dsa_row_flat(c, io, 1, c->bs + 1, c->n2 - 1, vd, 0), INFINITY);
    /* past L_b: the rest of batch 0's last page, the rows after batch 0
     * (contiguous) or after batch 1 (TND) */
    const int64_t pb = c->tnd ? 1 : 0;
    const int64_t room = c->paged ? (c->len[0] + c->page - 1) / c->page * c->page
                         : c->tnd ? io->srows - io->start[1]
                                  : io->srows;
    for (int64_t p = c->len[pb]; p < room; p++)
        for (int64_t n = 0; n < c->n2; n++) {
            tt_set_nonfinite(&io->k, dsa_row_flat(c, io, pb, p, n, c->d, 0), p % 2 ? NAN : INFINITY);
            tt_set_nonfinite(vt, dsa_row_flat(c, io, pb, p, n, vd, vd - 1), INFINITY);
        }
}

static void test_nonfinite(void)
{
    rng r = rng_seed(3204);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < DSA_N_DTS; k++) {
            if (!TEST_THIN_DTYPE(i, k, DSA_N_DTS))
                continue;
            dsa_case c;
            nonfinite_case(&c, i, dsa_dts[k], &r);
            dsa_io io;
            dsa_io_make(&io, &c, &r);
            poison(&c, &io);
            char label[32];
            snprintf(label, sizeof label, "nonfinite %s", dtype_name(dsa_dts[k]));
            check_case(label, i, &c, &io, (i + k) % N_RUNNERS, (size_t)i);
            /* the NaN key: every element of token 0's head-0 queries */
            for (int64_t g = 0; g < c.n1 / c.n2; g++)
                for (int64_t e = 0; e < c.dv; e++)
                    CU_ASSERT(isnan(tt_get(&io.o, g * c.dv + e)));
            for (int64_t t = 1; t < c.t; t++) {
                const bool fin = token_finite(&c, &io, t);
                if (!fin)
                    fprintf(stderr, "  %s case %d: token %lld not finite\n", label, i, (long long)t);
                CU_ASSERT(fin);
            }
            dsa_io_free(&io);
        }
}

/* ---- refusals: one per rule, nothing written, a reason recorded ---- */

typedef struct dsa_args {
    spa_tensor q, qr, k, kr, v, idx, table, o, mx, sm;
    spa_int_array sq, len;
    double scale;
    int64_t bs, mode;
    bool qr_on, kr_on, table_on, sq_on, len_on, mx_on, sm_on;
    int null_arg; /* 1 query, 2 key, 3 value, 4 indices, 5 attention_out, 6 workspace_size, 7 executor */
} dsa_args;

static spa_status call(const dsa_args *a, uint64_t *size, spa_executor *ex)
{
    return spa_dsa_sparse_attention_get_workspace_size(
        a->null_arg == 1 ? NULL : &a->q, a->qr_on ? &a->qr : NULL, a->null_arg == 2 ? NULL : &a->k,
        a->kr_on ? &a->kr : NULL, a->null_arg == 3 ? NULL : &a->v, a->null_arg == 4 ? NULL : &a->idx,
        a->table_on ? &a->table : NULL, a->sq_on ? &a->sq : NULL, a->len_on ? &a->len : NULL, a->scale, a->bs,
        a->mode, a->null_arg == 5 ? NULL : &a->o, a->mx_on ? &a->mx : NULL, a->sm_on ? &a->sm : NULL,
        a->null_arg == 6 ? NULL : size, a->null_arg == 7 ? NULL : ex);
}

static void expect_refusal(const dsa_args *a, const dsa_io *io, spa_status want, const char *what)
{
    uint64_t size = 12345;
    spa_executor ex, before;
    memset(&ex, 0x5A, sizeof ex);
    before = ex;
    unsigned char *snap[3];
    snapshot_outputs(io, snap);
    const spa_status st = call(a, &size, &ex);
    if (st != want)
        fprintf(stderr, "  dsa_sparse_attention rule '%s': status %d, expected %d\n", what, (int)st, (int)want);
    CU_ASSERT_EQUAL(st, want);
    CU_ASSERT_EQUAL(size, 12345);
    CU_ASSERT(refusal_recorded(&ex, &before, st));
    CU_ASSERT(tt_same_bytes(&io->o, snap[0]) && tt_same_bytes(&io->mx, snap[1]) && tt_same_bytes(&io->sm, snap[2]));
    free(snap[0]), free(snap[1]), free(snap[2]);
}

static void expect_ok(const dsa_args *a, const char *what)
{
    uint64_t size;
    spa_executor ex;
    const spa_status st = call(a, &size, &ex);
    if (st != SPA_OK)
        fprintf(stderr, "  dsa_sparse_attention '%s' refused: %s\n", what, spa_executor_reason(&ex, NULL));
    CU_ASSERT_EQUAL(st, SPA_OK);
}

static dsa_args args_of(const dsa_case *c, const dsa_io *io)
{
    dsa_args a;
    memset(&a, 0, sizeof a);
    a.q = io->q.t, a.k = io->k.t, a.v = *dsa_value_of(c, io), a.idx = io->idx.t, a.o = io->o.t;
    a.mx = io->mx.t, a.sm = io->sm.t;
    if (c->dr > 0)
        a.qr = io->qr.t, a.kr = io->kr.t;
    if (c->paged)
        a.table = io->table.t;
    a.sq = io->sq, a.len = io->len;
    a.scale = c->scale, a.bs = c->bs, a.mode = c->mode;
    a.qr_on = a.kr_on = c->dr > 0;
    a.table_on = c->paged, a.sq_on = !c->sq_null, a.len_on = !c->kv_null;
    a.mx_on = c->want_max, a.sm_on = c->want_sum;
    return a;
}

/* An INT32 [T, N2, K] index tensor of its own, every slot -1 but slot 0 of
 * each row (block 0). */
static void big_indices(ttensor *tt, const dsa_case *c, int64_t kc, rng *r)
{
    const int64_t id[3] = {c->t, c->n2, kc};
    tt_make(tt, SPA_INT32, 3, id, false, r);
    int32_t *p = tt->t.data;
    for (int64_t i = 0; i < c->t * c->n2 * kc; i++)
        p[i] = i % kc == 0 ? 0 : -1;
}

#define RULE(what, edit, want)               \
    do {                                     \
        a = *from;                           \
        edit;                                \
        expect_refusal(&a, io, want, what);  \
    } while (0)

/* The rules of the arguments themselves: NULLs, dtypes, ranks and shapes,
 * attributes. */
static void argument_rules(const dsa_args *from, const dsa_io *io, rng *r)
{
    dsa_args a;
    /* NULLs */
    RULE("query NULL", a.null_arg = 1, SPA_ERR_NULLPTR);
    RULE("key NULL", a.null_arg = 2, SPA_ERR_NULLPTR);
    RULE("value NULL", a.null_arg = 3, SPA_ERR_NULLPTR);
    RULE("sparse_indices NULL", a.null_arg = 4, SPA_ERR_NULLPTR);
    RULE("attention_out NULL", a.null_arg = 5, SPA_ERR_NULLPTR);
    RULE("workspace_size NULL", a.null_arg = 6, SPA_ERR_NULLPTR);
    RULE("executor NULL", a.null_arg = 7, SPA_ERR_NULLPTR);
    RULE("actual_seq_kv_len NULL with a paged key", a.len_on = false, SPA_ERR_NULLPTR);
    RULE("actual_seq_q_len data NULL", a.sq.data = NULL, SPA_ERR_NULLPTR);
    /* dtypes */
    RULE("query int32", (a.q.dtype = SPA_INT32, a.k.dtype = SPA_INT32), SPA_ERR_INVALID);
    RULE("key f16 with an f32 query", a.k.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("key bf16 with an f32 query", a.k.dtype = SPA_BFLOAT16, SPA_ERR_INVALID);
    RULE("value f16 with an f32 query", a.v.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("query_rope bf16 with an f32 query", a.qr.dtype = SPA_BFLOAT16, SPA_ERR_INVALID);
    RULE("key_rope f16 with an f32 query", a.kr.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("attention_out f16 with an f32 query", a.o.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("indices int64", a.idx.dtype = SPA_INT64, SPA_ERR_INVALID);
    RULE("indices f32", a.idx.dtype = SPA_FLOAT32, SPA_ERR_INVALID);
    RULE("block_table int64", a.table.dtype = SPA_INT64, SPA_ERR_INVALID);
    RULE("softmax_max f16", a.mx.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("softmax_sum bf16", a.sm.dtype = SPA_BFLOAT16, SPA_ERR_INVALID);
    RULE("softmax_sum int32", a.sm.dtype = SPA_INT32, SPA_ERR_INVALID);
    if (SPA_HAVE_F64) {
        RULE("softmax_max f64 for f32 inputs", a.mx.dtype = SPA_FLOAT64, SPA_ERR_INVALID);
        RULE("softmax_sum f32 for f64 inputs",
             (a.q.dtype = a.qr.dtype = a.k.dtype = a.kr.dtype = a.v.dtype = a.o.dtype = SPA_FLOAT64,
              a.mx.dtype = SPA_FLOAT64),
             SPA_ERR_INVALID);
    } else {
        RULE("float64 not built",
             (a.q.dtype = a.qr.dtype = a.k.dtype = a.kr.dtype = a.v.dtype = a.o.dtype = SPA_FLOAT64,
              a.mx.dtype = a.sm.dtype = SPA_FLOAT64),
             SPA_ERR_INVALID);
    }
    /* ranks and shapes */
    RULE("query rank 2", a.q.rank = 2, SPA_ERR_INVALID);
    RULE("query_rope rank 2", a.qr.rank = 2, SPA_ERR_INVALID);
    RULE("key rank 3", a.k.rank = 3, SPA_ERR_INVALID);
    RULE("key_rope rank 3", a.kr.rank = 3, SPA_ERR_INVALID);
    RULE("value rank 3", a.v.rank = 3, SPA_ERR_INVALID);
    RULE("indices rank 2", a.idx.rank = 2, SPA_ERR_INVALID);
    RULE("attention_out rank 2", a.o.rank = 2, SPA_ERR_INVALID);
    RULE("block_table rank 1", a.table.rank = 1, SPA_ERR_INVALID);
    RULE("softmax_max rank 2", a.mx.rank = 2, SPA_ERR_INVALID);
    RULE("query negative stride", a.q.strides[1] = -1, SPA_ERR_INVALID);
    RULE("key D differs", a.k.dims[3] = 16, SPA_ERR_INVALID);
    RULE("query D differs", a.q.dims[2] = 16, SPA_ERR_INVALID);
    RULE("key_rope Dr differs", a.kr.dims[3] = 8, SPA_ERR_INVALID);
    RULE("query_rope Dr differs", a.qr.dims[2] = 8, SPA_ERR_INVALID);
    RULE("query_rope tokens", a.qr.dims[0] = 2, SPA_ERR_INVALID);
    RULE("query_rope heads", a.qr.dims[1] = 2, SPA_ERR_INVALID);
    RULE("key_rope pages differ from the key's", a.kr.dims[0] = a.k.dims[0] - 1, SPA_ERR_INVALID);
    RULE("key_rope page size differs", a.kr.dims[1] = 8, SPA_ERR_INVALID);
    RULE("key_rope heads differ", a.kr.dims[2] = 1, SPA_ERR_INVALID);
    RULE("value pages differ from the key's", a.v.dims[0] = a.k.dims[0] - 1, SPA_ERR_INVALID);
    RULE("value page size differs", a.v.dims[1] = 8, SPA_ERR_INVALID);
    RULE("value heads differ", a.v.dims[2] = 1, SPA_ERR_INVALID);
    RULE("attention_out Dv differs from the value's", a.o.dims[2] = 23, SPA_ERR_INVALID);
    RULE("attention_out heads", a.o.dims[1] = 2, SPA_ERR_INVALID);
    RULE("attention_out tokens", a.o.dims[0] = 2, SPA_ERR_INVALID);
    RULE("attention_out reaches an element twice", a.o.strides[0] = 0, SPA_ERR_INVALID);
    RULE("indices heads differ from the key's", a.idx.dims[1] = 1, SPA_ERR_INVALID);
    RULE("indices tokens", a.idx.dims[0] = 2, SPA_ERR_INVALID);
    RULE("softmax_max [T, N2, G]", (a.mx.dims[0] = 3, a.mx.dims[1] = 2), SPA_ERR_INVALID);
    RULE("softmax_sum G", a.sm.dims[2] = 3, SPA_ERR_INVALID);
    RULE("softmax_sum reaches an element twice", a.sm.strides[1] = 0, SPA_ERR_INVALID);
    RULE("block_table rows differ from B", a.table.dims[0] = 1, SPA_ERR_INVALID);
    RULE("N1 % N2", (a.q.dims[1] = a.qr.dims[1] = a.o.dims[1] = 3), SPA_ERR_INVALID);
    RULE("N1 > 128",
         (a.q.dims[1] = a.qr.dims[1] = a.o.dims[1] = 130, a.mx.dims[2] = a.sm.dims[2] = 65), SPA_ERR_INVALID);
    RULE("D + Dr 769", (a.q.dims[2] = a.k.dims[3] = 753), SPA_ERR_INVALID);
    RULE("D + Dr 0", (a.q.dims[2] = a.k.dims[3] = 0, a.qr_on = a.kr_on = false), SPA_ERR_INVALID);
    RULE("Dv 769", (a.v.dims[3] = a.o.dims[2] = 769), SPA_ERR_INVALID);
    RULE("Dv 0", (a.v.dims[3] = a.o.dims[2] = 0), SPA_ERR_INVALID);
    RULE("query_rope without key_rope", a.kr_on = false, SPA_ERR_INVALID);
    RULE("key_rope without query_rope", a.qr_on = false, SPA_ERR_INVALID);
    /* attributes */
    RULE("sparse_block_size 0", a.bs = 0, SPA_ERR_INVALID);
    RULE("sparse_block_size -1", a.bs = -1, SPA_ERR_INVALID);
    RULE("sparse_block_size 4097", a.bs = 4097, SPA_ERR_INVALID);
    RULE("K 0", a.idx.dims[2] = 0, SPA_ERR_INVALID);
    RULE("sparse_mode 1", a.mode = 1, SPA_ERR_INVALID);
    RULE("sparse_mode 2", a.mode = 2, SPA_ERR_INVALID);
    RULE("sparse_mode 4", a.mode = 4, SPA_ERR_INVALID);
    RULE("sparse_mode -1", a.mode = -1, SPA_ERR_INVALID);
    RULE("scale NaN", a.scale = NAN, SPA_ERR_INVALID);
    RULE("scale +inf", a.scale = INFINITY, SPA_ERR_INVALID);
    RULE("scale -inf", a.scale = -INFINITY, SPA_ERR_INVALID);
    /* K past 65536 and K S past 2^20, on index tensors that hold them (every
     * slot valid: only the size is wrong); K S = 2^20 accepted */
    {
        dsa_case c;
        dsa_refusal_case(&c, 0);
        ttensor big;
        big_indices(&big, &c, 65537, r);
        RULE("K 65537", a.idx = big.t, SPA_ERR_INVALID);
        tt_free(&big);
        big_indices(&big, &c, 257, r);
        RULE("K S = 257 * 4096", (a.idx = big.t, a.bs = 4096), SPA_ERR_INVALID);
        tt_free(&big);
        big_indices(&big, &c, 256, r);
        a = *from, a.idx = big.t, a.bs = 4096;
        expect_ok(&a, "K S = 256 * 4096");
        tt_free(&big);
    }
}

/* The rules on the sequence arrays, the indices' and the table's values. */
static void value_rules(const dsa_args *from, dsa_io *io)
{
    dsa_args a;
    const int64_t sq_short[2] = {2, 2}, sq_neg[2] = {-1, 4}, one[1] = {3}, len_neg[2] = {40, -1};
    const int64_t len_long[2] = {16 * io->table_cols + 1, 20};
    RULE("sum of S_b != T", a.sq.data = sq_short, SPA_ERR_INVALID);
    RULE("S_b negative", a.sq.data = sq_neg, SPA_ERR_INVALID);
    RULE("actual_seq_q_len size != B", (a.sq.data = one, a.sq.size = 1), SPA_ERR_INVALID);
    RULE("actual_seq_kv_len size != B", a.len.size = 1, SPA_ERR_INVALID);
    RULE("T not a multiple of B (q_len NULL)", a.sq_on = false, SPA_ERR_INVALID);
    RULE("L_b negative", a.len.data = len_neg, SPA_ERR_INVALID);
    RULE("L_b beyond the block table", a.len.data = len_long, SPA_ERR_INVALID);
    /* indices: token 0 (batch 0, L 40, S 4: blocks 0 .. 9), token 2 (batch
     * 1, L 20: blocks 0 .. 4); slot 3 of key head 1 */
    {
        const int64_t at[7] = {0, 0, 0, 2 * 12 + 6 + 3, 2 * 12 + 6 + 3, 2 * 12, 6 + 3};
        const int64_t v[7] = {-2, INT32_MIN, 10, 5, INT32_MAX, 1000, 11};
        static const char *what[7] = {"index -2", "index INT32_MIN", "index 10 of batch 0 (10 S = L_b)",
                                      "index 5 of batch 1 (5 S = L_b)", "index INT32_MAX",
                                      "index 1000 of batch 1", "index 11 of batch 0, slot 3 of head 1"};
        for (int m = 0; m < 7; m++) {
            const int64_t keep = (int64_t)tt_get(&io->idx, at[m]);
            tt_set_int(&io->idx, at[m], v[m]);
            RULE(what[m], (void)0, SPA_ERR_INVALID);
            tt_set_int(&io->idx, at[m], keep);
        }
        /* the last block of each batch (row 39 past token 0's position, 38): accepted */
        const int64_t keep0 = (int64_t)tt_get(&io->idx, 0), keep2 = (int64_t)tt_get(&io->idx, 2 * 12);
        tt_set_int(&io->idx, 0, 9), tt_set_int(&io->idx, 2 * 12, 4);
        expect_ok(from, "the last blocks, past the query's position");
        tt_set_int(&io->idx, 0, keep0), tt_set_int(&io->idx, 2 * 12, keep2);
    }
    /* block table entries of pages the sequences use (batch 0: 40 rows on
     * columns 0 .. 2; batch 1: 20 rows on columns 0, 1; table_cols >= 3) */
    {
        const int64_t at[6] = {0, 0, 1, 2, io->table_cols, io->table_cols + 1};
        const int64_t v[6] = {-1, io->pages, io->pages + 5, INT32_MAX, INT32_MIN, io->pages};
        static const char *what[6] = {"page negative", "page == pages", "batch 0's second page past the key",
                                      "batch 0's last page INT32_MAX", "batch 1's first page INT32_MIN",
                                      "batch 1's partly used last page past the key"};
        for (int m = 0; m < 6; m++) {
            tt_set_int(&io->table, at[m], v[m]);
            RULE(what[m], (void)0, SPA_ERR_INVALID);
            tt_set_int(&io->table, at[m], io->page_of[at[m]]);
        }
        /* an entry past the pages batch 1 uses: never read, accepted */
        tt_set_int(&io->table, io->table_cols + 2, -7);
        expect_ok(from, "an entry past the pages a sequence uses");
        tt_set_int(&io->table, io->table_cols + 2, io->pages + 1);
        expect_ok(from, "an entry past the pages a sequence uses");
        tt_set_int(&io->table, io->table_cols + 2, io->page_of[io->table_cols + 2]);
    }
}

/* A contiguous key [B, S, N2, D]. */
static void contiguous_rules(rng *r)
{
    dsa_case c;
    dsa_refusal_case(&c, 1);
    dsa_io store, *io = &store;
    dsa_io_make(io, &c, r);
    const dsa_args base = args_of(&c, io), *from = &base;
    const int64_t len_past[2] = {io->srows + 1, 20};
    expect_ok(&base, "the contiguous base case");
    dsa_args a = base;
    a.len_on = false;
    expect_ok(&a, "a contiguous key without actual_seq_kv_len");
    RULE("L_b beyond key dim 1", a.len.data = len_past, SPA_ERR_INVALID);
    RULE("key dim 0 != B", a.k.dims[0] = 1, SPA_ERR_INVALID);
    RULE("value dim 1 differs from the key's", a.v.dims[1] = a.k.dims[1] + 1, SPA_ERR_INVALID);
    RULE("key_rope dim 0 differs", a.kr.dims[0] = 1, SPA_ERR_INVALID);
    RULE("T not a multiple of B (both arrays NULL)", (a.sq_on = false, a.len_on = false), SPA_ERR_INVALID);
    RULE("key rank 5", (a.k.rank = 5, a.k.dims[4] = 1, a.k.strides[4] = 1), SPA_ERR_INVALID);
    dsa_io_free(io);
}

/* A TND key [T2, N2, D]. */
static void tnd_rules(rng *r)
{
    dsa_case c;
    dsa_refusal_case(&c, 2);
    dsa_io store, *io = &store;
    dsa_io_make(io, &c, r);
    const dsa_args base = args_of(&c, io), *from = &base;
    const int64_t len_over[2] = {40, io->srows - 40 + 1}, len_neg[2] = {40, -1};
    expect_ok(&base, "the TND base case");
    dsa_args a;
    RULE("actual_seq_kv_len NULL with a TND key", a.len_on = false, SPA_ERR_NULLPTR);
    RULE("TND: L_0 + L_1 beyond T2", a.len.data = len_over, SPA_ERR_INVALID);
    RULE("TND: L_b negative", a.len.data = len_neg, SPA_ERR_INVALID);
    RULE("TND key D differs", a.k.dims[2] = 16, SPA_ERR_INVALID);
    RULE("TND value rows differ from the key's", a.v.dims[0] = a.k.dims[0] - 1, SPA_ERR_INVALID);
    RULE("TND key_rope heads differ", a.kr.dims[1] = 1, SPA_ERR_INVALID);
    int32_t pages[8] = {0, 1, 2, 3, 0, 1, 2, 3};
    const int64_t td[2] = {2, 4};
    spa_tensor table;
    spa_tensor_init(&table, SPA_INT32, 2, td, pages);
    RULE("TND key with a block_table", (a.table_on = true, a.table = table), SPA_ERR_INVALID);
    dsa_io_free(io);
}

static void test_refusals(void)
{
    rng r = rng_seed(3205);
    dsa_case c;
    dsa_refusal_case(&c, 0);
    dsa_io io;
    dsa_io_make(&io, &c, &r);
    CU_ASSERT(io.table_cols >= 3); /* the table rules' entries */
    const dsa_args base = args_of(&c, &io);
    expect_ok(&base, "the paged base case");
    argument_rules(&base, &io, &r);
    value_rules(&base, &io);
    dsa_args a = base;
    a.mx_on = a.sm_on = false;
    expect_ok(&a, "no softmax outputs");
    a = base, a.qr_on = a.kr_on = false;
    expect_ok(&a, "no rope parts");
    /* value the key itself: Dv = D = 32, an attention_out of its own */
    ttensor o32;
    const int64_t od[3] = {c.t, c.n1, c.d};
    tt_make(&o32, SPA_FLOAT32, 3, od, false, &r);
    a = base, a.v = a.k, a.o = o32.t;
    expect_ok(&a, "value the key itself");
    tt_free(&o32);
    dsa_io_free(&io);
    contiguous_rules(&r);
    tnd_rules(&r);
}
#undef RULE

/* ---- phase 2 ---- */

static bool outputs_same(const dsa_io *io, unsigned char *const *snap)
{
    return tt_same_bytes(&io->o, snap[0]) && tt_same_bytes(&io->mx, snap[1]) && tt_same_bytes(&io->sm, snap[2]);
}

/* A block table entry, a length or an index made invalid between the
 * phases, a workspace too small or NULL: refused, nothing written. */
static void test_phase2(void)
{
    rng r = rng_seed(3206);
    dsa_case c;
    dsa_refusal_case(&c, 0);
    dsa_io io;
    dsa_io_make(&io, &c, &r);
    unsigned char *snap[3];
    snapshot_outputs(&io, snap);
    uint64_t size;
    spa_executor ex;
    tws ws;

    CU_ASSERT_EQUAL(phase1(&c, &io, &size, &ex), SPA_OK);
    tws_make(&ws, size, 0);
    tt_set_int(&io.table, 1, -1); /* batch 0's page 1 */
    CU_ASSERT_EQUAL(spa_dsa_sparse_attention(ws.ptr, ws.size, &ex, NULL), SPA_ERR_INVALID);
    tt_set_int(&io.table, 1, io.pages);
    CU_ASSERT_EQUAL(spa_dsa_sparse_attention(ws.ptr, ws.size, &ex, test_runner(2)), SPA_ERR_INVALID);
    tt_set_int(&io.table, 1, io.page_of[1]);
    c.len[1] = 16 * io.table_cols + 3; /* the array read again in phase 2 */
    CU_ASSERT_EQUAL(spa_dsa_sparse_attention(ws.ptr, ws.size, &ex, NULL), SPA_ERR_INVALID);
    c.len[1] = 20;
    const int64_t keep = (int64_t)tt_get(&io.idx, 2 * 12 + 1); /* token 2 (batch 1): blocks 0 .. 4 */
    tt_set_int(&io.idx, 2 * 12 + 1, 5);
    CU_ASSERT_EQUAL(spa_dsa_sparse_attention(ws.ptr, ws.size, &ex, test_runner(1)), SPA_ERR_INVALID);
    tt_set_int(&io.idx, 2 * 12 + 1, -2);
    CU_ASSERT_EQUAL(spa_dsa_sparse_attention(ws.ptr, ws.size, &ex, NULL), SPA_ERR_INVALID);
    tt_set_int(&io.idx, 2 * 12 + 1, keep);
    CU_ASSERT(outputs_same(&io, snap));
    if (size > 0) {
        CU_ASSERT_EQUAL(spa_dsa_sparse_attention(ws.ptr, size - 1, &ex, NULL), SPA_ERR_WORKSPACE);
        CU_ASSERT_EQUAL(spa_dsa_sparse_attention(NULL, size, &ex, NULL), SPA_ERR_NULLPTR);
        CU_ASSERT(outputs_same(&io, snap));
    } else {
        fprintf(stderr, "  dsa_sparse_attention: workspace 0 bytes, its phase-2 size checks skipped\n");
    }
    CU_ASSERT(tws_guard_ok(&ws));
    CU_ASSERT_EQUAL(spa_dsa_sparse_attention(ws.ptr, ws.size, &ex, test_runner(3)), SPA_OK);
    CU_ASSERT_EQUAL(compare(&c, &io), 0);
    tws_free(&ws);
    free(snap[0]), free(snap[1]), free(snap[2]);

    /* the workspace over the output, softmax_max, the indices: the tensor
     * laid at the workspace's start (a block large enough for both) */
    for (int o = 0; o < 3 && size > 0; o++) {
        ttensor *tt = o == 0 ? &io.o : o == 1 ? &io.mx : &io.idx;
        const size_t span = tt->span;
        tws_make(&ws, size + span, 0);
        void *keep_data = tt->t.data;
        if (o == 2)
            memcpy(ws.ptr, keep_data, span);
        tt->t.data = ws.ptr;
        uint64_t size2 = 0;
        CU_ASSERT_EQUAL(phase1(&c, &io, &size2, &ex), SPA_OK);
        CU_ASSERT_EQUAL(size2, size);
        unsigned char *wsnap = malloc((size_t)size + span);
        memcpy(wsnap, ws.ptr, (size_t)size + span);
        unsigned char *osnap[3];
        tt_fill_canary(&io.o), tt_fill_canary(&io.sm);
        snapshot_outputs(&io, osnap);
        const spa_status st = spa_dsa_sparse_attention(ws.ptr, size, &ex, NULL);
        if (st != SPA_ERR_INVALID)
            fprintf(stderr, "  workspace over the %s: status %d\n",
                    o == 0 ? "output" : o == 1 ? "softmax_max" : "indices", (int)st);
        CU_ASSERT_EQUAL(st, SPA_ERR_INVALID);
        CU_ASSERT(memcmp(wsnap, ws.ptr, (size_t)size + span) == 0); /* nothing written */
        CU_ASSERT(outputs_same(&io, osnap));
        free(wsnap), free(osnap[0]), free(osnap[1]), free(osnap[2]);
        tt->t.data = keep_data;
        tws_free(&ws);
    }
    dsa_io_free(&io);
}

/* ---- edges ---- */

/* Every head of token t saw nothing: out 0, M -FLT_MAX, L 0. */
static void expect_unseen(const dsa_case *c, const dsa_io *io, int64_t t)
{
    const int64_t g = c->n1 / c->n2;
    for (int64_t e = 0; e < c->n1 * c->dv; e++) {
        const double x = tt_get(&io->o, t * c->n1 * c->dv + e);
        CU_ASSERT(x == 0.0 && !signbit(x));
    }
    for (int64_t n = 0; n < c->n2; n++)
        for (int64_t h = 0; h < g; h++) {
            if (c->want_max)
                CU_ASSERT_EQUAL(tt_get(&io->mx, (n * c->t + t) * g + h), -(double)FLT_MAX);
            if (c->want_sum)
                CU_ASSERT_EQUAL(tt_get(&io->sm, (n * c->t + t) * g + h), 0.0);
        }
}

/* T = 0 (q_len given and NULL): nothing to write, every guard intact. */
static void edge_no_query(spa_dtype dt, int k, rng *r)
{
    for (int v = 0; v < 2; v++) {
        dsa_case c;
        dsa_refusal_case(&c, k % 3);
        c.dt = dt;
        c.sq[0] = c.sq[1] = 0;
        c.sq_null = v == 1;
        dsa_case_sum(&c);
        dsa_io io;
        dsa_io_make(&io, &c, r);
        uint64_t size = 99;
        spa_executor ex;
        CU_ASSERT_EQUAL(phase1(&c, &io, &size, &ex), SPA_OK);
        tws ws;
        tws_make(&ws, size, 0);
        CU_ASSERT_EQUAL(spa_dsa_sparse_attention(size ? ws.ptr : NULL, size, &ex, test_runner(k % N_RUNNERS)),
                        SPA_OK);
        CU_ASSERT(tws_guard_ok(&ws));
        tws_free(&ws);
        CU_ASSERT(guards_ok(&c, &io));
        dsa_io_free(&io);
    }
}

/* L_0 = 0 (batch 0's queries see nothing; its indices all -1), K = 1 and
 * larger, both modes; a row of batch 1 selecting nothing. */
static void edge_empty_batch(spa_dtype dt, int k, rng *r)
{
    for (int m = 0; m < 4; m++) {
        if (!TEST_THIN_DTYPE(m, k, DSA_N_DTS))
            continue;
        dsa_case c;
        dsa_refusal_case(&c, m % 3);
        c.dt = dt;
        c.len[0] = 0, c.sq[0] = 3, c.len[1] = 9, c.sq[1] = 2;
        c.mode = m % 2 ? 0 : 3;
        c.kc = m < 2 ? 1 : 12;
        c.want_max = m != 1, c.want_sum = m != 2;
        dsa_case_sum(&c);
        dsa_io io;
        dsa_io_make(&io, &c, r);
        for (int64_t j = 0; j < c.n2 * c.kc; j++) /* token 4's slots: all -1 */
            tt_set_int(&io.idx, 4 * c.n2 * c.kc + j, -1);
        check_case("L_b = 0", k * 4 + m, &c, &io, (k + m) % N_RUNNERS, (size_t)m);
        for (int64_t t = 0; t < 3; t++)
            expect_unseen(&c, &io, t);
        expect_unseen(&c, &io, 4);
        dsa_io_free(&io);
    }
}

/* Causal, S_b > L_b: of 4 queries on 2 keys, 0 and 1 see nothing, 2 sees
 * key 0, 3 keys 0 and 1; S 1, K 3 (blocks 0, 1, -1 in some order). */
static void edge_before_keys(spa_dtype dt, int k, rng *r)
{
    dsa_case c;
    dsa_refusal_case(&c, k % 2 == 1 ? 0 : k == 0 ? 1 : 2);
    c.dt = dt;
    c.b = 1, c.len[0] = 2, c.sq[0] = 4, c.kc = 3, c.bs = 1;
    dsa_case_sum(&c);
    dsa_io io;
    dsa_io_make(&io, &c, r);
    for (int64_t row = 0; row < c.t * c.n2; row++) {
        const int64_t first = rng_int(r, 0, 2);
        for (int64_t j = 0; j < 3; j++)
            tt_set_int(&io.idx, row * 3 + (first + j) % 3, j == 2 ? -1 : j);
    }
    check_case("before the keys", k, &c, &io, k % N_RUNNERS, 0);
    expect_unseen(&c, &io, 0);
    expect_unseen(&c, &io, 1);
    dsa_io_free(&io);
}

/* The largest head dims: D + Dr = 768, Dv = 768 (a value of its own), and
 * value the key itself at D 768 without rope. */
static void edge_widest(spa_dtype dt, int k, rng *r)
{
    for (int m = 0; m < 2; m++) {
        dsa_case c;
        dsa_refusal_case(&c, (k + m) % 3);
        c.dt = dt;
        c.n1 = 2, c.n2 = 1, c.kc = 3, c.bs = 5;
        c.d = m == 0 ? 704 : 768, c.dr = m == 0 ? 64 : 0, c.dv = 768, c.absorb = m == 1;
        c.len[0] = 33, c.len[1] = 12, c.sq[0] = 2, c.sq[1] = 1;
        dsa_case_sum(&c);
        c.scale = dsa_draw_scale(c.d, c.dr, r);
        dsa_io io;
        dsa_io_make(&io, &c, r);
        check_case("widest", k * 2 + m, &c, &io, (k + m) % N_RUNNERS, 7);
        dsa_io_free(&io);
    }
}

/* K = 65536 (on a board, its memory: 4096), most slots -1, the rest
 * scattered up to the last slot. */
static void edge_largest_k(rng *r)
{
    dsa_case c;
    dsa_refusal_case(&c, 0);
    c.b = 1, c.n1 = 2, c.n2 = 1, c.d = 16, c.dr = 0, c.dv = 8, c.len[0] = 300, c.sq[0] = 1, c.mode = 0;
    c.kc = SPA_TEST_SMALL ? 4096 : 65536, c.bs = TEST_SIZE(3, 1);
    dsa_case_sum(&c);
    dsa_io io;
    dsa_io_make(&io, &c, r);
    const int64_t nblk = (c.len[0] + c.bs - 1) / c.bs;
    for (int64_t j = 0; j < c.kc; j++) {
        const bool some = j % 1021 == 0 || j == c.kc - 1;
        tt_set_int(&io.idx, j, some ? rng_int(r, 0, nblk - 1) : -1);
    }
    check_case("largest K", 0, &c, &io, 3, 5);
    dsa_io_free(&io);
}

static void test_edges(void)
{
    rng r = rng_seed(3207);
    for (int k = 0; k < DSA_N_DTS; k++) {
        edge_no_query(dsa_dts[k], k, &r);
        edge_empty_batch(dsa_dts[k], k, &r);
        edge_before_keys(dsa_dts[k], k, &r);
        if (TEST_THIN_DTYPE(1, k, DSA_N_DTS))
            edge_widest(dsa_dts[k], k, &r);
    }
    edge_largest_k(&r);
}

void suite_dsa_sparse_attention(void)
{
    CU_pSuite s = CU_add_suite("dsa_sparse_attention", NULL, NULL);
    CU_add_test(s, "random shapes, paged, contiguous and TND keys, all dtypes", test_random);
    CU_add_test(s, "bit-identical across runners", test_deterministic);
    CU_add_test(s, "decode: thousands of rows in one unit, G up to 128", test_decode);
    CU_add_test(s, "NaN and Inf: seen, masked, not selected, past L_b", test_nonfinite);
    CU_add_test(s, "refusals, indices and block tables outside the key", test_refusals);
    CU_add_test(s, "phase 2: changed arguments, workspace", test_phase2);
    CU_add_test(s, "edges: T = 0, L_b = 0, K = 1, causal before the keys, widest heads, K = 65536", test_edges);
}
