/* NsaCompressGrad: against the fp64 reference, on every rule, across runners. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nsac_case.h"

typedef struct grad_io {
    ttensor dy, x, w, dx, dw;
} grad_io;

static void io_make(grad_io *io, const nsac_case *c, rng *r)
{
    const int64_t xd[3] = {c->tokens, c->n, c->d}, wd[2] = {c->bs, c->n},
                  yd[3] = {c->windows, c->n, c->d};
    tt_make(&io->dy, c->dt, 3, yd, c->strided, r);
    tt_make(&io->x, c->dt, 3, xd, c->strided, r);
    tt_make(&io->w, c->dt, 2, wd, c->strided, r);
    tt_make(&io->dx, c->dt, 3, xd, c->strided, r);
    tt_make(&io->dw, c->dt, 2, wd, c->strided, r);
    tt_fill_random(&io->dy, r, -1.0, 1.0);
    tt_fill_random(&io->x, r, -1.0, 1.0);
    tt_fill_random(&io->w, r, -1.0, 1.0);
}

static void io_free(grad_io *io)
{
    tt_free(&io->dy);
    tt_free(&io->x);
    tt_free(&io->w);
    tt_free(&io->dx);
    tt_free(&io->dw);
}

static bool io_guards_ok(const grad_io *io)
{
    return tt_guard_ok(&io->dy) && tt_guard_ok(&io->x) && tt_guard_ok(&io->w) &&
           tt_guard_ok(&io->dx) && tt_guard_ok(&io->dw);
}

static spa_status run_grad(const nsac_case *c, grad_io *io, int runner, size_t skew)
{
    uint64_t ws_size = 0;
    spa_executor ex;
    spa_status st = spa_nsa_compress_grad_get_workspace_size(
        &io->dy.t, &io->x.t, &io->w.t, &c->seq, c->bs, c->st, c->seq_type, "TND", &io->dx.t,
        &io->dw.t, &ws_size, &ex);
    if (st != SPA_OK)
        return st;
    tws ws;
    tws_make(&ws, ws_size, skew);
    st = spa_nsa_compress_grad(ws.ptr, ws.size, &ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

/* Mismatches of inputGrad and weightGrad; tokens no window covers (mag 0)
 * must be exactly +0. */
static int64_t compare_with_ref(const nsac_case *c, const grad_io *io)
{
    double *dy = tt_to_doubles(&io->dy), *x = tt_to_doubles(&io->x), *w = tt_to_doubles(&io->w);
    double *dx = tt_to_doubles(&io->dx), *dw = tt_to_doubles(&io->dw);
    const int64_t nx = c->tokens * c->n * c->d, nw = c->bs * c->n;
    double *rdx = malloc(sizeof(double) * (size_t)(nx + 1)), *mdx = malloc(sizeof(double) * (size_t)(nx + 1));
    double *rdw = malloc(sizeof(double) * (size_t)nw), *mdw = malloc(sizeof(double) * (size_t)nw);
    ref_batches bt = nsac_case_batches(c);
    ref_nsa_compress_grad(dy, x, w, &bt, c->tokens, c->n, c->d, c->bs, c->st, rdx, mdx, rdw, mdw);
    /* weightGrad sums up to windows*D terms in f32: allow for that length */
    int64_t bad = check_close("inputGrad", dx, rdx, mdx, nx, tol_for(c->dt, 0x1p-20));
    bad += check_close("weightGrad", dw, rdw, mdw, nw, tol_for(c->dt, 0x1p-16));
    free(dy), free(x), free(w), free(dx), free(dw), free(rdx), free(mdx), free(rdw), free(mdw);
    return bad;
}

static void verdict(const char *label, int i, const nsac_case *c, spa_status st, int64_t bad,
                    bool guards)
{
    char desc[256];
    nsac_case_describe(c, desc, sizeof desc);
    case_verdict(label, i, desc, st, bad, guards);
}

static void test_random_shapes(void)
{
    rng r = rng_seed(201);
    for (int i = 0; i < TEST_BOARD_SIZE(60, 32); i++) {
        nsac_case c;
        nsac_case_draw(&c, i, &r);
        grad_io io;
        io_make(&io, &c, &r);
        spa_status st = run_grad(&c, &io, i % N_RUNNERS, (size_t)rng_int(&r, 0, 63));
        verdict("case", i, &c, st, compare_with_ref(&c, &io), io_guards_ok(&io));
        io_free(&io);
    }
}

