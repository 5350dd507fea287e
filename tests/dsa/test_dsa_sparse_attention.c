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

#include "ref/ref_dsa_sparse_attention.h"
#include "ref/ref_nsa_select.h"
#include "spa_dtypes.h"
#include "spattn/dsa.h"
#include "util.h"

enum { DSA_MAX_B = 4 };

typedef struct dsa_case {
    spa_dtype dt;
    int64_t b, n1, n2, d, dr, dv, kc, bs, page, t, mode; /* dr 0: no rope part; bs: sparse_block_size */
    int64_t sq[DSA_MAX_B], len[DSA_MAX_B];
    bool paged, tnd, strided, sq_null, kv_null; /* kv_null: [B, S, N2, D], every L_b = S */
    bool absorb;             /* value: the key itself (Dv = D) or a view of its first Dv elements */
    bool want_max, want_sum; /* the softmax outputs given */
    double scale;
} dsa_case;

typedef struct dsa_io {
    ttensor q, qr, k, kr, v, idx, table, o, mx, sm;
    spa_tensor vview;                /* absorb with Dv < D: key's first Dv elements */
    int64_t pages, table_cols, lmax; /* lmax: the longest sequence */
    int64_t srows;                   /* contiguous key: dim 1; TND: T2 */
    int64_t rows_per;                /* rows per page (paged) or per batch (contiguous) */
    int64_t start[DSA_MAX_B];        /* TND: batch b's first row */
    int64_t *page_of;                /* [b][table_cols]: the test's own copy of the table */
    spa_int_array sq, len;
} dsa_io;

static const spa_dtype dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};
#define N_DTS (SPA_HAVE_F64 ? 4 : 3)

static int64_t max_len(const dsa_case *c)
{
    int64_t m = 0;
    for (int64_t b = 0; b < c->b; b++)
        m = c->len[b] > m ? c->len[b] : m;
    return m;
}

static void case_sum(dsa_case *c)
{
    c->t = 0;
    for (int64_t b = 0; b < c->b; b++)
        c->t += c->sq[b];
}

static spa_dtype stat_dtype(spa_dtype dt)
{
    return dt == SPA_FLOAT64 ? SPA_FLOAT64 : SPA_FLOAT32;
}

static double draw_scale(int64_t d, int64_t dr, rng *r)
{
    const double s = (0.25 + 1.75 * rng_unit(r)) / sqrt((double)(d + dr));
    return rng_int(r, 0, 7) == 0 ? -s : s; /* the definition puts no sign on it */
}

/* The reference's work per case (T N1 rows (D + Dr + Dv) multiply-adds, a
 * unit's rows at most K min(S, L)) and the tensors' elements, within the
 * budgets of the case set: K, then S, then the head dims give way. */
static void fit_budget(dsa_case *c)
{
    const double work = TEST_SIZE(1.2e6, 2e5);
    const int64_t mem = TEST_SIZE(1 << 19, 1 << 16);
    for (;;) {
        const int64_t lm = max_len(c), per = c->bs < lm ? c->bs : lm;
        const double w = (double)c->t * (double)c->n1 * (double)c->kc * (double)(per > 0 ? per : 1) *
                         (double)(c->d + c->dr + c->dv);
        const int64_t rows = c->paged ? (lm / c->page + 2) * c->page * c->b + 3 * c->page : c->b * (lm + 3);
        const int64_t m = (rows * c->n2 + c->t * c->n1) * (c->d + c->dr + c->dv);
        if (w <= work && m <= mem)
            return;
        if (w > work && c->kc > 1)
            c->kc = (c->kc + 1) / 2;
        else if (w > work && c->bs > 1)
            c->bs = (c->bs + 1) / 2;
        else if (c->d + c->dr + c->dv > 3) {
            c->d = c->d > 1 ? (c->d + 1) / 2 : 1;
            c->dr /= 2;
            c->dv = c->dv > 1 ? (c->dv + 1) / 2 : 1;
            if (c->absorb && c->dv > c->d)
                c->dv = c->d;
        } else {
            return;
        }
    }
}

