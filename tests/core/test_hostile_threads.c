/* Hostile calls that need threads or time: index and length arrays rewritten
 * by another thread while phase 2 runs, one pthread pool shared by two and
 * four calling threads, and phase 1 answering at once a call it will refuse
 * whatever its index tensor holds. Hosted targets only (bare metal has no
 * threads: the suite is empty there). */
#include <CUnit/Basic.h>
#include <stdlib.h>
#include <string.h>

#include "msda_case.h"
#include "nsas_case.h"
#include "util.h"
#include "watchdog.h"

#if !defined(SPA_TEST_NO_THREADS)
#include <pthread.h>
#include <stdatomic.h>

#include "spattn/nsa_infer.h"
#include "spattn/runner.h"

/* ---- arrays rewritten during phase 2 ---- */

/* Writes random values (valid ones and not) into n int32 or int64 slots
 * until told to stop. */
typedef struct scribbler {
    void *slots;
    size_t n, width;
    int64_t lo, hi;
    atomic_int stop;
    pthread_t thread;
} scribbler;

static void *scribble(void *arg)
{
    scribbler *s = arg;
    rng r = rng_seed((uint64_t)(uintptr_t)s);
    while (!atomic_load(&s->stop)) {
        const size_t i = (size_t)rng_int(&r, 0, (int64_t)s->n - 1);
        const int64_t v = rng_int(&r, s->lo, s->hi);
        if (s->width == 4) {
            const int32_t w = (int32_t)v;
            memcpy((int32_t *)s->slots + i, &w, sizeof w);
        } else {
            memcpy((int64_t *)s->slots + i, &v, sizeof v);
        }
    }
    return NULL;
}

static void scribblers_start(scribbler *s, int n)
{
    for (int i = 0; i < n; i++) {
        atomic_init(&s[i].stop, 0);
        CU_ASSERT_FATAL(pthread_create(&s[i].thread, NULL, scribble, &s[i]) == 0);
    }
}

static void scribblers_stop(scribbler *s, int n)
{
    for (int i = 0; i < n; i++) {
        atomic_store(&s[i].stop, 1);
        pthread_join(s[i].thread, NULL);
    }
}

/* Selected attention, forward and grad: topkIndices and both sequence arrays
 * rewritten while phase 2 runs again and again. Every run succeeds or is
 * refused, and nothing is written outside the outputs and the workspace. */
static void test_select_arrays_rewritten(void)
{
    rng r = rng_seed(1001);
    const int64_t qlen[2] = {40, 24}, klen[2] = {96, 64};
    nsas_case c;
    nsas_case_fixed(&c, SPA_FLOAT32, 4, 2, 32, 32, 16, 3, 2, qlen, klen, 0, false, &r, true);
    nsas_io io;
    nsas_io_make(&io, &c, &r);
    int64_t sq_saved[2], skv_saved[2];
    memcpy(sq_saved, c.sq_vals, sizeof sq_saved);
    memcpy(skv_saved, c.skv_vals, sizeof skv_saved);
    for (int grad = 0; grad < 2; grad++) {
        uint64_t size = 0;
        spa_executor ex;
        spa_status st =
            grad ? spa_nsa_select_grad_get_workspace_size(
                       &io.q.t, &io.k.t, &io.v.t, &io.o.t, &io.dy.t, &io.mx.t, &io.sm.t,
                       &io.topk.t, &c.sq, &c.skv, NULL, c.scale, c.bs, c.kc, c.n1, "TND", 0,
                       &io.dq.t, &io.dk.t, &io.dv.t, &size, &ex)
                 : spa_nsa_select_get_workspace_size(&io.q.t, &io.k.t, &io.v.t, &io.topk.t, NULL,
                                                     &c.sq, &c.skv, c.scale, c.n1, "TND", 0,
                                                     c.bs, c.kc, &io.mx.t, &io.sm.t, &io.o.t,
                                                     &size, &ex);
        CU_ASSERT_EQUAL_FATAL(st, SPA_OK);
        tws ws;
        tws_make(&ws, size, 3);
        scribbler s[3] = {
            {io.topk.t.data, (size_t)(io.topk.span / 4), 4, -3, 9, 0, 0},
            {c.sq_vals, 2, 8, -8, 80, 0, 0},
            {c.skv_vals, 2, 8, -8, 200, 0, 0},
        };
        scribblers_start(s, 3);
        watchdog_arm(120);
        int ok = 0, refused = 0;
        for (int run = 0; run < 100; run++) {
            st = grad ? spa_nsa_select_grad(ws.ptr, ws.size, &ex, test_runner(run % N_RUNNERS))
                      : spa_nsa_select(ws.ptr, ws.size, &ex, test_runner(run % N_RUNNERS));
            CU_ASSERT(st == SPA_OK || st == SPA_ERR_INVALID);
            ok += st == SPA_OK;
            refused += st == SPA_ERR_INVALID;
        }
        watchdog_disarm();
        scribblers_stop(s, 3);
        CU_ASSERT_EQUAL(ok + refused, 100);
        CU_ASSERT(tws_guard_ok(&ws));
        CU_ASSERT(tt_guard_ok(&io.mx) && tt_guard_ok(&io.sm) && tt_guard_ok(&io.o));
        CU_ASSERT(tt_guard_ok(&io.dq) && tt_guard_ok(&io.dk) && tt_guard_ok(&io.dv));
        tws_free(&ws);
        /* restore what the next phase 1 reads */
        nsas_io_set_indices(&io, &c);
        memcpy(c.sq_vals, sq_saved, sizeof sq_saved);
        memcpy(c.skv_vals, skv_saved, sizeof skv_saved);
    }
    nsas_io_free(&io);
    nsas_case_free(&c);
}

