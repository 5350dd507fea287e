/* Selected attention on a KV cache (spattn/nsa_infer.h): against the fp64
 * reference on paged and contiguous caches, every dtype, any G and head
 * dims, across runners; every refusal, and block tables and indices that
 * point outside the cache. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_nsa_select.h"
#include "ref/ref_nsa_select_infer.h"
#include "spa_dtypes.h"
#include "spattn/nsa_infer.h"
#include "util.h"

enum { NSASI_MAX_B = 4 };

typedef struct nsasi_case {
    spa_dtype dt;
    int64_t b, n1, n2, d, dv, bs, kc, page, t;
    int64_t sq[NSASI_MAX_B], len[NSASI_MAX_B];
    bool paged, strided, sq_null;
    double scale;
} nsasi_case;

typedef struct nsasi_io {
    ttensor q, k, v, topk, table, o;
    int64_t pages, table_cols, lmax; /* lmax: rows per sequence in the contiguous cache */
    int64_t *page_of;                /* [b][table_cols]: the test's own copy of the table */
    spa_int_array sq, len;
} nsasi_io;

static const spa_dtype dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};

static void case_draw(nsasi_case *c, int i, rng *r)
{
    static const int64_t groups[] = {1, 2, 4, 5, 8, 16, 17, 32, 33, 64};
    static const int64_t pages[] = {1, 5, 16, 64, 128};
    memset(c, 0, sizeof *c);
    c->dt = dts[i % (SPA_HAVE_F64 ? 4 : 3)];
    const int64_t g = groups[rng_int(r, 0, 9)];
    c->n2 = g > 32 ? 1 : rng_int(r, 1, 2);
    c->n1 = c->n2 * g;
    c->d = rng_int(r, 0, 2) ? rng_int(r, 1, 100) : 64 * rng_int(r, 1, 3);
    c->dv = rng_int(r, 0, 2) ? rng_int(r, 1, 100) : 64 * rng_int(r, 1, 2);
    c->bs = 16 * rng_int(r, 1, 4);
    /* K * bs past 2 * 256 rows: f32 / f64 run a unit in parts (merged) */
    c->kc = rng_int(r, 0, 3) == 0 ? rng_int(r, 8, TEST_SIZE(20, 9)) : rng_int(r, 1, 6);
    c->paged = rng_int(r, 0, 3) != 0;
    c->page = pages[rng_int(r, 0, 4)];
    c->strided = rng_int(r, 0, 1) != 0;
    c->b = rng_int(r, 1, NSASI_MAX_B);
    c->sq_null = rng_int(r, 0, 3) == 0;
    for (int64_t b = 0; b < c->b; b++) {
        c->len[b] = rng_int(r, 0, 5) == 0 ? rng_int(r, 1, 20) : rng_int(r, 1, TEST_SIZE(400, 150));
        c->sq[b] = c->sq_null ? 1 : rng_int(r, 0, c->len[b] < 4 ? c->len[b] : 4);
        c->t += c->sq[b];
    }
    c->scale = (0.5 + rng_unit(r)) / sqrt((double)c->d);
}

static void case_describe(const nsasi_case *c, char *buf, size_t n)
{
    int k = snprintf(buf, n, "%s N1 %lld N2 %lld D %lld Dv %lld bs %lld K %lld %s page %lld strided %d lens",
                     dtype_name(c->dt), (long long)c->n1, (long long)c->n2, (long long)c->d,
                     (long long)c->dv, (long long)c->bs, (long long)c->kc, c->paged ? "paged" : "contiguous",
                     (long long)c->page, c->strided);
    for (int64_t b = 0; b < c->b && k > 0 && (size_t)k < n; b++)
        k += snprintf(buf + k, n - (size_t)k, " %lld/%lld", (long long)c->sq[b], (long long)c->len[b]);
}

/* The slots of token t (position pos of a sequence of nblk blocks): blocks
 * up to the query's, some after it (selecting nothing), -1 padding,
 * duplicates. */
static void draw_slots(ttensor *topk, int64_t row, int64_t kc, int64_t nblk, int64_t cur, rng *r)
{
    for (int64_t j = 0; j < kc; j++) {
        int64_t x;
        switch (rng_int(r, 0, 7)) {
        case 0: x = -1; break;
        case 1: x = nblk - 1; break; /* may lie after the query */
        case 2: x = cur; break;
        default: x = rng_int(r, 0, cur); break;
        }
        tt_set_int(topk, row * kc + j, nblk == 0 ? -1 : x);
    }
}

