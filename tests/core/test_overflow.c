/* Size arithmetic: descriptors whose element count, addressed span or byte
 * size overflows 64 bits are refused with 161002 by phase 1, for every tensor
 * argument of every op listed below, and nothing is written. Also sequence
 * arrays whose lengths overflow when summed. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

/* One op: a valid baseline call over tensors it owns, and phase 1 on them. */
typedef struct ovf_op {
    const char *name;
    int ntensors;
    spa_tensor *(*tensor)(int k); /* k-th tensor argument of the baseline */
    void (*reset)(void);          /* restore the valid baseline */
    spa_status (*phase1)(uint64_t *ws, spa_executor *ex);
} ovf_op;

/* ---- NsaCompress / NsaCompressGrad baseline: 2 batches of 64 tokens,
 * N 2, D 16, block 32, stride 16 (7 windows). No data is ever read: phase 1
 * refuses before touching it, and the valid baseline only plans. ---- */
#define OVF_T 128
#define OVF_N 2
#define OVF_D 16
#define OVF_BS 32
#define OVF_ST 16
#define OVF_M 6
static float x_buf[OVF_T * OVF_N * OVF_D], w_buf[OVF_BS * OVF_N], y_buf[OVF_M * OVF_N * OVF_D];
static float dx_buf[OVF_T * OVF_N * OVF_D], dw_buf[OVF_BS * OVF_N];
static spa_tensor nsac_t[5]; /* x, w, y (or dY), dx, dw */
static int64_t seq_vals[2];
static spa_int_array seq;
static int64_t seq_type;

static void nsac_reset(void)
{
    const int64_t xd[3] = {OVF_T, OVF_N, OVF_D}, wd[2] = {OVF_BS, OVF_N}, yd[3] = {OVF_M, OVF_N, OVF_D};
    spa_tensor_init(&nsac_t[0], SPA_FLOAT32, 3, xd, x_buf);
    spa_tensor_init(&nsac_t[1], SPA_FLOAT32, 2, wd, w_buf);
    spa_tensor_init(&nsac_t[2], SPA_FLOAT32, 3, yd, y_buf);
    spa_tensor_init(&nsac_t[3], SPA_FLOAT32, 3, xd, dx_buf);
    spa_tensor_init(&nsac_t[4], SPA_FLOAT32, 2, wd, dw_buf);
    seq_vals[0] = 64;
    seq_vals[1] = 128;
    seq.data = seq_vals;
    seq.size = 2;
    seq_type = 0;
}

static spa_tensor *nsac_tensor(int k)
{
    return &nsac_t[k];
}

static spa_status nsac_fwd_phase1(uint64_t *ws, spa_executor *ex)
{
    return spa_nsa_compress_get_workspace_size(&nsac_t[0], &nsac_t[1], &seq, "TND", OVF_BS, OVF_ST,
                                               seq_type, &nsac_t[2], ws, ex);
}

static spa_status nsac_grad_phase1(uint64_t *ws, spa_executor *ex)
{
    return spa_nsa_compress_grad_get_workspace_size(&nsac_t[2], &nsac_t[0], &nsac_t[1], &seq,
                                                    OVF_BS, OVF_ST, seq_type, "TND", &nsac_t[3],
                                                    &nsac_t[4], ws, ex);
}

static const ovf_op ops[] = {
    {"nsa_compress", 3, nsac_tensor, nsac_reset, nsac_fwd_phase1},
    {"nsa_compress_grad", 5, nsac_tensor, nsac_reset, nsac_grad_phase1},
};

/* Ways to overflow a descriptor of rank >= 2 (dims and strides in range
 * one by one); v < N_VARIANTS. */
#define N_VARIANTS 7
static void overflow_variant(spa_tensor *t, int v)
{
    const int32_t r = t->rank;
    switch (v) {
    case 0: /* element count: dims[0] alone near 2^62, the product past 2^63 */
        t->dims[0] = (int64_t)1 << 62;
        t->dims[1] = 4;
        break;
    case 1: /* every dim 2^16 + 1: the product passes 2^64 at rank 4, 2^63 sooner */
        for (int32_t k = 0; k < r; k++)
            t->dims[k] = ((int64_t)1 << 32) + 1;
        break;
    case 2: /* one step (dims[0] - 1) * strides[0] overflows */
        t->dims[0] = 3;
        t->strides[0] = INT64_MAX / 2 + 1;
        break;
    case 3: /* the last offset is INT64_MAX exactly: its element count is not */
        t->dims[0] = 2;
        t->strides[0] = INT64_MAX;
        for (int32_t k = 1; k < r; k++)
            t->dims[k] = 1;
        break;
    case 4: /* the sum of the steps overflows although each step fits */
        for (int32_t k = 0; k < r; k++) {
            t->dims[k] = 2;
            t->strides[k] = INT64_MAX / 2;
        }
        break;
    case 5: /* elements fit, bytes do not: 2^62 elements of 4 bytes */
        t->dims[0] = (int64_t)1 << 62;
        t->strides[0] = 1;
        for (int32_t k = 1; k < r; k++) {
            t->dims[k] = 1;
            t->strides[k] = 1;
        }
        break;
    default: /* zero strides hide nothing: the element count still overflows */
        for (int32_t k = 0; k < r; k++) {
            t->dims[k] = INT64_MAX / 3;
            t->strides[k] = 0;
        }
        break;
    }
}

