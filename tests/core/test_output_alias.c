/* Output views that reach an element twice (a stride of 0, or strides that
 * interleave) are refused with 161002: whichever block wrote last would win,
 * so the result would depend on the runner. Input views may alias freely. */
#include <CUnit/Basic.h>
#include <string.h>

#include "util.h"

#define AL_T 128
#define AL_N 2
#define AL_D 16
#define AL_BS 32
#define AL_ST 16
#define AL_M 6
static float x_buf[AL_T * AL_N * AL_D], w_buf[AL_BS * AL_N], y_buf[AL_M * AL_N * AL_D];
static float dx_buf[AL_T * AL_N * AL_D], dw_buf[AL_BS * AL_N];
static spa_tensor x, w, y, dx, dw;
static const int64_t seq_vals[2] = {64, 128};
static const spa_int_array seq = {seq_vals, 2};

static void reset(void)
{
    const int64_t xd[3] = {AL_T, AL_N, AL_D}, wd[2] = {AL_BS, AL_N}, yd[3] = {AL_M, AL_N, AL_D};
    spa_tensor_init(&x, SPA_FLOAT32, 3, xd, x_buf);
    spa_tensor_init(&w, SPA_FLOAT32, 2, wd, w_buf);
    spa_tensor_init(&y, SPA_FLOAT32, 3, yd, y_buf);
    spa_tensor_init(&dx, SPA_FLOAT32, 3, xd, dx_buf);
    spa_tensor_init(&dw, SPA_FLOAT32, 2, wd, dw_buf);
}

static spa_status fwd(void)
{
    uint64_t size;
    spa_executor ex;
    return spa_nsa_compress_get_workspace_size(&x, &w, &seq, "TND", AL_BS, AL_ST, 0, &y, &size, &ex);
}

static spa_status grad(void)
{
    uint64_t size;
    spa_executor ex;
    return spa_nsa_compress_grad_get_workspace_size(&y, &x, &w, &seq, AL_BS, AL_ST, 0, "TND", &dx,
                                                    &dw, &size, &ex);
}

/* Aliasing layouts of a rank >= 2 view; v < 3. */
static void alias(spa_tensor *t, int v)
{
    if (v == 0) {
        t->strides[0] = 0; /* every row is the same row */
    } else if (v == 1) {
        t->strides[0] = t->strides[1]; /* row r + 1 starts at column 1 of row r */
    } else {
        t->strides[t->rank - 1] = 2; /* the inner row runs over the next one */
        t->strides[t->rank - 2] = t->dims[t->rank - 1];
    }
}

static void test_aliasing_outputs(void)
{
    reset();
    CU_ASSERT_EQUAL(fwd(), SPA_OK);
    CU_ASSERT_EQUAL(grad(), SPA_OK);
    spa_tensor *outs[3] = {&y, &dx, &dw};
    for (int o = 0; o < 3; o++)
        for (int v = 0; v < 3; v++) {
            reset();
            alias(outs[o], v);
            CU_ASSERT_EQUAL(o == 0 ? fwd() : grad(), SPA_ERR_INVALID);
        }
    /* The same layouts on inputs are legal: they are only read. */
    for (int v = 0; v < 3; v++) {
        reset();
        alias(&x, v);
        CU_ASSERT_EQUAL(fwd(), SPA_OK);
        reset();
        alias(&w, v);
        CU_ASSERT_EQUAL(grad(), SPA_OK);
    }
    /* A permuted output (heads outermost) does not alias: accepted. */
    reset();
    y.strides[1] = AL_M * AL_D;
    y.strides[0] = AL_D;
    CU_ASSERT_EQUAL(fwd(), SPA_OK);
}

/* An empty output has nothing to overlap, whatever its strides: the check
 * must not multiply them (found by fuzz/fuzz_nsa_compress.c). */
static void test_empty_output_any_strides(void)
{
    static const int64_t short_ends[2] = {16, 31}; /* both batches shorter than the block */
    const spa_int_array few = {short_ends, 2};
    const int64_t xd[3] = {31, AL_N, AL_D}, yd[3] = {0, AL_N, AL_D};
    reset();
    spa_tensor_init(&x, SPA_FLOAT32, 3, xd, x_buf);
    spa_tensor_init(&y, SPA_FLOAT32, 3, yd, y_buf);
    y.strides[1] = INT64_MAX / 2;
    y.strides[2] = INT64_MAX / 3;
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL(spa_nsa_compress_get_workspace_size(&x, &w, &few, "TND", AL_BS, AL_ST, 0, &y,
                                                        &size, &ex), SPA_OK);
}

void suite_output_alias(void)
{
    CU_pSuite s = CU_add_suite("output_alias", NULL, NULL);
    CU_add_test(s, "outputs that reach an element twice", test_aliasing_outputs);
    CU_add_test(s, "empty output, any strides", test_empty_output_any_strides);
}
