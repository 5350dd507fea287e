/* Compressed attention on a cache of compressed keys
 * (spa_nsa_compress_attention_infer): against the fp64 reference
 * (ref_nsa_cattn with the inference op's rules) on paged and contiguous
 * caches, every dtype, any G, strides and block sizes, causal or not, across
 * runners; the refusals, and block tables that point outside the cache or
 * change between the phases. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_nsa_cattn.h"
#include "spa_dtypes.h"
#include "spattn/nsa_infer.h"
#include "util.h"

enum { NSCAI_MAX_B = 4 };

typedef struct nscai_case {
    spa_dtype dt;
    int64_t b, n1, n2, d, dv, l, st, ls, kc, page, t;
    int64_t sq[NSCAI_MAX_B], cmp[NSCAI_MAX_B], len[NSCAI_MAX_B];
    bool paged, strided, sq_null, len_null;
    int64_t causal;
    double scale;
} nscai_case;

typedef struct nscai_io {
    ttensor q, k, v, table, o, topk;
    int64_t pages, table_cols, cmax; /* cmax: rows per batch in the contiguous cache */
    int64_t *page_of;                /* [b][table_cols]: the test's own copy of the table */
    spa_int_array sq, cmp, len;
} nscai_io;

static const spa_dtype dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};

static void case_draw(nscai_case *c, int i, rng *r)
{
    static const int64_t groups[] = {1, 2, 3, 4, 8, 16, 17, 32, 33};
    static const int64_t strides[] = {1, 2, 4, 16};
    static const int64_t pages[] = {1, 5, 16, 64};
    memset(c, 0, sizeof *c);
    c->dt = dts[i % (SPA_HAVE_F64 ? 4 : 3)];
    const int64_t g = groups[rng_int(r, 0, 8)];
    c->n2 = g > 16 ? 1 : rng_int(r, 1, 2);
    c->n1 = c->n2 * g;
    c->d = rng_int(r, 0, 2) ? rng_int(r, 1, 80) : 64 * rng_int(r, 1, 2);
    c->dv = rng_int(r, 0, 2) ? rng_int(r, 1, 80) : 64 * rng_int(r, 1, 2);
    c->st = strides[rng_int(r, 0, 3)];
    c->l = c->st * rng_int(r, 1, 3);
    c->ls = c->st * (int64_t)1 << rng_int(r, 0, 2);
    c->kc = rng_int(r, 1, 6);
    c->paged = rng_int(r, 0, 3) != 0;
    c->page = pages[rng_int(r, 0, 3)];
    c->strided = rng_int(r, 0, 1) != 0;
    c->causal = rng_int(r, 0, 3) != 0;
    c->sq_null = rng_int(r, 0, 3) == 0;
    c->len_null = !c->causal && rng_int(r, 0, 1);
    c->b = rng_int(r, 1, NSCAI_MAX_B);
    for (int64_t b = 0; b < c->b; b++) {
        /* now and then past 2 parts of keys (the units split) */
        c->cmp[b] = rng_int(r, 0, 5) == 0   ? rng_int(r, 0, 4)
                    : rng_int(r, 0, 9) == 0 ? rng_int(r, TEST_SIZE(1030, 40), TEST_SIZE(2600, 80))
                                            : rng_int(r, 1, TEST_SIZE(200, 60));
        c->sq[b] = c->sq_null ? 1 : rng_int(r, 0, 4);
        /* the sequence the compressed keys summarise, the queries its newest
         * tokens; now and then longer, or shorter than the keys cover */
        const int64_t covered = c->cmp[b] == 0 ? 0 : (c->cmp[b] - 1) * c->st + c->l;
        int64_t len = covered + rng_int(r, 0, c->st - 1);
        if (rng_int(r, 0, 4) == 0)
            len = rng_int(r, 0, covered + 2 * c->l);
        c->len[b] = len < c->sq[b] ? c->sq[b] : len;
        c->t += c->sq[b];
    }
    c->scale = (0.5 + rng_unit(r)) / sqrt((double)c->d);
}

