/* NsaSelectedAttention: against the fp64 reference, on every rule, across runners. */
#include <CUnit/Basic.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nsas_case.h"

/* spec/nsa.md 5 point 12 for f16 / bf16 (the reference rounds P like the op);
 * f32: a few hundred ulps of the accumulated magnitude (sums of up to
 * D + K*bs terms), far above the typical error and far below a wrong term. */
static tol attn_tol(spa_dtype dt)
{
    /* floor: half the spacing of the dtype's subnormals (util.h); it was left
     * unset, an uninitialised read that passed or failed with the compiler */
    tol t;
    if (dt == SPA_FLOAT16)
        t.atol = t.rtol = 0x1p-9, t.floor = 0x1p-25;
    else if (dt == SPA_BFLOAT16)
        t.atol = t.rtol = 0x1p-6, t.floor = 0x1p-134;
    else
        t.atol = 0x1p-16, t.rtol = 0x1p-22, t.floor = 0x1p-150;
    return t;
}

static spa_status phase1(const nsas_case *c, nsas_io *io, uint64_t *size, spa_executor *ex)
{
    return spa_nsa_select_get_workspace_size(&io->q.t, &io->k.t, &io->v.t, &io->topk.t,
                                             c->has_mask ? &io->mask.t : NULL, &c->sq, &c->skv,
                                             c->scale, c->n1, "TND", c->sparse_mode, c->bs, c->kc,
                                             &io->mx.t, &io->sm.t, &io->o.t, size, ex);
}

/* Both phases; workspace skewed by `skew` bytes, red zones checked. */
static spa_status run_fwd(const nsas_case *c, nsas_io *io, int runner, size_t skew)
{
    uint64_t ws_size = 0;
    spa_executor ex;
    spa_status st = phase1(c, io, &ws_size, &ex);
    if (st != SPA_OK)
        return st;
    tws ws;
    tws_make(&ws, ws_size, skew);
    st = spa_nsa_select(ws.ptr, ws.size, &ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

/* softmax statistics: all 8 lanes equal, each close to the reference (exact
 * where the reference is exact, e.g. -FLT_MAX and K*bs of fully masked rows) */
static int64_t check_stat(const char *what, const ttensor *tt, const double *ref, const double *mag,
                          int64_t count)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < count; i++) {
        const double got = tt_get(tt, i * 8);
        /* a NaN reference: softmaxSum NaN; softmaxMax unspecified (a number
         * of the row or NaN: the sum already says that the row is NaN) */
        bool ok = isnan(ref[i]) ? isnan(got) || what[7] == 'M'
                                : got == ref[i] || fabs(got - ref[i]) <= 0x1p-16 * mag[i] + 0x1p-21 * fabs(ref[i]);
        for (int64_t l = 1; l < 8; l++) {
            const double x = tt_get(tt, i * 8 + l);
            ok = ok && (x == got || (isnan(x) && isnan(got)));
        }
        if (!ok && bad++ < 5)
            fprintf(stderr, "  %s[%lld]: got %.9g want %.9g (mag %.3g)\n", what, (long long)i, got,
                    ref[i], mag[i]);
    }
    return bad;
}

static int64_t compare_with_ref(const nsas_case *c, const nsas_io *io)
{
    double *q = tt_to_doubles(&io->q), *k = tt_to_doubles(&io->k), *v = tt_to_doubles(&io->v);
    double *got = tt_to_doubles(&io->o);
    const int64_t no = c->t1 * c->n1 * c->dv, ns = c->t1 * c->n1;
    double *o = malloc(sizeof(double) * (size_t)(no + 1)), *o_mag = malloc(sizeof(double) * (size_t)(no + 1));
    double *mx = malloc(sizeof(double) * (size_t)(ns + 1)), *mx_mag = malloc(sizeof(double) * (size_t)(ns + 1));
    double *sm = malloc(sizeof(double) * (size_t)(ns + 1)), *sm_mag = malloc(sizeof(double) * (size_t)(ns + 1));
    ref_nsas_problem p = nsas_case_problem(c);
    ref_nsa_select(&p, q, k, v, o, o_mag, mx, mx_mag, sm, sm_mag);
    int64_t bad = check_close("attentionOut", got, o, o_mag, no, attn_tol(c->dt));
    bad += check_stat("softmaxMax", &io->mx, mx, mx_mag, ns);
    bad += check_stat("softmaxSum", &io->sm, sm, sm_mag, ns);
    free(q), free(k), free(v), free(got), free(o), free(o_mag), free(mx), free(mx_mag), free(sm), free(sm_mag);
    return bad;
}