static void test_overflowing_descriptors(void)
{
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        uint64_t size;
        spa_executor ex;
        ops[o].reset();
        CU_ASSERT_EQUAL_FATAL(ops[o].phase1(&size, &ex), SPA_OK);
        for (int k = 0; k < ops[o].ntensors; k++) {
            for (int v = 0; v < N_VARIANTS; v++) {
                ops[o].reset();
                overflow_variant(ops[o].tensor(k), v);
                spa_executor before;
                memset(&ex, 0x5A, sizeof ex);
                before = ex;
                size = 0x5A5A5A5A5A5A5A5Aull;
                spa_status st = ops[o].phase1(&size, &ex);
                if (st != SPA_ERR_INVALID)
                    fprintf(stderr, "  %s tensor %d variant %d: got %d\n", ops[o].name, k, v, (int)st);
                CU_ASSERT_EQUAL(st, SPA_ERR_INVALID);
                CU_ASSERT_EQUAL(size, 0x5A5A5A5A5A5A5A5Aull);
                CU_ASSERT(refusal_recorded(&ex, &before, st));
            }
        }
    }
}

/* Lengths that each fit but whose sum overflows, and cumulative ends that
 * would need an impossible batch count. */
static void test_overflowing_lengths(void)
{
    static const int64_t huge[3][2] = {
        {INT64_MAX, 1},
        {INT64_MAX / 2 + 1, INT64_MAX / 2 + 1},
        {(int64_t)1 << 62, (int64_t)3 << 61},
    };
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        for (int i = 0; i < 3; i++) {
            ops[o].reset();
            seq_vals[0] = huge[i][0];
            seq_vals[1] = huge[i][1];
            seq_type = 1;
            uint64_t size = 7;
            spa_executor ex;
            CU_ASSERT_EQUAL(ops[o].phase1(&size, &ex), SPA_ERR_INVALID);
            CU_ASSERT_EQUAL(size, 7);
        }
        /* A batch count no array can have (never read: refused first). */
        ops[o].reset();
        seq.size = UINT64_MAX;
        uint64_t size = 7;
        spa_executor ex;
        CU_ASSERT_EQUAL(ops[o].phase1(&size, &ex), SPA_ERR_INVALID);
        seq.size = ((uint64_t)1 << 61) + 1;
        CU_ASSERT_EQUAL(ops[o].phase1(&size, &ex), SPA_ERR_INVALID);
        CU_ASSERT_EQUAL(size, 7);
    }
}

/* Spans that fit 64 bits but not the address space: a view running past the
 * top of memory from its data pointer (every target), and on a 32-bit target
 * an f32 input of [2^28, 2, 32] (32 GiB). Phase 1 refuses, naming the rule. */
static void test_spans_beyond_the_address_space(void)
{
    static const int64_t big[3] = {(int64_t)1 << 28, 2, 32};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        for (int v = 0; v < (sizeof(void *) < 8 ? 2 : 1); v++) {
            ops[o].reset();
            spa_tensor *x = ops[o].tensor(0);
            if (v == 0) /* 4 KiB below the top: the view's 8 KiB run past it */
                x->data = (void *)(UINTPTR_MAX - 4095);
            else
                spa_tensor_init(x, SPA_FLOAT32, 3, big, x->data);
            spa_executor ex, before;
            memset(&ex, 0x5A, sizeof ex);
            before = ex;
            uint64_t size = 7;
            spa_status st = ops[o].phase1(&size, &ex);
            CU_ASSERT_EQUAL(st, SPA_ERR_INVALID);
            CU_ASSERT_EQUAL(size, 7);
            CU_ASSERT(refusal_recorded(&ex, &before, st));
            const char *why = spa_executor_reason(&ex, NULL);
            if (strstr(why, "address space") == NULL)
                fprintf(stderr, "  %s variant %d: reason '%s'\n", ops[o].name, v, why);
            CU_ASSERT(strstr(why, "address space") != NULL);
        }
    }
}

void suite_overflow(void)
{
    CU_pSuite s = CU_add_suite("overflow", NULL, NULL);
    CU_add_test(s, "descriptors whose sizes overflow 64 bits", test_overflowing_descriptors);
    CU_add_test(s, "sequence lengths whose sum overflows", test_overflowing_lengths);
    CU_add_test(s, "spans beyond the address space", test_spans_beyond_the_address_space);
}
