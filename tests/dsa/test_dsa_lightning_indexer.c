/* The DSA lightning indexer (spattn/dsa.h): against the fp64 reference on
 * paged, contiguous and TND keys, every dtype, both sparse modes, any G and D,
 * across runners; exact tie order and NaN placement on inputs whose scores
 * are exact; bit-identical results on every runner; every refusal, block
 * tables outside the key, phase-2 errors; empty calls and edges. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_dsa_lightning_indexer.h"
#include "spa_dtypes.h"
#include "spattn/dsa.h"
#include "util.h"

enum { DLI_MAX_B = 4 };

typedef struct dli_case {
    spa_dtype dt, wdt, vdt; /* query and key; weights; values output */
    bool values;            /* the values output given */
    int64_t b, n1, n2, d, kc, page, t, mode;
    int64_t sq[DLI_MAX_B], len[DLI_MAX_B];
    bool paged, tnd, strided, sq_null, kv_null; /* kv_null: [B, S, N2, D], every L_b = S */
} dli_case;

typedef struct dli_io {
    ttensor q, k, w, table, idx, val;
    int64_t pages, table_cols, lmax; /* lmax: the longest sequence */
    int64_t srows;                   /* contiguous key: dim 1; TND: T2 */
    int64_t start[DLI_MAX_B];        /* TND: batch b's first row */
    int64_t *page_of;                /* [b][table_cols]: the test's own copy of the table */
    spa_int_array sq, len;
} dli_io;

static const spa_dtype dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};
#define N_DTS (SPA_HAVE_F64 ? 4 : 3)

static int64_t max_len(const dli_case *c)
{
    int64_t m = 0;
    for (int64_t b = 0; b < c->b; b++)
        m = c->len[b] > m ? c->len[b] : m;
    return m;
}

static void case_sum(dli_case *c)
{
    c->t = 0;
    for (int64_t b = 0; b < c->b; b++)
        c->t += c->sq[b];
}

static void case_draw(dli_case *c, int i, rng *r)
{
    static const int64_t groups[] = {1, 2, 3, 8, 16, 17, 32, 33, 64};
    static const int64_t pages[] = {1, 5, 16, 7, 64, 128};
    memset(c, 0, sizeof *c);
    c->dt = dts[i % N_DTS];
    const int64_t g = groups[rng_int(r, 0, 8)];
    c->n2 = rng_int(r, 1, 2);
    c->n1 = c->n2 * g;
    switch (rng_int(r, 0, 7)) {
    case 0: case 1: c->d = 64 * rng_int(r, 1, 3); break;
    case 2: c->d = 64 * rng_int(r, 4, 12); break; /* up to 768 */
    default: c->d = rng_int(r, 1, 160); break;
    }
    c->mode = rng_int(r, 0, 1) ? 3 : 0;
    const int64_t layout = rng_int(r, 0, 3); /* paged half the time, contiguous, TND */
    c->paged = layout < 2, c->tnd = layout == 3;
    c->page = pages[rng_int(r, 0, 5)];
    c->strided = rng_int(r, 0, 1) != 0;
    c->b = rng_int(r, 1, DLI_MAX_B);
    c->kv_null = layout == 2 && rng_int(r, 0, 2) == 0;
    c->sq_null = rng_int(r, 0, 4) == 0;
    const int64_t s_common = rng_int(r, 0, 3);
    for (int64_t b = 0; b < c->b; b++) {
        const bool before = !c->sq_null && rng_int(r, 0, 5) == 0; /* causal: S_b > L_b */
        switch (before ? 1 : rng_int(r, 0, 7)) {
        case 0: c->len[b] = 0; break;
        case 1: c->len[b] = rng_int(r, 1, 10); break;
        default: c->len[b] = rng_int(r, 1, TEST_SIZE(300, 64)); break;
        }
        if (c->kv_null)
            c->len[b] = c->len[0];
        if (c->sq_null)
            c->sq[b] = s_common;
        else if (before)
            c->sq[b] = c->len[b] + rng_int(r, 1, 3); /* the first queries see nothing */
        else
            c->sq[b] = rng_int(r, 0, 5);
    }
    case_sum(c);
    /* the reference's cost (T N1 D L multiply-adds) within a budget */
    const double budget = TEST_SIZE(3e6, 3e5);
    while ((double)c->t * (double)c->n1 * (double)c->d * (double)max_len(c) > budget && max_len(c) > 1)
        for (int64_t b = 0; b < c->b; b++)
            c->len[b] = (c->len[b] + 1) / 2;
    const int64_t lm = max_len(c);
    /* memory: the key's rows (the pages at most) and the queries, times D */
    const int64_t rows = c->paged ? (lm / c->page + 2) * c->page * c->b + 3 * c->page : c->b * (lm + 3);
    while ((rows * c->n2 + c->t * c->n1) * c->d > TEST_SIZE(1 << 21, 1 << 16) && c->d > 1)
        c->d = c->d > 64 ? c->d - 64 : (c->d + 1) / 2;
    switch (rng_int(r, 0, 4)) {
    case 0: c->kc = 1; break;
    case 1: c->kc = rng_int(r, 1, 8); break;
    case 2: c->kc = rng_int(r, 1, lm / 2 + 1); break; /* fewer than seen */
    case 3: c->kc = lm + rng_int(r, 1, 30); break;    /* more than seen */
    default: c->kc = rng_int(r, 1, TEST_SIZE(2048, 300)); break;
    }
    c->wdt = rng_int(r, 0, 1) ? c->dt : SPA_FLOAT32;
    const int64_t v = rng_int(r, 0, 2);
    c->values = v != 0;
    c->vdt = v == 1 ? c->dt : SPA_FLOAT32;
}

static void case_describe(const dli_case *c, char *buf, size_t n)
{
    int k = snprintf(buf, n,
                     "%s w %s vals %s N1 %lld N2 %lld D %lld K %lld mode %lld %s page %lld strided %d%s%s lens",
                     dtype_name(c->dt), dtype_name(c->wdt), c->values ? dtype_name(c->vdt) : "-",
                     (long long)c->n1, (long long)c->n2, (long long)c->d, (long long)c->kc, (long long)c->mode,
                     c->paged ? "paged" : c->tnd ? "TND" : "contiguous", (long long)c->page, c->strided,
                     c->sq_null ? " q_len NULL" : "", c->kv_null ? " kv_len NULL" : "");
    for (int64_t b = 0; b < c->b && k > 0 && (size_t)k < n; b++)
        k += snprintf(buf + k, n - (size_t)k, " %lld/%lld", (long long)c->sq[b], (long long)c->len[b]);
}

