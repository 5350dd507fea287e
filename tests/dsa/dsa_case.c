/* Random DSA sparse attention problems for the forward and grad suites:
 * see dsa_case.h. The forward suite's draws are these functions' draws with
 * DSA_DRAW_FORWARD, unchanged since they moved here from it. */
#include "dsa_case.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_nsa_select.h"

const spa_dtype dsa_dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};

int64_t dsa_max_len(const dsa_case *c)
{
    int64_t m = 0;
    for (int64_t b = 0; b < c->b; b++)
        m = c->len[b] > m ? c->len[b] : m;
    return m;
}

void dsa_case_sum(dsa_case *c)
{
    c->t = 0;
    for (int64_t b = 0; b < c->b; b++)
        c->t += c->sq[b];
}

spa_dtype dsa_stat_dtype(spa_dtype dt)
{
    return dt == SPA_FLOAT64 ? SPA_FLOAT64 : SPA_FLOAT32;
}

double dsa_draw_scale(int64_t d, int64_t dr, rng *r)
{
    const double s = (0.25 + 1.75 * rng_unit(r)) / sqrt((double)(d + dr));
    return rng_int(r, 0, 7) == 0 ? -s : s; /* the definition puts no sign on it */
}

/* The reference's work per case (T N1 rows (D + Dr + Dv) multiply-adds, a
 * unit's rows at most K min(S, L)) and the tensors' elements, within the
 * budgets of the case set (the grad's a third of the forward's work): K,
 * then S, then the head dims give way; for the grad, G first down to 8
 * while a query's rows are fewer than 64 (one row: P = 1 and dS = 0, no
 * gradient of the scores to check). */