static void case_draw(dsa_case *c, int i, rng *r)
{
    static const int64_t groups[] = {1, 2, 3, 8, 16, 17, 32, 33, 64, 128};
    static const int64_t pages[] = {1, 3, 5, 16, 7, 64, 128};
    static const int64_t blocks[] = {1, 2, 4, 16, 64, 3, 5};
    memset(c, 0, sizeof *c);
    c->dt = dts[i % N_DTS];
    const int64_t g = groups[rng_int(r, 0, 9)];
    c->n2 = g > 64 ? 1 : rng_int(r, 1, 2); /* N1 <= 128 */
    c->n1 = c->n2 * g;
    switch (rng_int(r, 0, 7)) {
    case 0: c->d = 64 * rng_int(r, 4, 11), c->dr = 64; break; /* up to 768 with the rope part */
    case 1: c->d = 64 * rng_int(r, 1, 3), c->dr = rng_int(r, 0, 1) ? 64 : 0; break;
    default: c->d = rng_int(r, 1, 80), c->dr = rng_int(r, 0, 1) ? rng_int(r, 1, 64) : 0; break;
    }
    c->absorb = rng_int(r, 0, 3) == 0;
    if (c->absorb)
        c->dv = rng_int(r, 0, 1) ? c->d : rng_int(r, 1, c->d);
    else
        c->dv = rng_int(r, 0, 2) == 0 ? c->d : rng_int(r, 0, 1) ? rng_int(r, 1, 100) : 64 * rng_int(r, 1, 2);
    c->bs = blocks[rng_int(r, 0, 6)];
    c->mode = rng_int(r, 0, 1) ? 3 : 0;
    const int64_t layout = rng_int(r, 0, 3); /* paged half the time, contiguous, TND */
    c->paged = layout < 2, c->tnd = layout == 3;
    c->page = pages[rng_int(r, 0, 6)];
    c->strided = rng_int(r, 0, 1) != 0;
    c->b = rng_int(r, 1, DSA_MAX_B);
    c->kv_null = layout == 2 && rng_int(r, 0, 2) == 0;
    c->sq_null = rng_int(r, 0, 4) == 0;
    const int64_t s_common = rng_int(r, 0, 3);
    for (int64_t b = 0; b < c->b; b++) {
        const bool before = !c->sq_null && rng_int(r, 0, 5) == 0; /* S_b > L_b */
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
            c->sq[b] = c->len[b] + rng_int(r, 1, 3); /* causal: the first queries see nothing */
        else
            c->sq[b] = rng_int(r, 0, 4);
    }
    case_sum(c);
    const int64_t nblk = (max_len(c) + c->bs - 1) / c->bs;
    switch (rng_int(r, 0, 4)) {
    case 0: c->kc = 1; break;
    case 1: c->kc = rng_int(r, 1, 8); break;
    case 2: c->kc = rng_int(r, 1, nblk + 1); break;    /* about as many as the blocks */
    case 3: c->kc = nblk + rng_int(r, 1, 20); break;   /* more than the blocks: duplicates, -1 */
    default: c->kc = rng_int(r, 1, TEST_SIZE(256, 48)); break;
    }
    c->want_max = rng_int(r, 0, 2) != 0;
    c->want_sum = rng_int(r, 0, 2) != 0;
    fit_budget(c);
    c->scale = draw_scale(c->d, c->dr, r);
}

