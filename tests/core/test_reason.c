/* Why a call refused: for each op, a representative refusal of phase 1
 * records the rule it broke in the executor (spa_executor_reason), with the
 * op's call of a shared check as context, leaving an executor planned
 * before runnable; spa_executor_run does the same for phase 2, and a
 * success clears the record. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "msda_case.h"
#include "nsas_case.h"
#include "util.h"

/* One op: tensors for a valid call, phase 1 with one argument spoiled or
 * not, and the fragments its refusal must name. */
typedef struct reason_op {
    const char *name;
    void (*make)(rng *r);
    void (*release)(void);
    spa_status (*phase1)(bool spoil, uint64_t *size, spa_executor *ex);
    spa_status (*phase2)(void *ws, uint64_t size, const spa_executor *ex, const spa_runner *rn);
    const char *rule;    /* in the rule's text */
    const char *context; /* in the context's text ("" for none) */
} reason_op;

/* Reason texts, checked to hold a fragment. */
static bool has(const char *text, const char *fragment)
{
    if (strstr(text, fragment) != NULL)
        return true;
    fprintf(stderr, "  reason '%s' does not name '%s'\n", text, fragment);
    return false;
}

/* ---- NsaCompress and its grad: 64 tokens, N 1, D 16, windows of 16 ---- */
static ttensor cx, cw, cy, cdx, cdw;
static int64_t cseq_vals[2];
static spa_int_array cseq;

static void nsac_make(rng *r)
{
    const int64_t xd[3] = {64, 1, 16}, wd[2] = {16, 1}, yd[3] = {4, 1, 16};
    tt_make(&cx, SPA_FLOAT32, 3, xd, false, r);
    tt_make(&cw, SPA_FLOAT32, 2, wd, false, r);
    tt_make(&cy, SPA_FLOAT32, 3, yd, false, r);
    tt_make(&cdx, SPA_FLOAT32, 3, xd, false, r);
    tt_make(&cdw, SPA_FLOAT32, 2, wd, false, r);
    tt_fill_random(&cx, r, -1, 1);
    tt_fill_random(&cw, r, -1, 1);
    tt_fill_random(&cy, r, -1, 1);
    cseq_vals[0] = 64;
    cseq.data = cseq_vals;
    cseq.size = 1;
}

static void nsac_release(void)
{
    tt_free(&cx), tt_free(&cw), tt_free(&cy), tt_free(&cdx), tt_free(&cdw);
}

/* spoiled: a stride longer than the block */
static spa_status nsac_phase1(bool spoil, uint64_t *size, spa_executor *ex)
{
    return spa_nsa_compress_get_workspace_size(&cx.t, &cw.t, &cseq, "TND", 16, spoil ? 32 : 16, 0,
                                               &cy.t, size, ex);
}

/* spoiled: cumulative ends that decrease */
static spa_status nsacg_phase1(bool spoil, uint64_t *size, spa_executor *ex)
{
    const int64_t bad[2] = {64, 32};
    const spa_int_array bad_seq = {bad, 2};
    return spa_nsa_compress_grad_get_workspace_size(&cy.t, &cx.t, &cw.t, spoil ? &bad_seq : &cseq,
                                                    16, 16, 0, "TND", &cdx.t, &cdw.t, size, ex);
}

/* ---- NsaSelectedAttention and its grad: 2 batches, G 4, D 32 ---- */
static nsas_case sc;
static nsas_io sio;

static void nsas_make(rng *r)
{
    const int64_t ql[2] = {5, 3}, kl[2] = {64, 96};
    nsas_case_fixed(&sc, SPA_FLOAT32, 8, 2, 32, 32, 32, 2, 2, ql, kl, 2, true, r, false);
    nsas_io_make(&sio, &sc, r);
}

static void nsas_release(void)
{
    nsas_io_free(&sio);
    nsas_case_free(&sc);
}

