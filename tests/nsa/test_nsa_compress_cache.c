/* The compression of a KV cache's newest window (spa_nsa_compress_with_cache):
 * the rows of the batches that close a window against the fp64 reference
 * of NsaCompress and, bit for bit, against spa_nsa_compress on the same
 * window; every other row untouched; paged and contiguous caches, every
 * dtype, across runners; the refusals. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref.h"
#include "spa_dtypes.h"
#include "spattn/nsa_infer.h"
#include "util.h"

enum { CC_MAX_B = 4 };

typedef struct cc_case {
    spa_dtype dt;
    int64_t b, n, dim, l, d, page, rows;
    int64_t len[CC_MAX_B];
    int32_t slot[CC_MAX_B];
    bool paged;
    ttensor x, w, slots, table, out;
    int64_t *page_of; /* [b][cols] */
    int64_t cols;
    spa_int_array lens;
} cc_case;

static const spa_dtype dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};

static void cc_make(cc_case *c, int i, rng *r)
{
    memset(c, 0, sizeof *c);
    c->dt = dts[i % (SPA_HAVE_F64 ? 4 : 3)];
    c->b = rng_int(r, 1, CC_MAX_B);
    c->n = rng_int(r, 1, 3);
    c->dim = rng_int(r, 0, 1) ? rng_int(r, 1, 80) : 64 * rng_int(r, 1, 2);
    c->d = 16 * rng_int(r, 1, 2) / (rng_int(r, 0, 1) ? 1 : 4); /* 4, 8, 16, 32 */
    c->l = c->d * rng_int(r, 1, 3) + (rng_int(r, 0, 2) == 0 ? rng_int(r, 0, c->d - 1) : 0);
    c->paged = rng_int(r, 0, 3) != 0;
    c->page = rng_int(r, 0, 1) ? 16 : rng_int(r, 1, 40);
    c->rows = c->b + rng_int(r, 0, 5);
    int64_t lmax = 1, need = 0;
    for (int64_t b = 0; b < c->b; b++) {
        /* most batches close a window now; some do not, some are too short */
        const int64_t kind = rng_int(r, 0, 5);
        c->len[b] = kind == 0 ? rng_int(r, 0, c->l) : kind == 1 ? c->l + rng_int(r, 1, 3 * c->d)
                                                                 : c->l + c->d * rng_int(r, 0, 6);
        lmax = c->len[b] > lmax ? c->len[b] : lmax;
        need += (c->len[b] + c->page - 1) / c->page;
    }
    /* distinct rows, in a random order; some batches write nowhere (-1) */
    int64_t rows[16];
    for (int64_t k = 0; k < c->rows; k++)
        rows[k] = k;
    for (int64_t k = c->rows - 1; k > 0; k--) {
        const int64_t j = rng_int(r, 0, k), t = rows[k];
        rows[k] = rows[j], rows[j] = t;
    }
    for (int64_t b = 0; b < c->b; b++)
        c->slot[b] = rng_int(r, 0, 6) == 0 ? -1 : (int32_t)rows[b];
    if (c->paged) {
        const int64_t pages = need + 2;
        c->cols = (lmax + c->page - 1) / c->page + 1;
        const int64_t kd[4] = {pages, c->page, c->n, c->dim}, td[2] = {c->b, c->cols};
        tt_make(&c->x, c->dt, 4, kd, rng_int(r, 0, 1) != 0, r);
        tt_make(&c->table, SPA_INT32, 2, td, false, r);
        c->page_of = malloc(sizeof(int64_t) * (size_t)(c->b * c->cols));
        for (int64_t b = 0, used = 0; b < c->b; b++)
            for (int64_t j = 0; j < c->cols; j++) {
                const int64_t pg = j < (c->len[b] + c->page - 1) / c->page ? pages - 1 - used++ : pages + 9;
                c->page_of[b * c->cols + j] = pg;
                tt_set_int(&c->table, b * c->cols + j, pg);
            }
    } else {
        const int64_t kd[4] = {c->b, lmax + rng_int(r, 0, 3), c->n, c->dim};
        c->page = kd[1];
        tt_make(&c->x, c->dt, 4, kd, rng_int(r, 0, 1) != 0, r);
    }
    tt_fill_random(&c->x, r, -1.0, 1.0);
    const int64_t wd[2] = {c->l, c->n}, sd[1] = {c->b}, od[3] = {c->rows, c->n, c->dim};
    tt_make(&c->w, c->dt, 2, wd, false, r);
    tt_fill_random(&c->w, r, -1.0, 1.0);
    tt_make(&c->slots, SPA_INT32, 1, sd, false, r);
    for (int64_t b = 0; b < c->b; b++)
        tt_set_int(&c->slots, b, c->slot[b]);
    tt_make(&c->out, c->dt, 3, od, rng_int(r, 0, 1) != 0, r);
    tt_fill_random(&c->out, r, -1.0, 1.0); /* a cache holding earlier rows */
    c->lens.data = c->len, c->lens.size = (uint64_t)c->b;
}