static void case_describe(const dsa_case *c, char *buf, size_t n)
{
    int k = snprintf(buf, n,
                     "%s N1 %lld N2 %lld D %lld Dr %lld Dv %lld%s S %lld K %lld mode %lld %s page %lld strided %d"
                     " max %d sum %d scale %.4g%s%s lens",
                     dtype_name(c->dt), (long long)c->n1, (long long)c->n2, (long long)c->d, (long long)c->dr,
                     (long long)c->dv, c->absorb ? " absorb" : "", (long long)c->bs, (long long)c->kc,
                     (long long)c->mode, c->paged ? "paged" : c->tnd ? "TND" : "contiguous", (long long)c->page,
                     c->strided, c->want_max, c->want_sum, c->scale, c->sq_null ? " q_len NULL" : "",
                     c->kv_null ? " kv_len NULL" : "");
    for (int64_t b = 0; b < c->b && k > 0 && (size_t)k < n; b++)
        k += snprintf(buf + k, n - (size_t)k, " %lld/%lld", (long long)c->sq[b], (long long)c->len[b]);
}

/* The last token query i of batch b sees (negative: none). */
static int64_t last_seen(const dsa_case *c, int64_t b, int64_t i)
{
    return c->mode == 3 ? c->len[b] - c->sq[b] + i : c->len[b] - 1;
}

/* The slots of token t (query i of batch b), key head n: blocks up to the
 * last token it sees, the last block (past its position, or partly past
 * L_b), any block, -1 anywhere, duplicates of earlier slots. */
static void draw_slots(dsa_io *io, const dsa_case *c, int64_t b, int64_t i, int64_t t, int64_t n, rng *r)
{
    const int64_t nblk = (c->len[b] + c->bs - 1) / c->bs, last = last_seen(c, b, i);
    const int64_t cur = last < 0 ? nblk - 1 : last / c->bs, row = (t * c->n2 + n) * c->kc;
    for (int64_t j = 0; j < c->kc; j++) {
        int64_t x;
        switch (nblk == 0 ? 0 : rng_int(r, 0, 9)) {
        case 0: x = -1; break;
        case 1: x = j > 0 ? (int64_t)tt_get(&io->idx, row + rng_int(r, 0, j - 1)) : -1; break;
        case 2: x = nblk - 1; break;
        case 3: x = rng_int(r, 0, nblk - 1); break;
        default: x = rng_int(r, 0, cur); break;
        }
        tt_set_int(&io->idx, row + j, x);
    }
}

static void draw_indices(dsa_io *io, const dsa_case *c, rng *r)
{
    for (int64_t b = 0, t = 0; b < c->b; b++)
        for (int64_t i = 0; i < c->sq[b]; i++, t++)
            for (int64_t n = 0; n < c->n2; n++)
                draw_slots(io, c, b, i, t, n, r);
}

/* A key-shaped tensor: the key's leading dims, then N2 and dim; random in
 * [-1, 1), exact in its dtype. */
static void make_rows(ttensor *tt, spa_dtype dt, const int64_t *lead, int32_t nlead, int64_t n2, int64_t dim,
                      bool strided, rng *r)
{
    int64_t dims[4];
    for (int32_t k = 0; k < nlead; k++)
        dims[k] = lead[k];
    dims[nlead] = n2, dims[nlead + 1] = dim;
    tt_make(tt, dt, nlead + 2, dims, strided, r);
    tt_fill_random(tt, r, -1.0, 1.0);
}

/* The block table: each batch's pages in a random order, then spare pages;
 * entries past a sequence out of range on purpose (never read). */
static void make_table(dsa_io *io, const dsa_case *c, rng *r)
{
    int64_t need = 0, cols = 1;
    for (int64_t b = 0; b < c->b; b++) {
        const int64_t np = (c->len[b] + c->page - 1) / c->page;
        need += np;
        cols = np > cols ? np : cols;
    }
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
        const int64_t np = (c->len[b] + c->page - 1) / c->page;
        for (int64_t j = 0; j < io->table_cols; j++) {
            const int64_t pg = j < np ? perm[used++] : (j % 2 ? -3 : io->pages + 1000);
            io->page_of[b * io->table_cols + j] = pg;
            tt_set_int(&io->table, b * io->table_cols + j, pg);
        }
    }
    free(perm);
}