/* Compressed-attention decode: its block table rewritten while phase 2 runs
 * (entries from -4 to past the pages). f32 and bf16, D 128, 64-row pages and enough
 * compressed keys for parts, so the parts read the cache where it lies and
 * look each page up again as they read it; batch 1 contiguous-sized as well.
 * Every run succeeds or is refused; nothing is read or written outside the
 * tensors and the workspace (the sanitizer builds check the reads). */
static void cattn_infer_table_rewritten(spa_dtype dt)
{
    rng r = rng_seed(1003);
    enum { B = 2, N1 = 16, D = 128, PAGE = 64, K = 16 };
    const int64_t cmp_n[B] = {TEST_SIZE(1100, 120) + 5, TEST_SIZE(700, 80) + 11}, sq_n[B] = {1, 1};
    int64_t len_n[B];
    int64_t pages = 0, cols = 0;
    for (int b = 0; b < B; b++) {
        len_n[b] = (cmp_n[b] - 1) * 16 + 32;
        const int64_t np = (cmp_n[b] + PAGE - 1) / PAGE;
        pages += np;
        cols = np > cols ? np : cols;
    }
    ttensor q, k, v, table, o, topk;
    const int64_t qd[3] = {B, N1, D}, kd[4] = {pages, PAGE, 1, D}, td[2] = {B, cols}, id[3] = {B, 1, K};
    tt_make(&q, dt, 3, qd, false, &r);
    tt_make(&k, dt, 4, kd, false, &r);
    tt_make(&v, dt, 4, kd, false, &r);
    tt_make(&table, SPA_INT32, 2, td, false, &r);
    tt_make(&o, dt, 3, qd, false, &r);
    tt_make(&topk, SPA_INT32, 3, id, false, &r);
    tt_fill_random(&q, &r, -1.0, 1.0);
    tt_fill_random(&k, &r, -1.0, 1.0);
    tt_fill_random(&v, &r, -1.0, 1.0);
    for (int64_t b = 0, used = 0; b < B; b++)
        for (int64_t j = 0; j < cols; j++)
            tt_set_int(&table, b * cols + j, j * PAGE < cmp_n[b] ? used++ : -1);
    const spa_int_array sq = {sq_n, B}, cmp = {cmp_n, B}, len = {len_n, B};
    uint64_t size = 0;
    spa_executor ex;
    spa_status st = spa_nsa_compress_attention_infer_get_workspace_size(
        &q.t, &k.t, &v.t, &table.t, &sq, &cmp, &len, 0.088, 1, 32, 16, 64, K, &o.t, &topk.t, &size, &ex);
    CU_ASSERT_EQUAL_FATAL(st, SPA_OK);
    tws ws;
    tws_make(&ws, size, 3);
    scribbler s[1] = {{table.t.data, (size_t)(table.span / 4), 4, -4, pages + 4, 0, 0}};
    scribblers_start(s, 1);
    watchdog_arm(120);
    int ok = 0, refused = 0;
    for (int run = 0; run < 60; run++) {
        st = spa_nsa_compress_attention_infer(ws.ptr, ws.size, &ex, test_runner(run % N_RUNNERS));
        CU_ASSERT(st == SPA_OK || st == SPA_ERR_INVALID);
        ok += st == SPA_OK;
        refused += st == SPA_ERR_INVALID;
    }
    watchdog_disarm();
    scribblers_stop(s, 1);
    CU_ASSERT_EQUAL(ok + refused, 60);
    CU_ASSERT(tws_guard_ok(&ws));
    CU_ASSERT(tt_guard_ok(&o) && tt_guard_ok(&topk));
    tws_free(&ws);
    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&table), tt_free(&o), tt_free(&topk);
}