static bool outputs_guarded(const nsas_io *io)
{
    return tt_guard_ok(&io->o) && tt_guard_ok(&io->mx) && tt_guard_ok(&io->sm) &&
           tt_guard_ok(&io->q) && tt_guard_ok(&io->k) && tt_guard_ok(&io->v);
}

/* Set by test_nonfinite: NaN / Inf in the inputs of every case. */
static bool poison_inputs;

static void check_case(nsas_case *c, rng *r, int runner, const char *label, int i)
{
    nsas_io io;
    nsas_io_make(&io, c, r);
    if (poison_inputs)
        nsas_io_poison(&io, r);
    spa_status st = run_fwd(c, &io, runner, (size_t)rng_int(r, 0, 63));
    int64_t bad = st == SPA_OK ? compare_with_ref(c, &io) : -1;
    char desc[400];
    nsas_case_describe(c, desc, sizeof desc);
    case_verdict(label, i, desc, st, bad, outputs_guarded(&io));
    nsas_io_free(&io);
}

static void test_random_shapes(void)
{
    rng r = rng_seed(301);
    for (int i = 0; i < TEST_COUNT(72, 12); i++) {
        nsas_case c;
        nsas_case_draw(&c, i, &r);
        check_case(&c, &r, i % N_RUNNERS, "case", i);
        nsas_case_free(&c);
    }
}

/* NaN and Inf in q, k or v: NaN in every output row whose softmax sees the
 * element (a masked position's score is MASKVAL whatever its key), as the
 * reference computes it; softmaxSum NaN there too (softmaxMax: the max of
 * the row's numbers). */
static void test_nonfinite(void)
{
    rng r = rng_seed(309);
    poison_inputs = true;
    for (int i = 0; i < TEST_COUNT(24, 6); i++) {
        nsas_case c;
        nsas_case_draw(&c, i, &r);
        check_case(&c, &r, i % N_RUNNERS, "nonfinite", i);
        nsas_case_free(&c);
    }
    poison_inputs = false;
}

/* The named features of nsas_case.h. */
static void test_features(void)
{
    rng r = rng_seed(302);
    for (int i = 0; i < nsas_feature_count(); i++) {
        nsas_case c;
        nsas_case_feature(&c, i, &r);
        check_case(&c, &r, i % N_RUNNERS, "feature", i);
        nsas_case_free(&c);
    }
}

/* Every selected key in the future of every query: uniform average of the
 * selected values, max -FLT_MAX, sum K*bs; never NaN or Inf. */
static void test_fully_masked(void)
{
    rng r = rng_seed(303);
    const int64_t ql[1] = {3};
    for (int k = 0; k < 6; k++) {
        static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
        /* KV 90 from k 3: block 5 is partial (10 rows), its 6 rows past the
         * end stay out of the average */
        const int64_t kl[1] = {k < 3 ? 96 : 90};
        nsas_case c;
        nsas_case_fixed(&c, dts[k % 3], 4, 2, 32, 32, 16, 3, 1, ql, kl, 2, true, &r, true);
        for (int64_t i = 0; i < c.t1 * c.n2 * c.kc; i++)
            c.idx[i] = (int32_t)(1 + i % 5); /* blocks 1..5: positions >= 16 > s */
        nsas_io io;
        nsas_io_make(&io, &c, &r);
        CU_ASSERT_EQUAL(run_fwd(&c, &io, k % 3, 5), SPA_OK);
        CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
        for (int64_t i = 0; i < c.t1 * c.n1; i++) {
            const int32_t *slot = c.idx + i / (c.n1 / c.n2) * c.kc; /* the row's kv head */
            double rows = 0.0;
            for (int64_t j = 0; j < c.kc; j++)
                rows += slot[j] == 5 && kl[0] == 90 ? 10.0 : 16.0;
            CU_ASSERT_EQUAL(tt_get(&io.mx, i * 8), -(double)FLT_MAX);
            CU_ASSERT_EQUAL(tt_get(&io.sm, i * 8), rows);
        }
        for (int64_t i = 0; i < c.t1 * c.n1 * c.dv; i++)
            CU_ASSERT(isfinite(tt_get(&io.o, i)));
        nsas_io_free(&io);
        nsas_case_free(&c);
    }
}