static void io_make(dsa_io *io, const dsa_case *c, rng *r)
{
    memset(io, 0, sizeof *io);
    io->lmax = max_len(c);
    int64_t lead[2];
    int32_t nlead = 2;
    if (c->paged) {
        make_table(io, c, r);
        lead[0] = io->pages, lead[1] = c->page, io->rows_per = c->page;
    } else if (c->tnd) {
        for (int64_t b = 0; b < c->b; b++)
            io->start[b] = io->srows, io->srows += c->len[b];
        io->srows += rng_int(r, 0, 3);
        lead[0] = io->srows, nlead = 1;
    } else {
        io->srows = c->kv_null ? c->len[0] : io->lmax + rng_int(r, 0, 3);
        lead[0] = c->b, lead[1] = io->srows, io->rows_per = io->srows;
    }
    make_rows(&io->k, c->dt, lead, nlead, c->n2, c->d, c->strided, r);
    if (c->dr > 0)
        make_rows(&io->kr, c->dt, lead, nlead, c->n2, c->dr, c->strided, r);
    if (!c->absorb)
        make_rows(&io->v, c->dt, lead, nlead, c->n2, c->dv, c->strided, r);
    io->vview = io->k.t;
    io->vview.dims[io->k.t.rank - 1] = c->dv;
    const int64_t qd[3] = {c->t, c->n1, c->d}, qrd[3] = {c->t, c->n1, c->dr}, od[3] = {c->t, c->n1, c->dv};
    const int64_t id[3] = {c->t, c->n2, c->kc}, sd[3] = {c->n2, c->t, c->n1 / c->n2};
    tt_make(&io->q, c->dt, 3, qd, c->strided, r);
    tt_fill_random(&io->q, r, -1.0, 1.0);
    if (c->dr > 0) {
        tt_make(&io->qr, c->dt, 3, qrd, c->strided, r);
        tt_fill_random(&io->qr, r, -1.0, 1.0);
    }
    tt_make(&io->o, c->dt, 3, od, c->strided, r);
    tt_make(&io->idx, SPA_INT32, 3, id, c->strided, r);
    tt_make(&io->mx, stat_dtype(c->dt), 3, sd, c->strided, r);
    tt_make(&io->sm, stat_dtype(c->dt), 3, sd, c->strided, r);
    draw_indices(io, c, r);
    io->sq.data = c->sq, io->sq.size = (uint64_t)c->b;
    io->len.data = c->len, io->len.size = (uint64_t)c->b;
}

static void io_free(dsa_io *io)
{
    tt_free(&io->q), tt_free(&io->qr), tt_free(&io->k), tt_free(&io->kr), tt_free(&io->v);
    tt_free(&io->idx), tt_free(&io->o), tt_free(&io->mx), tt_free(&io->sm);
    if (io->page_of != NULL)
        tt_free(&io->table);
    free(io->page_of);
    io->page_of = NULL;
}

/* What the call gets as value: a tensor of its own, the key's very
 * descriptor (Dv = D), or the view of its first Dv elements. */
static const spa_tensor *value_of(const dsa_case *c, const dsa_io *io)
{
    if (!c->absorb)
        return &io->v.t;
    return c->dv == c->d ? &io->k.t : &io->vview;
}