static void case_describe(const nscai_case *c, char *buf, size_t n)
{
    int k = snprintf(buf, n,
                     "%s N1 %lld N2 %lld D %lld Dv %lld l %lld d %lld l' %lld K %lld %s page %lld strided %d "
                     "causal %lld S/C/L",
                     dtype_name(c->dt), (long long)c->n1, (long long)c->n2, (long long)c->d, (long long)c->dv,
                     (long long)c->l, (long long)c->st, (long long)c->ls, (long long)c->kc,
                     c->paged ? "paged" : "contiguous", (long long)c->page, c->strided, (long long)c->causal);
    for (int64_t b = 0; b < c->b && k > 0 && (size_t)k < n; b++)
        k += snprintf(buf + k, n - (size_t)k, " %lld/%lld/%lld", (long long)c->sq[b], (long long)c->cmp[b],
                      (long long)c->len[b]);
}

static void io_make(nscai_io *io, const nscai_case *c, rng *r)
{
    memset(io, 0, sizeof *io);
    int64_t need = 0, cols = 1, cmax = 1;
    for (int64_t b = 0; b < c->b; b++) {
        const int64_t np = (c->cmp[b] + c->page - 1) / c->page;
        need += np;
        cols = np > cols ? np : cols;
        cmax = c->cmp[b] > cmax ? c->cmp[b] : cmax;
    }
    io->cmax = cmax;
    if (c->paged) {
        io->pages = need + rng_int(r, 0, 3);
        io->table_cols = cols + rng_int(r, 0, 2);
        int64_t *perm = malloc(sizeof(int64_t) * (size_t)(io->pages + 1));
        for (int64_t i = 0; i < io->pages; i++)
            perm[i] = i;
        for (int64_t i = io->pages - 1; i > 0; i--) {
            const int64_t j = rng_int(r, 0, i), x = perm[i];
            perm[i] = perm[j], perm[j] = x;
        }
        const int64_t td[2] = {c->b, io->table_cols};
        tt_make(&io->table, SPA_INT32, 2, td, c->strided, r);
        io->page_of = malloc(sizeof(int64_t) * (size_t)(c->b * io->table_cols));
        for (int64_t b = 0, used = 0; b < c->b; b++) {
            const int64_t np = (c->cmp[b] + c->page - 1) / c->page;
            for (int64_t j = 0; j < io->table_cols; j++) {
                /* entries past the keys are never read: out of range on purpose */
                const int64_t pg = j < np ? perm[used++] : (j % 2 ? -7 : io->pages + 100);
                io->page_of[b * io->table_cols + j] = pg;
                tt_set_int(&io->table, b * io->table_cols + j, pg);
            }
        }
        free(perm);
        const int64_t kd[4] = {io->pages, c->page, c->n2, c->d}, vd[4] = {io->pages, c->page, c->n2, c->dv};
        tt_make(&io->k, c->dt, 4, kd, c->strided, r);
        tt_make(&io->v, c->dt, 4, vd, c->strided, r);
    } else {
        const int64_t kd[4] = {c->b + rng_int(r, 0, 1), cmax + rng_int(r, 0, 3), c->n2, c->d};
        const int64_t vd[4] = {kd[0], kd[1], c->n2, c->dv};
        tt_make(&io->k, c->dt, 4, kd, c->strided, r);
        tt_make(&io->v, c->dt, 4, vd, c->strided, r);
    }
    tt_fill_random(&io->k, r, -1.0, 1.0);
    tt_fill_random(&io->v, r, -1.0, 1.0);
    const int64_t qd[3] = {c->t, c->n1, c->d}, od[3] = {c->t, c->n1, c->dv}, id[3] = {c->t, c->n2, c->kc};
    tt_make(&io->q, c->dt, 3, qd, c->strided, r);
    tt_fill_random(&io->q, r, -2.0, 2.0);
    tt_make(&io->o, c->dt, 3, od, c->strided, r);
    tt_make(&io->topk, SPA_INT32, 3, id, c->strided, r);
    io->sq.data = c->sq, io->sq.size = (uint64_t)c->b;
    io->cmp.data = c->cmp, io->cmp.size = (uint64_t)c->b;
    io->len.data = c->len, io->len.size = (uint64_t)c->b;
}