/* Bit-identical results for the inline runner and pools of 1, 2 and 7 threads. */
static void test_deterministic_across_runners(void)
{
    const int64_t ql[3] = {37, 0, 50}, kl[3] = {300, 64, 129};
    for (int k = 0; k < 3; k++) {
        static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
        rng r = rng_seed(304);
        nsas_case c;
        nsas_case_fixed(&c, dts[k], 8, 2, 64, 32, 32, 4, 3, ql, kl, 2, true, &r, true);
        nsas_io io;
        nsas_io_make(&io, &c, &r);
        CU_ASSERT_EQUAL(run_fwd(&c, &io, 0, 0), SPA_OK);
        unsigned char *o1 = tt_snapshot(&io.o), *m1 = tt_snapshot(&io.mx), *s1 = tt_snapshot(&io.sm);
        for (int run = 1; run < N_RUNNERS; run++) {
            tt_fill_canary(&io.o);
            tt_fill_canary(&io.mx);
            tt_fill_canary(&io.sm);
            CU_ASSERT_EQUAL(run_fwd(&c, &io, run, (size_t)run * 8), SPA_OK);
            CU_ASSERT(tt_same_bytes(&io.o, o1));
            CU_ASSERT(tt_same_bytes(&io.mx, m1));
            CU_ASSERT(tt_same_bytes(&io.sm, s1));
        }
        free(o1), free(m1), free(s1);
        nsas_io_free(&io);
        nsas_case_free(&c);
    }
}

/* Phase 1 planned for a runner of 1, 2 or 3 threads
 * (spa_nsa_select_get_workspace_size_for): a smaller workspace than the
 * build's block limit asks (on a build of 64 blocks), the same bits as the
 * default plan, on any runner. */
static void test_planned_for_runner(void)
{
    const int64_t ql[2] = {300, 212}, kl[2] = {300, 212};
    for (int k = 0; k < 2; k++) {
        static const spa_dtype dts[2] = {SPA_FLOAT32, SPA_BFLOAT16};
        rng r = rng_seed(305);
        nsas_case c;
        nsas_case_fixed(&c, dts[k], 8, 1, 64, 32, 32, 4, 2, ql, kl, 2, true, &r, true);
        nsas_io io;
        nsas_io_make(&io, &c, &r);
        uint64_t full = 0;
        spa_executor ex;
        CU_ASSERT_EQUAL_FATAL(phase1(&c, &io, &full, &ex), SPA_OK);
        CU_ASSERT_EQUAL(run_fwd(&c, &io, 0, 0), SPA_OK);
        unsigned char *o1 = tt_snapshot(&io.o), *m1 = tt_snapshot(&io.mx), *s1 = tt_snapshot(&io.sm);
        for (uint32_t workers = 1; workers <= 3; workers++) {
            uint64_t size = 0;
            CU_ASSERT_EQUAL_FATAL(spa_nsa_select_get_workspace_size_for(
                                      &io.q.t, &io.k.t, &io.v.t, &io.topk.t, &io.mask.t, &c.sq, &c.skv, c.scale,
                                      c.n1, "TND", c.sparse_mode, c.bs, c.kc, &io.mx.t, &io.sm.t, &io.o.t,
                                      workers, &size, &ex),
                                  SPA_OK);
            CU_ASSERT(size > 0 && size <= full);
            if (!TEST_SMALL_SIZES) /* the boards build 4 blocks at most */
                CU_ASSERT(size < full); /* 4 * workers blocks, not 64 */
            tt_fill_canary(&io.o);
            tt_fill_canary(&io.mx);
            tt_fill_canary(&io.sm);
            tws ws;
            tws_make(&ws, size, workers);
            CU_ASSERT_EQUAL(spa_nsa_select(ws.ptr, ws.size, &ex, test_runner((int)workers % N_RUNNERS)), SPA_OK);
            CU_ASSERT(tws_guard_ok(&ws));
            tws_free(&ws);
            CU_ASSERT(tt_same_bytes(&io.o, o1));
            CU_ASSERT(tt_same_bytes(&io.mx, m1));
            CU_ASSERT(tt_same_bytes(&io.sm, s1));
        }
        free(o1), free(m1), free(s1);
        nsas_io_free(&io);
        nsas_case_free(&c);
    }
}

/* The upstream example (spec/nsa.md 3.5), scaled down: all ones, every index
 * 2, sparseMode 2 without a mask (no masking): every output is 1, the max is
 * scale*D, the sum K*bs. */