static void test_extreme_shapes(void)
{
    rng r = rng_seed(202);
    const int64_t lens1[3] = {0, TEST_BOARD_SIZE(300, 160), 127};
    const int64_t lens2[2] = {TEST_BOARD_SIZE(200, 144), 129};
    const int64_t lens3[1] = {40}; /* shorter than the block: all-zero gradients */
    nsac_case cs[4];
    /* Small targets: fewer heads too (the suite keeps ~40 bytes an element). */
    nsac_case_fixed(&cs[0], SPA_FLOAT32, TEST_BOARD_SIZE(128, 32), 16, 128, 16, 3, lens1, 0);
    nsac_case_fixed(&cs[1], SPA_BFLOAT16, 2, 256, 128, 128, 2, lens2, 1);
    nsac_case_fixed(&cs[2], SPA_FLOAT16, TEST_BOARD_SIZE(7, 2), 256, 16, 16, 2, lens2, 0);
    nsac_case_fixed(&cs[3], SPA_FLOAT16, 3, 48, 64, 32, 1, lens3, 0);
    for (int i = 0; i < 4; i++) {
        grad_io io;
        cs[i].strided = i == 1;
        io_make(&io, &cs[i], &r);
        spa_status st = run_grad(&cs[i], &io, 2, 5);
        verdict("extreme", i, &cs[i], st, compare_with_ref(&cs[i], &io), io_guards_ok(&io));
        io_free(&io);
    }
}

/* Shapes the NPU refuses and the native API takes (spec/nsa.md 0.3b): head
 * dims with channel tails (1, 48, 100, 300 and one past the kernels' tile),
 * blocks and strides that are not multiples of 16, a block of more than 8
 * strides; every dtype, contiguous and strided. */
static void test_any_shape(void)
{
    rng r = rng_seed(204);
    for (int i = 0; i < NSAC_ANY_CASES; i++) {
        nsac_case c;
        nsac_case_any(&c, i, &r);
        grad_io io;
        io_make(&io, &c, &r);
        spa_status st = run_grad(&c, &io, i % N_RUNNERS, (size_t)rng_int(&r, 0, 63));
        verdict("any", i, &c, st, compare_with_ref(&c, &io), io_guards_ok(&io));
        io_free(&io);
    }
}

static void test_deterministic_across_runners(void)
{
    const int64_t lens[4] = {0, TEST_BOARD_SIZE(1000, 400), 37, TEST_BOARD_SIZE(2100, 700)};
    static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
    for (int k = 0; k < 3; k++) {
        nsac_case c;
        nsac_case_fixed(&c, dts[k], 3, 64, 64, 16, 4, lens, 0);
        rng r = rng_seed(203);
        grad_io io;
        io_make(&io, &c, &r);
        CU_ASSERT_EQUAL(run_grad(&c, &io, 0, 0), SPA_OK);
        unsigned char *dx0 = tt_snapshot(&io.dx), *dw0 = tt_snapshot(&io.dw);
        for (int run = 1; run < N_RUNNERS; run++) {
            tt_fill_canary(&io.dx);
            tt_fill_canary(&io.dw);
            CU_ASSERT_EQUAL(run_grad(&c, &io, run, (size_t)run * 8), SPA_OK);
            CU_ASSERT(tt_same_bytes(&io.dx, dx0));
            CU_ASSERT(tt_same_bytes(&io.dw, dw0));
        }
        free(dx0);
        free(dw0);
        io_free(&io);
    }
}

/* Element flat of a float tensor: its bytes, and their width. */
static unsigned char *elem_bytes(ttensor *tt, int64_t flat)
{
    return (unsigned char *)tt->t.data + tt_offset(tt, flat) * (tt->t.dtype == SPA_FLOAT32 ? 4 : 2);
}