static void io_make(nsasi_io *io, const nsasi_case *c, rng *r)
{
    memset(io, 0, sizeof *io);
    int64_t need = 0, cols = 1, lmax = 1;
    for (int64_t b = 0; b < c->b; b++) {
        const int64_t np = (c->len[b] + c->page - 1) / c->page;
        need += np;
        cols = np > cols ? np : cols;
        lmax = c->len[b] > lmax ? c->len[b] : lmax;
    }
    io->lmax = lmax;
    if (c->paged) {
        io->pages = need + rng_int(r, 0, 3);
        io->table_cols = cols + rng_int(r, 0, 2);
        /* pages in a random order, then the spare ones */
        int64_t *perm = malloc(sizeof(int64_t) * (size_t)io->pages);
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
            const int64_t np = (c->len[b] + c->page - 1) / c->page;
            for (int64_t j = 0; j < io->table_cols; j++) {
                /* entries past the sequence are never read: out of range on purpose */
                const int64_t pg = j < np ? perm[used++] : (j % 2 ? -3 : io->pages + 1000);
                io->page_of[b * io->table_cols + j] = pg;
                tt_set_int(&io->table, b * io->table_cols + j, pg);
            }
        }
        free(perm);
        const int64_t kd[4] = {io->pages, c->page, c->n2, c->d}, vd[4] = {io->pages, c->page, c->n2, c->dv};
        tt_make(&io->k, c->dt, 4, kd, c->strided, r);
        tt_make(&io->v, c->dt, 4, vd, c->strided, r);
    } else {
        const int64_t kd[4] = {c->b + rng_int(r, 0, 1), lmax + rng_int(r, 0, 3), c->n2, c->d};
        const int64_t vd[4] = {kd[0], kd[1], c->n2, c->dv};
        tt_make(&io->k, c->dt, 4, kd, c->strided, r);
        tt_make(&io->v, c->dt, 4, vd, c->strided, r);
    }
    tt_fill_random(&io->k, r, -1.0, 1.0);
    tt_fill_random(&io->v, r, -1.0, 1.0);
    const int64_t qd[3] = {c->t, c->n1, c->d}, od[3] = {c->t, c->n1, c->dv}, id[3] = {c->t, c->n2, c->kc};
    tt_make(&io->q, c->dt, 3, qd, c->strided, r);
    tt_fill_random(&io->q, r, -1.0, 1.0);
    tt_make(&io->o, c->dt, 3, od, c->strided, r);
    tt_make(&io->topk, SPA_INT32, 3, id, c->strided, r);
    for (int64_t b = 0, t = 0; b < c->b; b++) {
        const int64_t nblk = (c->len[b] + c->bs - 1) / c->bs;
        for (int64_t i = 0; i < c->sq[b]; i++, t++)
            for (int64_t h = 0; h < c->n2; h++)
                draw_slots(&io->topk, t * c->n2 + h, c->kc, nblk, (c->len[b] - c->sq[b] + i) / c->bs, r);
    }
    io->sq.data = c->sq, io->sq.size = (uint64_t)c->b;
    io->len.data = c->len, io->len.size = (uint64_t)c->b;
}

static void io_free(nsasi_io *io)
{
    tt_free(&io->q), tt_free(&io->k), tt_free(&io->v), tt_free(&io->topk), tt_free(&io->o);
    if (io->page_of != NULL)
        tt_free(&io->table);
    free(io->page_of);
}

static spa_status phase1(const nsasi_case *c, nsasi_io *io, uint64_t *size, spa_executor *ex)
{
    return spa_nsa_select_infer_get_workspace_size(&io->q.t, &io->k.t, &io->v.t, &io->topk.t,
                                                   c->paged ? &io->table.t : NULL, c->sq_null ? NULL : &io->sq,
                                                   &io->len, c->scale, c->bs, &io->o.t, size, ex);
}