static void test_upstream_example(void)
{
    rng r = rng_seed(305);
    const int64_t ql[2] = {8, 8}, kl[2] = {256, 256};
    nsas_case c;
    nsas_case_fixed(&c, SPA_FLOAT16, 16, 4, 192, 128, 64, 2, 2, ql, kl, 2, false, &r, true);
    c.scale = 1.0;
    for (int64_t i = 0; i < c.t1 * c.n2 * c.kc; i++)
        c.idx[i] = 2;
    nsas_io io;
    nsas_io_make(&io, &c, &r);
    tt_fill_random(&io.q, &r, 1.0, 1.0);
    tt_fill_random(&io.k, &r, 1.0, 1.0);
    tt_fill_random(&io.v, &r, 1.0, 1.0);
    nsas_io_set_indices(&io, &c);
    CU_ASSERT_EQUAL(run_fwd(&c, &io, 0, 0), SPA_OK);
    for (int64_t i = 0; i < tt_numel(&io.o); i++)
        CU_ASSERT_EQUAL(tt_get(&io.o, i), 1.0);
    for (int64_t i = 0; i < tt_numel(&io.mx); i++) {
        CU_ASSERT_EQUAL(tt_get(&io.mx, i), 192.0);
        CU_ASSERT_EQUAL(tt_get(&io.sm, i), 128.0);
    }
    nsas_io_free(&io);
    nsas_case_free(&c);
}

/* ---- validation: one case per rule, nothing written on error ---- */

typedef struct fwd_args {
    spa_tensor q, k, v, topk, mask, mx, sm, o;
    spa_int_array sq, skv;
    const char *layout;
    double scale;
    int64_t head_num, mode, bs, kc;
    bool use_mask;
    bool null_q, null_k, null_v, null_topk, null_sq, null_skv, null_mx, null_sm, null_o, null_size,
        null_ex;
} fwd_args;

static spa_status call_phase1(const fwd_args *a, uint64_t *size, spa_executor *ex)
{
    return spa_nsa_select_get_workspace_size(
        a->null_q ? NULL : &a->q, a->null_k ? NULL : &a->k, a->null_v ? NULL : &a->v,
        a->null_topk ? NULL : &a->topk, a->use_mask ? &a->mask : NULL, a->null_sq ? NULL : &a->sq,
        a->null_skv ? NULL : &a->skv, a->scale, a->head_num, a->layout, a->mode, a->bs, a->kc,
        a->null_mx ? NULL : &a->mx, a->null_sm ? NULL : &a->sm, a->null_o ? NULL : &a->o,
        a->null_size ? NULL : size, a->null_ex ? NULL : ex);
}