/* The tensors of a case; inputs random in [-1, 1), exact in their dtype. */
static void io_make(dli_io *io, const dli_case *c, rng *r)
{
    memset(io, 0, sizeof *io);
    int64_t need = 0, cols = 1;
    for (int64_t b = 0; b < c->b; b++) {
        const int64_t np = (c->len[b] + c->page - 1) / c->page;
        need += np;
        cols = np > cols ? np : cols;
    }
    io->lmax = max_len(c);
    if (c->paged) {
        io->pages = need + rng_int(r, 0, 3);
        io->table_cols = cols + rng_int(r, 0, 2);
        /* the pages in a random order, then the spare ones */
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
            const int64_t np = (c->len[b] + c->page - 1) / c->page;
            for (int64_t j = 0; j < io->table_cols; j++) {
                /* entries past the sequence are never read: out of range on purpose */
                const int64_t pg = j < np ? perm[used++] : (j % 2 ? -3 : io->pages + 1000);
                io->page_of[b * io->table_cols + j] = pg;
                tt_set_int(&io->table, b * io->table_cols + j, pg);
            }
        }
        free(perm);
        const int64_t kd[4] = {io->pages, c->page, c->n2, c->d};
        tt_make(&io->k, c->dt, 4, kd, c->strided, r);
    } else if (c->tnd) {
        for (int64_t b = 0; b < c->b; b++)
            io->start[b] = io->srows, io->srows += c->len[b];
        io->srows += rng_int(r, 0, 3);
        const int64_t kd[3] = {io->srows, c->n2, c->d};
        tt_make(&io->k, c->dt, 3, kd, c->strided, r);
    } else {
        io->srows = c->kv_null ? c->len[0] : io->lmax + rng_int(r, 0, 3);
        const int64_t kd[4] = {c->b, io->srows, c->n2, c->d};
        tt_make(&io->k, c->dt, 4, kd, c->strided, r);
    }
    tt_fill_random(&io->k, r, -1.0, 1.0);
    const int64_t qd[3] = {c->t, c->n1, c->d}, wd[2] = {c->t, c->n1}, od[3] = {c->t, c->n2, c->kc};
    tt_make(&io->q, c->dt, 3, qd, c->strided, r);
    tt_fill_random(&io->q, r, -1.0, 1.0);
    tt_make(&io->w, c->wdt, 2, wd, c->strided, r);
    tt_fill_random(&io->w, r, -1.0, 1.0);
    tt_make(&io->idx, SPA_INT32, 3, od, c->strided, r);
    tt_make(&io->val, c->vdt, 3, od, c->strided, r);
    io->sq.data = c->sq, io->sq.size = (uint64_t)c->b;
    io->len.data = c->len, io->len.size = (uint64_t)c->b;
}

static void io_free(dli_io *io)
{
    tt_free(&io->q), tt_free(&io->k), tt_free(&io->w), tt_free(&io->idx), tt_free(&io->val);
    if (io->page_of != NULL)
        tt_free(&io->table);
    free(io->page_of);
}

static spa_status phase1(const dli_case *c, dli_io *io, uint64_t *size, spa_executor *ex)
{
    return spa_dsa_lightning_indexer_get_workspace_size(
        &io->q.t, &io->k.t, &io->w.t, c->paged ? &io->table.t : NULL, c->sq_null ? NULL : &io->sq,
        c->kv_null ? NULL : &io->len, c->kc, c->mode, &io->idx.t, c->values ? &io->val.t : NULL, size, ex);
}

static spa_status run(const dli_case *c, dli_io *io, int runner, size_t skew)
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
    st = spa_dsa_lightning_indexer(ws.ptr, ws.size, &ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

/* The flat index of element e of key row p, head n, of batch b. */
static int64_t key_flat(const dli_case *c, const dli_io *io, int64_t b, int64_t p, int64_t n, int64_t e)
{
    if (c->tnd)
        return ((io->start[b] + p) * c->n2 + n) * c->d + e;
    const int64_t pg = c->paged ? io->page_of[b * io->table_cols + p / c->page] : b;
    const int64_t row = c->paged ? p % c->page : p;
    return ((pg * io->k.t.dims[1] + row) * c->n2 + n) * c->d + e;
}

/* The key as each sequence's logical rows [b][lmax][n2][d], read through
 * the test's copy of the table. */
static double *logical_rows(const dli_case *c, const dli_io *io)
{
    double *out = calloc((size_t)(c->b * io->lmax * c->n2 * c->d + 1), sizeof(double));
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t p = 0; p < c->len[b]; p++)
            for (int64_t n = 0; n < c->n2; n++)
                for (int64_t e = 0; e < c->d; e++)
                    out[((b * io->lmax + p) * c->n2 + n) * c->d + e] = tt_get(&io->k, key_flat(c, io, b, p, n, e));
    return out;
}

typedef struct dli_ref {
    int64_t *seen, *order;
    double *score, *mag;
} dli_ref;

static void ref_make(dli_ref *rf, const dli_case *c, const dli_io *io)
{
    double *q = tt_to_doubles(&io->q), *w = tt_to_doubles(&io->w), *k = logical_rows(c, io);
    const size_t nrow = (size_t)(c->t * c->n2 * io->lmax + 1);
    rf->seen = malloc(sizeof(int64_t) * (size_t)(c->t + 1));
    rf->order = malloc(sizeof(int64_t) * nrow);
    rf->score = malloc(sizeof(double) * nrow);
    rf->mag = malloc(sizeof(double) * nrow);
    const ref_dsa_li_problem p = {c->t, c->n1, c->n2, c->d, c->b, io->lmax, c->sq, c->len, c->mode == 3};
    ref_dsa_lightning_indexer(&p, q, k, w, rf->seen, rf->score, rf->mag, rf->order);
    free(q), free(w), free(k);
}

static void ref_free(dli_ref *rf)
{
    free(rf->seen), free(rf->order), free(rf->score), free(rf->mag);
}

/* The rounding of the values output to its dtype: relative, and half the
 * spacing of its subnormals. */
static void value_rounding(spa_dtype compute, spa_dtype vdt, double *rel, double *floor_)
{
    *rel = 0.0, *floor_ = 0.0;
    if (vdt == SPA_FLOAT16)
        *rel = 0x1p-10, *floor_ = 0x1p-24;
    else if (vdt == SPA_BFLOAT16)
        *rel = 0x1p-7, *floor_ = 0x1p-133;
    else if (vdt == SPA_FLOAT32 && compute == SPA_FLOAT64)
        *rel = 0x1p-23, *floor_ = 0x1p-149;
}

/* Each output row against the reference: min(K, seen) distinct seen keys,
 * the j-th of score within tolerance of the j-th largest reference score
 * (the kernel's scores are within tol of the reference's, so are its order
 * statistics), -1 after; the values output I of each index, non-increasing,
 * -inf after. exact: the scores are exact in every dtype, so the indices
 * are the reference's order exactly (NaNs too: among themselves by
 * ascending key, docs/dsa.md) and the values exactly I. */