/* Element flat set to bits32 (f32) or h (f16, bf16). */
static void put_raw(ttensor *tt, int64_t flat, uint32_t bits32, uint16_t h)
{
    if (tt->t.dtype == SPA_FLOAT32)
        memcpy(elem_bytes(tt, flat), &bits32, 4);
    else
        memcpy(elem_bytes(tt, flat), &h, 2);
}

/* One element of a float tensor set to the given bits (the dtype's width). */
static void set_bits(ttensor *tt, int64_t flat, uint32_t bits32)
{
    put_raw(tt, flat, bits32,
            (uint16_t)(tt->t.dtype == SPA_BFLOAT16 ? bits32 >> 16 : 0x7E00u | ((bits32 >> 31) << 15)));
}

/* An infinity of the dtype at flat index flat. */
static void set_inf(ttensor *tt, int64_t flat, int negative)
{
    const uint32_t bits32 = (negative ? 0x80000000u : 0u) | 0x7F800000u;
    put_raw(tt, flat, bits32,
            (uint16_t)(tt->t.dtype == SPA_BFLOAT16 ? bits32 >> 16 : ((bits32 >> 16) & 0x8000u) | 0x7C00u));
}

/* The value at flat index flat made positive (its sign bit cleared). */
static void clear_sign(ttensor *tt, int64_t flat)
{
    uint32_t u = 0;
    uint16_t h = 0;
    if (tt->t.dtype == SPA_FLOAT32)
        memcpy(&u, elem_bytes(tt, flat), 4);
    else
        memcpy(&h, elem_bytes(tt, flat), 2);
    put_raw(tt, flat, u & 0x7FFFFFFFu, (uint16_t)(h & 0x7FFFu));
}

/* n values against the reference: NaN where it is NaN, the same infinity
 * where it is infinite; those positions then leave the comparison. */
static int64_t mask_special(double *got, double *want, double *mag, int64_t n, int64_t *nan_count, int64_t *inf_count)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(want[i]) || isnan(got[i])) {
            bad += !isnan(got[i]) || !isnan(want[i]);
            *nan_count += isnan(want[i]) ? 1 : 0;
        } else if (isinf(want[i]) || isinf(got[i])) {
            bad += got[i] != want[i];
            *inf_count += isinf(want[i]) ? 1 : 0;
        } else {
            continue;
        }
        got[i] = want[i] = 0.0, mag[i] = 1.0;
    }
    return bad;
}

/* NaN in outputGrad and in weight (quiet and signaling, both signs), then
 * infinities of both signs in outputGrad (inf - inf makes NaN from values
 * that are not NaN): the gradients are NaN exactly where
 * the fp64 reference is, infinite where it is, and match it elsewhere. On
 * rows of two windows the layers narrow 16-bit inputGrad by the form for
 * numbers only where the outputGrad rows and weights are all finite. */