typedef void (*mutate_fn)(fwd_args *a);
#define MUT(name, body) static void name(fwd_args *a) { body; }
static int64_t seq_bad[2];
MUT(m_null_q, a->null_q = true)
MUT(m_null_k, a->null_k = true)
MUT(m_null_v, a->null_v = true)
MUT(m_null_topk, a->null_topk = true)
MUT(m_null_sq, a->null_sq = true)
MUT(m_null_skv, a->null_skv = true)
MUT(m_null_layout, a->layout = NULL)
MUT(m_null_mx, a->null_mx = true)
MUT(m_null_sm, a->null_sm = true)
MUT(m_null_o, a->null_o = true)
MUT(m_null_size, a->null_size = true)
MUT(m_null_ex, a->null_ex = true)
MUT(m_null_q_data, a->q.data = NULL)
MUT(m_null_sq_data, a->sq.data = NULL)
MUT(m_layout_bsnd, a->layout = "BSND")
MUT(m_layout_tn, a->layout = "TN")
MUT(m_mode_1, a->mode = 1)
MUT(m_mode_3, a->mode = 3)
MUT(m_bs_0, a->bs = 0)
MUT(m_bs_8, a->bs = 8)
MUT(m_bs_24, a->bs = 24)
MUT(m_bs_144, a->bs = 144)
MUT(m_kc_0, a->kc = 0; a->topk.dims[2] = 0)
MUT(m_kc_33, a->kc = 33; a->topk.dims[2] = 33)
MUT(m_q_rank, a->q.rank = 2)
MUT(m_k_rank, a->k.rank = 4; a->k.dims[3] = 1)
MUT(m_topk_rank, a->topk.rank = 2)
MUT(m_dtype_int, a->q.dtype = SPA_INT32; a->k.dtype = SPA_INT32; a->v.dtype = SPA_INT32; a->o.dtype = SPA_INT32)
MUT(m_dtype_k, a->k.dtype = SPA_FLOAT16)
MUT(m_dtype_v, a->v.dtype = SPA_BFLOAT16)
MUT(m_dtype_o, a->o.dtype = SPA_FLOAT16)
MUT(m_dtype_topk, a->topk.dtype = SPA_INT64)
MUT(m_dtype_mx, a->mx.dtype = SPA_FLOAT16)
MUT(m_dtype_sm, a->sm.dtype = SPA_BFLOAT16)
MUT(m_mask_dtype, a->use_mask = true; a->mask.dtype = SPA_FLOAT32)
MUT(m_mask_rank, a->use_mask = true; a->mask.rank = 3; a->mask.dims[2] = 1)
MUT(m_n2_zero, a->k.dims[1] = 0; a->v.dims[1] = 0; a->topk.dims[1] = 0)
MUT(m_n1_not_multiple, a->q.dims[1] = 7; a->mx.dims[1] = 7; a->sm.dims[1] = 7; a->o.dims[1] = 7; a->head_num = 7)
MUT(m_g_33, a->q.dims[1] = 132; a->k.dims[1] = 4; a->head_num = 132)
MUT(m_head_num, a->head_num = 4)
MUT(m_dq_ne_dk, a->k.dims[2] = 48)
MUT(m_d_24, a->q.dims[2] = 24; a->k.dims[2] = 24)
MUT(m_d_784, a->q.dims[2] = 784; a->k.dims[2] = 784)
MUT(m_dv_8, a->v.dims[2] = 8; a->o.dims[2] = 8)
MUT(m_d_0, a->q.dims[2] = 0; a->k.dims[2] = 0)
MUT(m_dv_0, a->v.dims[2] = 0; a->o.dims[2] = 0)
MUT(m_dv_784, a->v.dims[2] = 784; a->o.dims[2] = 784)
MUT(m_v_rows, a->v.dims[0] = 300)
MUT(m_v_heads, a->v.dims[1] = 1)
MUT(m_topk_rows, a->topk.dims[0] = 9)
MUT(m_topk_k, a->topk.dims[2] = 3)
MUT(m_mx_shape, a->mx.dims[2] = 4)
MUT(m_sm_shape, a->sm.dims[1] = 4)
MUT(m_o_shape, a->o.dims[2] = 16)
MUT(m_o_rows, a->o.dims[0] = 7)
MUT(m_seq_len_differ, a->skv.size = 1)
MUT(m_seq_empty, a->sq.size = 0; a->skv.size = 0)
MUT(m_seq_1025, a->sq.size = 1025; a->skv.size = 1025)
MUT(m_seq_negative, seq_bad[0] = -1; seq_bad[1] = 8; a->sq.data = seq_bad)
MUT(m_seq_decreasing, seq_bad[0] = 200; seq_bad[1] = 100; a->skv.data = seq_bad)
MUT(m_seq_q_total, seq_bad[0] = 4; seq_bad[1] = 7; a->sq.data = seq_bad)
MUT(m_seq_kv_total, seq_bad[0] = 128; seq_bad[1] = 257; a->skv.data = seq_bad)
MUT(m_stride_negative, a->q.strides[0] = -1)
MUT(m_span_overflow, a->k.strides[0] = INT64_MAX / 2)

typedef struct rule {
    const char *name;
    mutate_fn fn;
    spa_status want;
} rule;