static void cc_free(cc_case *c)
{
    tt_free(&c->x), tt_free(&c->w), tt_free(&c->slots), tt_free(&c->out);
    if (c->paged)
        tt_free(&c->table);
    free(c->page_of);
}

static spa_status cc_run(cc_case *c, int runner)
{
    uint64_t size;
    spa_executor ex;
    spa_status st = spa_nsa_compress_with_cache_get_workspace_size(&c->x.t, &c->w.t, &c->slots.t,
                                                                   c->paged ? &c->table.t : NULL, &c->lens, c->l,
                                                                   c->d, &c->out.t, &size, &ex);
    if (st != SPA_OK)
        return st;
    tws ws;
    tws_make(&ws, size, (size_t)runner * 3);
    st = spa_nsa_compress_with_cache(ws.ptr, ws.size, &ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

/* Whether batch b writes, and the logical row p of its cache as a flat
 * element offset base (of x's logical [pages, page, n, dim] order). */
static bool writes(const cc_case *c, int64_t b)
{
    return c->slot[b] >= 0 && c->len[b] >= c->l && (c->len[b] - c->l) % c->d == 0;
}

static int64_t row_flat(const cc_case *c, int64_t b, int64_t p)
{
    const int64_t pg = c->paged ? c->page_of[b * c->cols + p / c->page] : b;
    return (pg * c->x.t.dims[1] + (c->paged ? p % c->page : p)) * c->n * c->dim;
}

static void test_random(void)
{
    rng r = rng_seed(3101);
    for (int i = 0; i < TEST_SIZE(64, 16); i++) {
        cc_case c;
        cc_make(&c, i, &r);
        double *before = tt_to_doubles(&c.out);
        const spa_status st = cc_run(&c, i % N_RUNNERS);
        CU_ASSERT_EQUAL(st, SPA_OK);
        const int64_t rowel = c.n * c.dim;
        double *w = tt_to_doubles(&c.w), *after = tt_to_doubles(&c.out);
        double *win = malloc(sizeof(double) * (size_t)(c.l * rowel)), *ref = malloc(sizeof(double) * (size_t)rowel);
        double *mag = malloc(sizeof(double) * (size_t)rowel);
        int64_t bad = 0;
        bool written[16] = {false};
        for (int64_t b = 0; b < c.b && st == SPA_OK; b++) {
            if (!writes(&c, b))
                continue;
            written[c.slot[b]] = true;
            for (int64_t j = 0; j < c.l; j++)
                for (int64_t e = 0; e < rowel; e++)
                    win[j * rowel + e] = tt_get(&c.x, row_flat(&c, b, c.len[b] - c.l + j) + e);
            const int64_t start = 0, len = c.l;
            const ref_batches bt = {1, &start, &len};
            ref_nsa_compress(win, w, &bt, c.n, c.dim, c.l, c.d, ref, mag);
            bad += check_close("cache row", after + c.slot[b] * rowel, ref, mag, rowel, tol_for(c.dt, 0x1p-18));
        }
        for (int64_t k = 0; k < c.rows; k++) /* every other row as it was */
            if (!written[k])
                for (int64_t e = 0; e < rowel; e++)
                    bad += after[k * rowel + e] != before[k * rowel + e];
        char desc[200];
        snprintf(desc, sizeof desc, "%s B %lld N %lld D %lld l %lld d %lld %s page %lld", dtype_name(c.dt),
                 (long long)c.b, (long long)c.n, (long long)c.dim, (long long)c.l, (long long)c.d,
                 c.paged ? "paged" : "contiguous", (long long)c.page);
        case_verdict("case", i, desc, st, bad, tt_guard_ok(&c.x) && tt_guard_ok(&c.out));
        free(before), free(w), free(after), free(win), free(ref), free(mag);
        cc_free(&c);
    }
}

/* The row equals spa_nsa_compress's for the same window, bit for bit. */
static void test_same_as_compress(void)
{
    rng r = rng_seed(3102);
    for (int i = 0; i < 8; i++) {
        cc_case c;
        cc_make(&c, i, &r);
        int64_t wb = -1; /* a batch that writes */
        for (int64_t b = 0; b < c.b && wb < 0; b++)
            if (writes(&c, b))
                wb = b;
        if (wb < 0) {
            cc_free(&c);
            continue;
        }
        CU_ASSERT_EQUAL(cc_run(&c, i % N_RUNNERS), SPA_OK);
        /* the window as a dense tensor of the dtype, through spa_nsa_compress */
        const int64_t wd[3] = {c.l, c.n, c.dim}, od[3] = {1, c.n, c.dim};
        ttensor win, one;
        tt_make(&win, c.dt, 3, wd, false, &r);
        tt_make(&one, c.dt, 3, od, false, &r);
        const size_t es = (size_t)(c.dt == SPA_FLOAT64 ? 8 : c.dt == SPA_FLOAT32 ? 4 : 2);
        for (int64_t j = 0; j < c.l; j++)
            for (int64_t e = 0; e < c.n * c.dim; e++)
                memcpy((char *)win.t.data + (size_t)(j * c.n * c.dim + e) * es,
                       (char *)c.x.t.data + (size_t)tt_offset(&c.x, row_flat(&c, wb, c.len[wb] - c.l + j) + e) * es,
                       es);
        const int64_t seqv[1] = {c.l};
        const spa_int_array seq = {seqv, 1};
        uint64_t size;
        spa_executor ex;
        CU_ASSERT_EQUAL(spa_nsa_compress_get_workspace_size(&win.t, &c.w.t, &seq, "TND", c.l, c.d, 0, &one.t,
                                                            &size, &ex),
                        SPA_OK);
        void *ws = malloc((size_t)size + 1);
        CU_ASSERT_EQUAL(spa_nsa_compress(ws, size, &ex, NULL), SPA_OK);
        free(ws);
        for (int64_t e = 0; e < c.n * c.dim; e++)
            CU_ASSERT(memcmp((char *)one.t.data + (size_t)tt_offset(&one, e) * es,
                             (char *)c.out.t.data + (size_t)tt_offset(&c.out, c.slot[wb] * c.n * c.dim + e) * es,
                             es) == 0);
        tt_free(&win), tt_free(&one);
        cc_free(&c);
    }
}

/* TND input: the batches' rows one after the other. */
static void test_tnd(void)
{
    rng r = rng_seed(3104);
    for (int i = 0; i < 6; i++) {
        const spa_dtype dt = dts[i % (SPA_HAVE_F64 ? 4 : 3)];
        const int64_t n = 2, dim = 20, l = 16, d = 8, b = 3, lens[3] = {16 + 8 * i, 5, 40};
        const int64_t total = lens[0] + lens[1] + lens[2] + 3;
        const int64_t xd[3] = {total, n, dim}, wd[2] = {l, n}, sd[1] = {b}, od[3] = {4, n, dim};
        ttensor x, w, slots, out;
        tt_make(&x, dt, 3, xd, i % 2 == 1, &r);
        tt_make(&w, dt, 2, wd, false, &r);
        tt_make(&slots, SPA_INT32, 1, sd, false, &r);
        tt_make(&out, dt, 3, od, false, &r);
        tt_fill_random(&x, &r, -1.0, 1.0);
        tt_fill_random(&w, &r, -1.0, 1.0);
        tt_fill_random(&out, &r, -1.0, 1.0);
        const int32_t sv[3] = {2, 0, 3};
        for (int64_t k = 0; k < b; k++)
            tt_set_int(&slots, k, sv[k]);
        double *before = tt_to_doubles(&out);
        const spa_int_array la = {lens, 3};
        uint64_t size;
        spa_executor ex;
        CU_ASSERT_EQUAL_FATAL(spa_nsa_compress_with_cache_get_workspace_size(&x.t, &w.t, &slots.t, NULL, &la, l, d,
                                                                             &out.t, &size, &ex),
                              SPA_OK);
        tws ws;
        tws_make(&ws, size, 5);
        CU_ASSERT_EQUAL(spa_nsa_compress_with_cache(ws.ptr, ws.size, &ex, test_runner(i % N_RUNNERS)), SPA_OK);
        tws_free(&ws);
        double *xs = tt_to_doubles(&x), *ws_ = tt_to_doubles(&w), *after = tt_to_doubles(&out);
        double ref[40], mag[40];
        const int64_t start = 0, len1 = l;
        const ref_batches bt = {1, &start, &len1};
        /* batch 0 closes a window (16 + 8i), batch 1 is too short, batch 2 (40 = 16 + 3 * 8) closes one */
        ref_nsa_compress(xs + (lens[0] - l) * n * dim, ws_, &bt, n, dim, l, d, ref, mag);
        CU_ASSERT_EQUAL(check_close("batch 0", after + 2 * n * dim, ref, mag, n * dim, tol_for(dt, 0x1p-18)), 0);
        ref_nsa_compress(xs + (lens[0] + lens[1] + lens[2] - l) * n * dim, ws_, &bt, n, dim, l, d, ref, mag);
        CU_ASSERT_EQUAL(check_close("batch 2", after + 3 * n * dim, ref, mag, n * dim, tol_for(dt, 0x1p-18)), 0);
        for (int64_t e = 0; e < 2 * n * dim; e++) /* rows 0 and 1: untouched (batch 1 writes nothing) */
            CU_ASSERT_EQUAL(after[e], before[e]);
        free(before), free(xs), free(ws_), free(after);
        tt_free(&x), tt_free(&w), tt_free(&slots), tt_free(&out);
    }
}

static void test_refusals(void)
{
    rng r = rng_seed(3103);
    cc_case c;
    memset(&c, 0, sizeof c);
    do {
        cc_free(&c);
        cc_make(&c, 0, &r);
    } while (c.b < 2 || !c.paged || c.len[0] < c.l || c.len[1] < c.l);
    const int64_t d0 = c.d;
    for (int64_t b = 0; b < c.b; b++) { /* batches 0 and 1 write rows 0 and 1, the others nothing */
        c.slot[b] = b < 2 ? (int32_t)b : -1;
        if (b < 2)
            c.len[b] = c.l;
        tt_set_int(&c.slots, b, c.slot[b]);
    }
    unsigned char *before = tt_snapshot(&c.out);
    CU_ASSERT_EQUAL(cc_run(&c, 0), SPA_OK);
    tt_fill_random(&c.out, &r, -1.0, 1.0);
    free(before);
    before = tt_snapshot(&c.out);
    for (int m = 0; m < 6; m++) {
        switch (m) {
        case 0: tt_set_int(&c.slots, 1, 0); break;                    /* two writers, one row */
        case 1: tt_set_int(&c.slots, 1, (int32_t)c.rows); break;       /* past the cache */
        case 2: tt_set_int(&c.table, 0, -2); break;                    /* a page outside the pool */
        case 3: c.d = c.l + 1; break;                                  /* stride over the block */
        case 4: c.len[0] = c.cols * c.page + 1; break;                 /* past the table */
        default: tt_set_int(&c.slots, 1, -2); break;
        }
        CU_ASSERT_EQUAL(cc_run(&c, 0), SPA_ERR_INVALID);
        CU_ASSERT(tt_same_bytes(&c.out, before));
        tt_set_int(&c.slots, 1, 1);
        tt_set_int(&c.table, 0, c.page_of[0]);
        c.d = d0, c.len[0] = c.l;
    }
    free(before);
    cc_free(&c);
}

void suite_nsa_compress_cache(void);
void suite_nsa_compress_cache(void)
{
    CU_pSuite s = CU_add_suite("nsa_compress_cache", NULL, NULL);
    CU_add_test(s, "random windows, paged and contiguous, all dtypes", test_random);
    CU_add_test(s, "rows equal spa_nsa_compress's, bit for bit", test_same_as_compress);
    CU_add_test(s, "TND input", test_tnd);
    CU_add_test(s, "refusals, nothing written", test_refusals);
}