static void test_nan_propagation(void)
{
    static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
    static const uint32_t nans[4] = {0x7FC00000u, 0xFF810000u, 0x7F810000u, 0xFFC10000u};
    const int64_t lens[2] = {37, 160};
    for (int k = 0; k < 6; k++) {
        nsac_case c;
        nsac_case_fixed(&c, dts[k % 3], 3, 128, 32, 16, 2, lens, 0);
        rng r = rng_seed(204 + (uint64_t)k);
        grad_io io;
        io_make(&io, &c, &r);
        if (k < 3) {
            /* outputGrad window 3, head 1, channel 77; weight row 5, head 1
             * (a token under it: head 0 by the form for numbers, then the
             * exact form) */
            set_bits(&io.dy, (3 * c.n + 1) * c.d + 77, nans[k]);
            set_bits(&io.w, 5 * c.n + 1, nans[(k + 1) % 4]);
        } else {
            /* +inf in window 4 and -inf in window 5, head 2, channel 10, the
             * weights of head 2 made positive: tokens under both windows
             * get inf * w0 - inf * w1, NaN */
            set_inf(&io.dy, (4 * c.n + 2) * c.d + 10, 0);
            set_inf(&io.dy, (5 * c.n + 2) * c.d + 10, 1);
            for (int64_t j = 0; j < c.bs; j++)
                clear_sign(&io.w, j * c.n + 2);
        }
        CU_ASSERT_EQUAL(run_grad(&c, &io, k % N_RUNNERS, 0), SPA_OK);
        double *dy = tt_to_doubles(&io.dy), *x = tt_to_doubles(&io.x), *w = tt_to_doubles(&io.w);
        double *dx = tt_to_doubles(&io.dx), *dw = tt_to_doubles(&io.dw);
        const int64_t nx = c.tokens * c.n * c.d, nw = c.bs * c.n;
        double *rdx = malloc(sizeof(double) * (size_t)(nx + 1)), *mdx = malloc(sizeof(double) * (size_t)(nx + 1));
        double *rdw = malloc(sizeof(double) * (size_t)nw), *mdw = malloc(sizeof(double) * (size_t)nw);
        ref_batches bt = nsac_case_batches(&c);
        ref_nsa_compress_grad(dy, x, w, &bt, c.tokens, c.n, c.d, c.bs, c.st, rdx, mdx, rdw, mdw);
        int64_t nan_dx = 0, inf_dx = 0, nan_dw = 0, inf_dw = 0;
        int64_t bad = mask_special(dx, rdx, mdx, nx, &nan_dx, &inf_dx);
        bad += mask_special(dw, rdw, mdw, nw, &nan_dw, &inf_dw);
        /* the planted values reached inputGrad: NaN rows (k < 3), or NaN
         * from inf - inf beside infinities */
        CU_ASSERT(k < 3 ? nan_dx > c.d : nan_dx >= 1 && inf_dx > 8);
        bad += check_close("inputGrad", dx, rdx, mdx, nx, tol_for(c.dt, 0x1p-20));
        bad += check_close("weightGrad", dw, rdw, mdw, nw, tol_for(c.dt, 0x1p-16));
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT(io_guards_ok(&io));
        free(dy), free(x), free(w), free(dx), free(dw), free(rdx), free(mdx), free(rdw), free(mdw);
        io_free(&io);
    }
}

/* The upstream example (spec/nsa.md 2.5): N 64, D 128, bs 32, st 16, lengths
 * {0,128,272} cumulative, all ones: 15 windows, inputGrad = number of windows
 * covering the token, weightGrad = 15 * 128. */
static void test_upstream_example(void)
{
    const int64_t lens[3] = {0, 128, 144};
    nsac_case c;
    /* Small targets: 4 heads instead of 64 (the expected values do not
     * depend on N). */
    nsac_case_fixed(&c, SPA_FLOAT16, TEST_BOARD_SIZE(64, 4), 128, 32, 16, 3, lens, 0);
    CU_ASSERT_EQUAL(c.windows, 15);
    rng r = rng_seed(204);
    grad_io io;
    io_make(&io, &c, &r);
    tt_fill_random(&io.dy, &r, 1.0, 1.0);
    tt_fill_random(&io.x, &r, 1.0, 1.0);
    tt_fill_random(&io.w, &r, 1.0, 1.0);
    CU_ASSERT_EQUAL(run_grad(&c, &io, 1, 0), SPA_OK);
    for (int64_t i = 0; i < tt_numel(&io.dw); i++)
        CU_ASSERT_EQUAL(tt_get(&io.dw, i), 15.0 * 128.0);
    /* batch 1 = tokens 0..127 (7 windows), batch 2 = tokens 128..271 (8 windows) */
    for (int64_t t = 0; t < c.tokens; t++) {
        int64_t p = t < 128 ? t : t - 128, nb = t < 128 ? 7 : 8, cover = 0;
        for (int64_t i = 0; i < nb; i++)
            cover += p >= i * 16 && p < i * 16 + 32;
        CU_ASSERT_EQUAL(tt_get(&io.dx, (t * c.n + TEST_BOARD_SIZE(5, 3)) * 128 + 7), (double)cover);
    }
    io_free(&io);
}

/* ---- validation ---- */

typedef struct grad_args {
    spa_tensor dy, x, w, dx, dw;
    spa_int_array seq;
    const char *layout;
    int64_t bs, st, type;
    int null_which; /* 1..9: which pointer argument is NULL */
} grad_args;

