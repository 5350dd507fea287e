/* MultiScaleDeformableAttnFunction and its grad in float64 (src/msda/msda_f64.h):
 * the output and all three gradients against the fp64 reference with exact
 * coordinates at 1e-12 relative, the public test shapes, channel tails up to
 * C 3096, float64 mixed with the other float dtypes, bit-identical results
 * across runners. Builds without float64 (Cortex-M) check the refusal. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msda_case.h"
#include "spa_dtypes.h"

static spa_status run(msda_io *io, bool grad, int runner, size_t skew)
{
    uint64_t ws_size = 0;
    spa_executor ex;
    spa_status st = grad ? spa_msda_grad_get_workspace_size(&io->value.t, &io->ss.t, &io->lsi.t, &io->loc.t,
                                                            &io->attn.t, &io->out.t, &io->gv.t, &io->gl.t,
                                                            &io->ga.t, &ws_size, &ex)
                         : spa_msda_get_workspace_size(&io->value.t, &io->ss.t, &io->lsi.t, &io->loc.t,
                                                       &io->attn.t, &io->out.t, &ws_size, &ex);
    if (st != SPA_OK)
        return st;
    tws ws;
    tws_make(&ws, ws_size, skew);
    st = grad ? spa_msda_grad(ws.ptr, ws.size, &ex, test_runner(runner))
              : spa_msda(ws.ptr, ws.size, &ex, test_runner(runner));
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

#if SPA_HAVE_F64

/* The outputs against the reference (x = loc * W - 0.5 in fp64, as the
 * float64 path computes it), each in the tolerance of its own dtype. */
static int64_t compare_with_ref(const msda_case *c, const msda_io *io, bool grad)
{
    ref_msda_shape s = msda_case_shape(c);
    double *v = tt_to_doubles(&io->value), *l = tt_to_doubles(&io->loc), *a = tt_to_doubles(&io->attn);
    double *o = tt_to_doubles(&io->out);
    const int64_t nv = tt_numel(&io->value), nl = tt_numel(&io->loc), na = tt_numel(&io->attn);
    const int64_t no = tt_numel(&io->out);
    int64_t bad;
    if (!grad) {
        double *ref = malloc(sizeof(double) * (size_t)(no + 1)), *mag = malloc(sizeof(double) * (size_t)(no + 1));
        ref_msda(&s, v, l, a, REF_COORD_EXACT, ref, mag);
        bad = msda_check("output", c->odt, 0x1p-17, o, ref, mag, no);
        free(ref), free(mag);
    } else {
        double *gv = malloc(sizeof(double) * (size_t)(nv + 1)), *gvm = malloc(sizeof(double) * (size_t)(nv + 1));
        double *gl = malloc(sizeof(double) * (size_t)(nl + 1)), *glm = malloc(sizeof(double) * (size_t)(nl + 1));
        double *ga = malloc(sizeof(double) * (size_t)(na + 1)), *gam = malloc(sizeof(double) * (size_t)(na + 1));
        ref_msda_grad(&s, v, l, a, o, REF_COORD_EXACT, gv, gvm, gl, glm, ga, gam);
        double *got_v = tt_to_doubles(&io->gv), *got_l = tt_to_doubles(&io->gl), *got_a = tt_to_doubles(&io->ga);
        bad = msda_check("gradValue", c->gvdt, 0x1p-16, got_v, gv, gvm, nv);
        bad += msda_check("gradLocation", c->gldt, 0x1p-17, got_l, gl, glm, nl);
        bad += msda_check("gradAttnWeight", c->gadt, 0x1p-17, got_a, ga, gam, na);
        free(gv), free(gvm), free(gl), free(glm), free(ga), free(gam), free(got_v), free(got_l), free(got_a);
    }
    free(v), free(l), free(a), free(o);
    return bad;
}

