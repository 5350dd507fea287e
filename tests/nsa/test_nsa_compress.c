/* NsaCompress: against the fp64 reference, on every rule, across runners. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nsac_case.h"

typedef struct fwd_io {
    ttensor x, w, y;
} fwd_io;

static void io_make(fwd_io *io, const nsac_case *c, rng *r)
{
    const int64_t xd[3] = {c->tokens, c->n, c->d}, wd[2] = {c->bs, c->n},
                  yd[3] = {c->windows, c->n, c->d};
    tt_make(&io->x, c->dt, 3, xd, c->strided, r);
    tt_make(&io->w, c->dt, 2, wd, c->strided, r);
    tt_make(&io->y, c->dt, 3, yd, c->strided, r);
    tt_fill_random(&io->x, r, -1.0, 1.0);
    tt_fill_random(&io->w, r, -1.0, 1.0);
}

static void io_free(fwd_io *io)
{
    tt_free(&io->x);
    tt_free(&io->w);
    tt_free(&io->y);
}

/* Both phases; workspace skewed by `skew` bytes, red zones checked. */
static spa_status run_fwd(const nsac_case *c, fwd_io *io, int runner, size_t skew)
{
    uint64_t ws_size = 0;
    spa_executor ex;
    spa_status st = spa_nsa_compress_get_workspace_size(&io->x.t, &io->w.t, &c->seq, "TND", c->bs,
                                                        c->st, c->seq_type, &io->y.t, &ws_size, &ex);
    if (st != SPA_OK)
        return st;
    tws ws;
    tws_make(&ws, ws_size, skew);
    st = spa_nsa_compress(ws.ptr, ws.size, &ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

static int64_t compare_with_ref(const nsac_case *c, const fwd_io *io)
{
    double *x = tt_to_doubles(&io->x), *w = tt_to_doubles(&io->w), *got = tt_to_doubles(&io->y);
    int64_t m = c->windows * c->n * c->d;
    double *ref = malloc(sizeof(double) * (size_t)(m + 1)), *mag = malloc(sizeof(double) * (size_t)(m + 1));
    ref_batches bt = nsac_case_batches(c);
    ref_nsa_compress(x, w, &bt, c->n, c->d, c->bs, c->st, ref, mag);
    int64_t bad = check_close("output", got, ref, mag, m, tol_for(c->dt, 0x1p-20));
    free(x), free(w), free(got), free(ref), free(mag);
    return bad;
}

static void test_random_shapes(void)
{
    rng r = rng_seed(101);
    for (int i = 0; i < TEST_BOARD_SIZE(60, 32); i++) {
        nsac_case c;
        nsac_case_draw(&c, i, &r);
        fwd_io io;
        io_make(&io, &c, &r);
        spa_status st = run_fwd(&c, &io, i % N_RUNNERS, (size_t)rng_int(&r, 0, 63));
        int64_t bad = compare_with_ref(&c, &io);
        char desc[256];
        nsac_case_describe(&c, desc, sizeof desc);
        case_verdict("case", i, desc, st, bad,
                     tt_guard_ok(&io.x) && tt_guard_ok(&io.w) && tt_guard_ok(&io.y));
        io_free(&io);
    }
}

/* NaN and Inf in the input or the weight: the windows that hold them give
 * NaN / infinite rows exactly as the reference's arithmetic does, in every
 * dtype, on every runner. */
static void test_nonfinite(void)
{
    rng r = rng_seed(109);
    for (int i = 0; i < TEST_BOARD_SIZE(24, 8); i++) {
        nsac_case c;
        nsac_case_draw(&c, i, &r);
        fwd_io io;
        io_make(&io, &c, &r);
        tt_poison(rng_int(&r, 0, 3) ? &io.x : &io.w, &r, (int)rng_int(&r, 1, 3), true);
        spa_status st = run_fwd(&c, &io, i % N_RUNNERS, (size_t)rng_int(&r, 0, 63));
        int64_t bad = st == SPA_OK ? compare_with_ref(&c, &io) : -1;
        char desc[256];
        nsac_case_describe(&c, desc, sizeof desc);
        case_verdict("nonfinite", i, desc, st, bad,
                     tt_guard_ok(&io.x) && tt_guard_ok(&io.w) && tt_guard_ok(&io.y));
        io_free(&io);
    }
}

/* The extremes of the contract: 128 heads, block 128 with stride 16, D 256
 * (fewer tokens on small targets). */
static void test_extreme_shapes(void)
{
    rng r = rng_seed(102);
    const int64_t lens1[3] = {0, TEST_BOARD_SIZE(300, 160), 127};
    const int64_t lens2[2] = {TEST_BOARD_SIZE(200, 144), 129};
    nsac_case cs[3];
    nsac_case_fixed(&cs[0], SPA_FLOAT32, 128, 16, 128, 16, 3, lens1, 0);
    nsac_case_fixed(&cs[1], SPA_BFLOAT16, 2, 256, 128, 128, 2, lens2, 1);
    nsac_case_fixed(&cs[2], SPA_FLOAT16, 7, 256, 16, 16, 2, lens2, 0);
    for (int i = 0; i < 3; i++) {
        fwd_io io;
        cs[i].strided = i == 1;
        io_make(&io, &cs[i], &r);
        CU_ASSERT_EQUAL(run_fwd(&cs[i], &io, 2, 3), SPA_OK);
        CU_ASSERT_EQUAL(compare_with_ref(&cs[i], &io), 0);
        CU_ASSERT(tt_guard_ok(&io.y));
        io_free(&io);
    }
}

/* A head dim of 1 leaves the channel stride free: any value is a valid view
 * (only element 0 is read). A huge one once sent the kernels' prefetch of
 * the next rows over its whole span (minutes of hints); the strided rows
 * take no prefetch now. Each dtype, a dense and a token-strided layout. */
static void test_head_dim_one_any_stride(void)
{
    rng r = rng_seed(103);
    const int64_t lens[2] = {48, 80};
    const spa_dtype dts[3] = {SPA_FLOAT32, SPA_BFLOAT16, SPA_FLOAT16};
    for (int i = 0; i < 6; i++) {
        nsac_case c;
        nsac_case_fixed(&c, dts[i % 3], 2, 1, 24, 8, 2, lens, 0);
        c.strided = i >= 3;
        fwd_io io;
        io_make(&io, &c, &r);
        io.x.t.strides[2] = (int64_t)1 << 56;
        CU_ASSERT_EQUAL(run_fwd(&c, &io, i % 3, 0), SPA_OK);
        CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
        CU_ASSERT(tt_guard_ok(&io.y));
        io_free(&io);
    }
}

/* Shapes the NPU refuses and the native API takes (spec/nsa.md 0.3b): head
 * dims with channel tails (1, 48, 100, 300 and one past the kernels' tile),
 * blocks and strides that are not multiples of 16; every dtype, contiguous
 * and strided. */
static void test_any_shape(void)
{
    rng r = rng_seed(108);
    for (int i = 0; i < NSAC_ANY_CASES; i++) {
        nsac_case c;
        nsac_case_any(&c, i, &r);
        fwd_io io;
        io_make(&io, &c, &r);
        spa_status st = run_fwd(&c, &io, i % N_RUNNERS, (size_t)rng_int(&r, 0, 63));
        int64_t bad = compare_with_ref(&c, &io);
        char desc[256];
        nsac_case_describe(&c, desc, sizeof desc);
        case_verdict("any", i, desc, st, bad, tt_guard_ok(&io.x) && tt_guard_ok(&io.w) && tt_guard_ok(&io.y));
        io_free(&io);
    }
}

/* Bit-identical results for the inline runner and pools of 1, 2 and 7 threads. */
static void test_deterministic_across_runners(void)
{
    const int64_t lens[4] = {0, TEST_BOARD_SIZE(1000, 400), 37, TEST_BOARD_SIZE(2100, 700)};
    for (int k = 0; k < 3; k++) {
        static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
        nsac_case c;
        nsac_case_fixed(&c, dts[k], 3, 64, 64, 16, 4, lens, 0);
        rng r = rng_seed(103);
        fwd_io io;
        io_make(&io, &c, &r);
        CU_ASSERT_EQUAL(run_fwd(&c, &io, 0, 0), SPA_OK);
        unsigned char *first = tt_snapshot(&io.y);
        for (int run = 1; run < N_RUNNERS; run++) {
            tt_fill_canary(&io.y);
            CU_ASSERT_EQUAL(run_fwd(&c, &io, run, (size_t)run * 8), SPA_OK);
            CU_ASSERT(tt_same_bytes(&io.y, first));
        }
        free(first);
        io_free(&io);
    }
}

/* The upstream example (spec/nsa.md 1.5): one batch of 64 ones, 4 heads,
 * D 32, block = stride = 32, weights one: two windows, every value 32. */
static void test_upstream_example(void)
{
    const int64_t len = 64;
    nsac_case c;
    nsac_case_fixed(&c, SPA_FLOAT16, 4, 32, 32, 32, 1, &len, 0);
    rng r = rng_seed(104);
    fwd_io io;
    io_make(&io, &c, &r);
    tt_fill_random(&io.x, &r, 1.0, 1.0);
    tt_fill_random(&io.w, &r, 1.0, 1.0);
    CU_ASSERT_EQUAL(c.windows, 2);
    CU_ASSERT_EQUAL(run_fwd(&c, &io, 0, 0), SPA_OK);
    for (int64_t i = 0; i < tt_numel(&io.y); i++)
        CU_ASSERT_EQUAL(tt_get(&io.y, i), 32.0);
    io_free(&io);
}

/* ---- validation: one case per rule, nothing written on error ---- */

typedef struct fwd_args {
    spa_tensor x, w, y;
    spa_int_array seq;
    const char *layout;
    int64_t bs, st, type;
    bool null_x, null_w, null_y, null_seq, null_size, null_ex;
} fwd_args;

static spa_status call_phase1(const fwd_args *a, uint64_t *size, spa_executor *ex)
{
    return spa_nsa_compress_get_workspace_size(a->null_x ? NULL : &a->x, a->null_w ? NULL : &a->w,
                                               a->null_seq ? NULL : &a->seq, a->layout, a->bs,
                                               a->st, a->type, a->null_y ? NULL : &a->y,
                                               a->null_size ? NULL : size, a->null_ex ? NULL : ex);
}

typedef void (*mutate_fn)(fwd_args *a);
#define MUT(name, body) static void name(fwd_args *a) { body; }
static int64_t seq_bad[3];
MUT(m_null_x, a->null_x = true)
MUT(m_null_w, a->null_w = true)
MUT(m_null_y, a->null_y = true)
MUT(m_null_seq, a->null_seq = true)
MUT(m_null_size, a->null_size = true)
MUT(m_null_ex, a->null_ex = true)
MUT(m_null_seq_data, a->seq.data = NULL)
MUT(m_null_x_data, a->x.data = NULL)
MUT(m_rank_x, a->x.rank = 2)
MUT(m_rank_w, a->w.rank = 3; a->w.dims[2] = 1)
MUT(m_rank_y, a->y.rank = 4; a->y.dims[3] = 1)
MUT(m_rank_huge, a->x.rank = 9)
MUT(m_dtype_int, a->x.dtype = SPA_INT32; a->w.dtype = SPA_INT32; a->y.dtype = SPA_INT32)
MUT(m_dtype_w, a->w.dtype = SPA_FLOAT16)
MUT(m_dtype_y, a->y.dtype = SPA_BFLOAT16)
MUT(m_dtype_unknown, a->x.dtype = 99)
MUT(m_layout_bsh, a->layout = "BSH")
MUT(m_layout_prefix, a->layout = "TN")
MUT(m_layout_longer, a->layout = "TNDX")
MUT(m_type_2, a->type = 2)
MUT(m_type_neg, a->type = -1)
MUT(m_seq_empty, a->seq.size = 0)
MUT(m_seq_negative, seq_bad[0] = -16; seq_bad[1] = 64; seq_bad[2] = 96; a->seq.data = seq_bad)
MUT(m_seq_decreasing, seq_bad[0] = 64; seq_bad[1] = 32; seq_bad[2] = 96; a->seq.data = seq_bad)
MUT(m_seq_short_total, seq_bad[0] = 32; seq_bad[1] = 64; seq_bad[2] = 95; a->seq.data = seq_bad)
MUT(m_seq_long_total, seq_bad[0] = 32; seq_bad[1] = 64; seq_bad[2] = 97; a->seq.data = seq_bad)
MUT(m_seq_lengths_sum, a->type = 1)
MUT(m_bs_zero, a->bs = 0)
MUT(m_bs_negative, a->bs = -32)
MUT(m_st_zero, a->st = 0)
MUT(m_st_over_bs, a->st = 48)
MUT(m_w_rows, a->w.dims[0] = 48)
MUT(m_w_heads, a->w.dims[1] = 3)
MUT(m_bs_w_rows, a->bs = 48)
MUT(m_st_w_rows, a->st = 8; a->bs = 24)
MUT(m_d_zero, a->x.dims[2] = 0; a->y.dims[2] = 0)
MUT(m_n_zero, a->x.dims[1] = 0; a->w.dims[1] = 0; a->y.dims[1] = 0)
MUT(m_y_rows, a->y.dims[0] += 1)
MUT(m_y_heads, a->y.dims[1] = 3)
MUT(m_y_dim, a->y.dims[2] = 16)
MUT(m_stride_negative, a->x.strides[0] = -a->x.strides[0])
MUT(m_dim_negative, a->y.dims[0] = -1)
MUT(m_span_overflow, a->x.strides[0] = INT64_MAX / 2)
MUT(m_dims_overflow, a->x.dims[0] = INT64_MAX / 2; a->x.dims[1] = 4; a->x.dims[2] = 32)

typedef struct rule {
    const char *name;
    mutate_fn fn;
    spa_status want;
} rule;

static const rule fwd_rules[] = {
    {"NULL input", m_null_x, SPA_ERR_NULLPTR},
    {"NULL weight", m_null_w, SPA_ERR_NULLPTR},
    {"NULL output", m_null_y, SPA_ERR_NULLPTR},
    {"NULL actSeqLen", m_null_seq, SPA_ERR_NULLPTR},
    {"NULL workspaceSize", m_null_size, SPA_ERR_NULLPTR},
    {"NULL executor", m_null_ex, SPA_ERR_NULLPTR},
    {"NULL actSeqLen data", m_null_seq_data, SPA_ERR_NULLPTR},
    {"NULL input data", m_null_x_data, SPA_ERR_NULLPTR},
    {"input rank 2", m_rank_x, SPA_ERR_INVALID},
    {"weight rank 3", m_rank_w, SPA_ERR_INVALID},
    {"output rank 4", m_rank_y, SPA_ERR_INVALID},
    {"rank 9", m_rank_huge, SPA_ERR_INVALID},
    {"int32 tensors", m_dtype_int, SPA_ERR_INVALID},
    {"weight dtype differs", m_dtype_w, SPA_ERR_INVALID},
    {"output dtype differs", m_dtype_y, SPA_ERR_INVALID},
    {"unknown dtype", m_dtype_unknown, SPA_ERR_INVALID},
    {"layout BSH", m_layout_bsh, SPA_ERR_INVALID},
    {"layout TN", m_layout_prefix, SPA_ERR_INVALID},
    {"layout TNDX", m_layout_longer, SPA_ERR_INVALID},
    {"actSeqLenType 2", m_type_2, SPA_ERR_INVALID},
    {"actSeqLenType -1", m_type_neg, SPA_ERR_INVALID},
    {"actSeqLen empty", m_seq_empty, SPA_ERR_INVALID},
    {"actSeqLen negative", m_seq_negative, SPA_ERR_INVALID},
    {"actSeqLen decreasing", m_seq_decreasing, SPA_ERR_INVALID},
    {"actSeqLen total < T", m_seq_short_total, SPA_ERR_INVALID},
    {"actSeqLen total > T", m_seq_long_total, SPA_ERR_INVALID},
    {"type 1 lengths not summing to T", m_seq_lengths_sum, SPA_ERR_INVALID},
    {"blockSize 0", m_bs_zero, SPA_ERR_INVALID},
    {"blockSize -32", m_bs_negative, SPA_ERR_INVALID},
    {"stride 0", m_st_zero, SPA_ERR_INVALID},
    {"stride > blockSize", m_st_over_bs, SPA_ERR_INVALID},
    {"weight rows != blockSize", m_w_rows, SPA_ERR_INVALID},
    {"weight heads != N", m_w_heads, SPA_ERR_INVALID},
    {"N 0", m_n_zero, SPA_ERR_INVALID},
    {"D 0", m_d_zero, SPA_ERR_INVALID},
    {"blockSize 48 != weight rows", m_bs_w_rows, SPA_ERR_INVALID},
    {"blockSize 24 != weight rows", m_st_w_rows, SPA_ERR_INVALID},
    {"output rows != windows", m_y_rows, SPA_ERR_INVALID},
    {"output heads", m_y_heads, SPA_ERR_INVALID},
    {"output dim", m_y_dim, SPA_ERR_INVALID},
    {"negative stride", m_stride_negative, SPA_ERR_INVALID},
    {"negative dim", m_dim_negative, SPA_ERR_INVALID},
    {"span overflows", m_span_overflow, SPA_ERR_INVALID},
    {"dims product overflows", m_dims_overflow, SPA_ERR_INVALID},
};

static void test_validation_rules(void)
{
    /* Baseline: 3 batches (32, 32, 32 tokens), N 4, D 32, bs 32, st 16. */
    const int64_t lens[3] = {32, 32, 32};
    nsac_case c;
    nsac_case_fixed(&c, SPA_FLOAT32, 4, 32, 32, 16, 3, lens, 0);
    rng r = rng_seed(105);
    fwd_io io;
    io_make(&io, &c, &r);
    unsigned char *y_before = tt_snapshot(&io.y);
    for (size_t k = 0; k < sizeof fwd_rules / sizeof fwd_rules[0]; k++) {
        fwd_args a = {io.x.t, io.w.t, io.y.t, c.seq, "TND", c.bs, c.st, 0,
                      false, false, false, false, false, false};
        fwd_rules[k].fn(&a);
        uint64_t size = 0x5A5A5A5A5A5A5A5Aull;
        spa_executor ex, ex_before;
        memset(&ex, 0x5A, sizeof ex);
        ex_before = ex;
        spa_status st = call_phase1(&a, &size, &ex);
        if (st != fwd_rules[k].want)
            fprintf(stderr, "  rule '%s': got %d want %d\n", fwd_rules[k].name, (int)st,
                    (int)fwd_rules[k].want);
        CU_ASSERT_EQUAL(st, fwd_rules[k].want);
        CU_ASSERT_EQUAL(size, 0x5A5A5A5A5A5A5A5Aull);
        CU_ASSERT(refusal_recorded(&ex, &ex_before, st));
        CU_ASSERT(tt_same_bytes(&io.y, y_before));
    }
    /* A NULL layout means "TND"; an all-empty call is legal and writes nothing. */
    fwd_args a = {io.x.t, io.w.t, io.y.t, c.seq, NULL, c.bs, c.st, 0,
                  false, false, false, false, false, false};
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL(call_phase1(&a, &size, &ex), SPA_OK);
    free(y_before);
    io_free(&io);
}

/* Phase 2 refuses bad executors and workspaces, and rechecks the lengths. */
static void test_phase2_errors(void)
{
    const int64_t lens[2] = {64, 64};
    nsac_case c;
    nsac_case_fixed(&c, SPA_BFLOAT16, 2, 16, 32, 16, 2, lens, 0);
    rng r = rng_seed(106);
    fwd_io io;
    io_make(&io, &c, &r);
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL_FATAL(spa_nsa_compress_get_workspace_size(&io.x.t, &io.w.t, &c.seq, "TND", c.bs,
                                                              c.st, 0, &io.y.t, &size, &ex), SPA_OK);
    CU_ASSERT(size > 0);
    unsigned char *y_before = tt_snapshot(&io.y);
    tws ws;
    tws_make(&ws, size, 0);
    CU_ASSERT_EQUAL(spa_nsa_compress(ws.ptr, size, NULL, NULL), SPA_ERR_NULLPTR);
    CU_ASSERT_EQUAL(spa_nsa_compress(NULL, size, &ex, NULL), SPA_ERR_NULLPTR);
    CU_ASSERT_EQUAL(spa_nsa_compress(ws.ptr, size - 1, &ex, NULL), SPA_ERR_WORKSPACE);
    spa_executor bad = ex;
    bad.u.bytes[100] ^= 1;
    CU_ASSERT_EQUAL(spa_nsa_compress(ws.ptr, size, &bad, NULL), SPA_ERR_INVALID);
    CU_ASSERT_EQUAL(spa_nsa_compress_grad(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    /* The caller breaks the lengths after phase 1: refused, nothing written. */
    c.seq_vals[0] = 100; /* 5 + 0 windows instead of 3 + 3 */
    CU_ASSERT_EQUAL(spa_nsa_compress(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    c.seq_vals[0] = 64;
    CU_ASSERT(tt_same_bytes(&io.y, y_before));
    CU_ASSERT(tws_guard_ok(&ws));
    /* Valid again: runs, and may run twice with the same result. */
    CU_ASSERT_EQUAL(spa_nsa_compress(ws.ptr, size, &ex, NULL), SPA_OK);
    unsigned char *y_once = tt_snapshot(&io.y);
    CU_ASSERT_EQUAL(spa_nsa_compress(ws.ptr, size, &ex, test_runner(3)), SPA_OK);
    CU_ASSERT(tt_same_bytes(&io.y, y_once));
    CU_ASSERT(tws_guard_ok(&ws));
    free(y_before);
    free(y_once);
    tws_free(&ws);
    io_free(&io);
}

/* No window at all (every batch shorter than the block): a legal no-op. */
static void test_no_window(void)
{
    const int64_t lens[3] = {0, 31, 5};
    nsac_case c;
    nsac_case_fixed(&c, SPA_FLOAT16, 2, 32, 32, 16, 3, lens, 1);
    rng r = rng_seed(107);
    fwd_io io;
    io_make(&io, &c, &r);
    CU_ASSERT_EQUAL(c.windows, 0);
    uint64_t size = 1;
    spa_executor ex;
    CU_ASSERT_EQUAL(spa_nsa_compress_get_workspace_size(&io.x.t, &io.w.t, &c.seq, NULL, c.bs, c.st,
                                                        1, &io.y.t, &size, &ex), SPA_OK);
    CU_ASSERT_EQUAL(size, 0);
    CU_ASSERT_EQUAL(spa_nsa_compress(NULL, 0, &ex, NULL), SPA_OK);
    io_free(&io);
}

/* Hundreds of batches (40 on small targets), many empty or shorter than the window: blocks cross
 * batch boundaries everywhere. */
static void test_many_batches(void)
{
    rng r = rng_seed(107);
    enum { BATCHES = TEST_BOARD_SIZE(300, 40) };
    int64_t lens[BATCHES];
    for (int b = 0; b < BATCHES; b++)
        lens[b] = rng_int(&r, 0, 3) == 0 ? 0 : rng_int(&r, 1, 100);
    static const spa_dtype dts[2] = {SPA_FLOAT32, SPA_BFLOAT16};
    for (int k = 0; k < 2; k++) {
        nsac_case c;
        nsac_case_fixed(&c, dts[k], 3, 32, 32, 16, BATCHES, lens, k);
        fwd_io io;
        io_make(&io, &c, &r);
        CU_ASSERT_EQUAL(run_fwd(&c, &io, 3, 7), SPA_OK);
        CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
        io_free(&io);
    }
}

void suite_nsa_compress(void)
{
    CU_pSuite s = CU_add_suite("nsa_compress", NULL, NULL);
    CU_add_test(s, "random shapes, all dtypes, every D, strided", test_random_shapes);
    CU_add_test(s, "hundreds of batches", test_many_batches);
    CU_add_test(s, "NaN and Inf inputs", test_nonfinite);
    CU_add_test(s, "extreme shapes", test_extreme_shapes);
    CU_add_test(s, "any D, block and stride", test_any_shape);
    CU_add_test(s, "a head dim of 1, any channel stride", test_head_dim_one_any_stride);
    CU_add_test(s, "bit-identical across runners", test_deterministic_across_runners);
    CU_add_test(s, "upstream example", test_upstream_example);
    CU_add_test(s, "validation rules", test_validation_rules);
    CU_add_test(s, "phase 2 errors", test_phase2_errors);
    CU_add_test(s, "no window", test_no_window);
}