static void test_cattn_infer_table_rewritten(void)
{
    cattn_infer_table_rewritten(SPA_FLOAT32);
    cattn_infer_table_rewritten(SPA_BFLOAT16); /* widened 16 rows at a time as it reads them */
}

/* Deformable attention: spatialShape and levelStartIndex rewritten. */
static void test_msda_levels_rewritten(void)
{
    rng r = rng_seed(1002);
    const int64_t h[2] = {6, 3}, w[2] = {5, 4};
    msda_case c;
    msda_case_fixed(&c, SPA_FLOAT32, 2, 2, 16, 40, 2, h, w, 3);
    msda_io io;
    msda_io_make(&io, &c, &r, false);
    uint64_t size = 0;
    spa_executor ex;
    CU_ASSERT_EQUAL_FATAL(spa_msda_get_workspace_size(&io.value.t, &io.ss.t, &io.lsi.t, &io.loc.t,
                                                      &io.attn.t, &io.out.t, &size, &ex),
                          SPA_OK);
    tws ws;
    tws_make(&ws, size, 5);
    const size_t iw = c.idt == SPA_INT32 ? 4 : 8;
    scribbler s[2] = {
        {io.ss.t.data, (size_t)(io.ss.span / iw), iw, -2, 60, 0, 0},
        {io.lsi.t.data, (size_t)(io.lsi.span / iw), iw, -2, 60, 0, 0},
    };
    scribblers_start(s, 2);
    watchdog_arm(120);
    for (int run = 0; run < 100; run++) {
        const spa_status st = spa_msda(ws.ptr, ws.size, &ex, test_runner(run % N_RUNNERS));
        CU_ASSERT(st == SPA_OK || st == SPA_ERR_INVALID);
    }
    watchdog_disarm();
    scribblers_stop(s, 2);
    CU_ASSERT(tws_guard_ok(&ws));
    CU_ASSERT(msda_io_guards_ok(&io));
    tws_free(&ws);
    msda_io_free(&io);
}

/* ---- one pool, several callers ---- */

/* One caller: its own problem, executor and workspace; runs phase 2 again
 * and again on the shared pool and compares with the inline result. */
typedef struct caller {
    nsas_case c;
    nsas_io io;
    spa_executor ex;
    tws ws;
    unsigned char *expect; /* attentionOut bytes of the inline run */
    const spa_runner *runner;
    int runs, mismatches, failures;
    pthread_t thread;
} caller;

static void caller_make(caller *k, int i)
{
    rng r = rng_seed(2000 + (uint64_t)i);
    const int64_t qlen[2] = {24 + 8 * i, 17}, klen[2] = {64, 48};
    nsas_case_fixed(&k->c, i % 2 ? SPA_BFLOAT16 : SPA_FLOAT32, 4, 2, 32, 32, 16, 2, 2, qlen, klen,
                    0, false, &r, false);
    nsas_io_make(&k->io, &k->c, &r);
    uint64_t size = 0;
    CU_ASSERT_EQUAL_FATAL(spa_nsa_select_get_workspace_size(
                              &k->io.q.t, &k->io.k.t, &k->io.v.t, &k->io.topk.t, NULL, &k->c.sq,
                              &k->c.skv, k->c.scale, k->c.n1, "TND", 0, k->c.bs, k->c.kc,
                              &k->io.mx.t, &k->io.sm.t, &k->io.o.t, &size, &k->ex),
                          SPA_OK);
    tws_make(&k->ws, size, (size_t)i);
    CU_ASSERT_EQUAL(spa_nsa_select(k->ws.ptr, k->ws.size, &k->ex, NULL), SPA_OK);
    k->expect = tt_snapshot(&k->io.o);
    k->mismatches = k->failures = 0;
}

