/* MultiScaleDeformableAttnFunction: against the fp64 reference, on every
 * rule, across runners, with hostile locations and index tensors. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msda_case.h"

/* Both phases; workspace skewed by `skew` bytes, red zones checked. */
static spa_status run_fwd(msda_io *io, int runner, size_t skew)
{
    uint64_t ws_size = 0;
    spa_executor ex;
    spa_status st = spa_msda_get_workspace_size(&io->value.t, &io->ss.t, &io->lsi.t, &io->loc.t,
                                                &io->attn.t, &io->out.t, &ws_size, &ex);
    if (st != SPA_OK)
        return st;
    tws ws;
    tws_make(&ws, ws_size, skew);
    st = spa_msda(ws.ptr, ws.size, &ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

static int64_t compare_with_ref(const msda_case *c, const msda_io *io)
{
    double *v = tt_to_doubles(&io->value), *l = tt_to_doubles(&io->loc), *a = tt_to_doubles(&io->attn);
    double *got = tt_to_doubles(&io->out);
    const int64_t n = tt_numel(&io->out);
    double *ref = malloc(sizeof(double) * (size_t)(n + 1)), *mag = malloc(sizeof(double) * (size_t)(n + 1));
    ref_msda_shape s = msda_case_shape(c);
    ref_msda(&s, v, l, a, REF_COORD_F32, ref, mag);
    int64_t bad = msda_check("output", c->odt, 0x1p-17, got, ref, mag, n);
    free(v), free(l), free(a), free(got), free(ref), free(mag);
    return bad;
}

static void report(const msda_case *c, int i, spa_status st, int64_t bad, bool guards)
{
    char desc[512];
    msda_case_describe(c, desc, sizeof desc);
    fprintf(stderr, "  case %d (%s): status %d, %lld bad, guards %s\n", i, desc, (int)st, (long long)bad,
            guards ? "ok" : "BROKEN");
}

static void test_random_shapes(void)
{
    rng r = rng_seed(201);
    for (int i = 0; i < MSDA_RANDOM_CASES; i++) {
        msda_case c;
        msda_case_draw(&c, i, &r, false);
        msda_io io;
        msda_io_make(&io, &c, &r, false);
        spa_status st = run_fwd(&io, i % N_RUNNERS, (size_t)rng_int(&r, 0, 63));
        CU_ASSERT_EQUAL(st, SPA_OK);
        int64_t bad = compare_with_ref(&c, &io);
        bool guards = msda_io_guards_ok(&io);
        if (bad || !guards || st != SPA_OK)
            report(&c, i, st, bad, guards);
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT(guards);
        msda_io_free(&io);
    }
}

/* The NPU's limits: 16 heads, levels and points at C 8; C 256 with 16 levels. */
static void test_extreme_shapes(void)
{
    rng r = rng_seed(202);
    int64_t h[16], w[16];
    for (int l = 0; l < 16; l++)
        h[l] = 1 + l % 5, w[l] = 1 + (l * 7) % 9;
    msda_case cs[3];
    msda_case_fixed(&cs[0], SPA_FLOAT32, 1, 16, 8, 33, 16, h, w, 16);
    msda_case_fixed(&cs[1], SPA_BFLOAT16, 2, 2, 256, 32, 16, h, w, 2);
    msda_case_fixed(&cs[2], SPA_FLOAT16, 1, 3, 256, 40, 1, h + 4, w + 4, 16);
    for (int i = 0; i < 3; i++) {
        msda_io io;
        cs[i].strided = i == 1;
        cs[i].loc_mode = LOC_SPECIAL;
        msda_io_make(&io, &cs[i], &r, false);
        spa_status st = run_fwd(&io, 2, 3);
        CU_ASSERT_EQUAL(st, SPA_OK);
        int64_t bad = compare_with_ref(&cs[i], &io);
        bool guards = msda_io_guards_ok(&io);
        if (bad || !guards || st != SPA_OK)
            report(&cs[i], i, st, bad, guards);
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT(guards);
        msda_io_free(&io);
    }
}

/* One fixed case against the reference on runner `runner`. */
static void check_fixed(msda_case *c, rng *r, int runner, int id)
{
    msda_io io;
    msda_io_make(&io, c, r, false);
    spa_status st = run_fwd(&io, runner, (size_t)id % 64);
    CU_ASSERT_EQUAL(st, SPA_OK);
    int64_t bad = compare_with_ref(c, &io);
    bool guards = msda_io_guards_ok(&io);
    if (bad || !guards || st != SPA_OK)
        report(c, id, st, bad, guards);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(guards);
    msda_io_free(&io);
}

/* The shapes of the public implementations' tests: N 1, M 2 heads, C 2,
 * Lq 2, levels 6x4 and 3x2, 2 points; and their module's (5 queries, embed
 * 3 or 6 over 3 heads: C 1 and 2; 4 levels, 4 points). */
static void test_public_shapes(void)
{
    rng r = rng_seed(209);
    const int64_t h[4] = {6, 3, 2, 1}, w[4] = {4, 2, 2, 1};
    static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
    int id = 0;
    for (int k = 0; k < 3; k++) {
        msda_case c;
        msda_case_fixed(&c, dts[k], 1, 2, 2, 2, 2, h, w, 2);
        check_fixed(&c, &r, k, id++);
        for (int64_t ch = 1; ch <= 2; ch++) {
            msda_case_fixed(&c, dts[k], 2, 3, ch, 5, 4, h, w, 4);
            c.strided = ch == 2;
            c.loc_mode = LOC_SPECIAL;
            check_fixed(&c, &r, k, id++);
        }
    }
}

/* C off the vector width and past the old 256: the partial vectors of every
 * layer, the tile shrunk for large C; bit-identical across runners. */
static void test_channel_tails(void)
{
    rng r = rng_seed(210);
    const int64_t h[2] = {3, 2}, w[2] = {2, 2};
    static const int64_t cs[] = {1, 2, 3, 5, 7, 9, 15, 17, 30, 71, 264, 1025, 2048, 3096};
    static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
    for (int k = 0; k < (int)(sizeof cs / sizeof cs[0]); k++) {
        msda_case c;
        msda_case_fixed(&c, dts[k % 3], 1, cs[k] > 256 ? 1 : 2, cs[k], 3, 2, h, w, 2);
        c.strided = k % 4 == 1;
        c.loc_mode = k % 2 ? LOC_SPECIAL : LOC_UNIFORM;
        check_fixed(&c, &r, k % N_RUNNERS, k);
    }
    msda_case c;
    msda_case_fixed(&c, SPA_FLOAT32, 2, 3, 71, 40, 2, h, w, 3);
    msda_io io;
    msda_io_make(&io, &c, &r, false);
    CU_ASSERT_EQUAL(run_fwd(&io, 0, 0), SPA_OK);
    unsigned char *first = tt_snapshot(&io.out);
    for (int run = 1; run < N_RUNNERS; run++) {
        tt_fill_canary(&io.out);
        CU_ASSERT_EQUAL(run_fwd(&io, run, (size_t)run * 4), SPA_OK);
        CU_ASSERT(tt_same_bytes(&io.out, first));
    }
    CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
    free(first);
    msda_io_free(&io);
}

/* More than 16 levels, points and heads (more than 256 samples per query). */
static void test_many_levels_points(void)
{
    rng r = rng_seed(211);
    int64_t h[20], w[20];
    for (int l = 0; l < 20; l++)
        h[l] = 1 + l % 3, w[l] = 1 + (l * 5) % 4;
    msda_case c;
    msda_case_fixed(&c, SPA_FLOAT32, 1, 17, 3, 4, 20, h, w, 18);
    c.loc_mode = LOC_SPECIAL;
    check_fixed(&c, &r, 2, 0);
    msda_case_fixed(&c, SPA_BFLOAT16, 1, 2, 16, 2, 18, h, w, 17);
    c.strided = true;
    check_fixed(&c, &r, 1, 1);
}

/* location, attnWeight and output each in its own float dtype (what
 * autocast hands over), packed and strided, C on and off the vector width. */
static void test_mixed_dtypes(void)
{
    rng r = rng_seed(212);
    const int64_t h[2] = {5, 2}, w[2] = {4, 3};
    static const spa_dtype mix[][4] = {/* value, location, attnWeight, output */
                                       {SPA_BFLOAT16, SPA_FLOAT32, SPA_FLOAT32, SPA_BFLOAT16},
                                       {SPA_FLOAT16, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT16},
                                       {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT32},
                                       {SPA_FLOAT32, SPA_FLOAT32, SPA_FLOAT32, SPA_FLOAT16},
                                       {SPA_BFLOAT16, SPA_FLOAT16, SPA_FLOAT32, SPA_FLOAT32},
                                       {SPA_FLOAT16, SPA_BFLOAT16, SPA_BFLOAT16, SPA_BFLOAT16}};
    int id = 0;
    for (int k = 0; k < (int)(sizeof mix / sizeof mix[0]); k++)
        for (int v = 0; v < 2; v++) {
            msda_case c;
            msda_case_fixed(&c, mix[k][0], 2, 2, v ? 13 : 32, 33, 2, h, w, v ? 3 : 4);
            c.ldt = mix[k][1], c.adt = mix[k][2], c.odt = mix[k][3];
            c.strided = v == 1;
            c.loc_mode = LOC_SPECIAL;
            check_fixed(&c, &r, id % N_RUNNERS, id);
            id++;
        }
}

/* Bit-identical results for the inline runner and pools of 1, 2 and 7 threads. */
static void test_deterministic_across_runners(void)
{
    const int64_t h[3] = {20, 9, 3}, w[3] = {30, 11, 5};
    for (int k = 0; k < 3; k++) {
        static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
        msda_case c;
        msda_case_fixed(&c, dts[k], 2, 3, 32, 700, 3, h, w, 4);
        rng r = rng_seed(203);
        msda_io io;
        msda_io_make(&io, &c, &r, false);
        CU_ASSERT_EQUAL(run_fwd(&io, 0, 0), SPA_OK);
        unsigned char *first = tt_snapshot(&io.out);
        for (int run = 1; run < N_RUNNERS; run++) {
            tt_fill_canary(&io.out);
            CU_ASSERT_EQUAL(run_fwd(&io, run, (size_t)run * 8), SPA_OK);
            CU_ASSERT(tt_same_bytes(&io.out, first));
        }
        CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
        free(first);
        msda_io_free(&io);
    }
}

/* The worked example of spec 6 (forward half): H = W = 1, value 1, location
 * 0, weight 1: only corner (y1, x1) is inside, weight 0.25. */
static void test_worked_example(void)
{
    const int64_t one = 1;
    msda_case c;
    msda_case_fixed(&c, SPA_FLOAT16, 1, 1, 8, 32, 1, &one, &one, 1);
    rng r = rng_seed(204);
    msda_io io;
    msda_io_make(&io, &c, &r, false);
    tt_fill_random(&io.value, &r, 1.0, 1.0);
    tt_fill_random(&io.attn, &r, 1.0, 1.0);
    tt_fill_random(&io.loc, &r, 0.0, 0.0);
    CU_ASSERT_EQUAL(run_fwd(&io, 0, 0), SPA_OK);
    for (int64_t i = 0; i < tt_numel(&io.out); i++)
        CU_ASSERT_EQUAL(tt_get(&io.out, i), 0.25);
    msda_io_free(&io);
}

/* NaN, +-Inf and huge locations: no crash, no access outside the tensors.
 * Infinite and huge ones are off the map (skipped samples); a NaN one makes
 * its query's row NaN in every channel, the others of a row give +0. */
static void test_nonfinite_locations(void)
{
    const int64_t h[2] = {4, 1}, w[2] = {3, 7};
    static const double bad_values[5] = {NAN, INFINITY, -INFINITY, 1e30, -1e30};
    /* strided views, then packed ones (the vector staging paths) */
    for (int k = 0; k < 6; k++) {
        static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
        msda_case c;
        msda_case_fixed(&c, dts[k % 3], 1, 2, 16, 32, 2, h, w, 3);
        c.strided = k < 3;
        rng r = rng_seed(205);
        msda_io io;
        msda_io_make(&io, &c, &r, false);
        for (int64_t i = 0; i < tt_numel(&io.loc); i++)
            msda_set_float(&io.loc, i, bad_values[rng_int(&r, 0, 4)]);
        CU_ASSERT_EQUAL(run_fwd(&io, k % 3, 5), SPA_OK);
        CU_ASSERT(msda_io_guards_ok(&io));
        const int64_t per_query = c.nl * c.np * 2;
        for (int64_t i = 0; i < tt_numel(&io.out); i++) {
            /* output [bs, nq, nh * C]; location [bs, nq, nh, nl, np, 2] */
            const int64_t row = i / c.c; /* (b, q, h) */
            bool nan_loc = false;
            for (int64_t j = 0; j < per_query; j++)
                nan_loc |= isnan(tt_get(&io.loc, row * per_query + j));
            double v = tt_get(&io.out, i);
            CU_ASSERT(nan_loc ? isnan(v) : v == 0.0 && !signbit(v));
        }
        /* one coordinate bad, the other fine: still skipped */
        for (int64_t i = 0; i < tt_numel(&io.loc); i++)
            msda_set_float(&io.loc, i, i % 2 ? 0.5 : bad_values[i % 5]);
        CU_ASSERT_EQUAL(run_fwd(&io, 0, 0), SPA_OK);
        CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
        CU_ASSERT(msda_io_guards_ok(&io));
        msda_io_free(&io);
    }
}

/* Infinite and NaN attention weights, on samples at pixel centres (exact
 * zero corner weights): a * samp as the spec orders it, +-Inf where the
 * sample is finite and nonzero, never the NaN that Inf folded into a zero
 * corner weight would make; the other queries as the reference. */
static void test_nonfinite_attention(void)
{
    const int64_t h[2] = {4, 2}, w[2] = {4, 8};
    static const double specials[3] = {INFINITY, -INFINITY, NAN};
    for (int k = 0; k < 6; k++) {
        static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
        msda_case c;
        msda_case_fixed(&c, dts[k % 3], 1, 2, k < 3 ? 40 : 7, 9, 2, h, w, 3);
        c.strided = k >= 3;
        rng r = rng_seed(211 + (uint64_t)k);
        msda_io io;
        msda_io_make(&io, &c, &r, false);
        /* every location a pixel centre: (i + 0.5) / W, exact in every dtype */
        for (int64_t i = 0; i < tt_numel(&io.loc); i++) {
            const int64_t l = (i / 2 / c.np) % c.nl, n = i % 2 ? c.h[l] : c.w[l];
            msda_set_float(&io.loc, i, ((double)rng_int(&r, 0, n - 1) + 0.5) / (double)n);
        }
        /* queries 0, 1, 2 (head 1, one sample each) and query 5 (head 0,
         * every sample): +Inf, -Inf, NaN, +Inf */
        const int64_t per_q = c.nh * c.nl * c.np;
        for (int s = 0; s < 3; s++)
            msda_set_float(&io.attn, s * per_q + c.nl * c.np + 1 + s, specials[s]);
        for (int64_t j = 0; j < c.nl * c.np; j++)
            msda_set_float(&io.attn, 5 * per_q + j, INFINITY);
        CU_ASSERT_EQUAL(run_fwd(&io, k % 3, 3), SPA_OK);
        CU_ASSERT(msda_io_guards_ok(&io));
        double *v = tt_to_doubles(&io.value), *l = tt_to_doubles(&io.loc), *a = tt_to_doubles(&io.attn);
        double *got = tt_to_doubles(&io.out);
        const int64_t n = tt_numel(&io.out);
        double *ref = malloc(sizeof(double) * (size_t)n), *mag = malloc(sizeof(double) * (size_t)n);
        ref_msda_shape sh = msda_case_shape(&c);
        ref_msda(&sh, v, l, a, REF_COORD_F32, ref, mag);
        int64_t nonfinite = 0, bad = 0;
        for (int64_t i = 0; i < n; i++) {
            if (isfinite(ref[i]))
                continue;
            nonfinite++;
            if (isnan(ref[i]) ? !isnan(got[i]) : got[i] != ref[i]) {
                if (bad++ < 5)
                    fprintf(stderr, "  output[%lld]: got %g want %g\n", (long long)i, got[i], ref[i]);
            }
            got[i] = ref[i] = mag[i] = 1.0; /* checked: out of the tolerance check below */
        }
        CU_ASSERT_EQUAL(nonfinite, 4 * c.c); /* the four rows */
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_EQUAL(msda_check("output", c.odt, 0x1p-17, got, ref, mag, n), 0);
        free(v), free(l), free(a), free(got), free(ref), free(mag);
        msda_io_free(&io);
    }
}

/* ---- validation: one case per rule, nothing written on error ---- */

typedef struct fwd_args {
    spa_tensor v, ss, lsi, loc, attn, out;
    bool null_v, null_ss, null_lsi, null_loc, null_attn, null_out, null_size, null_ex;
} fwd_args;

static spa_status call_phase1(const fwd_args *a, uint64_t *size, spa_executor *ex)
{
    return spa_msda_get_workspace_size(a->null_v ? NULL : &a->v, a->null_ss ? NULL : &a->ss,
                                       a->null_lsi ? NULL : &a->lsi, a->null_loc ? NULL : &a->loc,
                                       a->null_attn ? NULL : &a->attn, a->null_out ? NULL : &a->out,
                                       a->null_size ? NULL : size, a->null_ex ? NULL : ex);
}

/* Index contents are read from these buffers by the mutations below. */
static int64_t ss_bad[4], lsi_bad[2];
static void point_indices(fwd_args *a, int64_t h0, int64_t w0, int64_t h1, int64_t w1, int64_t s0, int64_t s1)
{
    ss_bad[0] = h0, ss_bad[1] = w0, ss_bad[2] = h1, ss_bad[3] = w1;
    lsi_bad[0] = s0, lsi_bad[1] = s1;
    const int64_t ssd[2] = {2, 2}, lsid[1] = {2};
    spa_tensor_init(&a->ss, SPA_INT64, 2, ssd, ss_bad);
    spa_tensor_init(&a->lsi, SPA_INT64, 1, lsid, lsi_bad);
}

/* Baseline levels: 3x4 at 0 and 2x2 at 12, nk = 16. */
typedef void (*mutate_fn)(fwd_args *a);
#define MUT(name, body) static void name(fwd_args *a) { body; }
MUT(m_null_v, a->null_v = true)
MUT(m_null_ss, a->null_ss = true)
MUT(m_null_lsi, a->null_lsi = true)
MUT(m_null_loc, a->null_loc = true)
MUT(m_null_attn, a->null_attn = true)
MUT(m_null_out, a->null_out = true)
MUT(m_null_size, a->null_size = true)
MUT(m_null_ex, a->null_ex = true)
MUT(m_null_v_data, a->v.data = NULL)
MUT(m_null_ss_data, a->ss.data = NULL)
MUT(m_dt_v_int, a->v.dtype = SPA_INT32)
MUT(m_dt_v_unknown, a->v.dtype = 99)
MUT(m_dt_ss_float, a->ss.dtype = SPA_FLOAT32)
MUT(m_dt_ss_u8, a->ss.dtype = SPA_UINT8)
MUT(m_dt_lsi_float, a->lsi.dtype = SPA_FLOAT16)
MUT(m_dt_loc, a->loc.dtype = SPA_FLOAT16)
MUT(m_dt_attn, a->attn.dtype = SPA_BFLOAT16)
MUT(m_dt_out, a->out.dtype = SPA_FLOAT16)
MUT(m_rank_v, a->v.rank = 3)
MUT(m_rank_ss, a->ss.rank = 1)
MUT(m_rank_lsi, a->lsi.rank = 2; a->lsi.dims[1] = 1)
MUT(m_rank_loc, a->loc.rank = 5)
MUT(m_rank_attn, a->attn.rank = 4)
MUT(m_rank_out, a->out.rank = 4; a->out.dims[3] = 1)
MUT(m_rank_huge, a->v.rank = 9)
MUT(m_ss_dim1, a->ss.dims[1] = 3)
MUT(m_loc_dim5, a->loc.dims[5] = 3)
MUT(m_nq_31, a->loc.dims[1] = 31; a->attn.dims[1] = 31; a->out.dims[1] = 31)
MUT(m_nh_17, a->v.dims[2] = 17; a->loc.dims[2] = 17; a->attn.dims[2] = 17; a->out.dims[2] = 17 * 16)
MUT(m_np_17, a->loc.dims[4] = 17; a->attn.dims[4] = 17)
MUT(m_c_12, a->v.dims[3] = 12; a->out.dims[2] = 2 * 12)
MUT(m_c_264, a->v.dims[3] = 264; a->out.dims[2] = 2 * 264)
MUT(m_ss_levels, a->ss.dims[0] = 1)
MUT(m_attn_levels, a->attn.dims[3] = 1)
MUT(m_lsi_levels, a->lsi.dims[0] = 1)
MUT(m_bs_loc, a->loc.dims[0] = 1)
MUT(m_bs_attn, a->attn.dims[0] = 1)
MUT(m_bs_out, a->out.dims[0] = 1)
MUT(m_nh_value, a->v.dims[2] = 1)
MUT(m_nh_attn, a->attn.dims[2] = 1)
MUT(m_nq_attn, a->attn.dims[1] = 33)
MUT(m_nq_out, a->out.dims[1] = 33)
MUT(m_np_attn, a->attn.dims[4] = 1)
MUT(m_out_width, a->out.dims[2] = 16)
MUT(m_stride_negative, a->loc.strides[0] = -a->loc.strides[0])
MUT(m_dim_negative, a->v.dims[1] = -1)
MUT(m_span_overflow, a->v.strides[0] = INT64_MAX / 2)
MUT(m_h_zero, point_indices(a, 0, 4, 2, 2, 0, 12))
MUT(m_w_zero, point_indices(a, 3, 4, 2, 0, 0, 12))
MUT(m_h_negative, point_indices(a, -3, 4, 2, 2, 0, 12))
MUT(m_w_negative, point_indices(a, 3, -4, 2, 2, 0, 12))
MUT(m_start_negative, point_indices(a, 3, 4, 2, 2, -1, 12))
MUT(m_level_past_end, point_indices(a, 3, 4, 2, 2, 0, 13))
MUT(m_level_too_big, point_indices(a, 3, 6, 2, 2, 0, 12))
MUT(m_area_overflow, point_indices(a, INT64_MAX / 2, 4, 2, 2, 0, 12))
MUT(m_h_over_int32, point_indices(a, (int64_t)1 << 32, 1, 2, 2, 0, 12))
MUT(m_start_over_int32, point_indices(a, 3, 4, 2, 2, 0, ((int64_t)1 << 32) + 12))
MUT(m_start_plus_area_overflow, point_indices(a, 3, 4, 2, 2, 0, INT64_MAX - 1))

typedef struct rule {
    const char *name;
    mutate_fn fn;
    spa_status want;
} rule;

static const rule fwd_rules[] = {
    {"NULL value", m_null_v, SPA_ERR_NULLPTR},
    {"NULL spatialShape", m_null_ss, SPA_ERR_NULLPTR},
    {"NULL levelStartIndex", m_null_lsi, SPA_ERR_NULLPTR},
    {"NULL location", m_null_loc, SPA_ERR_NULLPTR},
    {"NULL attnWeight", m_null_attn, SPA_ERR_NULLPTR},
    {"NULL output", m_null_out, SPA_ERR_NULLPTR},
    {"NULL workspaceSize", m_null_size, SPA_ERR_NULLPTR},
    {"NULL executor", m_null_ex, SPA_ERR_NULLPTR},
    {"NULL value data", m_null_v_data, SPA_ERR_NULLPTR},
    {"NULL spatialShape data", m_null_ss_data, SPA_ERR_NULLPTR},
    {"value int32", m_dt_v_int, SPA_ERR_INVALID},
    {"value unknown dtype", m_dt_v_unknown, SPA_ERR_INVALID},
    {"spatialShape float", m_dt_ss_float, SPA_ERR_INVALID},
    {"spatialShape uint8", m_dt_ss_u8, SPA_ERR_INVALID},
    {"levelStartIndex float16", m_dt_lsi_float, SPA_ERR_INVALID},
    {"value rank 3", m_rank_v, SPA_ERR_INVALID},
    {"spatialShape rank 1", m_rank_ss, SPA_ERR_INVALID},
    {"levelStartIndex rank 2", m_rank_lsi, SPA_ERR_INVALID},
    {"location rank 5", m_rank_loc, SPA_ERR_INVALID},
    {"attnWeight rank 4", m_rank_attn, SPA_ERR_INVALID},
    {"output rank 4", m_rank_out, SPA_ERR_INVALID},
    {"rank 9", m_rank_huge, SPA_ERR_INVALID},
    {"spatialShape dim1 3", m_ss_dim1, SPA_ERR_INVALID},
    {"location dim5 3", m_loc_dim5, SPA_ERR_INVALID},
    {"spatialShape levels != nl", m_ss_levels, SPA_ERR_INVALID},
    {"attnWeight levels != nl", m_attn_levels, SPA_ERR_INVALID},
    {"levelStartIndex levels != nl", m_lsi_levels, SPA_ERR_INVALID},
    {"location batch", m_bs_loc, SPA_ERR_INVALID},
    {"attnWeight batch", m_bs_attn, SPA_ERR_INVALID},
    {"output batch", m_bs_out, SPA_ERR_INVALID},
    {"value heads", m_nh_value, SPA_ERR_INVALID},
    {"attnWeight heads", m_nh_attn, SPA_ERR_INVALID},
    {"attnWeight queries", m_nq_attn, SPA_ERR_INVALID},
    {"output queries", m_nq_out, SPA_ERR_INVALID},
    {"attnWeight points", m_np_attn, SPA_ERR_INVALID},
    {"output width != nh*C", m_out_width, SPA_ERR_INVALID},
    {"negative stride", m_stride_negative, SPA_ERR_INVALID},
    {"negative dim", m_dim_negative, SPA_ERR_INVALID},
    {"span overflows", m_span_overflow, SPA_ERR_INVALID},
    {"level H 0", m_h_zero, SPA_ERR_INVALID},
    {"level W 0", m_w_zero, SPA_ERR_INVALID},
    {"level H negative", m_h_negative, SPA_ERR_INVALID},
    {"level W negative", m_w_negative, SPA_ERR_INVALID},
    {"level start negative", m_start_negative, SPA_ERR_INVALID},
    {"level past num_keys", m_level_past_end, SPA_ERR_INVALID},
    {"level larger than num_keys", m_level_too_big, SPA_ERR_INVALID},
    {"H*W overflows", m_area_overflow, SPA_ERR_INVALID},
    {"H over INT32_MAX", m_h_over_int32, SPA_ERR_INVALID},
    {"start over INT32_MAX", m_start_over_int32, SPA_ERR_INVALID},
    {"start + H*W overflows", m_start_plus_area_overflow, SPA_ERR_INVALID},
};

/* The NPU's limits (spec 8.1 rules 2 and 5) that the native API lifts: the
 * aclnn layer still refuses them (test_acl_ops.c). Phase 1 only reads the
 * index data, which these leave alone. */
static const rule fwd_lifted[] = {
    {"location dtype != value", m_dt_loc, SPA_OK},
    {"attnWeight dtype != value", m_dt_attn, SPA_OK},
    {"output dtype != value", m_dt_out, SPA_OK},
    {"nq 31", m_nq_31, SPA_OK},
    {"nh 17", m_nh_17, SPA_OK},
    {"np 17", m_np_17, SPA_OK},
    {"C 12", m_c_12, SPA_OK},
    {"C 264", m_c_264, SPA_OK},
};

static void test_validation_rules(void)
{
    /* Baseline: bs 2, nh 2, C 16, nq 32, levels 3x4 and 2x2, 2 points. */
    const int64_t h[2] = {3, 2}, w[2] = {4, 2};
    msda_case c;
    msda_case_fixed(&c, SPA_FLOAT32, 2, 2, 16, 32, 2, h, w, 2);
    rng r = rng_seed(206);
    msda_io io;
    msda_io_make(&io, &c, &r, false);
    unsigned char *out_before = tt_snapshot(&io.out);
    for (size_t k = 0; k < sizeof fwd_rules / sizeof fwd_rules[0]; k++) {
        fwd_args a = {io.value.t, io.ss.t, io.lsi.t, io.loc.t, io.attn.t, io.out.t,
                      false, false, false, false, false, false, false, false};
        fwd_rules[k].fn(&a);
        uint64_t size = 0x5A5A5A5A5A5A5A5Aull;
        spa_executor ex, ex_before;
        memset(&ex, 0x5A, sizeof ex);
        ex_before = ex;
        spa_status st = call_phase1(&a, &size, &ex);
        if (st != fwd_rules[k].want)
            fprintf(stderr, "  rule '%s': got %d want %d\n", fwd_rules[k].name, (int)st, (int)fwd_rules[k].want);
        CU_ASSERT_EQUAL(st, fwd_rules[k].want);
        CU_ASSERT_EQUAL(size, 0x5A5A5A5A5A5A5A5Aull);
        CU_ASSERT(refusal_recorded(&ex, &ex_before, st));
        CU_ASSERT(tt_same_bytes(&io.out, out_before));
    }
    for (size_t k = 0; k < sizeof fwd_lifted / sizeof fwd_lifted[0]; k++) {
        fwd_args a = {io.value.t, io.ss.t, io.lsi.t, io.loc.t, io.attn.t, io.out.t,
                      false, false, false, false, false, false, false, false};
        fwd_lifted[k].fn(&a);
        spa_tensor *grown[4] = {&a.v, &a.loc, &a.attn, &a.out}; /* packed again for their new dims */
        for (int j = 0; j < 4; j++)
            spa_tensor_init(grown[j], (spa_dtype)grown[j]->dtype, grown[j]->rank, grown[j]->dims, grown[j]->data);
        /* a dtype this build leaves out (DTYPES=) is refused instead */
        bool built = true;
        for (int j = 0; j < 4; j++)
            built = built && test_built_dtype((spa_dtype)grown[j]->dtype) == (spa_dtype)grown[j]->dtype;
        uint64_t size = 0;
        spa_executor ex;
        spa_status st = call_phase1(&a, &size, &ex);
        if (st != (built ? SPA_OK : SPA_ERR_INVALID))
            fprintf(stderr, "  lifted rule '%s': got %d\n", fwd_lifted[k].name, (int)st);
        CU_ASSERT_EQUAL(st, built ? SPA_OK : SPA_ERR_INVALID);
        CU_ASSERT(!built || size > 0);
    }
    /* The baseline itself passes, with INT32 indices too. */
    fwd_args a = {io.value.t, io.ss.t, io.lsi.t, io.loc.t, io.attn.t, io.out.t,
                  false, false, false, false, false, false, false, false};
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL(call_phase1(&a, &size, &ex), SPA_OK);
    free(out_before);
    msda_io_free(&io);
}

/* Phase 2 refuses bad executors and workspaces, and rechecks the indices. */
static void test_phase2_errors(void)
{
    const int64_t h[2] = {5, 2}, w[2] = {4, 3};
    msda_case c;
    msda_case_fixed(&c, SPA_BFLOAT16, 1, 2, 24, 40, 2, h, w, 3);
    rng r = rng_seed(207);
    msda_io io;
    msda_io_make(&io, &c, &r, false);
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL_FATAL(spa_msda_get_workspace_size(&io.value.t, &io.ss.t, &io.lsi.t, &io.loc.t,
                                                      &io.attn.t, &io.out.t, &size, &ex), SPA_OK);
    CU_ASSERT(size > 0);
    unsigned char *out_before = tt_snapshot(&io.out);
    tws ws;
    tws_make(&ws, size, 0);
    CU_ASSERT_EQUAL(spa_msda(ws.ptr, size, NULL, NULL), SPA_ERR_NULLPTR);
    CU_ASSERT_EQUAL(spa_msda(NULL, size, &ex, NULL), SPA_ERR_NULLPTR);
    CU_ASSERT_EQUAL(spa_msda(ws.ptr, size - 1, &ex, NULL), SPA_ERR_WORKSPACE);
    spa_executor bad = ex;
    bad.u.bytes[100] ^= 1;
    CU_ASSERT_EQUAL(spa_msda(ws.ptr, size, &bad, NULL), SPA_ERR_INVALID);
    CU_ASSERT_EQUAL(spa_msda_grad(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    CU_ASSERT_EQUAL(spa_nsa_compress(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    /* The caller breaks the indices after phase 1: refused, nothing written. */
    tt_set_int(&io.ss, 0, 7); /* level 0: 7x4 = 28 keys > nk = 26 */
    CU_ASSERT_EQUAL(spa_msda(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    tt_set_int(&io.ss, 0, 5);
    tt_set_int(&io.ss, 3, 0); /* W 0 */
    CU_ASSERT_EQUAL(spa_msda(ws.ptr, size, &ex, test_runner(2)), SPA_ERR_INVALID);
    tt_set_int(&io.ss, 3, 3);
    tt_set_int(&io.lsi, 1, 21); /* 21 + 6 > 26 */
    CU_ASSERT_EQUAL(spa_msda(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    tt_set_int(&io.lsi, 1, -1);
    CU_ASSERT_EQUAL(spa_msda(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    tt_set_int(&io.lsi, 1, 20);
    CU_ASSERT(tt_same_bytes(&io.out, out_before));
    CU_ASSERT(tws_guard_ok(&ws));
    /* Still-valid new contents are used: overlapping level 1 at key 0. */
    tt_set_int(&io.lsi, 1, 0);
    CU_ASSERT_EQUAL(spa_msda(ws.ptr, size, &ex, NULL), SPA_OK);
    c.start[1] = 0;
    CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
    tt_set_int(&io.lsi, 1, 20);
    c.start[1] = 20;
    /* Valid again: runs, and may run twice with the same result. */
    CU_ASSERT_EQUAL(spa_msda(ws.ptr, size, &ex, NULL), SPA_OK);
    CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
    unsigned char *out_once = tt_snapshot(&io.out);
    CU_ASSERT_EQUAL(spa_msda(ws.ptr, size, &ex, test_runner(3)), SPA_OK);
    CU_ASSERT(tt_same_bytes(&io.out, out_once));
    CU_ASSERT(tws_guard_ok(&ws));
    free(out_before);
    free(out_once);
    tws_free(&ws);
    msda_io_free(&io);
}

/* An empty input: success, no workspace, non-empty output zero-filled. */
static void test_empty_inputs(void)
{
    const int64_t h[2] = {2, 2}, w[2] = {3, 1};
    for (int k = 0; k < 5; k++) {
        msda_case c;
        msda_case_fixed(&c, SPA_FLOAT16, 2, 2, 8, 32, 2, h, w, 2);
        if (k == 0)
            c.nk = 0; /* value empty, output not */
        else if (k == 1)
            c.np = 0;
        else if (k == 2)
            c.bs = 0; /* everything empty */
        else if (k == 3)
            c.c = 0;
        else
            c.nq = 0; /* no query: nothing to write */
        c.strided = k == 1;
        rng r = rng_seed(208);
        msda_io io;
        msda_io_make(&io, &c, &r, false);
        uint64_t size = 7;
        spa_executor ex;
        CU_ASSERT_EQUAL(spa_msda_get_workspace_size(&io.value.t, &io.ss.t, &io.lsi.t, &io.loc.t,
                                                    &io.attn.t, &io.out.t, &size, &ex), SPA_OK);
        CU_ASSERT_EQUAL(size, 0);
        CU_ASSERT_EQUAL(spa_msda(NULL, 0, &ex, test_runner(k % N_RUNNERS)), SPA_OK);
        const int64_t per_query = c.nl * c.np * 2;
        for (int64_t i = 0; i < tt_numel(&io.out); i++) {
            /* output [bs, nq, nh * C]; location [bs, nq, nh, nl, np, 2] */
            const int64_t row = i / c.c; /* (b, q, h) */
            bool nan_loc = false;
            for (int64_t j = 0; j < per_query; j++)
                nan_loc |= isnan(tt_get(&io.loc, row * per_query + j));
            double v = tt_get(&io.out, i);
            CU_ASSERT(nan_loc ? isnan(v) : v == 0.0 && !signbit(v));
        }
        CU_ASSERT(msda_io_guards_ok(&io));
        msda_io_free(&io);
    }
}

void suite_msda(void)
{
    CU_pSuite s = CU_add_suite("msda", NULL, NULL);
    CU_add_test(s, "random shapes, mixed dtypes, C 1..256, strided", test_random_shapes);
    CU_add_test(s, "public test shapes (C 1, 2; 2 and 5 queries)", test_public_shapes);
    CU_add_test(s, "channel tails and C up to 3096", test_channel_tails);
    CU_add_test(s, "more than 16 levels, points and heads", test_many_levels_points);
    CU_add_test(s, "mixed dtypes", test_mixed_dtypes);
    CU_add_test(s, "extreme shapes", test_extreme_shapes);
    CU_add_test(s, "bit-identical across runners", test_deterministic_across_runners);
    CU_add_test(s, "worked example", test_worked_example);
    CU_add_test(s, "NaN and Inf locations", test_nonfinite_locations);
    CU_add_test(s, "NaN and Inf attention weights", test_nonfinite_attention);
    CU_add_test(s, "validation rules", test_validation_rules);
    CU_add_test(s, "phase 2 errors", test_phase2_errors);
    CU_add_test(s, "empty inputs", test_empty_inputs);
}