static spa_status phase1(const dsa_case *c, dsa_io *io, uint64_t *size, spa_executor *ex)
{
    return spa_dsa_sparse_attention_get_workspace_size(
        &io->q.t, c->dr > 0 ? &io->qr.t : NULL, &io->k.t, c->dr > 0 ? &io->kr.t : NULL, value_of(c, io),
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

/* The flat index of element e of row p of batch b, head n, in a key-shaped
 * tensor whose last dim is dim. */
static int64_t row_flat(const dsa_case *c, const dsa_io *io, int64_t b, int64_t p, int64_t n, int64_t dim, int64_t e)
{
    if (c->tnd)
        return ((io->start[b] + p) * c->n2 + n) * dim + e;
    const int64_t pg = c->paged ? io->page_of[b * io->table_cols + p / c->page] : b;
    const int64_t row = c->paged ? p % c->page : p;
    return ((pg * io->rows_per + row) * c->n2 + n) * dim + e;
}

enum { PART_KEY, PART_ROPE, PART_VALUE };

/* Element e of the key, its rope part or the value (absorb: the key's). */
static double part_at(const dsa_case *c, const dsa_io *io, int part, int64_t b, int64_t p, int64_t n, int64_t e)
{
    if (part == PART_ROPE)
        return tt_get(&io->kr, row_flat(c, io, b, p, n, c->dr, e));
    if (part == PART_VALUE && !c->absorb)
        return tt_get(&io->v, row_flat(c, io, b, p, n, c->dv, e));
    return tt_get(&io->k, row_flat(c, io, b, p, n, c->d, e));
}

/* A part as each sequence's logical rows [b][lmax][n2][dim], read through
 * the test's copy of the table. */
static double *logical_rows(const dsa_case *c, const dsa_io *io, int part)
{
    const int64_t dim = part == PART_KEY ? c->d : part == PART_ROPE ? c->dr : c->dv;
    double *out = calloc((size_t)(c->b * io->lmax * c->n2 * dim + 1), sizeof(double));
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t p = 0; p < c->len[b]; p++)
            for (int64_t n = 0; n < c->n2; n++)
                for (int64_t e = 0; e < dim; e++)
                    out[((b * io->lmax + p) * c->n2 + n) * dim + e] = part_at(c, io, part, b, p, n, e);
    return out;
}

static int32_t *indices_of(const dsa_case *c, const dsa_io *io)
{
    const int64_t n = c->t * c->n2 * c->kc;
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++)
        idx[i] = (int32_t)tt_get(&io->idx, i);
    return idx;
}

static ref_dsa_sa_problem problem_of(const dsa_case *c, const dsa_io *io, const int32_t *idx)
{
    const int32_t dt = io->q.t.dtype; /* the dtype built (f32 where a half one is not) */
    const ref_dsa_sa_problem p = {
        .t = c->t, .n1 = c->n1, .n2 = c->n2, .d = c->d, .dr = c->dr, .dv = c->dv, .kc = c->kc, .bs = c->bs,
        .batches = c->b, .lmax = io->lmax, .sq = c->sq, .len = c->len, .idx = idx, .scale = c->scale,
        .causal = c->mode == 3,
        .round = dt == SPA_FLOAT16 ? REF_ROUND_F16 : dt == SPA_BFLOAT16 ? REF_ROUND_BF16 : REF_ROUND_NONE};
    return p;
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
    double *k = logical_rows(c, io, PART_KEY), *kr = c->dr > 0 ? logical_rows(c, io, PART_ROPE) : NULL;
    double *v = logical_rows(c, io, PART_VALUE);
    int32_t *idx = indices_of(c, io);
    const int64_t no = c->t * c->n1 * c->dv, ns = c->t * c->n1;
    double *o = malloc(sizeof(double) * (size_t)(no + 1)), *omag = malloc(sizeof(double) * (size_t)(no + 1));
    double *mx = malloc(sizeof(double) * (size_t)(ns + 1)), *mxmag = malloc(sizeof(double) * (size_t)(ns + 1));
    double *sm = malloc(sizeof(double) * (size_t)(ns + 1)), *smmag = malloc(sizeof(double) * (size_t)(ns + 1));
    const ref_dsa_sa_problem p = problem_of(c, io, idx);
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
    case_describe(c, desc, sizeof desc);
    const spa_status st = run(c, io, runner, skew);
    case_verdict(label, i, desc, st, st == SPA_OK ? compare(c, io) : -1, guards_ok(c, io));
}