static void *caller_main(void *arg)
{
    caller *k = arg;
    for (int run = 0; run < k->runs; run++) {
        tt_fill_canary(&k->io.o);
        if (spa_nsa_select(k->ws.ptr, k->ws.size, &k->ex, k->runner) != SPA_OK)
            k->failures++;
        else if (!tt_same_bytes(&k->io.o, k->expect))
            k->mismatches++;
    }
    return NULL;
}

static void shared_pool(int callers, unsigned threads)
{
    enum { MAX_CALLERS = 4 };
    caller k[MAX_CALLERS];
    spa_pool pool;
    CU_ASSERT_FATAL(spa_pool_start(&pool, threads) == 0);
    const spa_runner runner = spa_pool_runner(&pool);
    for (int i = 0; i < callers; i++) {
        caller_make(&k[i], i);
        k[i].runner = &runner;
        k[i].runs = 16; /* enough to overlap the callers' jobs, quick under valgrind */
    }
    watchdog_arm(300);
    for (int i = 0; i < callers; i++)
        CU_ASSERT_FATAL(pthread_create(&k[i].thread, NULL, caller_main, &k[i]) == 0);
    for (int i = 0; i < callers; i++)
        pthread_join(k[i].thread, NULL);
    watchdog_disarm();
    spa_pool_stop(&pool);
    for (int i = 0; i < callers; i++) {
        CU_ASSERT_EQUAL(k[i].failures, 0);
        CU_ASSERT_EQUAL(k[i].mismatches, 0);
        CU_ASSERT(tws_guard_ok(&k[i].ws) && tt_guard_ok(&k[i].io.o));
        free(k[i].expect);
        tws_free(&k[i].ws);
        nsas_io_free(&k[i].io);
        nsas_case_free(&k[i].c);
    }
}

static void test_pool_two_callers(void)
{
    shared_pool(2, 3);
}

static void test_pool_four_callers(void)
{
    shared_pool(4, 4);
}

/* A pool that never started, or was stopped, gives a runner that runs inline. */
static void test_pool_stopped(void)
{
    rng r = rng_seed(3003);
    const int64_t qlen[1] = {20}, klen[1] = {64};
    nsas_case c;
    nsas_case_fixed(&c, SPA_FLOAT32, 2, 1, 16, 16, 16, 2, 1, qlen, klen, 0, false, &r, false);
    nsas_io io;
    nsas_io_make(&io, &c, &r);
    uint64_t size = 0;
    spa_executor ex;
    CU_ASSERT_EQUAL_FATAL(spa_nsa_select_get_workspace_size(
                              &io.q.t, &io.k.t, &io.v.t, &io.topk.t, NULL, &c.sq, &c.skv, c.scale,
                              c.n1, "TND", 0, c.bs, c.kc, &io.mx.t, &io.sm.t, &io.o.t, &size, &ex),
                          SPA_OK);
    tws ws;
    tws_make(&ws, size, 0);
    spa_pool pool;
    CU_ASSERT_FATAL(spa_pool_start(&pool, 2) == 0);
    spa_pool_stop(&pool);
    const spa_runner stopped = spa_pool_runner(&pool);
    CU_ASSERT_EQUAL(spa_nsa_select(ws.ptr, ws.size, &ex, &stopped), SPA_OK);
    spa_pool never = {NULL};
    const spa_runner none = spa_pool_runner(&never);
    CU_ASSERT_EQUAL(spa_nsa_select(ws.ptr, ws.size, &ex, &none), SPA_OK);
    CU_ASSERT_EQUAL(spa_pool_threads(&never), 1u);
    tws_free(&ws);
    nsas_io_free(&io);
    nsas_case_free(&c);
}