static spa_status call_phase1(const grad_args *a, uint64_t *size, spa_executor *ex)
{
    int k = a->null_which;
    return spa_nsa_compress_grad_get_workspace_size(
        k == 1 ? NULL : &a->dy, k == 2 ? NULL : &a->x, k == 3 ? NULL : &a->w,
        k == 4 ? NULL : &a->seq, a->bs, a->st, a->type, a->layout, k == 5 ? NULL : &a->dx,
        k == 6 ? NULL : &a->dw, k == 7 ? NULL : size, k == 8 ? NULL : ex);
}

typedef void (*mutate_fn)(grad_args *a);
#define MUT(name, body) static void name(grad_args *a) { body; }
MUT(m_null_dy, a->null_which = 1)
MUT(m_null_x, a->null_which = 2)
MUT(m_null_w, a->null_which = 3)
MUT(m_null_seq, a->null_which = 4)
MUT(m_null_dx, a->null_which = 5)
MUT(m_null_dw, a->null_which = 6)
MUT(m_null_size, a->null_which = 7)
MUT(m_null_ex, a->null_which = 8)
MUT(m_null_dx_data, a->dx.data = NULL)
MUT(m_dtype_dy, a->dy.dtype = SPA_FLOAT16)
MUT(m_dtype_dx, a->dx.dtype = SPA_BFLOAT16)
MUT(m_dtype_dw, a->dw.dtype = SPA_FLOAT16)
MUT(m_dtype_all_int, a->dy.dtype = a->x.dtype = a->w.dtype = a->dx.dtype = a->dw.dtype = SPA_INT32)
MUT(m_rank_dy, a->dy.rank = 2)
MUT(m_rank_dw, a->dw.rank = 1)
MUT(m_dy_rows, a->dy.dims[0] -= 1)
MUT(m_dy_heads, a->dy.dims[1] = 3)
MUT(m_dx_shape, a->dx.dims[0] -= 1)
MUT(m_dx_dim, a->dx.dims[2] = 48)
MUT(m_dw_shape, a->dw.dims[0] = 16)
MUT(m_layout, a->layout = "BNSD")
MUT(m_type, a->type = 3)
MUT(m_seq_empty, a->seq.size = 0)
MUT(m_bs_w_rows, a->bs = 40)
MUT(m_st_over_bs, a->st = 48)
MUT(m_bs_zero, a->bs = 0)
MUT(m_st_zero, a->st = 0)
MUT(m_neg_stride, a->dw.strides[1] = -1)

typedef struct rule {
    const char *name;
    mutate_fn fn;
    spa_status want;
} rule;

static const rule grad_rules[] = {
    {"NULL outputGrad", m_null_dy, SPA_ERR_NULLPTR},
    {"NULL input", m_null_x, SPA_ERR_NULLPTR},
    {"NULL weight", m_null_w, SPA_ERR_NULLPTR},
    {"NULL actSeqLen", m_null_seq, SPA_ERR_NULLPTR},
    {"NULL inputGrad", m_null_dx, SPA_ERR_NULLPTR},
    {"NULL weightGrad", m_null_dw, SPA_ERR_NULLPTR},
    {"NULL workspaceSize", m_null_size, SPA_ERR_NULLPTR},
    {"NULL executor", m_null_ex, SPA_ERR_NULLPTR},
    {"NULL inputGrad data", m_null_dx_data, SPA_ERR_NULLPTR},
    {"outputGrad dtype", m_dtype_dy, SPA_ERR_INVALID},
    {"inputGrad dtype", m_dtype_dx, SPA_ERR_INVALID},
    {"weightGrad dtype", m_dtype_dw, SPA_ERR_INVALID},
    {"int32 everywhere", m_dtype_all_int, SPA_ERR_INVALID},
    {"outputGrad rank", m_rank_dy, SPA_ERR_INVALID},
    {"weightGrad rank", m_rank_dw, SPA_ERR_INVALID},
    {"outputGrad rows != windows", m_dy_rows, SPA_ERR_INVALID},
    {"outputGrad heads", m_dy_heads, SPA_ERR_INVALID},
    {"inputGrad shape", m_dx_shape, SPA_ERR_INVALID},
    {"inputGrad dim", m_dx_dim, SPA_ERR_INVALID},
    {"weightGrad shape", m_dw_shape, SPA_ERR_INVALID},
    {"layout BNSD", m_layout, SPA_ERR_INVALID},
    {"actSeqLenType 3", m_type, SPA_ERR_INVALID},
    {"actSeqLen empty", m_seq_empty, SPA_ERR_INVALID},
    {"blockSize 40 != weight rows", m_bs_w_rows, SPA_ERR_INVALID},
    {"stride > blockSize", m_st_over_bs, SPA_ERR_INVALID},
    {"blockSize 0", m_bs_zero, SPA_ERR_INVALID},
    {"stride 0", m_st_zero, SPA_ERR_INVALID},
    {"negative stride", m_neg_stride, SPA_ERR_INVALID},
};