static int64_t compare(const dli_case *c, const dli_io *io, bool exact)
{
    dli_ref rf;
    ref_make(&rf, c, io);
    const spa_dtype compute = (spa_dtype)io->q.t.dtype;
    const double eps = compute == SPA_FLOAT64 ? 0x1p-53 : 0x1p-24;
    const double tolf = 2.0 * (double)(c->d + c->n1 / c->n2 + 4) * eps;
    double vrel, vfloor;
    value_rounding(compute, (spa_dtype)io->val.t.dtype, &vrel, &vfloor);
    /* the values output in the compute precision: equal values by ascending key */
    const bool vexact = io->val.t.dtype == SPA_FLOAT64 || (compute != SPA_FLOAT64 && io->val.t.dtype == SPA_FLOAT32);
    int64_t *mark = calloc((size_t)(io->lmax + 1), sizeof(int64_t));
    int64_t bad = 0, stamp = 0;
#define BAD(...)                                      \
    do {                                              \
        if (bad++ < 5) {                              \
            fprintf(stderr, "  token %lld head %lld slot %lld: ", (long long)t, (long long)n, (long long)j); \
            fprintf(stderr, __VA_ARGS__);             \
        }                                             \
    } while (0)
    for (int64_t t = 0; t < c->t; t++)
        for (int64_t n = 0; n < c->n2; n++) {
            const int64_t ns = rf.seen[t], cnt = c->kc < ns ? c->kc : ns, base = (t * c->n2 + n) * io->lmax;
            const double *score = rf.score + base, *mag = rf.mag + base;
            const int64_t *order = rf.order + base;
            double rowmag = 0.0;
            for (int64_t s = 0; s < ns; s++)
                rowmag = mag[s] > rowmag ? mag[s] : rowmag;
            stamp++;
            double prev_v = INFINITY;
            int64_t prev_x = -1;
            for (int64_t j = 0; j < c->kc; j++) {
                const int64_t at = (t * c->n2 + n) * c->kc + j;
                const double xd = tt_get(&io->idx, at);
                const int64_t x = (int64_t)xd;
                const double v = c->values ? tt_get(&io->val, at) : 0.0;
                if (j >= cnt) {
                    if (x != -1)
                        BAD("index %lld past the %lld seen, want -1\n", (long long)x, (long long)cnt);
                    if (c->values && !(isinf(v) && v < 0))
                        BAD("value %.9g past the indices, want -inf\n", v);
                    continue;
                }
                if (x < 0 || x >= ns) {
                    BAD("index %lld not among the %lld seen keys\n", (long long)x, (long long)ns);
                    continue;
                }
                if (mark[x] == stamp) {
                    BAD("index %lld twice\n", (long long)x);
                    continue;
                }
                mark[x] = stamp;
                const double want = score[order[j]], have = score[x];
                if (exact || isnan(want) || isnan(have)) {
                    if (exact ? x != order[j] : (isnan(want) != 0) != (isnan(have) != 0))
                        BAD("key %lld (I %.9g) where the reference has key %lld (I %.9g)\n", (long long)x, have,
                            (long long)order[j], want);
                } else if (fabs(have - want) > 2.0 * tolf * rowmag) {
                    BAD("key %lld (I %.9g) where the reference has key %lld (I %.9g, tol %.3g)\n", (long long)x,
                        have, (long long)order[j], want, 2.0 * tolf * rowmag);
                }
                if (!c->values)
                    continue;
                if (isnan(have)) {
                    if (!isnan(v))
                        BAD("value %.9g of key %lld, want NaN\n", v, (long long)x);
                } else {
                    const double tol = tolf * mag[x] + vrel * fabs(have) + vfloor;
                    if (exact || isinf(have) ? v != have : !(fabs(v - have) <= tol))
                        BAD("value %.9g of key %lld, want %.9g (tol %.3g)\n", v, (long long)x, have, tol);
                    if (v > prev_v)
                        BAD("value %.9g after %.9g: not descending\n", v, prev_v);
                    if (vexact && v == prev_v && x < prev_x)
                        BAD("key %lld after key %lld of the same value %.9g\n", (long long)x, (long long)prev_x, v);
                    prev_v = v, prev_x = x;
                }
            }
        }
#undef BAD
    free(mark);
    ref_free(&rf);
    return bad;
}

static bool guards_ok(const dli_io *io)
{
    return tt_guard_ok(&io->q) && tt_guard_ok(&io->k) && tt_guard_ok(&io->w) && tt_guard_ok(&io->idx) &&
           tt_guard_ok(&io->val) && (io->page_of == NULL || tt_guard_ok(&io->table));
}

static void test_random(void)
{
    rng r = rng_seed(3101);
    for (int i = 0; i < TEST_COUNT(64, 24); i++) {
        dli_case c;
        case_draw(&c, i, &r);
        dli_io io;
        io_make(&io, &c, &r);
        char desc[400];
        case_describe(&c, desc, sizeof desc);
        const spa_status st = run(&c, &io, i % N_RUNNERS, (size_t)rng_int(&r, 0, 63));
        case_verdict("case", i, desc, st, st == SPA_OK ? compare(&c, &io, false) : -1, guards_ok(&io));
        io_free(&io);
    }
}

/* ---- inputs whose scores are exact in every dtype ---- */

/* Element flat = v, v exact in the tensor's dtype (small integers, halves). */
static void set_exact(ttensor *tt, int64_t flat, double v)
{
    const size_t es = tt->t.dtype == SPA_FLOAT64 ? 8u : tt->t.dtype == SPA_FLOAT32 ? 4u : 2u;
    unsigned char *p = (unsigned char *)tt->t.data + (size_t)tt_offset(tt, flat) * es;
    if (tt->t.dtype == SPA_FLOAT64) {
        memcpy(p, &v, 8);
    } else if (tt->t.dtype == SPA_FLOAT32) {
        const float f = (float)v;
        memcpy(p, &f, 4);
    } else if (tt->t.dtype == SPA_BFLOAT16) {
        const float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        const uint16_t h = (uint16_t)(u >> 16);
        memcpy(p, &h, 2);
    } else {
        uint16_t h = 0;
        if (v != 0.0) {
            int e;
            const double m = frexp(fabs(v), &e); /* |v| = m 2^e, m in [0.5, 1): normal f16 */
            h = (uint16_t)(((e + 14) << 10) | ((int)(m * 2048.0) - 1024));
        }
        if (signbit(v))
            h |= 0x8000;
        memcpy(p, &h, 2);
    }
    CU_ASSERT(tt_get(tt, flat) == v);
}

/* Small integers: q, k in {-1, 0, 1}, each key row one of a few per batch
 * and head (many equal scores; rows of negative dot products: many zero
 * scores), w in {-2, -1, -0.5, 0.5, 1, 2}: every score exact in f32 and in
 * the values output of any dtype (|I| <= 2 G D <= 256 here). */