/* spoiled: an index past its batch's KV blocks */
static spa_status nsas_phase1(bool spoil, uint64_t *size, spa_executor *ex)
{
    const int64_t at = 6 * sc.n2 * sc.kc; /* token 6 lies in batch 1: 3 blocks */
    const int64_t keep = (int64_t)tt_get(&sio.topk, at);
    if (spoil)
        tt_set_int(&sio.topk, at, 3);
    spa_status st = spa_nsa_select_get_workspace_size(
        &sio.q.t, &sio.k.t, &sio.v.t, &sio.topk.t, &sio.mask.t, &sc.sq, &sc.skv, sc.scale, sc.n1,
        "TND", sc.sparse_mode, sc.bs, sc.kc, &sio.mx.t, &sio.sm.t, &sio.o.t, size, ex);
    tt_set_int(&sio.topk, at, keep);
    return st;
}

/* spoiled: headNum is not N1 */
static spa_status nsasg_phase1(bool spoil, uint64_t *size, spa_executor *ex)
{
    return spa_nsa_select_grad_get_workspace_size(
        &sio.q.t, &sio.k.t, &sio.v.t, &sio.o.t, &sio.dy.t, &sio.mx.t, &sio.sm.t, &sio.topk.t,
        &sc.sq, &sc.skv, &sio.mask.t, sc.scale, sc.bs, sc.kc, spoil ? sc.n1 + 1 : sc.n1, "TND",
        sc.sparse_mode, &sio.dq.t, &sio.dk.t, &sio.dv.t, size, ex);
}

/* ---- MultiScaleDeformableAttn and its grad: 2 levels, nq 32 ---- */
static msda_case mc;
static msda_io mio, mgio;

static void msda_make(rng *r)
{
    const int64_t h[2] = {3, 2}, w[2] = {4, 2};
    msda_case_fixed(&mc, SPA_FLOAT32, 2, 2, 16, 32, 2, h, w, 2);
    msda_io_make(&mio, &mc, r, false);
    msda_io_make(&mgio, &mc, r, true);
}

static void msda_release(void)
{
    msda_io_free(&mio);
    msda_io_free(&mgio);
}

/* spoiled: an output of rank 2 (a shared descriptor check: context names it) */
static spa_status msda_phase1(bool spoil, uint64_t *size, spa_executor *ex)
{
    spa_tensor out = mio.out.t;
    if (spoil)
        out.rank = 2;
    return spa_msda_get_workspace_size(&mio.value.t, &mio.ss.t, &mio.lsi.t, &mio.loc.t,
                                       &mio.attn.t, &out, size, ex);
}

/* spoiled: a level reaching past num_keys */
static spa_status msdag_phase1(bool spoil, uint64_t *size, spa_executor *ex)
{
    const int64_t keep = (int64_t)tt_get(&mgio.ss, 2);
    if (spoil)
        tt_set_int(&mgio.ss, 2, 9);
    spa_status st = spa_msda_grad_get_workspace_size(
        &mgio.value.t, &mgio.ss.t, &mgio.lsi.t, &mgio.loc.t, &mgio.attn.t, &mgio.out.t,
        &mgio.gv.t, &mgio.gl.t, &mgio.ga.t, size, ex);
    tt_set_int(&mgio.ss, 2, keep); /* level 1's H */
    return st;
}

/* Contexts: the op's own call of the helper the rule lies in. */
static const reason_op ops[] = {
    {"nsa_compress", nsac_make, nsac_release, nsac_phase1, spa_nsa_compress, "bs >= st", "src/nsa/nsa_compress.c:"},
    {"nsa_compress_grad", nsac_make, nsac_release, nsacg_phase1, spa_nsa_compress_grad, "spa_seq_check", "src/nsa/nsa_compress_grad.c:"},
    {"nsa_select", nsas_make, nsas_release, nsas_phase1, spa_nsa_select, "x < blocks", "spa_nsas_check_indices"},
    {"nsa_select_grad", nsas_make, nsas_release, nsasg_phase1, spa_nsa_select_grad, "head_num == n1", "src/nsa/nsa_select_grad.c:"},
    {"msda", msda_make, msda_release, msda_phase1, spa_msda, "src/core/tensor.c", "spa_tensor_check_output(output, 3)"},
    {"msda_grad", msda_make, msda_release, msdag_phase1, spa_msda_grad, "end <= nk", "src/msda/msda_grad.c:"},
};
#define N_OPS (sizeof ops / sizeof ops[0])