static spa_status run(const nsasi_case *c, nsasi_io *io, int runner, size_t skew)
{
    uint64_t size = 0;
    spa_executor ex;
    spa_status st = phase1(c, io, &size, &ex);
    if (st != SPA_OK)
        return st;
    tws ws;
    tws_make(&ws, size, skew);
    st = spa_nsa_select_infer(ws.ptr, ws.size, &ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

/* The cache as each sequence's logical rows [b][lmax][n2][dim], read through
 * the test's copy of the table. */
static double *logical_rows(const nsasi_case *c, const nsasi_io *io, const ttensor *cache, int64_t dim)
{
    double *out = calloc((size_t)(c->b * io->lmax * c->n2 * dim + 1), sizeof(double));
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t p = 0; p < c->len[b]; p++) {
            const int64_t pg = c->paged ? io->page_of[b * io->table_cols + p / c->page] : b;
            const int64_t row = c->paged ? p % c->page : p;
            for (int64_t h = 0; h < c->n2; h++)
                for (int64_t e = 0; e < dim; e++)
                    out[((b * io->lmax + p) * c->n2 + h) * dim + e] =
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

static int64_t compare(const nsasi_case *c, const nsasi_io *io)
{
    double *q = tt_to_doubles(&io->q), *got = tt_to_doubles(&io->o);
    double *k = logical_rows(c, io, &io->k, c->d), *v = logical_rows(c, io, &io->v, c->dv);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)(c->t * c->n2 * c->kc + 1));
    for (int64_t i = 0; i < c->t * c->n2 * c->kc; i++)
        idx[i] = (int32_t)tt_get(&io->topk, i);
    const int64_t no = c->t * c->n1 * c->dv;
    double *o = calloc((size_t)(no + 1), sizeof(double)), *mag = calloc((size_t)(no + 1), sizeof(double));
    ref_nsasi_problem p = {c->t, c->n1, c->n2, c->d, c->dv, c->bs, c->kc, c->b, io->lmax, c->sq, c->len, idx,
                           c->scale, c->dt == SPA_FLOAT16 ? REF_ROUND_F16 : c->dt == SPA_BFLOAT16 ? REF_ROUND_BF16
                                                                                                : REF_ROUND_NONE};
    ref_nsa_select_infer(&p, q, k, v, o, mag);
    const int64_t bad = check_close("attentionOut", got, o, mag, no, attn_tol(c->dt));
    free(q), free(got), free(k), free(v), free(idx), free(o), free(mag);
    return bad;
}

static bool guards_ok(const nsasi_io *io)
{
    return tt_guard_ok(&io->q) && tt_guard_ok(&io->k) && tt_guard_ok(&io->v) && tt_guard_ok(&io->topk) &&
           tt_guard_ok(&io->o) && (io->page_of == NULL || tt_guard_ok(&io->table));
}

static void test_random(void)
{
    rng r = rng_seed(2901);
    for (int i = 0; i < TEST_SIZE(96, 32); i++) { /* the select kernels: their own suites draw the tiles */
        nsasi_case c;
        case_draw(&c, i, &r);
        nsasi_io io;
        io_make(&io, &c, &r);
        char desc[300];
        case_describe(&c, desc, sizeof desc);
        const spa_status st = run(&c, &io, i % N_RUNNERS, (size_t)rng_int(&r, 0, 63));
        case_verdict("case", i, desc, st, st == SPA_OK ? compare(&c, &io) : -1, guards_ok(&io));
        io_free(&io);
    }
}

/* Every runner writes the same bytes. */
static void test_deterministic(void)
{
    rng r = rng_seed(2902);
    for (int i = 0; i < 4; i++) {
        nsasi_case c;
        case_draw(&c, i, &r);
        c.b = 2, c.sq[0] = c.len[0] < 3 ? c.len[0] : 3, c.sq[1] = 1, c.len[1] = 1 + c.len[1];
        c.sq_null = false, c.t = c.sq[0] + c.sq[1];
        /* a unit in parts (f32 / f64 merged; f16 / bf16 in two passes): the
         * same bits on every runner */
        c.kc = 12, c.bs = 64;
        nsasi_io io;
        io_make(&io, &c, &r);
        CU_ASSERT_EQUAL(run(&c, &io, 0, 0), SPA_OK);
        unsigned char *first = tt_snapshot(&io.o);
        for (int k = 1; k < N_RUNNERS; k++) {
            CU_ASSERT_EQUAL(run(&c, &io, k, (size_t)k), SPA_OK);
            CU_ASSERT(tt_same_bytes(&io.o, first));
        }
        free(first);
        io_free(&io);
    }
}

/* One decode step per token, each at its own cache length, equals the
 * last row of a call over the whole chunk (bottom-right alignment). */
static void decode_equals_chunk(spa_dtype dt)
{
    rng r = rng_seed(2903);
    nsasi_case c;
    case_draw(&c, 0, &r);
    if (c.n1 / c.n2 > 32) /* a half dtype's parts: G <= 32 */
        c.n1 = 16, c.n2 = 1;
    c.dt = dt, c.b = 1, c.len[0] = 150, c.sq[0] = 4, c.t = 4, c.sq_null = false, c.paged = true;
    c.page = 16, c.bs = 64, c.kc = 8; /* 512 rows: two parts (the same split whatever T) */
    nsasi_io io;
    io_make(&io, &c, &r);
    CU_ASSERT_EQUAL(run(&c, &io, 0, 0), SPA_OK);
    for (int64_t i = 0; i < 4; i++) {
        /* query i alone, the cache cut at its position + 1 */
        nsasi_case one = c;
        one.sq[0] = 1, one.len[0] = c.len[0] - 3 + i, one.t = 1;
        ttensor q1 = io.q, i1 = io.topk, o1;
        q1.t.dims[0] = 1, q1.t.data = (char *)io.q.t.data + (size_t)(i * io.q.t.strides[0]) * (dt == SPA_FLOAT32 ? 4u : 2u);
        i1.t.dims[0] = 1, i1.t.data = (int32_t *)io.topk.t.data + i * io.topk.t.strides[0];
        const int64_t od[3] = {1, c.n1, c.dv};
        tt_make(&o1, dt, 3, od, false, &r);
        spa_int_array sq = {one.sq, 1}, len = {one.len, 1};
        uint64_t size;
        spa_executor ex;
        /* a block of the chunk after this query's position would be refused:
         * keep only the slots this query may name */
        int32_t *slots = (int32_t *)i1.t.data;
        int32_t saved[16];
        for (int64_t j = 0; j < c.n2 * c.kc && j < 16; j++) {
            const int64_t h = j / c.kc, s = j % c.kc;
            int32_t *x = slots + h * i1.t.strides[1] + s * i1.t.strides[2];
            saved[j] = *x;
            if (*x >= 0 && (int64_t)*x * c.bs >= one.len[0])
                *x = -1;
        }
        CU_ASSERT_EQUAL(spa_nsa_select_infer_get_workspace_size(&q1.t, &io.k.t, &io.v.t, &i1.t, &io.table.t, &sq,
                                                                &len, c.scale, c.bs, &o1.t, &size, &ex),
                        SPA_OK);
        tws ws;
        tws_make(&ws, size, 0);
        CU_ASSERT_EQUAL(spa_nsa_select_infer(ws.ptr, ws.size, &ex, NULL), SPA_OK);
        tws_free(&ws);
        for (int64_t e = 0; e < c.n1 * c.dv; e++)
            CU_ASSERT_EQUAL(tt_get(&o1, e), tt_get(&io.o, i * c.n1 * c.dv + e));
        for (int64_t j = 0; j < c.n2 * c.kc && j < 16; j++) {
            const int64_t h = j / c.kc, s = j % c.kc;
            slots[h * i1.t.strides[1] + s * i1.t.strides[2]] = saved[j];
        }
        tt_free(&o1);
    }
    io_free(&io);
}

static void test_decode_equals_chunk(void)
{
    decode_equals_chunk(SPA_FLOAT32);
    decode_equals_chunk(SPA_BFLOAT16); /* its parts in two passes */
}

/* Refusals: 161001 for NULL, 161002 for each rule, before anything is written. */
static void test_refusals(void)
{
    rng r = rng_seed(2904);
    nsasi_case c;
    case_draw(&c, 0, &r);
    c.dt = SPA_FLOAT32, c.b = 2, c.len[0] = 100, c.len[1] = 40, c.sq[0] = 2, c.sq[1] = 1, c.t = 3;
    c.sq_null = false, c.paged = true, c.page = 16, c.bs = 32, c.kc = 2;
    nsasi_io io;
    io_make(&io, &c, &r);
    tt_set_int(&io.topk, 0, 0); /* token 0 reads block 0: page 0 of batch 0 */
    unsigned char *before = tt_snapshot(&io.o);
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL(phase1(&c, &io, &size, &ex), SPA_OK);
    CU_ASSERT_EQUAL(spa_nsa_select_infer_get_workspace_size(NULL, &io.k.t, &io.v.t, &io.topk.t, &io.table.t,
                                                            &io.sq, &io.len, c.scale, c.bs, &io.o.t, &size, &ex),
                    SPA_ERR_NULLPTR);
    CU_ASSERT_EQUAL(spa_nsa_select_infer_get_workspace_size(&io.q.t, &io.k.t, &io.v.t, &io.topk.t, &io.table.t,
                                                            &io.sq, NULL, c.scale, c.bs, &io.o.t, &size, &ex),
                    SPA_ERR_NULLPTR);
    /* each mutation alone */
    for (int m = 0; m < 9; m++) {
        nsasi_case cc = c;
        int64_t saved_page = 0;
        int32_t saved_idx = 0;
        switch (m) {
        case 0: cc.bs = 24; break;                 /* not a multiple of 16 */
        case 1: cc.sq[0] = 101; break;             /* more queries than tokens */
        case 2: cc.sq[1] = 2; break;               /* counts do not sum to T */
        case 3: cc.len[0] = 16 * io.table_cols + 1; break; /* past the table's pages */
        case 4: cc.scale = INFINITY; break;
        case 5: /* a table entry the call uses, outside the cache */
            saved_page = io.page_of[0];
            tt_set_int(&io.table, 0, io.pages);
            break;
        case 6: /* an index past the sequence */
            saved_idx = (int32_t)tt_get(&io.topk, 0);
            tt_set_int(&io.topk, 0, 4);
            break;
        case 7: cc.len[1] = -1; break;
        default: /* another dtype for value */
            io.v.t.dtype = SPA_FLOAT16;
            break;
        }
        io.sq.data = cc.sq, io.len.data = cc.len;
        spa_executor ex2;
        const spa_status st = phase1(&cc, &io, &size, &ex2);
        CU_ASSERT_EQUAL(st, SPA_ERR_INVALID);
        if (st != SPA_ERR_INVALID)
            fprintf(stderr, "  mutation %d: status %d\n", m, (int)st);
        if (m == 5)
            tt_set_int(&io.table, 0, saved_page);
        if (m == 6)
            tt_set_int(&io.topk, 0, saved_idx);
        if (m == 8)
            io.v.t.dtype = SPA_FLOAT32;
        io.sq.data = c.sq, io.len.data = c.len;
    }
    /* a table entry made invalid between the phases: phase 2 refuses, writing nothing */
    CU_ASSERT_EQUAL(phase1(&c, &io, &size, &ex), SPA_OK);
    tt_set_int(&io.table, 0, -1);
    tws ws;
    tws_make(&ws, size, 0);
    CU_ASSERT_EQUAL(spa_nsa_select_infer(ws.ptr, ws.size, &ex, NULL), SPA_ERR_INVALID);
    tws_free(&ws);
    CU_ASSERT(tt_same_bytes(&io.o, before));
    free(before);
    io_free(&io);
}

/* A batch without queries, a sequence whose selected blocks hold no visible
 * key (output 0), and T = 0. */
static void test_edges(void)
{
    rng r = rng_seed(2905);
    nsasi_case c;
    case_draw(&c, 1, &r);
    c.dt = SPA_FLOAT32, c.b = 3, c.len[0] = 50, c.len[1] = 20, c.len[2] = 1, c.sq[0] = 0, c.sq[1] = 2, c.sq[2] = 1;
    c.t = 3, c.sq_null = false, c.paged = false;
    nsasi_io io;
    io_make(&io, &c, &r);
    for (int64_t i = 0; i < c.kc * c.n2; i++) /* token 0 (batch 1, position 18): nothing selected */
        tt_set_int(&io.topk, i, -1);
    CU_ASSERT_EQUAL(run(&c, &io, 1, 3), SPA_OK);
    CU_ASSERT_EQUAL(compare(&c, &io), 0);
    for (int64_t e = 0; e < c.n1 * c.dv; e++)
        CU_ASSERT(tt_get(&io.o, e) == 0.0);
    io_free(&io);
    c.b = 1, c.len[0] = 10, c.sq[0] = 0, c.t = 0;
    io_make(&io, &c, &r);
    CU_ASSERT_EQUAL(run(&c, &io, 0, 0), SPA_OK);
    io_free(&io);
}

void suite_nsa_select_infer(void)
{
    CU_pSuite s = CU_add_suite("nsa_select_infer", NULL, NULL);
    CU_add_test(s, "random shapes, paged and contiguous, all dtypes", test_random);
    CU_add_test(s, "bit-identical across runners", test_deterministic);
    CU_add_test(s, "decode steps equal a chunk's rows", test_decode_equals_chunk);
    CU_add_test(s, "refusals, tables and indices outside the cache", test_refusals);
    CU_add_test(s, "edges: no query, nothing selected, T = 0", test_edges);
}