static void test_validation_rules(void)
{
    const int64_t lens[3] = {32, 32, 32};
    nsac_case c;
    nsac_case_fixed(&c, SPA_FLOAT32, 4, 32, 32, 16, 3, lens, 0);
    rng r = rng_seed(205);
    grad_io io;
    io_make(&io, &c, &r);
    unsigned char *dx0 = tt_snapshot(&io.dx), *dw0 = tt_snapshot(&io.dw);
    for (size_t k = 0; k < sizeof grad_rules / sizeof grad_rules[0]; k++) {
        grad_args a = {io.dy.t, io.x.t, io.w.t, io.dx.t, io.dw.t, c.seq, "TND", c.bs, c.st, 0, 0};
        grad_rules[k].fn(&a);
        uint64_t size = 0x5A5A5A5A5A5A5A5Aull;
        spa_executor ex, ex_before;
        memset(&ex, 0x5A, sizeof ex);
        ex_before = ex;
        spa_status st = call_phase1(&a, &size, &ex);
        if (st != grad_rules[k].want)
            fprintf(stderr, "  rule '%s': got %d want %d\n", grad_rules[k].name, (int)st, (int)grad_rules[k].want);
        CU_ASSERT_EQUAL(st, grad_rules[k].want);
        CU_ASSERT_EQUAL(size, 0x5A5A5A5A5A5A5A5Aull);
        CU_ASSERT(refusal_recorded(&ex, &ex_before, st));
        CU_ASSERT(tt_same_bytes(&io.dx, dx0));
        CU_ASSERT(tt_same_bytes(&io.dw, dw0));
    }
    free(dx0);
    free(dw0);
    io_free(&io);
}

/* A block of more than 2^40 strides (descriptors only: phase 1 refuses
 * before any memory is touched) is the one size the scratch arithmetic
 * bounds; 2^30 strides plan. On a 32-bit target inputGrad's span must also
 * fit the address space: 2^26 strides plan there, and the big block is
 * refused for that first. */
static void test_windows_per_token_bound(void)
{
    static float cell[1];
    const bool wide = sizeof(void *) >= 8;
    const int64_t bs_ok = (int64_t)1 << (wide ? 30 : 26), bs_big = ((int64_t)1 << 40) + 1;
    for (int k = 0; k < 2; k++) {
        const int64_t bs = k ? bs_big : bs_ok, t = bs + 2;
        /* x and dy read with stride 0; inputGrad and weightGrad unit strides */
        spa_tensor x = {SPA_FLOAT32, 3, {t, 1, 1}, {0, 0, 0}, cell};
        spa_tensor dy = {SPA_FLOAT32, 3, {3, 1, 1}, {0, 0, 0}, cell};
        spa_tensor w = {SPA_FLOAT32, 2, {bs, 1}, {0, 0}, cell};
        spa_tensor dx = {SPA_FLOAT32, 3, {t, 1, 1}, {1, 1, 1}, cell};
        spa_tensor dw = {SPA_FLOAT32, 2, {bs, 1}, {1, 1}, cell};
        const int64_t end = t;
        spa_int_array seq = {&end, 1};
        uint64_t size = 0;
        spa_executor ex;
        spa_status st = spa_nsa_compress_grad_get_workspace_size(&dy, &x, &w, &seq, bs, 1, 0, "TND", &dx, &dw,
                                                                 &size, &ex);
        CU_ASSERT_EQUAL(st, k ? SPA_ERR_INVALID : SPA_OK);
        if (k)
            CU_ASSERT(strstr(spa_executor_reason(&ex, NULL), wide ? "nw_max" : "address space") != NULL);
    }
}