static void fit_budget(dsa_case *c, int purpose)
{
    const double work = purpose == DSA_DRAW_GRAD ? TEST_SIZE(4e5, 7e4) : TEST_SIZE(1.2e6, 2e5);
    const int64_t mem = TEST_SIZE(1 << 19, 1 << 16);
    for (;;) {
        const int64_t lm = dsa_max_len(c), per = c->bs < lm ? c->bs : lm;
        const double w = (double)c->t * (double)c->n1 * (double)c->kc * (double)(per > 0 ? per : 1) *
                         (double)(c->d + c->dr + c->dv);
        const int64_t rows = c->paged ? (lm / c->page + 2) * c->page * c->b + 3 * c->page : c->b * (lm + 3);
        const int64_t m = (rows * c->n2 + c->t * c->n1) * (c->d + c->dr + c->dv);
        if (w <= work && m <= mem)
            return;
        const int64_t g = c->n1 / c->n2;
        if (purpose == DSA_DRAW_GRAD && w > work && g > 8 && c->kc * (per > 0 ? per : 1) < 64)
            c->n1 = c->n2 * ((g + 1) / 2);
        else if (w > work && c->kc > 1)
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

void dsa_case_draw(dsa_case *c, int i, rng *r, int purpose)
{
    static const int64_t groups[] = {1, 2, 3, 8, 16, 17, 32, 33, 64, 128};
    static const int64_t pages[] = {1, 3, 5, 16, 7, 64, 128};
    static const int64_t blocks[] = {1, 2, 4, 16, 64, 3, 5};
    memset(c, 0, sizeof *c);
    c->dt = dsa_dts[i % DSA_N_DTS];
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
    int64_t layout = rng_int(r, 0, 3); /* paged half the time, contiguous, TND */
    if (purpose == DSA_DRAW_GRAD)      /* no paged key: contiguous and TND half the time each */
        layout = 2 + layout % 2;
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
    dsa_case_sum(c);
    const int64_t nblk = (dsa_max_len(c) + c->bs - 1) / c->bs;
    switch (rng_int(r, 0, 4)) {
    case 0: c->kc = 1; break;
    case 1: c->kc = rng_int(r, 1, 8); break;
    case 2: c->kc = rng_int(r, 1, nblk + 1); break;    /* about as many as the blocks */
    case 3: c->kc = nblk + rng_int(r, 1, 20); break;   /* more than the blocks: duplicates, -1 */
    default: c->kc = rng_int(r, 1, TEST_SIZE(256, 48)); break;
    }
    c->want_max = rng_int(r, 0, 2) != 0;
    c->want_sum = rng_int(r, 0, 2) != 0;
    fit_budget(c, purpose);
    c->scale = dsa_draw_scale(c->d, c->dr, r);
}

void dsa_case_describe(const dsa_case *c, char *buf, size_t n)
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

void dsa_refusal_case(dsa_case *c, int layout)
{
    memset(c, 0, sizeof *c);
    c->dt = SPA_FLOAT32;
    c->b = 2, c->n1 = 4, c->n2 = 2, c->d = 32, c->dr = 16, c->dv = 24, c->bs = 4, c->kc = 6, c->mode = 3;
    c->len[0] = 40, c->len[1] = 20, c->sq[0] = 2, c->sq[1] = 1;
    dsa_case_sum(c);
    c->paged = layout == 0, c->tnd = layout == 2, c->page = 16;
    c->want_max = c->want_sum = true;
    c->scale = 0.125;
}

int64_t dsa_last_seen(const dsa_case *c, int64_t b, int64_t i)
{
    return c->mode == 3 ? c->len[b] - c->sq[b] + i : c->len[b] - 1;
}

/* The slots of token t (query i of batch b), key head n: blocks up to the
 * last token it sees, the last block (past its position, or partly past
 * L_b), any block, -1 anywhere, duplicates of earlier slots. */
static void draw_slots(dsa_io *io, const dsa_case *c, int64_t b, int64_t i, int64_t t, int64_t n, rng *r)
{
    const int64_t nblk = (c->len[b] + c->bs - 1) / c->bs, last = dsa_last_seen(c, b, i);
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

void dsa_io_make(dsa_io *io, const dsa_case *c, rng *r)
{
    memset(io, 0, sizeof *io);
    io->lmax = dsa_max_len(c);
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
    tt_make(&io->mx, dsa_stat_dtype(c->dt), 3, sd, c->strided, r);
    tt_make(&io->sm, dsa_stat_dtype(c->dt), 3, sd, c->strided, r);
    draw_indices(io, c, r);
    io->sq.data = c->sq, io->sq.size = (uint64_t)c->b;
    io->len.data = c->len, io->len.size = (uint64_t)c->b;
}

void dsa_io_free(dsa_io *io)
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
const spa_tensor *dsa_value_of(const dsa_case *c, const dsa_io *io)
{
    if (!c->absorb)
        return &io->v.t;
    return c->dv == c->d ? &io->k.t : &io->vview;
}

/* The flat index of element e of row p of batch b, head n, in a key-shaped
 * tensor whose last dim is dim. */
int64_t dsa_row_flat(const dsa_case *c, const dsa_io *io, int64_t b, int64_t p, int64_t n, int64_t dim, int64_t e)
{
    if (c->tnd)
        return ((io->start[b] + p) * c->n2 + n) * dim + e;
    const int64_t pg = c->paged ? io->page_of[b * io->table_cols + p / c->page] : b;
    const int64_t row = c->paged ? p % c->page : p;
    return ((pg * io->rows_per + row) * c->n2 + n) * dim + e;
}

/* Element e of the key, its rope part or the value (absorb: the key's). */
static double part_at(const dsa_case *c, const dsa_io *io, int part, int64_t b, int64_t p, int64_t n, int64_t e)
{
    if (part == DSA_PART_ROPE)
        return tt_get(&io->kr, dsa_row_flat(c, io, b, p, n, c->dr, e));
    if (part == DSA_PART_VALUE && !c->absorb)
        return tt_get(&io->v, dsa_row_flat(c, io, b, p, n, c->dv, e));
    return tt_get(&io->k, dsa_row_flat(c, io, b, p, n, c->d, e));
}

/* A part as each sequence's logical rows [b][lmax][n2][dim], read through
 * the test's copy of the table. */
double *dsa_logical_rows(const dsa_case *c, const dsa_io *io, int part)
{
    const int64_t dim = part == DSA_PART_KEY ? c->d : part == DSA_PART_ROPE ? c->dr : c->dv;
    double *out = calloc((size_t)(c->b * io->lmax * c->n2 * dim + 1), sizeof(double));
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t p = 0; p < c->len[b]; p++)
            for (int64_t n = 0; n < c->n2; n++)
                for (int64_t e = 0; e < dim; e++)
                    out[((b * io->lmax + p) * c->n2 + n) * dim + e] = part_at(c, io, part, b, p, n, e);
    return out;
}

int32_t *dsa_indices_of(const dsa_case *c, const dsa_io *io)
{
    const int64_t n = c->t * c->n2 * c->kc;
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++)
        idx[i] = (int32_t)tt_get(&io->idx, i);
    return idx;
}

ref_dsa_sa_problem dsa_problem_of(const dsa_case *c, const dsa_io *io, const int32_t *idx)
{
    const int32_t dt = io->q.t.dtype; /* the dtype built (f32 where a half one is not) */
    const ref_dsa_sa_problem p = {
        .t = c->t, .n1 = c->n1, .n2 = c->n2, .d = c->d, .dr = c->dr, .dv = c->dv, .kc = c->kc, .bs = c->bs,
        .batches = c->b, .lmax = io->lmax, .sq = c->sq, .len = c->len, .idx = idx, .scale = c->scale,
        .causal = c->mode == 3,
        .round = dt == SPA_FLOAT16 ? REF_ROUND_F16 : dt == SPA_BFLOAT16 ? REF_ROUND_BF16 : REF_ROUND_NONE};
    return p;
}