static const rule fwd_rules[] = {
    {"NULL query", m_null_q, SPA_ERR_NULLPTR},
    {"NULL key", m_null_k, SPA_ERR_NULLPTR},
    {"NULL value", m_null_v, SPA_ERR_NULLPTR},
    {"NULL topkIndices", m_null_topk, SPA_ERR_NULLPTR},
    {"NULL actualSeqQLen", m_null_sq, SPA_ERR_NULLPTR},
    {"NULL actualSeqKvLen", m_null_skv, SPA_ERR_NULLPTR},
    {"NULL inputLayout", m_null_layout, SPA_ERR_NULLPTR},
    {"NULL softmaxMaxOut", m_null_mx, SPA_ERR_NULLPTR},
    {"NULL softmaxSumOut", m_null_sm, SPA_ERR_NULLPTR},
    {"NULL attentionOut", m_null_o, SPA_ERR_NULLPTR},
    {"NULL workspaceSize", m_null_size, SPA_ERR_NULLPTR},
    {"NULL executor", m_null_ex, SPA_ERR_NULLPTR},
    {"NULL query data", m_null_q_data, SPA_ERR_NULLPTR},
    {"NULL seq data", m_null_sq_data, SPA_ERR_NULLPTR},
    {"layout BSND", m_layout_bsnd, SPA_ERR_INVALID},
    {"layout TN", m_layout_tn, SPA_ERR_INVALID},
    {"sparseMode 1", m_mode_1, SPA_ERR_INVALID},
    {"sparseMode 3", m_mode_3, SPA_ERR_INVALID},
    {"blockSize 0", m_bs_0, SPA_ERR_INVALID},
    {"blockSize 8", m_bs_8, SPA_ERR_INVALID},
    {"blockSize 24", m_bs_24, SPA_ERR_INVALID},
    {"blockSize 144", m_bs_144, SPA_ERR_INVALID},
    {"blockCount 0", m_kc_0, SPA_ERR_INVALID},
    {"blockCount 33", m_kc_33, SPA_ERR_INVALID},
    {"query rank 2", m_q_rank, SPA_ERR_INVALID},
    {"key rank 4", m_k_rank, SPA_ERR_INVALID},
    {"topk rank 2", m_topk_rank, SPA_ERR_INVALID},
    {"int32 q/k/v/out", m_dtype_int, SPA_ERR_INVALID},
    {"key dtype differs", m_dtype_k, SPA_ERR_INVALID},
    {"value dtype differs", m_dtype_v, SPA_ERR_INVALID},
    {"attentionOut dtype differs", m_dtype_o, SPA_ERR_INVALID},
    {"topk int64", m_dtype_topk, SPA_ERR_INVALID},
    {"softmaxMax not float", m_dtype_mx, SPA_ERR_INVALID},
    {"softmaxSum not float", m_dtype_sm, SPA_ERR_INVALID},
    {"mask float", m_mask_dtype, SPA_ERR_INVALID},
    {"mask rank 3", m_mask_rank, SPA_ERR_INVALID},
    {"N2 0", m_n2_zero, SPA_ERR_INVALID},
    {"N1 % N2 != 0", m_n1_not_multiple, SPA_ERR_INVALID},
    {"G 33", m_g_33, SPA_ERR_INVALID},
    {"headNum != N1", m_head_num, SPA_ERR_INVALID},
    {"Dq != Dk", m_dq_ne_dk, SPA_ERR_INVALID},
    {"D 0", m_d_0, SPA_ERR_INVALID},
    {"D 784", m_d_784, SPA_ERR_INVALID},
    {"Dv 0", m_dv_0, SPA_ERR_INVALID},
    {"Dv 784", m_dv_784, SPA_ERR_INVALID},
    {"value rows != key rows", m_v_rows, SPA_ERR_INVALID},
    {"value heads != key heads", m_v_heads, SPA_ERR_INVALID},
    {"topk rows != T1", m_topk_rows, SPA_ERR_INVALID},
    {"topk last dim != K", m_topk_k, SPA_ERR_INVALID},
    {"softmaxMax shape", m_mx_shape, SPA_ERR_INVALID},
    {"softmaxSum shape", m_sm_shape, SPA_ERR_INVALID},
    {"attentionOut dim", m_o_shape, SPA_ERR_INVALID},
    {"attentionOut rows", m_o_rows, SPA_ERR_INVALID},
    {"seq arrays of different length", m_seq_len_differ, SPA_ERR_INVALID},
    {"seq arrays empty", m_seq_empty, SPA_ERR_INVALID},
    {"B 1025", m_seq_1025, SPA_ERR_INVALID},
    {"seq negative", m_seq_negative, SPA_ERR_INVALID},
    {"seq decreasing", m_seq_decreasing, SPA_ERR_INVALID},
    {"a_q[B-1] != T1", m_seq_q_total, SPA_ERR_INVALID},
    {"a_kv[B-1] > T2", m_seq_kv_total, SPA_ERR_INVALID},
    {"negative stride", m_stride_negative, SPA_ERR_INVALID},
    {"span overflows", m_span_overflow, SPA_ERR_INVALID},
};

/* Baseline: 2 batches (q 5 + 3, kv 128 + 128), N1 8, N2 2, D 32, Dv 32, bs 32, K 2. */
static void baseline(nsas_case *c, rng *r)
{
    const int64_t ql[2] = {5, 3}, kl[2] = {128, 128};
    nsas_case_fixed(c, SPA_FLOAT32, 8, 2, 32, 32, 32, 2, 2, ql, kl, 2, true, r, false);
}

static fwd_args args_of(const nsas_case *c, const nsas_io *io)
{
    fwd_args a;
    memset(&a, 0, sizeof a);
    a.q = io->q.t, a.k = io->k.t, a.v = io->v.t, a.topk = io->topk.t, a.mask = io->mask.t;
    a.mx = io->mx.t, a.sm = io->sm.t, a.o = io->o.t;
    a.sq = c->sq, a.skv = c->skv;
    a.layout = "TND";
    a.scale = c->scale, a.head_num = c->n1, a.mode = 2, a.bs = c->bs, a.kc = c->kc;
    a.use_mask = true;
    return a;
}