static void fill_exact(const dli_case *c, dli_io *io, rng *r)
{
    static const double ws[6] = {-2, -1, -0.5, 0.5, 1, 2};
    for (int64_t i = 0; i < tt_numel(&io->q); i++)
        set_exact(&io->q, i, (double)rng_int(r, -1, 1));
    for (int64_t i = 0; i < tt_numel(&io->w); i++)
        set_exact(&io->w, i, ws[rng_int(r, 0, 5)]);
    /* every element of the key (pages not used too) */
    for (int64_t i = 0; i < tt_numel(&io->k); i++)
        set_exact(&io->k, i, 0.0);
    enum { PAL = 4 };
    double pal[PAL][16];
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t n = 0; n < c->n2; n++) {
            for (int p = 0; p < PAL; p++)
                for (int64_t e = 0; e < c->d; e++)
                    pal[p][e] = p == 0 ? 0.0 : (double)rng_int(r, -1, 1);
            for (int64_t s = 0; s < c->len[b]; s++) {
                const int p = (int)rng_int(r, 0, PAL + 1) % PAL; /* rows 0, 1: twice as often */
                for (int64_t e = 0; e < c->d; e++)
                    set_exact(&io->k, key_flat(c, io, b, s, n, e), pal[p][e]);
            }
        }
}

static void exact_case(dli_case *c, int i, spa_dtype dt, rng *r)
{
    memset(c, 0, sizeof *c);
    c->dt = c->wdt = c->vdt = dt;
    if (i % 3 == 1)
        c->wdt = SPA_FLOAT32;
    c->values = true;
    c->n2 = 1 + i % 2;
    c->n1 = c->n2 * (1 + i % 4);
    c->d = rng_int(r, 1, 8);
    c->mode = i % 2 ? 0 : 3;
    c->paged = i % 4 < 2, c->tnd = i % 4 == 3;
    c->page = i % 3 == 0 ? 16 : 5;
    c->strided = i % 3 == 2;
    c->b = 2;
    c->len[0] = TEST_SIZE(120, 40), c->len[1] = 37;
    c->sq[0] = 3, c->sq[1] = 2;
    case_sum(c);
    c->kc = i % 2 ? 9 : 200; /* fewer than seen; more */
}

/* Many equal scores and many zero ones (ReLU; w of either sign: zeros of
 * either sign, equal values): the indices are the reference's stable order
 * exactly, the values I exactly. */
static void test_exact_ties(void)
{
    rng r = rng_seed(3102);
    for (int i = 0; i < 6; i++)
        for (int k = 0; k < N_DTS; k++) {
            if (!TEST_THIN_DTYPE(i, k, N_DTS))
                continue;
            dli_case c;
            exact_case(&c, i, dts[k], &r);
            dli_io io;
            io_make(&io, &c, &r);
            fill_exact(&c, &io, &r);
            char desc[400];
            case_describe(&c, desc, sizeof desc);
            const spa_status st = run(&c, &io, (i + k) % N_RUNNERS, (size_t)i);
            case_verdict("ties", i * 4 + k, desc, st, st == SPA_OK ? compare(&c, &io, true) : -1, guards_ok(&io));
            io_free(&io);
        }
}

/* A NaN in a key row: that key's I is NaN, ranked after every number (its
 * value NaN), NaNs among themselves by ascending key; the numbers in their
 * exact order before them. */
static void test_nan_key(void)
{
    rng r = rng_seed(3103);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < N_DTS; k++) {
            if (!TEST_THIN_DTYPE(i, k, N_DTS))
                continue;
            dli_case c;
            exact_case(&c, i, dts[k], &r);
            c.kc = i == 3 ? 5 : 200; /* i = 3: fewer than the numbers, no NaN listed */
            dli_io io;
            io_make(&io, &c, &r);
            fill_exact(&c, &io, &r);
            /* batch 0: keys 11 and 2 of head 0 and (i odd) key 30 of the last
             * head; batch 1: key 0 */
            tt_set_nonfinite(&io.k, key_flat(&c, &io, 0, 11, 0, 0), NAN);
            tt_set_nonfinite(&io.k, key_flat(&c, &io, 0, 2, 0, c.d - 1), NAN);
            if (i % 2)
                tt_set_nonfinite(&io.k, key_flat(&c, &io, 0, 30, c.n2 - 1, 0), NAN);
            tt_set_nonfinite(&io.k, key_flat(&c, &io, 1, 0, 0, 0), NAN);
            char desc[400];
            case_describe(&c, desc, sizeof desc);
            const spa_status st = run(&c, &io, (i + k) % N_RUNNERS, 3);
            case_verdict("nan", i * 4 + k, desc, st, st == SPA_OK ? compare(&c, &io, true) : -1, guards_ok(&io));
            io_free(&io);
        }
}

/* An infinite key element: where every head's dot product is -inf (its
 * query element -1) ReLU makes it 0 and I is a number (0); where it is
 * +inf, I is +-inf or NaN (terms of both signs). Exact, as the reference. */
static void test_inf_key(void)
{
    rng r = rng_seed(3109);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < N_DTS; k++) {
            if (!TEST_THIN_DTYPE(i, k, N_DTS))
                continue;
            dli_case c;
            exact_case(&c, i, dts[k], &r);
            dli_io io;
            io_make(&io, &c, &r);
            fill_exact(&c, &io, &r);
            /* batch 1 (tokens sq[0] ..): key 5 of head 0 +inf at element 0, the
             * queries' element 0 -1: dot -inf, I 0 */
            tt_set_nonfinite(&io.k, key_flat(&c, &io, 1, 5, 0, 0), INFINITY);
            for (int64_t t = c.sq[0]; t < c.t; t++)
                for (int64_t h = 0; h < c.n1; h++)
                    set_exact(&io.q, (t * c.n1 + h) * c.d, -1.0);
            /* batch 0: key 7 of the last head +inf at element 0, the queries'
             * element 0 +1: dot +inf; key 9 -inf: dot -inf */
            tt_set_nonfinite(&io.k, key_flat(&c, &io, 0, 7, c.n2 - 1, 0), INFINITY);
            tt_set_nonfinite(&io.k, key_flat(&c, &io, 0, 9, c.n2 - 1, 0), -INFINITY);
            for (int64_t t = 0; t < c.sq[0]; t++)
                for (int64_t h = 0; h < c.n1; h++)
                    set_exact(&io.q, (t * c.n1 + h) * c.d, 1.0);
            char desc[400];
            case_describe(&c, desc, sizeof desc);
            const spa_status st = run(&c, &io, (i + k) % N_RUNNERS, 1);
            case_verdict("inf", i * 4 + k, desc, st, st == SPA_OK ? compare(&c, &io, true) : -1, guards_ok(&io));
            io_free(&io);
        }
}