static void io_free(nscai_io *io)
{
    tt_free(&io->q), tt_free(&io->k), tt_free(&io->v), tt_free(&io->o), tt_free(&io->topk);
    if (io->page_of != NULL)
        tt_free(&io->table);
    free(io->page_of);
}

static spa_status phase1(const nscai_case *c, nscai_io *io, uint64_t *size, spa_executor *ex)
{
    return spa_nsa_compress_attention_infer_get_workspace_size(
        &io->q.t, &io->k.t, &io->v.t, c->paged ? &io->table.t : NULL, c->sq_null ? NULL : &io->sq, &io->cmp,
        c->len_null ? NULL : &io->len, c->scale, c->causal, c->l, c->st, c->ls, c->kc, &io->o.t, &io->topk.t, size,
        ex);
}

static spa_status run(const nscai_case *c, nscai_io *io, int runner, size_t skew)
{
    uint64_t size = 0;
    spa_executor ex;
    spa_status st = phase1(c, io, &size, &ex);
    if (st != SPA_OK)
        return st;
    tws ws;
    tws_make(&ws, size, skew);
    st = spa_nsa_compress_attention_infer(ws.ptr, ws.size, &ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

/* The compressed cache as rows [b * cmax + c][n2][dim], read through the
 * test's copy of the table. */
static double *logical_rows(const nscai_case *c, const nscai_io *io, const ttensor *cache, int64_t dim)
{
    double *out = calloc((size_t)(c->b * io->cmax * c->n2 * dim + 1), sizeof(double));
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t p = 0; p < c->cmp[b]; p++) {
            const int64_t pg = c->paged ? io->page_of[b * io->table_cols + p / c->page] : b;
            const int64_t row = c->paged ? p % c->page : p;
            for (int64_t h = 0; h < c->n2; h++)
                for (int64_t e = 0; e < dim; e++)
                    out[((b * io->cmax + p) * c->n2 + h) * dim + e] =
                        tt_get(cache, ((pg * cache->t.dims[1] + row) * c->n2 + h) * dim + e);
        }
    return out;
}

static tol attn_tol(spa_dtype dt)
{
    tol t = tol_for(dt, 0x1p-16);
    if (dt == SPA_FLOAT16)
        t.atol = t.rtol = 0x1p-9;
    else if (dt == SPA_BFLOAT16)
        t.atol = t.rtol = 0x1p-6;
    return t;
}

/* Top-K: each slot names the reference's block or one of (nearly) equal
 * importance, distinct; -1 where the reference has it. */
static int64_t check_topk(const nscai_case *c, const ttensor *tt, const double *imp, int64_t cols, const int32_t *ref,
                          double tolv)
{
    int64_t bad = 0;
    for (int64_t u = 0; u < c->t * c->n2; u++)
        for (int64_t i = 0; i < c->kc; i++) {
            const int64_t got = (int64_t)tt_get(tt, u * c->kc + i), want = ref[u * c->kc + i];
            bool ok = got == want;
            if (!ok && got >= 0 && want >= 0 && got < cols) {
                const double ig = imp[u * cols + got], iw = imp[u * cols + want];
                ok = fabs(ig - iw) <= tolv || (isnan(ig) && isnan(iw));
            }
            for (int64_t j = 0; j < i && ok && got >= 0; j++)
                ok = (int64_t)tt_get(tt, u * c->kc + j) != got;
            if (!ok && bad++ < 5)
                fprintf(stderr, "  topk[%lld][%lld]: got %lld want %lld\n", (long long)u, (long long)i,
                        (long long)got, (long long)want);
        }
    return bad;
}

static int64_t compare(const nscai_case *c, const nscai_io *io)
{
    double *q = tt_to_doubles(&io->q), *got = tt_to_doubles(&io->o);
    double *k = logical_rows(c, io, &io->k, c->d), *v = logical_rows(c, io, &io->v, c->dv);
    int64_t qstart[NSCAI_MAX_B], cstart[NSCAI_MAX_B], qpos0[NSCAI_MAX_B];
    for (int64_t b = 0, t = 0; b < c->b; t += c->sq[b], b++)
        qstart[b] = t, cstart[b] = b * io->cmax, qpos0[b] = c->len[b] - c->sq[b];
    ref_nsca_problem p;
    memset(&p, 0, sizeof p);
    p.t1 = c->t, p.t2 = c->b * io->cmax, p.n1 = c->n1, p.n2 = c->n2, p.d = c->d, p.dv = c->dv;
    p.l = c->l, p.st = c->st, p.ls = c->ls, p.kc = c->kc, p.batches = c->b;
    p.qstart = qstart, p.qlen = c->sq, p.cstart = cstart, p.clen = c->cmp;
    p.causal = (int)c->causal, p.qpos0 = qpos0, p.infer = 1;
    p.scale = c->scale;
    p.round = c->dt == SPA_FLOAT16 ? REF_ROUND_F16 : c->dt == SPA_BFLOAT16 ? REF_ROUND_BF16 : REF_ROUND_NONE;
    const int64_t no = c->t * c->n1 * c->dv, ns = c->t * c->n1, cols = ref_nsca_blocks(&p, io->cmax) + 1;
    double *o = calloc((size_t)(no + 1), sizeof(double)), *mag = calloc((size_t)(no + 1), sizeof(double));
    double *mx = calloc((size_t)(ns + 1), sizeof(double)), *sm = calloc((size_t)(ns + 1), sizeof(double));
    double *imp = calloc((size_t)(c->t * c->n2 * cols + 1), sizeof(double));
    int32_t *topk = calloc((size_t)(c->t * c->n2 * c->kc + 1), sizeof(int32_t));
    ref_nsa_cattn(&p, q, k, v, o, mag, mx, sm, imp, cols, topk);
    int64_t bad = check_close("attentionOut", got, o, mag, no, attn_tol(c->dt));
    bad += check_topk(c, &io->topk, imp, cols, topk, c->dt == SPA_FLOAT64 ? 1e-12 : 1e-4 * (double)(c->n1 / c->n2));
    free(q), free(got), free(k), free(v), free(o), free(mag), free(mx), free(sm), free(imp), free(topk);
    return bad;
}

static bool guards_ok(const nscai_io *io)
{
    return tt_guard_ok(&io->q) && tt_guard_ok(&io->k) && tt_guard_ok(&io->v) && tt_guard_ok(&io->o) &&
           tt_guard_ok(&io->topk) && (io->page_of == NULL || tt_guard_ok(&io->table));
}

static void test_random(void)
{
    rng r = rng_seed(3101);
    for (int i = 0; i < TEST_COUNT(96, 32); i++) {
        nscai_case c;
        case_draw(&c, i, &r);
        nscai_io io;
        io_make(&io, &c, &r);
        char desc[320];
        case_describe(&c, desc, sizeof desc);
        const spa_status st = run(&c, &io, i % N_RUNNERS, (size_t)rng_int(&r, 0, 63));
        case_verdict("case", i, desc, st, st == SPA_OK ? compare(&c, &io) : -1, guards_ok(&io));
        io_free(&io);
    }
}

/* A decode step as a model runs it: one query, G 16, the fla layer's
 * blocks (l = d = l' = 64) and the paper's (l 32, d 16, l' 64), a cache of a
 * few hundred compressed keys in 64-row pages; block 0 and the last two
 * lead the top-K. Cases 4 to 7 split the keys in parts, and the parts read
 * the cache where it lies (bf16 and f16 widen 16 rows at a time): 6 and 7
 * contiguous caches of two kv heads (a row pitch of two heads, f32 and f16)
 * whose last part ends inside a group of 16. */
static void test_decode_shapes(void)
{
    rng r = rng_seed(3102);
    for (int i = 0; i < 8; i++) {
        nscai_case c;
        case_draw(&c, 0, &r);
        c.dt = i == 7 ? SPA_FLOAT16 : i % 2 ? SPA_BFLOAT16 : SPA_FLOAT32, c.b = 1, c.n1 = 16, c.n2 = i >= 6 ? 2 : 1;
        c.d = 128, c.dv = 128;
        c.l = i < 2 ? 64 : 32, c.st = i < 2 ? 64 : 16, c.ls = 64, c.kc = 16, c.page = 64, c.paged = i < 6;
        c.causal = 1, c.sq_null = false, c.len_null = false, c.strided = false;
        c.cmp[0] = (i < 4 ? TEST_SIZE(300, 90) : TEST_SIZE(2300, 150)) + i, c.sq[0] = 1, c.t = 1;
        c.len[0] = (c.cmp[0] - 1) * c.st + c.l + i;
        nscai_io io;
        io_make(&io, &c, &r);
        char desc[320];
        case_describe(&c, desc, sizeof desc);
        const spa_status st = run(&c, &io, i % N_RUNNERS, 0);
        case_verdict("decode", i, desc, st, st == SPA_OK ? compare(&c, &io) : -1, guards_ok(&io));
        const int64_t nsel = ((c.cmp[0] - 1) * c.st + c.l + c.ls - 1) / c.ls;
        CU_ASSERT_EQUAL(tt_get(&io.topk, 0), 0);
        CU_ASSERT_EQUAL(tt_get(&io.topk, 1), (double)(nsel - 2));
        CU_ASSERT_EQUAL(tt_get(&io.topk, 2), (double)(nsel - 1));
        io_free(&io);
    }
}

/* Non-finite cache values in a decode step that splits its keys in parts
 * read in place (f32, bf16, f16): NaN or an infinity in a key or value row
 * the query attends gives what the reference gives (NaN where it flows), and
 * an infinity in the value row of a key it does not see (the last keys lie
 * past its position: the exact forms, value rows widened one at a time)
 * leaves the output finite. */
static void test_decode_nonfinite(void)
{
    rng r = rng_seed(3104);
    for (int i = 0; i < 6; i++) {
        nscai_case c;
        case_draw(&c, 0, &r);
        c.dt = i % 3 == 0 ? SPA_FLOAT32 : i % 3 == 1 ? SPA_BFLOAT16 : SPA_FLOAT16;
        c.b = 1, c.n1 = 16, c.n2 = 1, c.d = 128, c.dv = 128, c.l = 32, c.st = 16, c.ls = 64, c.kc = 16;
        c.page = 64, c.paged = true, c.causal = 1, c.sq_null = false, c.len_null = false, c.strided = false;
        c.cmp[0] = TEST_SIZE(1100, 150) + i, c.sq[0] = 1, c.t = 1;
        const int64_t hidden = i < 3 ? 0 : 3; /* keys past the query's position */
        c.len[0] = (c.cmp[0] - 1 - hidden) * c.st + c.l;
        nscai_io io;
        io_make(&io, &c, &r);
        if (hidden == 0) {
            tt_poison(rng_int(&r, 0, 1) ? &io.k : &io.v, &r, (int)rng_int(&r, 1, 2), true);
        } else { /* the last key's value row, through the table */
            const int64_t last = c.cmp[0] - 1, pg = io.page_of[last / c.page];
            tt_set_nonfinite(&io.v, (pg * c.page + last % c.page) * c.dv + rng_int(&r, 0, c.dv - 1), INFINITY);
        }
        char desc[320];
        case_describe(&c, desc, sizeof desc);
        const spa_status st = run(&c, &io, i % N_RUNNERS, 0);
        case_verdict("decode non-finite", i, desc, st, st == SPA_OK ? compare(&c, &io) : -1, guards_ok(&io));
        if (hidden > 0 && st == SPA_OK)
            for (int64_t x = 0; x < c.n1 * c.dv; x++)
                CU_ASSERT(isfinite(tt_get(&io.o, x)));
        io_free(&io);
    }
}

/* Every runner writes the same bytes. */
static void test_deterministic(void)
{
    rng r = rng_seed(3103);
    for (int i = 0; i < 6; i++) {
        nscai_case c;
        case_draw(&c, i, &r);
        if (i >= 4) { /* keys in parts: a few queries of G 4 and 8 over one batch */
            c.dt = i == 4 ? SPA_FLOAT32 : SPA_FLOAT16, c.n2 = 1, c.n1 = i == 4 ? 4 : 8, c.b = 1;
            c.cmp[0] = TEST_SIZE(1500, 100), c.sq[0] = 3, c.t = 3, c.sq_null = false, c.causal = 1;
            c.len_null = false, c.len[0] = (c.cmp[0] - 1) * c.st + c.l;
        }
        nscai_io io;
        io_make(&io, &c, &r);
        CU_ASSERT_EQUAL(run(&c, &io, 0, 0), SPA_OK);
        unsigned char *o0 = tt_snapshot(&io.o), *k0 = tt_snapshot(&io.topk);
        for (int k = 1; k < N_RUNNERS; k++) {
            CU_ASSERT_EQUAL(run(&c, &io, k, (size_t)k), SPA_OK);
            CU_ASSERT(tt_same_bytes(&io.o, o0));
            CU_ASSERT(tt_same_bytes(&io.topk, k0));
        }
        free(o0), free(k0);
        io_free(&io);
    }
}

/* Refusals: 161001 for NULL, 161002 for each rule, before anything is
 * written; a table entry made invalid between the phases. */
static void test_refusals(void)
{
    rng r = rng_seed(3104);
    nscai_case c;
    case_draw(&c, 0, &r);
    c.dt = SPA_FLOAT32, c.b = 2, c.cmp[0] = 40, c.cmp[1] = 9, c.sq[0] = 2, c.sq[1] = 1, c.t = 3;
    c.st = 16, c.l = 32, c.ls = 64, c.kc = 4, c.causal = 1, c.sq_null = false, c.len_null = false;
    c.len[0] = 39 * 16 + 32, c.len[1] = 8 * 16 + 32, c.paged = true, c.page = 16;
    nscai_io io;
    io_make(&io, &c, &r);
    unsigned char *o0 = tt_snapshot(&io.o), *k0 = tt_snapshot(&io.topk);
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL(phase1(&c, &io, &size, &ex), SPA_OK);
    CU_ASSERT_EQUAL(spa_nsa_compress_attention_infer_get_workspace_size(
                        NULL, &io.k.t, &io.v.t, &io.table.t, &io.sq, &io.cmp, &io.len, c.scale, 1, c.l, c.st,
                        c.ls, c.kc, &io.o.t, &io.topk.t, &size, &ex),
                    SPA_ERR_NULLPTR);
    CU_ASSERT_EQUAL(spa_nsa_compress_attention_infer_get_workspace_size(
                        &io.q.t, &io.k.t, &io.v.t, &io.table.t, &io.sq, NULL, &io.len, c.scale, 1, c.l, c.st,
                        c.ls, c.kc, &io.o.t, &io.topk.t, &size, &ex),
                    SPA_ERR_NULLPTR);
    for (int m = 0; m < 12; m++) {
        nscai_case cc = c;
        int64_t saved = 0;
        switch (m) {
        case 0: cc.ls = 40; break;               /* not a multiple of the stride */
        case 1: cc.l = 8; break;                 /* block below the stride */
        case 2: cc.st = 0; break;
        case 3: cc.kc = 0; break;
        case 4: cc.sq[1] = 2; break;             /* counts do not sum to T */
        case 5: cc.cmp[0] = 16 * io.table_cols + 1; break; /* past the table's pages */
        case 6: cc.scale = NAN; break;
        case 7: cc.len[0] = 1; break;            /* fewer tokens than queries */
        case 8: cc.len_null = true; break;       /* causal without the lengths */
        case 9: cc.causal = 2; break;
        case 10: /* a table entry the call uses, outside the cache */
            saved = io.page_of[0];
            tt_set_int(&io.table, 0, io.pages);
            break;
        default: io.v.t.dtype = SPA_FLOAT16; break;
        }
        io.sq.data = cc.sq, io.cmp.data = cc.cmp, io.len.data = cc.len;
        spa_executor ex2;
        const spa_status st = phase1(&cc, &io, &size, &ex2);
        CU_ASSERT_EQUAL(st, SPA_ERR_INVALID);
        if (st != SPA_ERR_INVALID)
            fprintf(stderr, "  mutation %d: status %d\n", m, (int)st);
        if (m == 10)
            tt_set_int(&io.table, 0, saved);
        if (m == 11)
            io.v.t.dtype = SPA_FLOAT32;
        io.sq.data = c.sq, io.cmp.data = c.cmp, io.len.data = c.len;
    }
    CU_ASSERT_EQUAL(phase1(&c, &io, &size, &ex), SPA_OK);
    tt_set_int(&io.table, 1, -1); /* batch 0's second page, read by the call */
    tws ws;
    tws_make(&ws, size, 0);
    CU_ASSERT_EQUAL(spa_nsa_compress_attention_infer(ws.ptr, ws.size, &ex, NULL), SPA_ERR_INVALID);
    tws_free(&ws);
    CU_ASSERT(tt_same_bytes(&io.o, o0));
    CU_ASSERT(tt_same_bytes(&io.topk, k0));
    free(o0), free(k0);
    io_free(&io);
}

/* A batch without queries, one without compressed keys (O = 0, no block),
 * queries that see no key yet (every key, equal scores), T = 0. */
static void test_edges(void)
{
    rng r = rng_seed(3105);
    nscai_case c;
    case_draw(&c, 1, &r);
    c.dt = SPA_FLOAT32, c.b = 3, c.st = 16, c.l = 32, c.ls = 32, c.kc = 3, c.causal = 1;
    c.sq_null = false, c.len_null = false, c.paged = false;
    c.cmp[0] = 5, c.sq[0] = 0, c.len[0] = 4 * 16 + 32;
    c.cmp[1] = 0, c.sq[1] = 2, c.len[1] = 10;
    c.cmp[2] = 1, c.sq[2] = 3, c.len[2] = 33; /* queries at 30, 31, 32: the first sees no key */
    c.t = 5;
    nscai_io io;
    io_make(&io, &c, &r);
    CU_ASSERT_EQUAL(run(&c, &io, 1, 3), SPA_OK);
    CU_ASSERT_EQUAL(compare(&c, &io), 0);
    for (int64_t e = 0; e < 2 * c.n1 * c.dv; e++)
        CU_ASSERT(tt_get(&io.o, e) == 0.0);
    for (int64_t e = 0; e < 2 * c.n2 * c.kc; e++)
        CU_ASSERT(tt_get(&io.topk, e) == -1.0);
    io_free(&io);
    c.b = 1, c.cmp[0] = 3, c.sq[0] = 0, c.t = 0;
    io_make(&io, &c, &r);
    CU_ASSERT_EQUAL(run(&c, &io, 0, 0), SPA_OK);
    io_free(&io);
}

void suite_nsa_cattn_infer(void)
{
    CU_pSuite s = CU_add_suite("nsa_cattn_infer", NULL, NULL);
    CU_add_test(s, "random shapes, paged and contiguous, all dtypes", test_random);
    CU_add_test(s, "decode steps (G 16, D 128, fla and paper blocks)", test_decode_shapes);
    CU_add_test(s, "decode steps with NaN / Inf in the cache", test_decode_nonfinite);
    CU_add_test(s, "bit-identical across runners", test_deterministic);
    CU_add_test(s, "refusals, tables outside the cache", test_refusals);
    CU_add_test(s, "edges: no query, no key, no key seen yet, T = 0", test_edges);
}