/* ---- phase 1 refuses at once ---- */

/* T1 = 2^40 query tokens over stride-0 views: the index tensor has 2^40
 * rows (all one int), so a check that walked it first would take hours. The
 * outputs are refused (stride 0 reaches an element twice, or a wrong dtype):
 * phase 1 must say so before reading any index. */
static void test_refused_at_once(void)
{
    static float one_row[64];
    static int32_t zero_index;
    static const int64_t q_end[1] = {(int64_t)1 << 40}, kv_end[1] = {64};
    const spa_int_array sq = {q_end, 1}, skv = {kv_end, 1};
    const int64_t t1 = (int64_t)1 << 40;
    const int64_t qd[3] = {t1, 2, 16}, kd[3] = {64, 1, 16}, id[3] = {t1, 1, 1}, sd[3] = {t1, 2, 8};
    spa_tensor q, k, v, topk, mx, sm, o, dq, dk, dv;
    spa_tensor_init(&q, SPA_FLOAT32, 3, qd, one_row);
    spa_tensor_init(&k, SPA_FLOAT32, 3, kd, one_row);
    spa_tensor_init(&v, SPA_FLOAT32, 3, kd, one_row);
    spa_tensor_init(&topk, SPA_INT32, 3, id, &zero_index);
    spa_tensor_init(&mx, SPA_FLOAT32, 3, sd, one_row);
    spa_tensor_init(&sm, SPA_FLOAT32, 3, sd, one_row);
    spa_tensor_init(&o, SPA_FLOAT32, 3, qd, one_row);
    spa_tensor_init(&dq, SPA_FLOAT32, 3, qd, one_row);
    spa_tensor_init(&dk, SPA_FLOAT32, 3, kd, one_row);
    spa_tensor_init(&dv, SPA_FLOAT32, 3, kd, one_row);
    /* the same row again and again: inputs may, outputs may not */
    q.strides[0] = o.strides[0] = dq.strides[0] = mx.strides[0] = sm.strides[0] = 0;
    topk.strides[0] = 0;
    uint64_t size;
    spa_executor ex;
    watchdog_arm(20);
    CU_ASSERT_EQUAL(spa_nsa_select_get_workspace_size(&q, &k, &v, &topk, NULL, &sq, &skv, 0.25, 2,
                                                      "TND", 0, 16, 1, &mx, &sm, &o, &size, &ex),
                    SPA_ERR_INVALID);
    CU_ASSERT_EQUAL(spa_nsa_select_grad_get_workspace_size(&q, &k, &v, &o, &o, &mx, &sm, &topk, &sq,
                                                           &skv, NULL, 0.25, 16, 1, 2, "TND", 0,
                                                           &dq, &dk, &dv, &size, &ex),
                    SPA_ERR_INVALID);
    /* distinct output elements, but softmaxMax of the wrong dtype */
    spa_tensor_init(&mx, SPA_FLOAT16, 3, sd, one_row);
    CU_ASSERT_EQUAL(spa_nsa_select_get_workspace_size(&q, &k, &v, &topk, NULL, &sq, &skv, 0.25, 2,
                                                      "TND", 0, 16, 1, &mx, &sm, &o, &size, &ex),
                    SPA_ERR_INVALID);
    watchdog_disarm();
}

void suite_hostile_threads(void)
{
    CU_pSuite s = CU_add_suite("hostile_threads", NULL, NULL);
    CU_add_test(s, "selected attention: arrays rewritten during phase 2",
                test_select_arrays_rewritten);
    CU_add_test(s, "compressed-attention decode: block table rewritten during phase 2",
                test_cattn_infer_table_rewritten);
    CU_add_test(s, "deformable attention: levels rewritten during phase 2",
                test_msda_levels_rewritten);
    CU_add_test(s, "one pool, two callers", test_pool_two_callers);
    CU_add_test(s, "one pool, four callers", test_pool_four_callers);
    CU_add_test(s, "stopped pool runs inline", test_pool_stopped);
    CU_add_test(s, "phase 1 refuses at once", test_refused_at_once);
}
#else
void suite_hostile_threads(void)
{
}
#endif