/* Every runner writes the same bytes. */
static void test_deterministic(void)
{
    rng r = rng_seed(3104);
    for (int i = 0; i < N_DTS; i++) {
        dli_case c;
        case_draw(&c, i, &r);
        c.b = 2, c.n2 = 2, c.n1 = 16, c.d = i % 2 ? 128 : 71;
        c.len[0] = TEST_SIZE(400, 100), c.len[1] = TEST_SIZE(150, 50);
        c.sq[0] = TEST_SIZE(6, 3), c.sq[1] = 2, c.sq_null = false, c.kv_null = false;
        case_sum(&c);
        c.kc = 64, c.values = true, c.vdt = i % 2 ? SPA_FLOAT32 : c.dt;
        dli_io io;
        io_make(&io, &c, &r);
        CU_ASSERT_EQUAL(run(&c, &io, 0, 0), SPA_OK);
        CU_ASSERT_EQUAL(compare(&c, &io, false), 0);
        unsigned char *first = tt_snapshot(&io.idx), *firstv = tt_snapshot(&io.val);
        for (int k = 1; k < N_RUNNERS; k++) {
            tt_fill_canary(&io.idx), tt_fill_canary(&io.val);
            CU_ASSERT_EQUAL(run(&c, &io, k, (size_t)k), SPA_OK);
            CU_ASSERT(tt_same_bytes(&io.idx, first));
            CU_ASSERT(tt_same_bytes(&io.val, firstv));
        }
        free(first), free(firstv);
        io_free(&io);
    }
}

/* Sequences of thousands of keys (a unit's scores in several parts, more
 * parts than blocks, tokens in several rounds), K below and above the seen
 * count: against the reference, and the same bytes on every runner. */
static void test_long(void)
{
    rng r = rng_seed(3108);
    for (int i = 0; i < 2 * N_DTS; i++) {
        if (!TEST_THIN_DTYPE(i / N_DTS, i % N_DTS, N_DTS))
            continue;
        dli_case c;
        memset(&c, 0, sizeof c);
        c.dt = c.wdt = dts[i % N_DTS];
        c.values = true, c.vdt = i % 2 ? SPA_FLOAT32 : c.dt;
        c.strided = i % 3 == 0;
        if (i < N_DTS) { /* one batch, 17 tokens at the end of it */
            c.b = 1, c.n2 = 1, c.n1 = 2, c.d = 16, c.mode = 3;
            c.len[0] = TEST_SIZE(4500, 1100), c.sq[0] = TEST_SIZE(17, 3);
            c.kc = 2048, c.paged = i % 2 == 1, c.tnd = i == 2, c.page = 128;
        } else { /* two batches, every key seen */
            c.b = 2, c.n2 = 2, c.n1 = 6, c.d = 40, c.mode = 0;
            c.len[0] = TEST_SIZE(2100, 1100), c.len[1] = 1030, c.sq[0] = 1, c.sq[1] = 2;
            c.kc = 1500, c.paged = true, c.page = i % 2 ? 64 : 5;
        }
        case_sum(&c);
        dli_io io;
        io_make(&io, &c, &r);
        char desc[400];
        case_describe(&c, desc, sizeof desc);
        const spa_status st = run(&c, &io, 0, 0);
        case_verdict("long", i, desc, st, st == SPA_OK ? compare(&c, &io, false) : -1, guards_ok(&io));
        unsigned char *first = tt_snapshot(&io.idx), *firstv = tt_snapshot(&io.val);
        for (int k = 1; k < N_RUNNERS; k++) {
            tt_fill_canary(&io.idx), tt_fill_canary(&io.val);
            CU_ASSERT_EQUAL(run(&c, &io, k, (size_t)k), SPA_OK);
            CU_ASSERT(tt_same_bytes(&io.idx, first) && tt_same_bytes(&io.val, firstv));
        }
        free(first), free(firstv);
        io_free(&io);
    }
}

/* ---- refusals: one per rule, nothing written, a reason recorded ---- */

typedef struct dli_args {
    spa_tensor q, k, w, table, idx, val;
    spa_int_array sq, len;
    int64_t kc, mode;
    bool table_on, val_on, sq_on, len_on;
    int null_arg; /* 1 query, 2 key, 3 weights, 4 indices, 5 workspace_size, 6 executor */
} dli_args;

static spa_status call(const dli_args *a, uint64_t *size, spa_executor *ex)
{
    return spa_dsa_lightning_indexer_get_workspace_size(
        a->null_arg == 1 ? NULL : &a->q, a->null_arg == 2 ? NULL : &a->k, a->null_arg == 3 ? NULL : &a->w,
        a->table_on ? &a->table : NULL, a->sq_on ? &a->sq : NULL, a->len_on ? &a->len : NULL, a->kc, a->mode,
        a->null_arg == 4 ? NULL : &a->idx, a->val_on ? &a->val : NULL, a->null_arg == 5 ? NULL : size,
        a->null_arg == 6 ? NULL : ex);
}

static void expect_refusal(const dli_args *a, const dli_io *io, spa_status want, const char *what)
{
    uint64_t size = 12345;
    spa_executor ex, before;
    memset(&ex, 0x5A, sizeof ex);
    before = ex;
    unsigned char *si = tt_snapshot(&io->idx), *sv = tt_snapshot(&io->val);
    const spa_status st = call(a, &size, &ex);
    if (st != want)
        fprintf(stderr, "  dsa_lightning_indexer rule '%s': status %d, expected %d\n", what, (int)st, (int)want);
    CU_ASSERT_EQUAL(st, want);
    CU_ASSERT_EQUAL(size, 12345);
    CU_ASSERT(refusal_recorded(&ex, &before, st));
    CU_ASSERT(tt_same_bytes(&io->idx, si) && tt_same_bytes(&io->val, sv));
    free(si), free(sv);
}

static void expect_ok(const dli_args *a, const char *what)
{
    uint64_t size;
    spa_executor ex;
    const spa_status st = call(a, &size, &ex);
    if (st != SPA_OK)
        fprintf(stderr, "  dsa_lightning_indexer '%s' refused: %s\n", what, spa_executor_reason(&ex, NULL));
    CU_ASSERT_EQUAL(st, SPA_OK);
}

static void refusal_case(dli_case *c, int layout) /* 0 paged, 1 contiguous, 2 TND */
{
    memset(c, 0, sizeof *c);
    c->dt = c->wdt = c->vdt = SPA_FLOAT32;
    c->values = true;
    c->b = 2, c->n1 = 4, c->n2 = 2, c->d = 32, c->kc = 8, c->mode = 3;
    c->len[0] = 40, c->len[1] = 20, c->sq[0] = 2, c->sq[1] = 1;
    case_sum(c);
    c->paged = layout == 0, c->tnd = layout == 2, c->page = 16;
}

static dli_args args_of(const dli_case *c, const dli_io *io)
{
    dli_args a;
    memset(&a, 0, sizeof a);
    a.q = io->q.t, a.k = io->k.t, a.w = io->w.t, a.idx = io->idx.t, a.val = io->val.t;
    if (c->paged)
        a.table = io->table.t;
    a.sq = io->sq, a.len = io->len;
    a.kc = c->kc, a.mode = c->mode;
    a.table_on = c->paged, a.val_on = c->values, a.sq_on = !c->sq_null, a.len_on = !c->kv_null;
    return a;
}