/* A refused phase 1 names its rule; an executor planned before it no longer
 * runs, through either phase-2 entry point, and phase 2 says why; a success
 * clears the record and arms it again. */
static void test_phase1_reasons(void)
{
    for (size_t o = 0; o < N_OPS; o++) {
        rng r = rng_seed(900 + o);
        ops[o].make(&r);
        uint64_t size, size2 = 77;
        spa_executor ex;
        memset(&ex, 0x3C, sizeof ex);
        CU_ASSERT_STRING_EQUAL(spa_executor_reason(&ex, NULL), ""); /* no record in garbage */
        CU_ASSERT_EQUAL_FATAL(ops[o].phase1(false, &size, &ex), SPA_OK);
        CU_ASSERT_STRING_EQUAL(spa_executor_reason(&ex, NULL), "");
        spa_executor planned = ex;
        CU_ASSERT_EQUAL(ops[o].phase1(true, &size2, &ex), SPA_ERR_INVALID);
        CU_ASSERT_EQUAL(size2, 77);
        CU_ASSERT(refusal_recorded(&ex, &planned, SPA_ERR_INVALID));
        const char *context;
        const char *rule = spa_executor_reason(&ex, &context);
        CU_ASSERT(has(rule, ops[o].rule));
        if (ops[o].context[0] == '\0' && context[0] != '\0')
            fprintf(stderr, "  %s: unexpected context '%s' of '%s'\n", ops[o].name, context, rule);
        CU_ASSERT(ops[o].context[0] == '\0' ? context[0] == '\0' : has(context, ops[o].context));
        /* the plan made before the refusal no longer runs: it was made for
         * arguments the caller has replaced since */
        tws w;
        tws_make(&w, size, 3);
        spa_executor direct = ex;
        CU_ASSERT_EQUAL(ops[o].phase2(w.ptr, w.size, &direct, NULL), SPA_ERR_INVALID);
        CU_ASSERT_EQUAL(spa_executor_run(w.ptr, w.size, &ex, test_runner(2)), SPA_ERR_INVALID);
        CU_ASSERT(has(spa_executor_reason(&ex, NULL), "phase 1 into this executor was"));
        CU_ASSERT(tws_guard_ok(&w));
        /* planned again, it runs, and the run clears the record */
        CU_ASSERT_EQUAL(ops[o].phase1(false, &size, &ex), SPA_OK);
        CU_ASSERT_EQUAL(spa_executor_run(w.ptr, w.size, &ex, test_runner(2)), SPA_OK);
        CU_ASSERT_STRING_EQUAL(spa_executor_reason(&ex, NULL), "");
        tws_free(&w);
        /* a NULL argument: a sentence */
        CU_ASSERT_EQUAL(ops[o].phase1(false, NULL, &ex), SPA_ERR_NULLPTR);
        CU_ASSERT(has(spa_executor_reason(&ex, NULL), "NULL"));
        /* a successful phase 1 clears it */
        CU_ASSERT_EQUAL(ops[o].phase1(false, &size, &ex), SPA_OK);
        CU_ASSERT_STRING_EQUAL(spa_executor_reason(&ex, &context), "");
        CU_ASSERT_STRING_EQUAL(context, "");
        ops[o].release();
    }
}

/* Phase 2's refusals through spa_executor_run: no workspace, too little,
 * an altered executor, one phase 1 never planned. */