static void test_phase2_errors(void)
{
    const int64_t lens[2] = {64, 64};
    nsac_case c;
    nsac_case_fixed(&c, SPA_FLOAT16, 2, 16, 32, 16, 2, lens, 0);
    rng r = rng_seed(206);
    grad_io io;
    io_make(&io, &c, &r);
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL_FATAL(spa_nsa_compress_grad_get_workspace_size(&io.dy.t, &io.x.t, &io.w.t,
                                                                   &c.seq, c.bs, c.st, 0, NULL,
                                                                   &io.dx.t, &io.dw.t, &size, &ex),
                          SPA_OK);
    unsigned char *dx0 = tt_snapshot(&io.dx);
    tws ws;
    tws_make(&ws, size, 1);
    CU_ASSERT_EQUAL(spa_nsa_compress_grad(ws.ptr, size, NULL, NULL), SPA_ERR_NULLPTR);
    CU_ASSERT_EQUAL(spa_nsa_compress_grad(NULL, size, &ex, NULL), SPA_ERR_NULLPTR);
    CU_ASSERT_EQUAL(spa_nsa_compress_grad(ws.ptr, size / 2, &ex, NULL), SPA_ERR_WORKSPACE);
    CU_ASSERT_EQUAL(spa_nsa_compress(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    spa_executor bad = ex;
    bad.u.bytes[sizeof bad.u.bytes - 1] ^= 0x10; /* beyond the sealed bytes: harmless */
    CU_ASSERT_EQUAL(spa_nsa_compress_grad(ws.ptr, size, &bad, NULL), SPA_OK);
    tt_fill_canary(&io.dx);
    memcpy(dx0, io.dx.block, io.dx.span + 2 * RED_ZONE);
    bad = ex;
    bad.u.bytes[40] ^= 0x01;
    CU_ASSERT_EQUAL(spa_nsa_compress_grad(ws.ptr, size, &bad, NULL), SPA_ERR_INVALID);
    c.seq_vals[1] = 127; /* total no longer T */
    CU_ASSERT_EQUAL(spa_nsa_compress_grad(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    CU_ASSERT(tt_same_bytes(&io.dx, dx0));
    CU_ASSERT(tws_guard_ok(&ws));
    free(dx0);
    tws_free(&ws);
    io_free(&io);
}

/* Hundreds of batches (40 on small targets), many empty or shorter than the window: blocks cross
 * batch boundaries everywhere. */
static void test_many_batches(void)
{
    rng r = rng_seed(207);
    enum { BATCHES = TEST_BOARD_SIZE(300, 40) };
    int64_t lens[BATCHES];
    for (int b = 0; b < BATCHES; b++)
        lens[b] = rng_int(&r, 0, 3) == 0 ? 0 : rng_int(&r, 1, 100);
    static const spa_dtype dts[2] = {SPA_FLOAT32, SPA_BFLOAT16};
    for (int k = 0; k < 2; k++) {
        nsac_case c;
        nsac_case_fixed(&c, dts[k], 3, 32, 32, 16, BATCHES, lens, k);
        grad_io io;
        io_make(&io, &c, &r);
        CU_ASSERT_EQUAL(run_grad(&c, &io, 3, 7), SPA_OK);
        CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
        io_free(&io);
    }
}

void suite_nsa_compress_grad(void)
{
    CU_pSuite s = CU_add_suite("nsa_compress_grad", NULL, NULL);
    CU_add_test(s, "random shapes, all dtypes, every D, strided", test_random_shapes);
    CU_add_test(s, "hundreds of batches", test_many_batches);
    CU_add_test(s, "extreme shapes and zero gradients", test_extreme_shapes);
    CU_add_test(s, "any D, block and stride", test_any_shape);
    CU_add_test(s, "bit-identical across runners", test_deterministic_across_runners);
    CU_add_test(s, "upstream example", test_upstream_example);
    CU_add_test(s, "NaN propagation", test_nan_propagation);
    CU_add_test(s, "validation rules", test_validation_rules);
    CU_add_test(s, "phase 2 errors", test_phase2_errors);
    CU_add_test(s, "windows per token bounded", test_windows_per_token_bound);
}
