/* MultiScaleDeformableAttentionGrad: the fp64 reference against finite
 * differences, the library against the reference (mixed dtypes included),
 * every rule, determinism, hostile locations and index tensors. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msda_case.h"

/* ---- the reference against central differences of the fp64 forward ---- */

/* L = sum(out * gout), out from the exact-coordinate fp64 forward. */
static double loss(const ref_msda_shape *s, const double *v, const double *l, const double *a,
                   const double *g, double *out, double *mag)
{
    ref_msda(s, v, l, a, REF_COORD_EXACT, out, mag);
    double sum = 0.0;
    for (int64_t i = 0; i < s->bs * s->nq * s->nh * s->c; i++)
        sum += out[i] * g[i];
    return sum;
}

/* Central difference of L along x[i]; L is linear in value and attnWeight
 * and piecewise bilinear in the location, so away from cell borders the
 * difference is exact up to rounding. */
static double central(const ref_msda_shape *s, double *v, double *l, double *a, const double *g,
                      double *x, int64_t i, double eps, double *out, double *mag)
{
    const double keep = x[i];
    x[i] = keep + eps;
    const double up = loss(s, v, l, a, g, out, mag);
    x[i] = keep - eps;
    const double down = loss(s, v, l, a, g, out, mag);
    x[i] = keep;
    return (up - down) / (2.0 * eps);
}

/* A normalised coordinate in [-0.2, 1.2] whose x = loc*n - 0.5 stays 0.01
 * away from every integer (cell borders, the -1 and n range ends). */
static double away_from_kinks(rng *r, int64_t n)
{
    for (;;) {
        const double loc = -0.2 + 1.4 * rng_unit(r);
        const double x = loc * (double)n - 0.5;
        if (fabs(x - floor(x + 0.5)) > 0.01)
            return loc;
    }
}