static void test_validation_rules(void)
{
    rng r = rng_seed(306);
    nsas_case c;
    baseline(&c, &r);
    nsas_io io;
    nsas_io_make(&io, &c, &r);
    unsigned char *o0 = tt_snapshot(&io.o), *m0 = tt_snapshot(&io.mx), *s0 = tt_snapshot(&io.sm);
    for (size_t k = 0; k < sizeof fwd_rules / sizeof fwd_rules[0]; k++) {
        fwd_args a = args_of(&c, &io);
        fwd_rules[k].fn(&a);
        uint64_t size = 0x5A5A5A5A5A5A5A5Aull;
        spa_executor ex, ex_before;
        memset(&ex, 0x5A, sizeof ex);
        ex_before = ex;
        spa_status st = call_phase1(&a, &size, &ex);
        if (st != fwd_rules[k].want)
            fprintf(stderr, "  rule '%s': got %d want %d\n", fwd_rules[k].name, st, fwd_rules[k].want);
        CU_ASSERT_EQUAL(st, fwd_rules[k].want);
        CU_ASSERT_EQUAL(size, 0x5A5A5A5A5A5A5A5Aull);
        CU_ASSERT(refusal_recorded(&ex, &ex_before, st));
        CU_ASSERT(tt_same_bytes(&io.o, o0) && tt_same_bytes(&io.mx, m0) && tt_same_bytes(&io.sm, s0));
    }
    /* The baseline itself is valid, with and without a mask, UINT8 mask too;
     * so are the NPU's refusals the native API lifts (spec/nsa.md 0.3b:
     * head dims not multiples of 16; Dv > D is run by the numeric suites). */
    fwd_args a;
    uint64_t size;
    spa_executor ex;
    const mutate_fn lifted[] = {m_d_24, m_dv_8};
    for (size_t k = 0; k < sizeof lifted / sizeof lifted[0]; k++) {
        a = args_of(&c, &io);
        lifted[k](&a);
        CU_ASSERT_EQUAL(call_phase1(&a, &size, &ex), SPA_OK);
    }
    a = args_of(&c, &io);
    CU_ASSERT_EQUAL(call_phase1(&a, &size, &ex), SPA_OK);
    a.mask.dtype = SPA_UINT8;
    CU_ASSERT_EQUAL(call_phase1(&a, &size, &ex), SPA_OK);
    a.use_mask = false;
    CU_ASSERT_EQUAL(call_phase1(&a, &size, &ex), SPA_OK);
    free(o0), free(m0), free(s0);
    nsas_io_free(&io);
    nsas_case_free(&c);
}

/* Untrusted indices: every way an index can leave its batch (-1 is padding,
 * a block starting inside the batch is valid even if partial). */
static void test_bad_indices(void)
{
    rng r = rng_seed(307);
    nsas_case c;
    baseline(&c, &r); /* batch 0: 4 blocks, batch 1: 4 blocks */
    c.skv_vals[1] = 218; /* batch 1 now holds 90 rows: blocks 0..2, block 2 partial */
    nsas_io io;
    nsas_io_make(&io, &c, &r);
    const int32_t bad_vals[4] = {-2, 4, INT32_MIN, INT32_MAX};
    for (int k = 0; k < 5; k++) {
        nsas_case_draw_indices(&c, &r, false);
        for (int64_t i = 0; i < c.t1 * c.n2 * c.kc; i++)
            if (c.idx[i] == 3)
                c.idx[i] = 2;
        /* valid: the partial block 2 of batch 1 and a padding slot */
        c.idx[(c.t1 - 1) * c.n2 * c.kc] = 2;
        c.idx[(c.t1 - 1) * c.n2 * c.kc + 1] = -1;
        nsas_io_set_indices(&io, &c);
        uint64_t size = 7;
        spa_executor ex;
        CU_ASSERT_EQUAL(phase1(&c, &io, &size, &ex), SPA_OK);
        const int64_t at = k < 4 ? rng_int(&r, 0, c.t1 * c.n2 * c.kc - 1) : (c.t1 - 1) * c.n2 * c.kc;
        c.idx[at] = k < 4 ? bad_vals[k] : 3; /* k 4: block 3 starts past the end of batch 1 */
        nsas_io_set_indices(&io, &c);
        size = 7;
        CU_ASSERT_EQUAL(phase1(&c, &io, &size, &ex), SPA_ERR_INVALID);
        CU_ASSERT_EQUAL(size, 7);
    }
    nsas_io_free(&io);
    nsas_case_free(&c);
}

/* Phase 2 refuses bad executors and workspaces, and rechecks the indices and
 * lengths the caller may have changed; nothing is written then. */