static void test_phase2_reasons(void)
{
    rng r = rng_seed(950);
    msda_make(&r);
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL_FATAL(msda_phase1(false, &size, &ex), SPA_OK);
    CU_ASSERT_FATAL(size > 64);
    CU_ASSERT_EQUAL(spa_executor_run(NULL, 0, NULL, NULL), SPA_ERR_NULLPTR);
    CU_ASSERT_EQUAL(spa_executor_run(NULL, size, &ex, NULL), SPA_ERR_NULLPTR);
    CU_ASSERT(has(spa_executor_reason(&ex, NULL), "spa_ws_check_args"));
    tws w;
    tws_make(&w, size, 5);
    CU_ASSERT_EQUAL(spa_executor_run(w.ptr, size - 1, &ex, NULL), SPA_ERR_WORKSPACE);
    CU_ASSERT(has(spa_executor_reason(&ex, NULL), "smaller than phase 1"));
    CU_ASSERT_EQUAL(spa_executor_run(w.ptr, size, &ex, NULL), SPA_OK);
    CU_ASSERT_STRING_EQUAL(spa_executor_reason(&ex, NULL), "");
    spa_executor altered = ex;
    altered.u.bytes[40] ^= 1; /* inside the plan: the checksum no longer agrees */
    CU_ASSERT_EQUAL(spa_executor_run(w.ptr, size, &altered, NULL), SPA_ERR_INVALID);
    CU_ASSERT(has(spa_executor_reason(&altered, NULL), "spa_exec_open"));
    CU_ASSERT_EQUAL(spa_msda(w.ptr, size, &altered, NULL), SPA_ERR_INVALID);
    spa_executor never;
    memset(&never, 0, sizeof never);
    CU_ASSERT_EQUAL(spa_executor_run(w.ptr, size, &never, NULL), SPA_ERR_INVALID);
    CU_ASSERT(has(spa_executor_reason(&never, NULL), "src/core/executor_run.c"));
    /* arguments changed since phase 1: phase 2 names the rule they now break */
    const int64_t keep = (int64_t)tt_get(&mio.ss, 0);
    tt_set_int(&mio.ss, 0, 1000);
    CU_ASSERT_EQUAL(spa_executor_run(w.ptr, size, &ex, NULL), SPA_ERR_INVALID);
    CU_ASSERT(has(spa_executor_reason(&ex, NULL), "end <= nk"));
    tt_set_int(&mio.ss, 0, keep);
    CU_ASSERT(tws_guard_ok(&w));
    tws_free(&w);
    msda_release();
}

/* The public statuses stay the native ones whatever the site. */
static void test_public_statuses(void)
{
    rng r = rng_seed(960);
    msda_make(&r);
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL(spa_msda_get_workspace_size(NULL, &mio.ss.t, &mio.lsi.t, &mio.loc.t,
                                                &mio.attn.t, &mio.out.t, &size, &ex),
                    SPA_ERR_NULLPTR);
    spa_tensor v = mio.value.t;
    v.data = NULL; /* a shared check's 161001 keeps its code */
    CU_ASSERT_EQUAL(spa_msda_get_workspace_size(&v, &mio.ss.t, &mio.lsi.t, &mio.loc.t,
                                                &mio.attn.t, &mio.out.t, &size, &ex),
                    SPA_ERR_NULLPTR);
    CU_ASSERT(has(spa_executor_reason(&ex, NULL), "spa_tensor_check(value, 4)"));
    msda_release();
}

void suite_reason(void)
{
    CU_pSuite s = CU_add_suite("reason", NULL, NULL);
    CU_add_test(s, "phase 1 refusals name their rule", test_phase1_reasons);
    CU_add_test(s, "phase 2 refusals through spa_executor_run", test_phase2_reasons);
    CU_add_test(s, "public statuses unchanged", test_public_statuses);
}