/* One case, forward or grad, on runner `runner`, against the reference. */
static void check_case(const msda_case *c, rng *r, bool grad, int runner, int id)
{
    msda_io io;
    msda_io_make(&io, c, r, grad);
    spa_status st = run(&io, grad, runner, (size_t)id % 64);
    CU_ASSERT_EQUAL(st, SPA_OK);
    int64_t bad = st == SPA_OK ? compare_with_ref(c, &io, grad) : -1;
    bool guards = msda_io_guards_ok(&io);
    if (bad || !guards || st != SPA_OK) {
        char desc[512];
        msda_case_describe(c, desc, sizeof desc);
        fprintf(stderr, "  %s case %d (%s): status %d, %lld bad, guards %s\n", grad ? "grad" : "forward", id, desc,
                (int)st, (long long)bad, guards ? "ok" : "BROKEN");
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(guards);
    msda_io_free(&io);
}

static void check_both(const msda_case *c, rng *r, int runner, int id)
{
    check_case(c, r, false, runner, id);
    check_case(c, r, true, (runner + 1) % N_RUNNERS, id);
}

/* The public implementations' test shape (N 1, M 2, C 2, Lq 2, levels 6x4
 * and 3x2, 2 points) and their module's (5 queries, 3 heads, C 1 and 2,
 * 4 levels, 4 points), with border, grid and non-finite locations. */
static void test_public_shapes(void)
{
    rng r = rng_seed(1901);
    const int64_t h[4] = {6, 3, 2, 1}, w[4] = {4, 2, 2, 1};
    msda_case c;
    int id = 0;
    msda_case_fixed(&c, SPA_FLOAT64, 1, 2, 2, 2, 2, h, w, 2);
    check_both(&c, &r, 0, id++);
    for (int64_t ch = 1; ch <= 2; ch++) {
        msda_case_fixed(&c, SPA_FLOAT64, 2, 3, ch, 5, 4, h, w, 4);
        c.strided = ch == 2;
        c.loc_mode = ch == 1 ? LOC_SPECIAL : LOC_NONFINITE;
        check_both(&c, &r, id % N_RUNNERS, id);
        id++;
    }
}

/* C around and past every layer's vector widths, up to 3096, at 2 queries. */
static void test_channels(void)
{
    rng r = rng_seed(1902);
    const int64_t h[2] = {6, 3}, w[2] = {4, 2};
    static const int64_t cs[] = {30, 32, 64, 71, 1025, 2048, 3096, 3, 9, 17};
    for (int i = 0; i < (int)(sizeof cs / sizeof cs[0]); i++) {
        msda_case c;
        msda_case_fixed(&c, SPA_FLOAT64, 1, 2, cs[i], 2, 2, h, w, 2);
        c.strided = i % 3 == 1;
        c.loc_mode = i % 2 ? LOC_SPECIAL : LOC_UNIFORM;
        check_both(&c, &r, i % N_RUNNERS, i);
    }
}

/* float64 next to the other float dtypes: any float64 tensor puts the call
 * on the float64 path, every other tensor read and written in its own dtype. */
static void test_mixed_dtypes(void)
{
    rng r = rng_seed(1903);
    const int64_t h[2] = {6, 3}, w[2] = {4, 2};
    const spa_dtype F64 = SPA_FLOAT64, F32 = SPA_FLOAT32, F16 = SPA_FLOAT16, BF16 = SPA_BFLOAT16;
    /* value, location, attnWeight, output / gradOutput, gradValue, gradLocation, gradAttnWeight */
    const spa_dtype mix[][7] = {
        {F64, F32, BF16, F16, F32, F16, BF16}, {F32, F64, F32, F32, F32, F32, F32},
        {F16, F16, F16, F64, F16, F16, F16},   {BF16, F64, F16, BF16, BF16, F64, F32},
        {F32, F32, F32, F32, F64, F32, F32},   {F16, BF16, F64, F32, F16, F64, F32},
    };
    for (int k = 0; k < (int)(sizeof mix / sizeof mix[0]); k++) {
        msda_case c;
        msda_case_fixed(&c, SPA_FLOAT64, 1, 2, k % 2 ? 13 : 8, 3, 2, h, w, 2);
        c.vdt = mix[k][0], c.ldt = mix[k][1], c.adt = mix[k][2], c.odt = mix[k][3];
        c.gvdt = mix[k][4], c.gldt = mix[k][5], c.gadt = mix[k][6];
        c.idt = k % 2 ? SPA_INT32 : SPA_INT64;
        c.strided = k == 2;
        c.loc_mode = LOC_SPECIAL;
        /* the forward takes no gradient dtypes: a case whose only float64 is a gradient runs the f32 grad */
        if (k != 4)
            check_case(&c, &r, false, k % N_RUNNERS, k);
        check_case(&c, &r, true, (k + 1) % N_RUNNERS, k);
    }
}

/* The inline runner and pools of 1, 2 and 7 threads give the same bytes. */
static void test_deterministic_across_runners(void)
{
    const int64_t h[3] = {20, 9, 3}, w[3] = {30, 11, 5};
    for (int grad = 0; grad <= 1; grad++) {
        msda_case c;
        msda_case_fixed(&c, SPA_FLOAT64, 2, 3, 35, 70, 3, h, w, 4);
        rng r = rng_seed(1904);
        msda_io io;
        msda_io_make(&io, &c, &r, grad);
        ttensor *outs[3] = {grad ? &io.gv : &io.out, &io.gl, &io.ga};
        const int nout = grad ? 3 : 1;
        CU_ASSERT_EQUAL(run(&io, grad, 0, 0), SPA_OK);
        unsigned char *first[3] = {NULL, NULL, NULL};
        for (int j = 0; j < nout; j++)
            first[j] = tt_snapshot(outs[j]);
        for (int k = 1; k < N_RUNNERS; k++) {
            for (int j = 0; j < nout; j++)
                tt_fill_canary(outs[j]);
            CU_ASSERT_EQUAL(run(&io, grad, k, (size_t)k * 8), SPA_OK);
            for (int j = 0; j < nout; j++)
                CU_ASSERT(tt_same_bytes(outs[j], first[j]));
        }
        CU_ASSERT_EQUAL(compare_with_ref(&c, &io, grad), 0);
        for (int j = 0; j < nout; j++)
            free(first[j]);
        msda_io_free(&io);
    }
}

/* No query: success; the grad zero-fills gradValue (8-byte elements). */
static void test_no_query(void)
{
    rng r = rng_seed(1905);
    const int64_t h[2] = {6, 3}, w[2] = {4, 2};
    for (int grad = 0; grad <= 1; grad++) {
        msda_case c;
        msda_case_fixed(&c, SPA_FLOAT64, 2, 2, 5, 0, 2, h, w, 2);
        c.strided = grad == 1;
        msda_io io;
        msda_io_make(&io, &c, &r, grad);
        if (grad)
            tt_fill_canary(&io.gv);
        CU_ASSERT_EQUAL(run(&io, grad, 1, 0), SPA_OK);
        for (int64_t i = 0; grad && i < tt_numel(&io.gv); i++)
            CU_ASSERT_EQUAL(tt_get(&io.gv, i), 0.0);
        CU_ASSERT(msda_io_guards_ok(&io));
        msda_io_free(&io);
    }
}

void suite_f64_msda(void)
{
    CU_pSuite s = CU_add_suite("f64_msda", NULL, NULL);
    CU_add_test(s, "public test shapes (C 1, 2; 2 and 5 queries)", test_public_shapes);
    CU_add_test(s, "no query", test_no_query);
    CU_add_test(s, "C 3..3096, tails on every layer", test_channels);
    CU_add_test(s, "float64 mixed with f32, f16, bf16", test_mixed_dtypes);
    CU_add_test(s, "bit-identical across runners", test_deterministic_across_runners);
}

#else

/* No float64 kernels in this build: both ops refuse float64 in phase 1. */
static void test_refused(void)
{
    rng r = rng_seed(1905);
    const int64_t h[2] = {6, 3}, w[2] = {4, 2};
    for (int grad = 0; grad <= 1; grad++) {
        msda_case c;
        msda_case_fixed(&c, SPA_FLOAT32, 1, 2, 8, 2, 2, h, w, 2);
        c.ldt = SPA_FLOAT64;
        msda_io io;
        msda_io_make(&io, &c, &r, grad);
        CU_ASSERT_EQUAL(run(&io, grad, 0, 0), SPA_ERR_INVALID);
        msda_io_free(&io);
    }
}

void suite_f64_msda(void)
{
    CU_pSuite s = CU_add_suite("f64_msda", NULL, NULL);
    CU_add_test(s, "float64 refused without float64 kernels", test_refused);
}

#endif