static void test_random(void)
{
    rng r = rng_seed(3201);
    for (int i = 0; i < TEST_COUNT(48, 16); i++) {
        dsa_case c;
        case_draw(&c, i, &r);
        dsa_io io;
        io_make(&io, &c, &r);
        check_case("case", i, &c, &io, i % N_RUNNERS, (size_t)rng_int(&r, 0, 63));
        io_free(&io);
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
    for (int i = 0; i < TEST_COUNT(N_DTS, 2); i++) {
        dsa_case c;
        case_draw(&c, i, &r);
        c.b = 2, c.n2 = TEST_SIZE(6, 2), c.n1 = c.n2 * (1 + i % 2), c.d = 48, c.dr = i % 2 ? 16 : 0, c.dv = 32;
        c.absorb = i % 2 == 1, c.bs = i < 2 ? 1 : 16;
        c.len[0] = TEST_SIZE(200, 100), c.len[1] = TEST_SIZE(90, 40);
        c.sq[0] = 2, c.sq[1] = 1, c.sq_null = c.kv_null = false;
        c.mode = 3, c.want_max = c.want_sum = true;
        case_sum(&c);
        c.kc = 1024 / c.bs;
        c.scale = draw_scale(c.d, c.dr, &r);
        dsa_io io;
        io_make(&io, &c, &r);
        check_case("deterministic", i, &c, &io, 0, 0);
        same_on_every_runner(&c, &io);
        io_free(&io);
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
    case_sum(c);
    c->mode = s->two ? 3 : 0;
    c->strided = s->two;
    c->want_max = c->want_sum = true;
    c->scale = draw_scale(c->d, c->dr, r);
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
        io_make(&io, &c, &r);
        /* slots K / 4 .. K / 2 - 1 all -1: a part of their own, or two, select nothing */
        for (int64_t row = 0; row < c.t * c.n2; row++)
            for (int64_t j = c.kc / 4; j < c.kc / 2; j++)
                tt_set_int(&io.idx, row * c.kc + j, -1);
        check_case("decode", i, &c, &io, 0, 0);
        same_on_every_runner(&c, &io);
        io_free(&io);
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
    case_sum(c);
    c->mode = 3, c->want_max = c->want_sum = true;
    c->scale = draw_scale(c->d, c->dr, r);
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
    tt_set_nonfinite(&io->k, row_flat(c, io, 0, 1, 0, c->d, c->d / 2), NAN);
    tt_set_nonfinite(vt, row_flat(c, io, 0, 20, 1, vd, 2), NAN);
    tt_set_nonfinite(vt, row_flat(c, io, 0, 20, 1, vd, 4), INFINITY);
    /* token 1 (last seen 35) selects row 36, which only token 2 sees */
    tt_set_int(&io->idx, (1 * c->n2 + 1) * c->kc + 3, late);
    for (int64_t n = 0; n < c->n2; n++) {
        unselect(io, c, 2, n, late);
        tt_set_nonfinite(&io->k, row_flat(c, io, 0, 36, n, c->d, 0), INFINITY);
        tt_set_nonfinite(vt, row_flat(c, io, 0, 36, n, vd, 1), INFINITY);
        tt_set_nonfinite(vt, row_flat(c, io, 0, 36, n, vd, 3), NAN);
        if (c->dr > 0)
            tt_set_nonfinite(&io->kr, row_flat(c, io, 0, 36, n, c->dr, 0), NAN);
    }
    /* batch 1 (tokens 3, 4): block 1 selected by nobody */
    for (int64_t t = 3; t < 5; t++)
        for (int64_t n = 0; n < c->n2; n++)
            unselect(io, c, t, n, 1);
    tt_set_nonfinite(&io->k, row_flat(c, io, 1, c->bs, 0, c->d, 0), INFINITY);
    tt_set_nonfinite(vt, row_flat(c, io, 1, c->bs + 1, c->n2 - 1, vd, 0), INFINITY);
    /* past L_b: the rest of batch 0's last page, the rows after batch 0
     * (contiguous) or after batch 1 (TND) */
    const int64_t pb = c->tnd ? 1 : 0;
    const int64_t room = c->paged ? (c->len[0] + c->page - 1) / c->page * c->page
                         : c->tnd ? io->srows - io->start[1]
                                  : io->srows;
    for (int64_t p = c->len[pb]; p < room; p++)
        for (int64_t n = 0; n < c->n2; n++) {
            tt_set_nonfinite(&io->k, row_flat(c, io, pb, p, n, c->d, 0), p % 2 ? NAN : INFINITY);
            tt_set_nonfinite(vt, row_flat(c, io, pb, p, n, vd, vd - 1), INFINITY);
        }
}

static void test_nonfinite(void)
{
    rng r = rng_seed(3204);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < N_DTS; k++) {
            if (!TEST_THIN_DTYPE(i, k, N_DTS))
                continue;
            dsa_case c;
            nonfinite_case(&c, i, dts[k], &r);
            dsa_io io;
            io_make(&io, &c, &r);
            poison(&c, &io);
            char label[32];
            snprintf(label, sizeof label, "nonfinite %s", dtype_name(dts[k]));
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
            io_free(&io);
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

/* f32, two batches (40 and 20 keys, 2 and 1 queries), N1 4, N2 2, D 32 +
 * Dr 16, Dv 24, S 4, K 6, causal; layout 0 paged (16-row pages), 1
 * contiguous, 2 TND. */
static void refusal_case(dsa_case *c, int layout)
{
    memset(c, 0, sizeof *c);
    c->dt = SPA_FLOAT32;
    c->b = 2, c->n1 = 4, c->n2 = 2, c->d = 32, c->dr = 16, c->dv = 24, c->bs = 4, c->kc = 6, c->mode = 3;
    c->len[0] = 40, c->len[1] = 20, c->sq[0] = 2, c->sq[1] = 1;
    case_sum(c);
    c->paged = layout == 0, c->tnd = layout == 2, c->page = 16;
    c->want_max = c->want_sum = true;
    c->scale = 0.125;
}

static dsa_args args_of(const dsa_case *c, const dsa_io *io)
{
    dsa_args a;
    memset(&a, 0, sizeof a);
    a.q = io->q.t, a.k = io->k.t, a.v = *value_of(c, io), a.idx = io->idx.t, a.o = io->o.t;
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
        refusal_case(&c, 0);
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
    refusal_case(&c, 1);
    dsa_io store, *io = &store;
    io_make(io, &c, r);
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
    io_free(io);
}

/* A TND key [T2, N2, D]. */
static void tnd_rules(rng *r)
{
    dsa_case c;
    refusal_case(&c, 2);
    dsa_io store, *io = &store;
    io_make(io, &c, r);
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
    io_free(io);
}

static void test_refusals(void)
{
    rng r = rng_seed(3205);
    dsa_case c;
    refusal_case(&c, 0);
    dsa_io io;
    io_make(&io, &c, &r);
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
    io_free(&io);
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
    refusal_case(&c, 0);
    dsa_io io;
    io_make(&io, &c, &r);
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
    io_free(&io);
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
        refusal_case(&c, k % 3);
        c.dt = dt;
        c.sq[0] = c.sq[1] = 0;
        c.sq_null = v == 1;
        case_sum(&c);
        dsa_io io;
        io_make(&io, &c, r);
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
        io_free(&io);
    }
}

/* L_0 = 0 (batch 0's queries see nothing; its indices all -1), K = 1 and
 * larger, both modes; a row of batch 1 selecting nothing. */
static void edge_empty_batch(spa_dtype dt, int k, rng *r)
{
    for (int m = 0; m < 4; m++) {
        if (!TEST_THIN_DTYPE(m, k, N_DTS))
            continue;
        dsa_case c;
        refusal_case(&c, m % 3);
        c.dt = dt;
        c.len[0] = 0, c.sq[0] = 3, c.len[1] = 9, c.sq[1] = 2;
        c.mode = m % 2 ? 0 : 3;
        c.kc = m < 2 ? 1 : 12;
        c.want_max = m != 1, c.want_sum = m != 2;
        case_sum(&c);
        dsa_io io;
        io_make(&io, &c, r);
        for (int64_t j = 0; j < c.n2 * c.kc; j++) /* token 4's slots: all -1 */
            tt_set_int(&io.idx, 4 * c.n2 * c.kc + j, -1);
        check_case("L_b = 0", k * 4 + m, &c, &io, (k + m) % N_RUNNERS, (size_t)m);
        for (int64_t t = 0; t < 3; t++)
            expect_unseen(&c, &io, t);
        expect_unseen(&c, &io, 4);
        io_free(&io);
    }
}

/* Causal, S_b > L_b: of 4 queries on 2 keys, 0 and 1 see nothing, 2 sees
 * key 0, 3 keys 0 and 1; S 1, K 3 (blocks 0, 1, -1 in some order). */
static void edge_before_keys(spa_dtype dt, int k, rng *r)
{
    dsa_case c;
    refusal_case(&c, k % 2 == 1 ? 0 : k == 0 ? 1 : 2);
    c.dt = dt;
    c.b = 1, c.len[0] = 2, c.sq[0] = 4, c.kc = 3, c.bs = 1;
    case_sum(&c);
    dsa_io io;
    io_make(&io, &c, r);
    for (int64_t row = 0; row < c.t * c.n2; row++) {
        const int64_t first = rng_int(r, 0, 2);
        for (int64_t j = 0; j < 3; j++)
            tt_set_int(&io.idx, row * 3 + (first + j) % 3, j == 2 ? -1 : j);
    }
    check_case("before the keys", k, &c, &io, k % N_RUNNERS, 0);
    expect_unseen(&c, &io, 0);
    expect_unseen(&c, &io, 1);
    io_free(&io);
}

/* The largest head dims: D + Dr = 768, Dv = 768 (a value of its own), and
 * value the key itself at D 768 without rope. */
static void edge_widest(spa_dtype dt, int k, rng *r)
{
    for (int m = 0; m < 2; m++) {
        dsa_case c;
        refusal_case(&c, (k + m) % 3);
        c.dt = dt;
        c.n1 = 2, c.n2 = 1, c.kc = 3, c.bs = 5;
        c.d = m == 0 ? 704 : 768, c.dr = m == 0 ? 64 : 0, c.dv = 768, c.absorb = m == 1;
        c.len[0] = 33, c.len[1] = 12, c.sq[0] = 2, c.sq[1] = 1;
        case_sum(&c);
        c.scale = draw_scale(c.d, c.dr, r);
        dsa_io io;
        io_make(&io, &c, r);
        check_case("widest", k * 2 + m, &c, &io, (k + m) % N_RUNNERS, 7);
        io_free(&io);
    }
}

/* K = 65536 (on a board, its memory: 4096), most slots -1, the rest
 * scattered up to the last slot. */
static void edge_largest_k(rng *r)
{
    dsa_case c;
    refusal_case(&c, 0);
    c.b = 1, c.n1 = 2, c.n2 = 1, c.d = 16, c.dr = 0, c.dv = 8, c.len[0] = 300, c.sq[0] = 1, c.mode = 0;
    c.kc = SPA_TEST_SMALL ? 4096 : 65536, c.bs = TEST_SIZE(3, 1);
    case_sum(&c);
    dsa_io io;
    io_make(&io, &c, r);
    const int64_t nblk = (c.len[0] + c.bs - 1) / c.bs;
    for (int64_t j = 0; j < c.kc; j++) {
        const bool some = j % 1021 == 0 || j == c.kc - 1;
        tt_set_int(&io.idx, j, some ? rng_int(r, 0, nblk - 1) : -1);
    }
    check_case("largest K", 0, &c, &io, 3, 5);
    io_free(&io);
}

static void test_edges(void)
{
    rng r = rng_seed(3207);
    for (int k = 0; k < N_DTS; k++) {
        edge_no_query(dts[k], k, &r);
        edge_empty_batch(dts[k], k, &r);
        edge_before_keys(dts[k], k, &r);
        if (TEST_THIN_DTYPE(1, k, N_DTS))
            edge_widest(dts[k], k, &r);
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