static void test_reference_vs_finite_differences(void)
{
    /* mmcv's test shapes: levels 6x4 and 3x2, 2 heads, 2 points. */
    const int64_t h[2] = {6, 3}, w[2] = {4, 2}, start[2] = {0, 24};
    ref_msda_shape s = {2, 30, 2, 8, 3, 2, 2, h, w, start};
    rng r = rng_seed(301);
    const int64_t nv = s.bs * s.nk * s.nh * s.c, ns = s.bs * s.nq * s.nh * s.nl * s.np;
    const int64_t no = s.bs * s.nq * s.nh * s.c;
    double *v = malloc(sizeof(double) * (size_t)nv), *l = malloc(sizeof(double) * (size_t)(2 * ns));
    double *a = malloc(sizeof(double) * (size_t)ns), *g = malloc(sizeof(double) * (size_t)no);
    double *out = malloc(sizeof(double) * (size_t)no), *mag = malloc(sizeof(double) * (size_t)no);
    double *gv = malloc(sizeof(double) * (size_t)nv), *gvm = malloc(sizeof(double) * (size_t)nv);
    double *gl = malloc(sizeof(double) * (size_t)(2 * ns)), *glm = malloc(sizeof(double) * (size_t)(2 * ns));
    double *ga = malloc(sizeof(double) * (size_t)ns), *gam = malloc(sizeof(double) * (size_t)ns);
    for (int64_t i = 0; i < nv; i++)
        v[i] = 2.0 * rng_unit(&r) - 1.0;
    for (int64_t i = 0; i < ns; i++) {
        const int64_t lev = (i / s.np) % s.nl;
        l[2 * i] = away_from_kinks(&r, w[lev]);
        l[2 * i + 1] = away_from_kinks(&r, h[lev]);
        a[i] = 2.0 * rng_unit(&r) - 1.0;
    }
    for (int64_t i = 0; i < no; i++)
        g[i] = 2.0 * rng_unit(&r) - 1.0;
    ref_msda_grad(&s, v, l, a, g, REF_COORD_EXACT, gv, gvm, gl, glm, ga, gam);
    int64_t bad = 0, live = 0;
    for (int64_t i = 0; i < nv; i++)
        bad += fabs(central(&s, v, l, a, g, v, i, 1e-3, out, mag) - gv[i]) > 1e-9;
    for (int64_t i = 0; i < ns; i++)
        bad += fabs(central(&s, v, l, a, g, a, i, 1e-3, out, mag) - ga[i]) > 1e-9;
    for (int64_t i = 0; i < 2 * ns; i++) {
        const double fd = central(&s, v, l, a, g, l, i, 1e-5, out, mag);
        if (fabs(fd - gl[i]) > 1e-7 * (1.0 + fabs(gl[i]))) {
            if (bad++ < 5)
                fprintf(stderr, "  gradLocation[%lld]: fd %.12g reference %.12g\n", (long long)i, fd, gl[i]);
        }
        live += gl[i] != 0.0;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(live > ns); /* most samples are inside, so the check has teeth */
    free(v), free(l), free(a), free(g), free(out), free(mag);
    free(gv), free(gvm), free(gl), free(glm), free(ga), free(gam);
}

/* ---- the library ---- */

static spa_status run_grad(msda_io *io, int runner, size_t skew)
{
    uint64_t ws_size = 0;
    spa_executor ex;
    spa_status st = spa_msda_grad_get_workspace_size(&io->value.t, &io->ss.t, &io->lsi.t, &io->loc.t,
                                                     &io->attn.t, &io->out.t, &io->gv.t, &io->gl.t,
                                                     &io->ga.t, &ws_size, &ex);
    if (st != SPA_OK)
        return st;
    tws ws;
    tws_make(&ws, ws_size, skew);
    st = spa_msda_grad(ws.ptr, ws.size, &ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

static int64_t compare_with_ref(const msda_case *c, const msda_io *io)
{
    ref_msda_shape s = msda_case_shape(c);
    double *v = tt_to_doubles(&io->value), *l = tt_to_doubles(&io->loc), *a = tt_to_doubles(&io->attn);
    double *g = tt_to_doubles(&io->out);
    const int64_t nv = tt_numel(&io->value), nl = tt_numel(&io->loc), na = tt_numel(&io->attn);
    double *gv = malloc(sizeof(double) * (size_t)(nv + 1)), *gvm = malloc(sizeof(double) * (size_t)(nv + 1));
    double *gl = malloc(sizeof(double) * (size_t)(nl + 1)), *glm = malloc(sizeof(double) * (size_t)(nl + 1));
    double *ga = malloc(sizeof(double) * (size_t)(na + 1)), *gam = malloc(sizeof(double) * (size_t)(na + 1));
    ref_msda_grad(&s, v, l, a, g, REF_COORD_F32, gv, gvm, gl, glm, ga, gam);
    double *got_v = tt_to_doubles(&io->gv), *got_l = tt_to_doubles(&io->gl), *got_a = tt_to_doubles(&io->ga);
    int64_t bad = msda_check("gradValue", c->gvdt, 0x1p-16, got_v, gv, gvm, nv);
    bad += msda_check("gradLocation", c->gldt, 0x1p-17, got_l, gl, glm, nl);
    bad += msda_check("gradAttnWeight", c->gadt, 0x1p-17, got_a, ga, gam, na);
    free(v), free(l), free(a), free(g), free(gv), free(gvm), free(gl), free(glm), free(ga), free(gam);
    free(got_v), free(got_l), free(got_a);
    return bad;
}

static void report(const msda_case *c, int i, spa_status st, int64_t bad, bool guards)
{
    char desc[512];
    msda_case_describe(c, desc, sizeof desc);
    fprintf(stderr, "  case %d (%s): status %d, %lld bad, guards %s\n", i, desc, (int)st, (long long)bad,
            guards ? "ok" : "BROKEN");
}

static void check_case(msda_case *c, rng *r, int i, int runner)
{
    msda_io io;
    msda_io_make(&io, c, r, true);
    spa_status st = run_grad(&io, runner, (size_t)rng_int(r, 0, 63));
    CU_ASSERT_EQUAL(st, SPA_OK);
    int64_t bad = st == SPA_OK ? compare_with_ref(c, &io) : -1;
    bool guards = msda_io_guards_ok(&io);
    if (bad || !guards || st != SPA_OK)
        report(c, i, st, bad, guards);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(guards);
    msda_io_free(&io);
}

static void test_random_shapes(void)
{
    rng r = rng_seed(302);
    for (int i = 0; i < MSDA_RANDOM_CASES; i++) {
        msda_case c;
        msda_case_draw(&c, i, &r, true);
        check_case(&c, &r, i, i % N_RUNNERS);
    }
}

static void test_extreme_shapes(void)
{
    rng r = rng_seed(303);
    int64_t h[16], w[16];
    for (int l = 0; l < 16; l++)
        h[l] = 1 + l % 5, w[l] = 1 + (l * 7) % 9;
    msda_case cs[4];
    msda_case_fixed(&cs[0], SPA_FLOAT32, 1, 16, 8, 5, 16, h, w, 16);
    msda_case_fixed(&cs[1], SPA_BFLOAT16, 2, 2, 256, 32, 16, h, w, 2);
    msda_case_fixed(&cs[2], SPA_FLOAT16, 1, 3, 256, 1, 1, h + 4, w + 4, 16);
    msda_case_fixed(&cs[3], SPA_FLOAT32, 1, 1, 8, 3, 1, h, w, 1); /* a single 1x1 level */
    for (int i = 0; i < 4; i++) {
        cs[i].strided = i == 1;
        cs[i].loc_mode = LOC_SPECIAL;
        check_case(&cs[i], &r, i, 2);
    }
}

/* The public implementations' gradient checks: N 1, M 2 heads, Lq 2,
 * levels 6x4 and 3x2, 2 points, C in {30, 32, 64, 71, 1025, 2048, 3096}
 * (partial vectors on every layer, the tile shrunk for large C), and their
 * module's shapes (5 queries, 3 heads, C 1 and 2). All three gradients
 * against the reference, dtypes in turn (mixed every other case). */
static void test_public_shapes(void)
{
    rng r = rng_seed(310);
    const int64_t h[4] = {6, 3, 2, 1}, w[4] = {4, 2, 2, 1};
    static const int64_t cs[] = {30, 32, 64, 71, 1025, 2048, 3096};
    static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
    int id = 0;
    for (int k = 0; k < (int)(sizeof cs / sizeof cs[0]); k++, id++) {
        msda_case c;
        msda_case_fixed(&c, dts[k % 3], 1, 2, cs[k], 2, 2, h, w, 2);
        if (k % 2) /* location, attnWeight, gradOutput and the grads each in another dtype */
            c.ldt = dts[(k + 1) % 3], c.adt = dts[(k + 2) % 3], c.odt = dts[(k + 1) % 3],
            c.gvdt = dts[(k + 2) % 3], c.gldt = dts[k % 3], c.gadt = dts[(k + 1) % 3];
        c.loc_mode = k % 3 == 2 ? LOC_SPECIAL : LOC_UNIFORM;
        c.strided = k == 3;
        check_case(&c, &r, id, id % N_RUNNERS);
    }
    for (int64_t ch = 1; ch <= 2; ch++)
        for (int k = 0; k < 3; k++, id++) {
            msda_case c;
            msda_case_fixed(&c, dts[k], 2, 3, ch, 5, 4, h, w, 4);
            c.strided = k == 1;
            c.loc_mode = LOC_SPECIAL;
            check_case(&c, &r, id, id % N_RUNNERS);
        }
}

/* More than 16 levels, points and heads, and a channel tail: bit-identical
 * across runners too. */
static void test_many_levels_points(void)
{
    rng r = rng_seed(311);
    int64_t h[20], w[20];
    for (int l = 0; l < 20; l++)
        h[l] = 1 + l % 3, w[l] = 1 + (l * 5) % 4;
    msda_case c;
    msda_case_fixed(&c, SPA_FLOAT32, 1, 17, 3, 3, 20, h, w, 18);
    c.loc_mode = LOC_SPECIAL;
    check_case(&c, &r, 0, 2);
    msda_case_fixed(&c, SPA_BFLOAT16, 1, 2, 13, 4, 18, h, w, 17);
    c.strided = true;
    msda_io io;
    msda_io_make(&io, &c, &r, true);
    CU_ASSERT_EQUAL(run_grad(&io, 0, 0), SPA_OK);
    unsigned char *first[3] = {tt_snapshot(&io.gv), tt_snapshot(&io.gl), tt_snapshot(&io.ga)};
    for (int run = 1; run < N_RUNNERS; run++) {
        tt_fill_canary(&io.gv), tt_fill_canary(&io.gl), tt_fill_canary(&io.ga);
        CU_ASSERT_EQUAL(run_grad(&io, run, (size_t)run * 8), SPA_OK);
        CU_ASSERT(tt_same_bytes(&io.gv, first[0]));
        CU_ASSERT(tt_same_bytes(&io.gl, first[1]));
        CU_ASSERT(tt_same_bytes(&io.ga, first[2]));
    }
    CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
    for (int j = 0; j < 3; j++)
        free(first[j]);
    msda_io_free(&io);
}

/* gradValue f32 in place, f32 strided (workspace), f16 and bf16 (workspace):
 * bit-identical for the inline runner and pools of 1, 2 and 7 threads. */
static void test_deterministic_across_runners(void)
{
    const int64_t h[3] = {20, 9, 3}, w[3] = {30, 11, 5};
    for (int k = 0; k < 4; k++) {
        static const spa_dtype dts[4] = {SPA_FLOAT32, SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
        msda_case c;
        msda_case_fixed(&c, dts[k], 2, 3, 32, 300, 3, h, w, 4);
        c.strided = k == 1;
        rng r = rng_seed(304);
        msda_io io;
        msda_io_make(&io, &c, &r, true);
        /* few keys, many samples: every gradValue row gets many additions */
        CU_ASSERT_EQUAL(run_grad(&io, 0, 0), SPA_OK);
        unsigned char *first[3] = {tt_snapshot(&io.gv), tt_snapshot(&io.gl), tt_snapshot(&io.ga)};
        for (int run = 1; run < N_RUNNERS; run++) {
            tt_fill_canary(&io.gv), tt_fill_canary(&io.gl), tt_fill_canary(&io.ga);
            CU_ASSERT_EQUAL(run_grad(&io, run, (size_t)run * 8), SPA_OK);
            CU_ASSERT(tt_same_bytes(&io.gv, first[0]));
            CU_ASSERT(tt_same_bytes(&io.gl, first[1]));
            CU_ASSERT(tt_same_bytes(&io.ga, first[2]));
        }
        CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
        for (int j = 0; j < 3; j++)
            free(first[j]);
        msda_io_free(&io);
    }
}

/* spec 6: H = W = 1, C 8, 32 queries, value, weight and gradOutput 1,
 * location 0: gradValue 8, gradLocation (4, 4), gradAttnWeight 2. */
static void test_worked_example(void)
{
    const int64_t one = 1;
    msda_case c;
    msda_case_fixed(&c, SPA_FLOAT32, 1, 1, 8, 32, 1, &one, &one, 1);
    c.gvdt = SPA_BFLOAT16;
    c.gldt = SPA_FLOAT16;
    rng r = rng_seed(305);
    msda_io io;
    msda_io_make(&io, &c, &r, true);
    tt_fill_random(&io.value, &r, 1.0, 1.0);
    tt_fill_random(&io.attn, &r, 1.0, 1.0);
    tt_fill_random(&io.out, &r, 1.0, 1.0);
    tt_fill_random(&io.loc, &r, 0.0, 0.0);
    CU_ASSERT_EQUAL(run_grad(&io, 1, 0), SPA_OK);
    for (int64_t i = 0; i < tt_numel(&io.gv); i++)
        CU_ASSERT_EQUAL(tt_get(&io.gv, i), 8.0);
    for (int64_t i = 0; i < tt_numel(&io.gl); i++)
        CU_ASSERT_EQUAL(tt_get(&io.gl, i), 4.0);
    for (int64_t i = 0; i < tt_numel(&io.ga); i++)
        CU_ASSERT_EQUAL(tt_get(&io.ga, i), 2.0);
    msda_io_free(&io);
}

/* NaN, +-Inf and huge locations: no crash, no access outside the tensors,
 * no gradValue share; zero location and weight gradients for the samples off
 * the map, NaN ones for the samples at a NaN location. */
static void test_nonfinite_locations(void)
{
    const int64_t h[2] = {4, 1}, w[2] = {3, 7};
    static const double bad_values[5] = {NAN, INFINITY, -INFINITY, 1e30, -1e30};
    /* strided views, then packed ones (the vector staging paths) */
    for (int k = 0; k < 6; k++) {
        static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
        msda_case c;
        msda_case_fixed(&c, dts[k % 3], 1, 2, 16, 6, 2, h, w, 3);
        c.strided = k < 3;
        rng r = rng_seed(306);
        msda_io io;
        msda_io_make(&io, &c, &r, true);
        for (int64_t i = 0; i < tt_numel(&io.loc); i++)
            msda_set_float(&io.loc, i, bad_values[rng_int(&r, 0, 4)]);
        CU_ASSERT_EQUAL(run_grad(&io, k % 3, 5), SPA_OK);
        CU_ASSERT(msda_io_guards_ok(&io));
        for (int64_t i = 0; i < tt_numel(&io.gv); i++) {
            double v = tt_get(&io.gv, i);
            CU_ASSERT(v == 0.0 && !signbit(v));
        }
        /* gradLocation is laid out like location, gradAttnWeight a sample each */
        for (int64_t i = 0; i < tt_numel(&io.ga); i++) {
            const bool nan_loc = isnan(tt_get(&io.loc, 2 * i)) || isnan(tt_get(&io.loc, 2 * i + 1));
            const double vs[3] = {tt_get(&io.ga, i), tt_get(&io.gl, 2 * i), tt_get(&io.gl, 2 * i + 1)};
            for (int j = 0; j < 3; j++)
                CU_ASSERT(nan_loc ? isnan(vs[j]) : vs[j] == 0.0 && !signbit(vs[j]));
        }
        for (int64_t i = 0; i < tt_numel(&io.loc); i++)
            msda_set_float(&io.loc, i, i % 2 ? 0.4 : bad_values[i % 5]);
        CU_ASSERT_EQUAL(run_grad(&io, 0, 0), SPA_OK);
        CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
        CU_ASSERT(msda_io_guards_ok(&io));
        msda_io_free(&io);
    }
}

/* ---- validation: one case per rule, nothing written on error ---- */

typedef struct grad_args {
    spa_tensor t[9]; /* value, ss, lsi, loc, attn, gout, gv, gl, ga */
    bool null_t[9], null_size, null_ex;
} grad_args;
enum { V, SS, LSI, LOC, ATTN, GOUT, GV, GL, GA };

static spa_status call_phase1(const grad_args *a, uint64_t *size, spa_executor *ex)
{
    const spa_tensor *p[9];
    for (int k = 0; k < 9; k++)
        p[k] = a->null_t[k] ? NULL : &a->t[k];
    return spa_msda_grad_get_workspace_size(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8],
                                            a->null_size ? NULL : size, a->null_ex ? NULL : ex);
}

static int64_t ss_bad[4], lsi_bad[2];
static void point_indices(grad_args *a, int64_t h0, int64_t w0, int64_t s1)
{
    ss_bad[0] = h0, ss_bad[1] = w0, ss_bad[2] = 2, ss_bad[3] = 2;
    lsi_bad[0] = 0, lsi_bad[1] = s1;
    const int64_t ssd[2] = {2, 2}, lsid[1] = {2};
    spa_tensor_init(&a->t[SS], SPA_INT64, 2, ssd, ss_bad);
    spa_tensor_init(&a->t[LSI], SPA_INT64, 1, lsid, lsi_bad);
}

typedef void (*mutate_fn)(grad_args *a);
#define MUT(name, body) static void name(grad_args *a) { body; }
MUT(m_null_v, a->null_t[V] = true)
MUT(m_null_ss, a->null_t[SS] = true)
MUT(m_null_lsi, a->null_t[LSI] = true)
MUT(m_null_loc, a->null_t[LOC] = true)
MUT(m_null_attn, a->null_t[ATTN] = true)
MUT(m_null_gout, a->null_t[GOUT] = true)
MUT(m_null_gv, a->null_t[GV] = true)
MUT(m_null_gl, a->null_t[GL] = true)
MUT(m_null_ga, a->null_t[GA] = true)
MUT(m_null_size, a->null_size = true)
MUT(m_null_ex, a->null_ex = true)
MUT(m_null_gv_data, a->t[GV].data = NULL)
MUT(m_null_lsi_data, a->t[LSI].data = NULL)
MUT(m_dt_v_int, a->t[V].dtype = SPA_INT32)
MUT(m_dt_loc_int, a->t[LOC].dtype = SPA_INT64)
MUT(m_dt_attn_bool, a->t[ATTN].dtype = SPA_BOOL)
MUT(m_dt_gout_u8, a->t[GOUT].dtype = SPA_UINT8)
MUT(m_dt_ss_float, a->t[SS].dtype = SPA_FLOAT32)
MUT(m_dt_lsi_bf16, a->t[LSI].dtype = SPA_BFLOAT16)
MUT(m_dt_gv_int, a->t[GV].dtype = SPA_INT32)
MUT(m_dt_gl_unknown, a->t[GL].dtype = 42)
MUT(m_dt_ga_int, a->t[GA].dtype = SPA_INT64)
MUT(m_rank_v, a->t[V].rank = 3)
MUT(m_rank_ss, a->t[SS].rank = 1)
MUT(m_rank_lsi, a->t[LSI].rank = 2; a->t[LSI].dims[1] = 1)
MUT(m_rank_loc, a->t[LOC].rank = 5)
MUT(m_rank_attn, a->t[ATTN].rank = 4)
MUT(m_rank_gout4, a->t[GOUT].rank = 4; a->t[GOUT].dims[2] = 2; a->t[GOUT].dims[3] = 16)
MUT(m_ss_dim1, a->t[SS].dims[1] = 1)
MUT(m_loc_dim5, a->t[LOC].dims[5] = 1)
MUT(m_c_12, a->t[V].dims[3] = 12; a->t[GV].dims[3] = 12; a->t[GOUT].dims[2] = 24)
MUT(m_c_264, a->t[V].dims[3] = 264; a->t[GV].dims[3] = 264; a->t[GOUT].dims[2] = 2 * 264)
MUT(m_nq_500000, a->t[LOC].dims[1] = 500000; a->t[ATTN].dims[1] = 500000; a->t[GOUT].dims[1] = 500000;
    a->t[GL].dims[1] = 500000; a->t[GA].dims[1] = 500000)
MUT(m_nh_17, a->t[V].dims[2] = 17; a->t[GV].dims[2] = 17; a->t[LOC].dims[2] = 17; a->t[ATTN].dims[2] = 17;
    a->t[GL].dims[2] = 17; a->t[GA].dims[2] = 17; a->t[GOUT].dims[2] = 17 * 16)
MUT(m_np_17, a->t[LOC].dims[4] = 17; a->t[ATTN].dims[4] = 17; a->t[GL].dims[4] = 17; a->t[GA].dims[4] = 17)
MUT(m_bs_loc, a->t[LOC].dims[0] = 1)
MUT(m_bs_attn, a->t[ATTN].dims[0] = 1)
MUT(m_bs_gout, a->t[GOUT].dims[0] = 1)
MUT(m_nh_loc, a->t[LOC].dims[2] = 1)
MUT(m_nh_attn, a->t[ATTN].dims[2] = 1)
MUT(m_nl_lsi, a->t[LSI].dims[0] = 1)
MUT(m_nl_loc, a->t[LOC].dims[3] = 1)
MUT(m_nl_attn, a->t[ATTN].dims[3] = 1)
MUT(m_nq_attn, a->t[ATTN].dims[1] = 4)
MUT(m_nq_gout, a->t[GOUT].dims[1] = 4)
MUT(m_np_attn, a->t[ATTN].dims[4] = 1)
MUT(m_gout_width, a->t[GOUT].dims[2] = 16)
MUT(m_gv_shape, a->t[GV].dims[1] = 17)
MUT(m_gl_shape, a->t[GL].dims[4] = 1)
MUT(m_ga_shape, a->t[GA].dims[0] = 1)
MUT(m_gl_rank, a->t[GL].rank = 5)
MUT(m_stride_negative, a->t[GOUT].strides[1] = -1)
MUT(m_span_overflow, a->t[GL].strides[0] = INT64_MAX / 2)
MUT(m_h_zero, point_indices(a, 0, 4, 12))
MUT(m_w_negative, point_indices(a, 3, -4, 12))
MUT(m_start_negative, point_indices(a, 3, 4, -12))
MUT(m_level_past_end, point_indices(a, 3, 4, 13))
MUT(m_area_overflow, point_indices(a, INT64_MAX / 4, 8, 12))
MUT(m_w_over_int32, point_indices(a, 1, INT32_MAX + (int64_t)1, 12))

typedef struct rule {
    const char *name;
    mutate_fn fn;
    spa_status want;
} rule;

static const rule grad_rules[] = {
    {"NULL value", m_null_v, SPA_ERR_NULLPTR},
    {"NULL spatialShape", m_null_ss, SPA_ERR_NULLPTR},
    {"NULL levelStartIndex", m_null_lsi, SPA_ERR_NULLPTR},
    {"NULL location", m_null_loc, SPA_ERR_NULLPTR},
    {"NULL attnWeight", m_null_attn, SPA_ERR_NULLPTR},
    {"NULL gradOutput", m_null_gout, SPA_ERR_NULLPTR},
    {"NULL gradValue", m_null_gv, SPA_ERR_NULLPTR},
    {"NULL gradLocation", m_null_gl, SPA_ERR_NULLPTR},
    {"NULL gradAttnWeight", m_null_ga, SPA_ERR_NULLPTR},
    {"NULL workspaceSize", m_null_size, SPA_ERR_NULLPTR},
    {"NULL executor", m_null_ex, SPA_ERR_NULLPTR},
    {"NULL gradValue data", m_null_gv_data, SPA_ERR_NULLPTR},
    {"NULL levelStartIndex data", m_null_lsi_data, SPA_ERR_NULLPTR},
    {"value int32", m_dt_v_int, SPA_ERR_INVALID},
    {"location int64", m_dt_loc_int, SPA_ERR_INVALID},
    {"attnWeight bool", m_dt_attn_bool, SPA_ERR_INVALID},
    {"gradOutput uint8", m_dt_gout_u8, SPA_ERR_INVALID},
    {"spatialShape float", m_dt_ss_float, SPA_ERR_INVALID},
    {"levelStartIndex bf16", m_dt_lsi_bf16, SPA_ERR_INVALID},
    {"gradValue int32", m_dt_gv_int, SPA_ERR_INVALID},
    {"gradLocation unknown dtype", m_dt_gl_unknown, SPA_ERR_INVALID},
    {"gradAttnWeight int64", m_dt_ga_int, SPA_ERR_INVALID},
    {"value rank 3", m_rank_v, SPA_ERR_INVALID},
    {"spatialShape rank 1", m_rank_ss, SPA_ERR_INVALID},
    {"levelStartIndex rank 2", m_rank_lsi, SPA_ERR_INVALID},
    {"location rank 5", m_rank_loc, SPA_ERR_INVALID},
    {"attnWeight rank 4", m_rank_attn, SPA_ERR_INVALID},
    {"gradOutput rank 4", m_rank_gout4, SPA_ERR_INVALID},
    {"spatialShape dim1 1", m_ss_dim1, SPA_ERR_INVALID},
    {"location dim5 1", m_loc_dim5, SPA_ERR_INVALID},
    {"location batch", m_bs_loc, SPA_ERR_INVALID},
    {"attnWeight batch", m_bs_attn, SPA_ERR_INVALID},
    {"gradOutput batch", m_bs_gout, SPA_ERR_INVALID},
    {"location heads", m_nh_loc, SPA_ERR_INVALID},
    {"attnWeight heads", m_nh_attn, SPA_ERR_INVALID},
    {"levelStartIndex levels", m_nl_lsi, SPA_ERR_INVALID},
    {"location levels", m_nl_loc, SPA_ERR_INVALID},
    {"attnWeight levels", m_nl_attn, SPA_ERR_INVALID},
    {"attnWeight queries", m_nq_attn, SPA_ERR_INVALID},
    {"gradOutput queries", m_nq_gout, SPA_ERR_INVALID},
    {"attnWeight points", m_np_attn, SPA_ERR_INVALID},
    {"gradOutput width != nh*C", m_gout_width, SPA_ERR_INVALID},
    {"gradValue shape", m_gv_shape, SPA_ERR_INVALID},
    {"gradLocation shape", m_gl_shape, SPA_ERR_INVALID},
    {"gradAttnWeight shape", m_ga_shape, SPA_ERR_INVALID},
    {"gradLocation rank 5", m_gl_rank, SPA_ERR_INVALID},
    {"negative stride", m_stride_negative, SPA_ERR_INVALID},
    {"span overflows", m_span_overflow, SPA_ERR_INVALID},
    {"level H 0", m_h_zero, SPA_ERR_INVALID},
    {"level W negative", m_w_negative, SPA_ERR_INVALID},
    {"level start negative", m_start_negative, SPA_ERR_INVALID},
    {"level past num_keys", m_level_past_end, SPA_ERR_INVALID},
    {"H*W overflows", m_area_overflow, SPA_ERR_INVALID},
    {"W over INT32_MAX", m_w_over_int32, SPA_ERR_INVALID},
};

/* The NPU's limits (spec 8.2 rule 5) that the native API lifts: the aclnn
 * layer still refuses them (test_acl_ops.c). Phase 1 only reads the index
 * data, which these leave alone. */
static const rule grad_lifted[] = {
    {"C 12", m_c_12, SPA_OK},
    {"C 264", m_c_264, SPA_OK},
    {"nq 500000", m_nq_500000, SPA_OK},
    {"nh 17", m_nh_17, SPA_OK},
    {"np 17", m_np_17, SPA_OK},
};

static grad_args args_of(const msda_io *io)
{
    grad_args a;
    memset(&a, 0, sizeof a);
    const ttensor *all[9] = {&io->value, &io->ss, &io->lsi, &io->loc, &io->attn, &io->out, &io->gv, &io->gl, &io->ga};
    for (int k = 0; k < 9; k++)
        a.t[k] = all[k]->t;
    return a;
}

static void test_validation_rules(void)
{
    /* Baseline: bs 2, nh 2, C 16, nq 5, levels 3x4 and 2x2 (nk 16), 2 points, mixed dtypes. */
    const int64_t h[2] = {3, 2}, w[2] = {4, 2};
    msda_case c;
    msda_case_fixed(&c, SPA_FLOAT32, 2, 2, 16, 5, 2, h, w, 2);
    c.ldt = SPA_FLOAT16, c.gvdt = SPA_BFLOAT16, c.gadt = SPA_FLOAT16;
    rng r = rng_seed(307);
    msda_io io;
    msda_io_make(&io, &c, &r, true);
    tt_fill_random(&io.gv, &r, -1.0, 1.0); /* outputs hold data that must survive */
    tt_fill_random(&io.gl, &r, -1.0, 1.0);
    tt_fill_random(&io.ga, &r, -1.0, 1.0);
    unsigned char *before[3] = {tt_snapshot(&io.gv), tt_snapshot(&io.gl), tt_snapshot(&io.ga)};
    for (size_t k = 0; k < sizeof grad_rules / sizeof grad_rules[0]; k++) {
        grad_args a = args_of(&io);
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
        CU_ASSERT(tt_same_bytes(&io.gv, before[0]));
        CU_ASSERT(tt_same_bytes(&io.gl, before[1]));
        CU_ASSERT(tt_same_bytes(&io.ga, before[2]));
    }
    for (size_t k = 0; k < sizeof grad_lifted / sizeof grad_lifted[0]; k++) {
        grad_args a = args_of(&io);
        grad_lifted[k].fn(&a);
        for (int j = 0; j < 9; j++) /* packed again for their new dims */
            spa_tensor_init(&a.t[j], (spa_dtype)a.t[j].dtype, a.t[j].rank, a.t[j].dims, a.t[j].data);
        uint64_t size = 0;
        spa_executor ex;
        spa_status st = call_phase1(&a, &size, &ex);
        if (st != SPA_OK)
            fprintf(stderr, "  lifted rule '%s': got %d want 0\n", grad_lifted[k].name, (int)st);
        CU_ASSERT_EQUAL(st, SPA_OK);
        CU_ASSERT(size > 0);
    }
    grad_args a = args_of(&io);
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL(call_phase1(&a, &size, &ex), SPA_OK);
    /* nq has no lower bound in the grad, and gradValue bf16 needs the f32 workspace */
    CU_ASSERT(size >= 2 * 16 * 2 * 16 * sizeof(float));
    for (int j = 0; j < 3; j++)
        free(before[j]);
    msda_io_free(&io);
}

static void test_phase2_errors(void)
{
    const int64_t h[2] = {5, 2}, w[2] = {4, 3};
    msda_case c;
    msda_case_fixed(&c, SPA_FLOAT16, 1, 2, 24, 7, 2, h, w, 3);
    rng r = rng_seed(308);
    msda_io io;
    msda_io_make(&io, &c, &r, true);
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL_FATAL(spa_msda_grad_get_workspace_size(&io.value.t, &io.ss.t, &io.lsi.t, &io.loc.t,
                                                           &io.attn.t, &io.out.t, &io.gv.t, &io.gl.t,
                                                           &io.ga.t, &size, &ex), SPA_OK);
    CU_ASSERT(size > 0);
    unsigned char *before[3] = {tt_snapshot(&io.gv), tt_snapshot(&io.gl), tt_snapshot(&io.ga)};
    tws ws;
    tws_make(&ws, size, 0);
    CU_ASSERT_EQUAL(spa_msda_grad(ws.ptr, size, NULL, NULL), SPA_ERR_NULLPTR);
    CU_ASSERT_EQUAL(spa_msda_grad(NULL, size, &ex, NULL), SPA_ERR_NULLPTR);
    CU_ASSERT_EQUAL(spa_msda_grad(ws.ptr, size - 1, &ex, NULL), SPA_ERR_WORKSPACE);
    spa_executor bad = ex;
    bad.u.bytes[200] ^= 4;
    CU_ASSERT_EQUAL(spa_msda_grad(ws.ptr, size, &bad, NULL), SPA_ERR_INVALID);
    CU_ASSERT_EQUAL(spa_msda(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    /* The caller breaks the indices after phase 1: refused, nothing written. */
    tt_set_int(&io.ss, 1, 6); /* level 0: 5x6 = 30 keys > nk = 26 */
    CU_ASSERT_EQUAL(spa_msda_grad(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    tt_set_int(&io.ss, 1, 4);
    tt_set_int(&io.ss, 2, -2);
    CU_ASSERT_EQUAL(spa_msda_grad(ws.ptr, size, &ex, test_runner(3)), SPA_ERR_INVALID);
    tt_set_int(&io.ss, 2, 2);
    tt_set_int(&io.lsi, 0, 7); /* 7 + 20 > 26 */
    CU_ASSERT_EQUAL(spa_msda_grad(ws.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    tt_set_int(&io.lsi, 0, 0);
    CU_ASSERT(tt_same_bytes(&io.gv, before[0]));
    CU_ASSERT(tt_same_bytes(&io.gl, before[1]));
    CU_ASSERT(tt_same_bytes(&io.ga, before[2]));
    CU_ASSERT(tws_guard_ok(&ws));
    /* Valid again: runs twice with the same result. */
    CU_ASSERT_EQUAL(spa_msda_grad(ws.ptr, size, &ex, NULL), SPA_OK);
    CU_ASSERT_EQUAL(compare_with_ref(&c, &io), 0);
    unsigned char *once = tt_snapshot(&io.gv);
    CU_ASSERT_EQUAL(spa_msda_grad(ws.ptr, size, &ex, test_runner(2)), SPA_OK);
    CU_ASSERT(tt_same_bytes(&io.gv, once));
    CU_ASSERT(tws_guard_ok(&ws));
    for (int j = 0; j < 3; j++)
        free(before[j]);
    free(once);
    tws_free(&ws);
    msda_io_free(&io);
}

/* An empty input: success, no workspace, every non-empty output zero-filled. */
static void test_empty_inputs(void)
{
    const int64_t h[2] = {2, 2}, w[2] = {3, 1};
    for (int k = 0; k < 4; k++) {
        msda_case c;
        msda_case_fixed(&c, SPA_BFLOAT16, 2, 2, 8, 3, 2, h, w, 2);
        c.gldt = SPA_FLOAT32;
        if (k == 0)
            c.nq = 0; /* gradValue non-empty: zeros */
        else if (k == 1)
            c.np = 0;
        else if (k == 2)
            c.nk = 0; /* gradLocation, gradAttnWeight non-empty: zeros */
        else
            c.c = 0;
        c.strided = k % 2 == 0;
        rng r = rng_seed(309);
        msda_io io;
        msda_io_make(&io, &c, &r, true);
        uint64_t size = 7;
        spa_executor ex;
        CU_ASSERT_EQUAL(spa_msda_grad_get_workspace_size(&io.value.t, &io.ss.t, &io.lsi.t, &io.loc.t,
                                                         &io.attn.t, &io.out.t, &io.gv.t, &io.gl.t,
                                                         &io.ga.t, &size, &ex), SPA_OK);
        CU_ASSERT_EQUAL(size, 0);
        CU_ASSERT_EQUAL(spa_msda_grad(NULL, 0, &ex, test_runner(k % N_RUNNERS)), SPA_OK);
        for (int64_t i = 0; i < tt_numel(&io.gv); i++) {
            double v = tt_get(&io.gv, i);
            CU_ASSERT(v == 0.0 && !signbit(v));
        }
        /* gradLocation is laid out like location, gradAttnWeight a sample each */
        for (int64_t i = 0; i < tt_numel(&io.ga); i++) {
            const bool nan_loc = isnan(tt_get(&io.loc, 2 * i)) || isnan(tt_get(&io.loc, 2 * i + 1));
            const double vs[3] = {tt_get(&io.ga, i), tt_get(&io.gl, 2 * i), tt_get(&io.gl, 2 * i + 1)};
            for (int j = 0; j < 3; j++)
                CU_ASSERT(nan_loc ? isnan(vs[j]) : vs[j] == 0.0 && !signbit(vs[j]));
        }
        CU_ASSERT(msda_io_guards_ok(&io));
        msda_io_free(&io);
    }
}

void suite_msda_grad(void)
{
    CU_pSuite s = CU_add_suite("msda_grad", NULL, NULL);
    /* The reference's own check (no library call): the full set runs it; the
     * quick one, for emulators, sanitizers and valgrind, has nothing to learn there. */
    if (!test_quick)
        CU_add_test(s, "reference vs finite differences", test_reference_vs_finite_differences);
    CU_add_test(s, "random shapes, mixed dtypes, C 1..256, strided", test_random_shapes);
    CU_add_test(s, "public test shapes (C 1..3096, 2 and 5 queries)", test_public_shapes);
    CU_add_test(s, "more than 16 levels, points and heads", test_many_levels_points);
    CU_add_test(s, "extreme shapes", test_extreme_shapes);
    CU_add_test(s, "bit-identical across runners", test_deterministic_across_runners);
    CU_add_test(s, "worked example", test_worked_example);
    CU_add_test(s, "NaN and Inf locations", test_nonfinite_locations);
    CU_add_test(s, "validation rules", test_validation_rules);
    CU_add_test(s, "phase 2 errors", test_phase2_errors);
    CU_add_test(s, "empty inputs", test_empty_inputs);
}