static void test_refusals(void)
{
    rng r = rng_seed(3105);
    dli_case c;
    refusal_case(&c, 0);
    dli_io io;
    io_make(&io, &c, &r);
    const dli_args base = args_of(&c, &io);
    expect_ok(&base, "the paged base case");
    dli_args a;
    const int64_t sq_short[2] = {2, 2}, sq_neg[2] = {-1, 4}, one[1] = {3}, len_neg[2] = {40, -1};
    int64_t len_long[2] = {40, 20};
    len_long[0] = 16 * io.table_cols + 1;
    const dli_args *from = &base;
#define RULE(what, edit, want)                \
    do {                                      \
        a = *from;                            \
        edit;                                 \
        expect_refusal(&a, &io, want, what);  \
    } while (0)
    /* NULLs */
    RULE("query NULL", a.null_arg = 1, SPA_ERR_NULLPTR);
    RULE("key NULL", a.null_arg = 2, SPA_ERR_NULLPTR);
    RULE("weights NULL", a.null_arg = 3, SPA_ERR_NULLPTR);
    RULE("sparse_indices_out NULL", a.null_arg = 4, SPA_ERR_NULLPTR);
    RULE("workspace_size NULL", a.null_arg = 5, SPA_ERR_NULLPTR);
    RULE("executor NULL", a.null_arg = 6, SPA_ERR_NULLPTR);
    RULE("actual_seq_kv_len NULL with a paged key", a.len_on = false, SPA_ERR_NULLPTR);
    RULE("actual_seq_q_len data NULL", a.sq.data = NULL, SPA_ERR_NULLPTR);
    /* dtypes */
    RULE("query int32", (a.q.dtype = SPA_INT32, a.k.dtype = SPA_INT32), SPA_ERR_INVALID);
    RULE("query uint8", a.q.dtype = SPA_UINT8, SPA_ERR_INVALID);
    RULE("key f16 with an f32 query", a.k.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("key bf16 with an f32 query", a.k.dtype = SPA_BFLOAT16, SPA_ERR_INVALID);
    RULE("weights bf16 with an f32 query", a.w.dtype = SPA_BFLOAT16, SPA_ERR_INVALID);
    RULE("weights int32", a.w.dtype = SPA_INT32, SPA_ERR_INVALID);
    RULE("indices int64", a.idx.dtype = SPA_INT64, SPA_ERR_INVALID);
    RULE("indices f32", a.idx.dtype = SPA_FLOAT32, SPA_ERR_INVALID);
    RULE("values int32", a.val.dtype = SPA_INT32, SPA_ERR_INVALID);
    RULE("values f16 with an f32 query", a.val.dtype = SPA_FLOAT16, SPA_ERR_INVALID);
    RULE("block_table int64", a.table.dtype = SPA_INT64, SPA_ERR_INVALID);
    RULE("block_table f32", a.table.dtype = SPA_FLOAT32, SPA_ERR_INVALID);
    if (!SPA_HAVE_F64)
        RULE("float64 not built", (a.q.dtype = a.k.dtype = a.w.dtype = SPA_FLOAT64, a.val.dtype = SPA_FLOAT64),
             SPA_ERR_INVALID);
    /* ranks and shapes */
    RULE("query rank 2", a.q.rank = 2, SPA_ERR_INVALID);
    RULE("key rank 3", a.k.rank = 3, SPA_ERR_INVALID);
    RULE("weights rank 3", (a.w.rank = 3, a.w.dims[2] = 1, a.w.strides[2] = 1), SPA_ERR_INVALID);
    RULE("indices rank 2", a.idx.rank = 2, SPA_ERR_INVALID);
    RULE("block_table rank 1", a.table.rank = 1, SPA_ERR_INVALID);
    RULE("query negative stride", a.q.strides[1] = -1, SPA_ERR_INVALID);
    RULE("key D differs", a.k.dims[3] = 16, SPA_ERR_INVALID);
    RULE("query D differs", a.q.dims[2] = 16, SPA_ERR_INVALID);
    RULE("key heads differ from the indices'", a.k.dims[2] = 1, SPA_ERR_INVALID);
    RULE("weights tokens", a.w.dims[0] = 2, SPA_ERR_INVALID);
    RULE("weights heads", a.w.dims[1] = 3, SPA_ERR_INVALID);
    RULE("indices K differs from sparse_count", a.idx.dims[2] = 7, SPA_ERR_INVALID);
    RULE("indices heads", a.idx.dims[1] = 1, SPA_ERR_INVALID);
    RULE("indices tokens", a.idx.dims[0] = 2, SPA_ERR_INVALID);
    RULE("values K", a.val.dims[2] = 7, SPA_ERR_INVALID);
    RULE("values tokens", a.val.dims[0] = 2, SPA_ERR_INVALID);
    RULE("values heads", a.val.dims[1] = 1, SPA_ERR_INVALID);
    RULE("values rank 2", a.val.rank = 2, SPA_ERR_INVALID);
    RULE("indices reach an element twice", a.idx.strides[0] = 0, SPA_ERR_INVALID);
    RULE("block_table rows differ from B", a.table.dims[0] = 1, SPA_ERR_INVALID);
    RULE("N1 % N2", (a.q.dims[1] = 3, a.w.dims[1] = 3), SPA_ERR_INVALID);
    RULE("N1 > 256", (a.q.dims[1] = 258, a.w.dims[1] = 258), SPA_ERR_INVALID);
    RULE("N2 0", (a.k.dims[2] = 0, a.idx.dims[1] = 0, a.val.dims[1] = 0), SPA_ERR_INVALID);
    RULE("D 0", (a.q.dims[2] = 0, a.k.dims[3] = 0), SPA_ERR_INVALID);
    RULE("D 769", (a.q.dims[2] = 769, a.k.dims[3] = 769), SPA_ERR_INVALID);
    /* attributes */
    RULE("K 0", (a.kc = 0, a.idx.dims[2] = 0, a.val.dims[2] = 0), SPA_ERR_INVALID);
    RULE("K 65537", (a.kc = 65537, a.idx.dims[2] = 65537, a.val.dims[2] = 65537), SPA_ERR_INVALID);
    RULE("K negative", (a.kc = -1), SPA_ERR_INVALID);
    RULE("sparse_mode 1", a.mode = 1, SPA_ERR_INVALID);
    RULE("sparse_mode 2", a.mode = 2, SPA_ERR_INVALID);
    RULE("sparse_mode 4", a.mode = 4, SPA_ERR_INVALID);
    RULE("sparse_mode -1", a.mode = -1, SPA_ERR_INVALID);
    /* sequence arrays */
    RULE("sum of S_b != T", a.sq.data = sq_short, SPA_ERR_INVALID);
    RULE("S_b negative", a.sq.data = sq_neg, SPA_ERR_INVALID);
    RULE("actual_seq_q_len size != B", (a.sq.data = one, a.sq.size = 1), SPA_ERR_INVALID);
    RULE("actual_seq_kv_len size != B", a.len.size = 1, SPA_ERR_INVALID);
    RULE("T not a multiple of B (q_len NULL)", a.sq_on = false, SPA_ERR_INVALID);
    RULE("L_b negative", a.len.data = len_neg, SPA_ERR_INVALID);
    RULE("L_b beyond the block table", a.len.data = len_long, SPA_ERR_INVALID);
    /* block table entries of pages the sequences use (batch 0: 40 rows on
     * columns 0 .. 2; batch 1: 20 rows on columns 0, 1; table_cols >= 3) */
    {
        const int64_t at[6] = {0, 0, 1, 2, 0, io.table_cols + 1};
        const int64_t v[6] = {-1, io.pages, io.pages + 5, INT32_MAX, INT32_MIN, io.pages};
        static const char *what[6] = {"page negative", "page == pages", "batch 0's second page past the key",
                                      "batch 0's last page INT32_MAX", "page INT32_MIN",
                                      "batch 1's partly used last page past the key"};
        for (int m = 0; m < 6; m++) {
            tt_set_int(&io.table, at[m], v[m]);
            a = base;
            expect_refusal(&a, &io, SPA_ERR_INVALID, what[m]);
            tt_set_int(&io.table, at[m], io.page_of[at[m]]);
        }
        /* an entry past the pages batch 1 uses: never read, accepted */
        tt_set_int(&io.table, io.table_cols + 2, -7);
        expect_ok(&base, "an entry past the pages a sequence uses");
        tt_set_int(&io.table, io.table_cols + 2, io.pages + 1);
        expect_ok(&base, "an entry past the pages a sequence uses");
        tt_set_int(&io.table, io.table_cols + 2, io.page_of[io.table_cols + 2]);
    }
    /* the values output absent; a query of another dtype with its own outputs */
    a = base, a.val_on = false;
    expect_ok(&a, "no values output");
    io_free(&io);

    /* a contiguous key */
    refusal_case(&c, 1);
    io_make(&io, &c, &r);
    const dli_args cb = args_of(&c, &io);
    const int64_t len_past[2] = {io.srows + 1, 20};
    expect_ok(&cb, "the contiguous base case");
    a = cb, a.len_on = false;
    expect_ok(&a, "a contiguous key without actual_seq_kv_len");
    from = &cb;
    RULE("L_b beyond key dim 1", a.len.data = len_past, SPA_ERR_INVALID);
    RULE("key dim 0 != B", a.k.dims[0] = 1, SPA_ERR_INVALID);
    RULE("T not a multiple of B (both arrays NULL)", (a.sq_on = false, a.len_on = false), SPA_ERR_INVALID);
    RULE("key rank 5", (a.k.rank = 5, a.k.dims[4] = 1, a.k.strides[4] = 1), SPA_ERR_INVALID);
    io_free(&io);

    /* a TND key [T2, N2, D] */
    refusal_case(&c, 2);
    io_make(&io, &c, &r);
    const dli_args tb = args_of(&c, &io);
    const int64_t len_over[2] = {40, io.srows - 40 + 1};
    expect_ok(&tb, "the TND base case");
    from = &tb;
    RULE("actual_seq_kv_len NULL with a TND key", a.len_on = false, SPA_ERR_NULLPTR);
    RULE("TND: L_0 + L_1 beyond T2", a.len.data = len_over, SPA_ERR_INVALID);
    RULE("TND: L_b negative", a.len.data = len_neg, SPA_ERR_INVALID);
    RULE("TND key D differs", a.k.dims[2] = 16, SPA_ERR_INVALID);
    RULE("TND key heads differ from the indices'", a.k.dims[1] = 1, SPA_ERR_INVALID);
    {
        int32_t pages[8] = {0, 1, 2, 3, 0, 1, 2, 3};
        const int64_t td[2] = {2, 4};
        spa_tensor table;
        spa_tensor_init(&table, SPA_INT32, 2, td, pages);
        RULE("TND key with a block_table", (a.table_on = true, a.table = table), SPA_ERR_INVALID);
    }
#undef RULE
    io_free(&io);
}

/* Phase 2: a block table entry or a length made invalid between the phases,
 * a workspace too small, NULL, or over an output or input: refused, nothing
 * written. */
static void test_phase2(void)
{
    rng r = rng_seed(3106);
    dli_case c;
    refusal_case(&c, 0);
    dli_io io;
    io_make(&io, &c, &r);
    unsigned char *si = tt_snapshot(&io.idx), *sv = tt_snapshot(&io.val);
    uint64_t size;
    spa_executor ex;
    tws ws;

    CU_ASSERT_EQUAL(phase1(&c, &io, &size, &ex), SPA_OK);
    tt_set_int(&io.table, 1, -1); /* batch 0's page 1 */
    tws_make(&ws, size, 0);
    CU_ASSERT_EQUAL(spa_dsa_lightning_indexer(ws.ptr, ws.size, &ex, NULL), SPA_ERR_INVALID);
    tt_set_int(&io.table, 1, io.pages);
    CU_ASSERT_EQUAL(spa_dsa_lightning_indexer(ws.ptr, ws.size, &ex, test_runner(2)), SPA_ERR_INVALID);
    tt_set_int(&io.table, 1, io.page_of[1]);
    c.len[1] = 16 * io.table_cols + 3; /* the array read again in phase 2 */
    CU_ASSERT_EQUAL(spa_dsa_lightning_indexer(ws.ptr, ws.size, &ex, NULL), SPA_ERR_INVALID);
    c.len[1] = 20;
    CU_ASSERT(tt_same_bytes(&io.idx, si) && tt_same_bytes(&io.val, sv));
    if (size > 0) {
        CU_ASSERT_EQUAL(spa_dsa_lightning_indexer(ws.ptr, size - 1, &ex, NULL), SPA_ERR_WORKSPACE);
        CU_ASSERT_EQUAL(spa_dsa_lightning_indexer(NULL, size, &ex, NULL), SPA_ERR_NULLPTR);
        CU_ASSERT(tt_same_bytes(&io.idx, si) && tt_same_bytes(&io.val, sv));
    } else {
        fprintf(stderr, "  dsa_lightning_indexer: workspace 0 bytes, its phase-2 size checks skipped\n");
    }
    CU_ASSERT_EQUAL(spa_dsa_lightning_indexer(ws.ptr, ws.size, &ex, test_runner(1)), SPA_OK);
    CU_ASSERT_EQUAL(compare(&c, &io, false), 0);
    tws_free(&ws);

    /* the workspace over the indices, the values, the query: the tensor laid
     * at the workspace's start (a block large enough for both) */
    for (int o = 0; o < 3 && size > 0; o++) {
        ttensor *tt = o == 0 ? &io.idx : o == 1 ? &io.val : &io.q;
        const size_t span = tt->span;
        tws_make(&ws, size + span, 0);
        void *keep = tt->t.data;
        if (o == 2)
            memcpy(ws.ptr, keep, span);
        tt->t.data = ws.ptr;
        uint64_t size2 = 0;
        CU_ASSERT_EQUAL(phase1(&c, &io, &size2, &ex), SPA_OK);
        CU_ASSERT_EQUAL(size2, size);
        unsigned char *wsnap = malloc((size_t)size + span);
        memcpy(wsnap, ws.ptr, (size_t)size + span);
        tt_fill_canary(&io.idx), tt_fill_canary(&io.val);
        unsigned char *ci = tt_snapshot(&io.idx), *cv = tt_snapshot(&io.val);
        const spa_status st = spa_dsa_lightning_indexer(ws.ptr, size, &ex, NULL);
        if (st != SPA_ERR_INVALID)
            fprintf(stderr, "  workspace over the %s: status %d\n", o == 0 ? "indices" : o == 1 ? "values" : "query",
                    (int)st);
        CU_ASSERT_EQUAL(st, SPA_ERR_INVALID);
        CU_ASSERT(memcmp(wsnap, ws.ptr, (size_t)size + span) == 0); /* nothing written */
        CU_ASSERT(tt_same_bytes(&io.idx, ci) && tt_same_bytes(&io.val, cv));
        free(wsnap), free(ci), free(cv);
        tt->t.data = keep;
        tws_free(&ws);
    }
    free(si), free(sv);
    io_free(&io);
}

/* T = 0; L_b = 0 (every index -1, every value -inf); K = 1; causal queries
 * before the first key; K = 65536. */
static void test_edges(void)
{
    rng r = rng_seed(3107);
    for (int k = 0; k < N_DTS; k++) {
        dli_case c;
        dli_io io;
        /* T = 0: no query in either batch; q_len NULL with no query */
        refusal_case(&c, k % 3);
        c.dt = c.wdt = c.vdt = dts[k];
        c.sq[0] = c.sq[1] = 0;
        case_sum(&c);
        for (int v = 0; v < 2; v++) {
            c.sq_null = v == 1;
            io_make(&io, &c, &r);
            uint64_t size = 99;
            spa_executor ex;
            CU_ASSERT_EQUAL(phase1(&c, &io, &size, &ex), SPA_OK);
            tws ws;
            tws_make(&ws, size, 0);
            CU_ASSERT_EQUAL(spa_dsa_lightning_indexer(size ? ws.ptr : NULL, size, &ex, test_runner(k % N_RUNNERS)),
                            SPA_OK);
            CU_ASSERT(tws_guard_ok(&ws));
            tws_free(&ws);
            CU_ASSERT(guards_ok(&io));
            io_free(&io);
        }
        /* L_b = 0 in batch 0, both modes; K = 1 and larger */
        for (int m = 0; m < 4; m++) {
            refusal_case(&c, m % 2 == 0 ? 0 : m == 1 ? 1 : 2);
            c.dt = c.wdt = dts[k], c.vdt = m < 2 ? dts[k] : SPA_FLOAT32;
            c.len[0] = 0, c.sq[0] = 3, c.len[1] = 9, c.sq[1] = 2;
            c.mode = m % 2 ? 0 : 3;
            c.kc = m < 2 ? 1 : 12;
            case_sum(&c);
            io_make(&io, &c, &r);
            char desc[400];
            case_describe(&c, desc, sizeof desc);
            const spa_status st = run(&c, &io, (k + m) % N_RUNNERS, (size_t)m);
            case_verdict("L_b = 0", k * 4 + m, desc, st, st == SPA_OK ? compare(&c, &io, false) : -1,
                         guards_ok(&io));
            for (int64_t j = 0; st == SPA_OK && j < 3 * c.n2 * c.kc; j++) {
                CU_ASSERT_EQUAL(tt_get(&io.idx, j), -1.0);
                CU_ASSERT(tt_get(&io.val, j) == -INFINITY);
            }
            io_free(&io);
        }
        /* causal, S_b > L_b: queries 0, 1 see nothing, 2 sees key 0, 3 keys 0, 1 */
        refusal_case(&c, k % 2 == 1 ? 0 : k == 0 ? 1 : 2);
        c.dt = c.wdt = c.vdt = dts[k];
        c.b = 1, c.len[0] = 2, c.sq[0] = 4, c.kc = 3;
        case_sum(&c);
        io_make(&io, &c, &r);
        CU_ASSERT_EQUAL(run(&c, &io, k % N_RUNNERS, 0), SPA_OK);
        CU_ASSERT_EQUAL(compare(&c, &io, false), 0);
        for (int64_t n = 0; n < c.n2; n++) {
            CU_ASSERT_EQUAL(tt_get(&io.idx, (0 * c.n2 + n) * 3), -1.0);
            CU_ASSERT_EQUAL(tt_get(&io.idx, (1 * c.n2 + n) * 3), -1.0);
            CU_ASSERT_EQUAL(tt_get(&io.idx, (2 * c.n2 + n) * 3), 0.0);
            CU_ASSERT_EQUAL(tt_get(&io.idx, (2 * c.n2 + n) * 3 + 1), -1.0);
            CU_ASSERT_EQUAL(tt_get(&io.idx, (3 * c.n2 + n) * 3 + 2), -1.0);
        }
        io_free(&io);
    }
    /* the largest K (on a board: 4096, its memory) */
    dli_case c;
    refusal_case(&c, 0);
    c.b = 1, c.n1 = 2, c.n2 = 1, c.len[0] = 70, c.sq[0] = 1;
    c.kc = SPA_TEST_SMALL ? 4096 : 65536;
    case_sum(&c);
    dli_io io;
    io_make(&io, &c, &r);
    CU_ASSERT_EQUAL(run(&c, &io, 3, 5), SPA_OK);
    CU_ASSERT_EQUAL(compare(&c, &io, false), 0);
    CU_ASSERT(guards_ok(&io));
    io_free(&io);
}

void suite_dsa_lightning_indexer(void)
{
    CU_pSuite s = CU_add_suite("dsa_lightning_indexer", NULL, NULL);
    CU_add_test(s, "random shapes, paged, contiguous and TND keys, all dtypes", test_random);
    CU_add_test(s, "exact ties and zero scores: the stable order", test_exact_ties);
    CU_add_test(s, "NaN keys after every number", test_nan_key);
    CU_add_test(s, "infinite keys: ReLU of -inf, +-inf and NaN scores", test_inf_key);
    CU_add_test(s, "bit-identical across runners", test_deterministic);
    CU_add_test(s, "thousands of keys: several parts and rounds", test_long);
    CU_add_test(s, "refusals, block tables outside the key", test_refusals);
    CU_add_test(s, "phase 2: changed arguments, workspace", test_phase2);
    CU_add_test(s, "edges: T = 0, L_b = 0, K = 1, causal before the keys, K = 65536", test_edges);
}