static void test_phase2_errors(void)
{
    rng r = rng_seed(308);
    nsas_case c;
    baseline(&c, &r);
    nsas_io io;
    nsas_io_make(&io, &c, &r);
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL_FATAL(phase1(&c, &io, &size, &ex), SPA_OK);
    CU_ASSERT(size > 0);
    unsigned char *o0 = tt_snapshot(&io.o), *m0 = tt_snapshot(&io.mx);
    tws ws;
    tws_make(&ws, size, 3);
    CU_ASSERT_EQUAL(spa_nsa_select(ws.ptr, size, NULL, NULL), SPA_ERR_NULLPTR);
    CU_ASSERT_EQUAL(spa_nsa_select(NULL, size, &ex, NULL), SPA_ERR_NULLPTR);
    CU_ASSERT_EQUAL(spa_nsa_select(ws.ptr, size - 1, &ex, NULL), SPA_ERR_WORKSPACE);
    spa_executor bad = ex;
    bad.u.bytes[200] ^= 1;
    CU_ASSERT_EQUAL(spa_nsa_select(ws.ptr, size, &bad, NULL), SPA_ERR_INVALID);
    CU_ASSERT_EQUAL(spa_nsa_select_grad(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    /* an index goes out of its batch after phase 1 */
    int32_t saved = c.idx[5];
    tt_set_int(&io.topk, 5, 4);
    CU_ASSERT_EQUAL(spa_nsa_select(ws.ptr, size, &ex, test_runner(2)), SPA_ERR_INVALID);
    tt_set_int(&io.topk, 5, -3);
    CU_ASSERT_EQUAL(spa_nsa_select(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    tt_set_int(&io.topk, 5, saved);
    /* the lengths change: batch 1 loses KV rows its indices point into */
    c.skv_vals[1] = 160;
    CU_ASSERT_EQUAL(spa_nsa_select(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    c.skv_vals[1] = 256;
    CU_ASSERT(tt_same_bytes(&io.o, o0) && tt_same_bytes(&io.mx, m0));
    CU_ASSERT(tws_guard_ok(&ws));
    /* valid again: runs, twice with the same result */
    CU_ASSERT_EQUAL(spa_nsa_select(ws.ptr, size, &ex, NULL), SPA_OK);
    unsigned char *o1 = tt_snapshot(&io.o);
    CU_ASSERT_EQUAL(spa_nsa_select(ws.ptr, size, &ex, test_runner(3)), SPA_OK);
    CU_ASSERT(tt_same_bytes(&io.o, o1));
    CU_ASSERT(tws_guard_ok(&ws));
    CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
    free(o0), free(m0), free(o1);
    tws_free(&ws);
    nsas_io_free(&io);
    nsas_case_free(&c);
}

/* T1 == 0: all outputs empty, a legal no-op with no workspace. */
static void test_empty(void)
{
    rng r = rng_seed(309);
    const int64_t ql[2] = {0, 0}, kl[2] = {64, 32};
    nsas_case c;
    nsas_case_fixed(&c, SPA_BFLOAT16, 4, 2, 32, 32, 16, 2, 2, ql, kl, 2, true, &r, false);
    nsas_io io;
    nsas_io_make(&io, &c, &r);
    uint64_t size = 1;
    spa_executor ex;
    CU_ASSERT_EQUAL(phase1(&c, &io, &size, &ex), SPA_OK);
    CU_ASSERT_EQUAL(size, 0);
    CU_ASSERT_EQUAL(spa_nsa_select(NULL, 0, &ex, NULL), SPA_OK);
    nsas_io_free(&io);
    nsas_case_free(&c);
}

void suite_nsa_select(void)
{
    CU_pSuite s = CU_add_suite("nsa_select", NULL, NULL);
    CU_add_test(s, "random shapes, all dtypes, strided", test_random_shapes);
    CU_add_test(s, "NaN and Inf inputs", test_nonfinite);
    /* The named cases need more heap than a Cortex-M board under QEMU has;
     * every hosted target (aarch64 and riscv64 included) runs them. */
    if (!SPA_TEST_SMALL)
        CU_add_test(s, "named features", test_features);
    CU_add_test(s, "fully masked rows", test_fully_masked);
    CU_add_test(s, "bit-identical across runners", test_deterministic_across_runners);
    CU_add_test(s, "planned for the runner's threads", test_planned_for_runner);
    CU_add_test(s, "upstream example", test_upstream_example);
    CU_add_test(s, "validation rules", test_validation_rules);
    CU_add_test(s, "untrusted indices", test_bad_indices);
    CU_add_test(s, "phase 2 errors", test_phase2_errors);
    CU_add_test(s, "empty query", test_empty);
}
