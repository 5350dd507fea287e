/* Test harness: see util.h. */
#include "util.h"

#include <CUnit/CUnit.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref.h"
#include "spa_dtypes.h"
#include "spattn/runner.h"

bool test_quick = false;
bool test_thin = false;

rng rng_seed(uint64_t seed)
{
    rng r = {seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull};
    if (r.s == 0)
        r.s = 1;
    return r;
}

uint64_t rng_u64(rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}

int64_t rng_int(rng *r, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)(hi - lo) + 1;
    return lo + (int64_t)(rng_u64(r) % span);
}

double rng_unit(rng *r)
{
    return (double)(rng_u64(r) >> 11) * 0x1p-53;
}

const char *dtype_name(spa_dtype dt)
{
    switch (dt) {
    case SPA_FLOAT32: return "f32";
    case SPA_FLOAT16: return "f16";
    case SPA_BFLOAT16: return "bf16";
    case SPA_FLOAT64: return "f64";
    case SPA_INT32: return "i32";
    case SPA_INT64: return "i64";
    case SPA_UINT8: return "u8";
    case SPA_BOOL: return "bool";
    }
    return "?";
}

static size_t esize(int32_t dt)
{
    switch (dt) {
    case SPA_FLOAT32: case SPA_INT32: return 4;
    case SPA_FLOAT16: case SPA_BFLOAT16: return 2;
    case SPA_INT64: case SPA_FLOAT64: return 8;
    default: return 1;
    }
}

/* Small targets have a few MiB of heap: say so instead of crashing. */
static void out_of_memory(size_t bytes)
{
    fprintf(stderr, "test: out of memory for %lu bytes%s\n", (unsigned long)bytes,
            SPA_TEST_SMALL ? " (a small target: scale the shape with TEST_SIZE / TEST_CAP)" : "");
    exit(2);
}

spa_dtype test_built_dtype(spa_dtype dt)
{
    if ((dt == SPA_FLOAT16 && !SPA_HAVE_F16) || (dt == SPA_BFLOAT16 && !SPA_HAVE_BF16))
        return SPA_FLOAT32; /* float64: its suites test the refusal where it is not built */
    return dt;
}

void tt_make(ttensor *tt, spa_dtype dt, int32_t rank, const int64_t *dims, bool strided, rng *r)
{
    dt = test_built_dtype(dt);
    memset(tt, 0, sizeof *tt);
    tt->t.dtype = (int32_t)dt;
    tt->t.rank = rank;
    /* Row-major with optional padding: each dim's pitch gets 0..3 extra
     * elements, and the innermost stride is 1 or 2. */
    int64_t stride = strided ? rng_int(r, 1, 2) : 1;
    int64_t span_elems = 1;
    bool empty = false;
    for (int32_t k = rank - 1; k >= 0; k--) {
        tt->t.dims[k] = dims[k];
        tt->t.strides[k] = stride;
        if (dims[k] == 0)
            empty = true;
        span_elems += (dims[k] > 0 ? dims[k] - 1 : 0) * stride;
        stride = stride * (dims[k] > 0 ? dims[k] : 1) + (strided ? rng_int(r, 0, 3) : 0);
    }
    tt->span = empty ? 0 : (size_t)span_elems * esize((int32_t)dt);
    tt->block = malloc(tt->span + 2 * RED_ZONE);
    if (tt->block == NULL)
        out_of_memory(tt->span + 2 * RED_ZONE);
    memset(tt->block, CANARY, tt->span + 2 * RED_ZONE);
    tt->t.data = tt->block + RED_ZONE;
}

void tt_free(ttensor *tt)
{
    free(tt->block);
    tt->block = NULL;
}

int64_t tt_numel(const ttensor *tt)
{
    int64_t n = 1;
    for (int32_t k = 0; k < tt->t.rank; k++)
        n *= tt->t.dims[k];
    return n;
}

int64_t tt_offset(const ttensor *tt, int64_t flat)
{
    int64_t off = 0;
    for (int32_t k = tt->t.rank - 1; k >= 0; k--) {
        int64_t i = flat % tt->t.dims[k];
        flat /= tt->t.dims[k];
        off += i * tt->t.strides[k];
    }
    return off;
}

double tt_get(const ttensor *tt, int64_t flat)
{
    const unsigned char *p = (const unsigned char *)tt->t.data + tt_offset(tt, flat) * (int64_t)esize(tt->t.dtype);
    switch (tt->t.dtype) {
    case SPA_FLOAT32: { float f; memcpy(&f, p, 4); return f; }
    case SPA_FLOAT16: { uint16_t h; memcpy(&h, p, 2); return ref_f16_to_double(h); }
    case SPA_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); return ref_bf16_to_double(h); }
    case SPA_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case SPA_INT64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case SPA_FLOAT64: { double v; memcpy(&v, p, 8); return v; }
    default: return *p;
    }
}

void tt_set_int(ttensor *tt, int64_t flat, int64_t v)
{
    unsigned char *p = (unsigned char *)tt->t.data + tt_offset(tt, flat) * (int64_t)esize(tt->t.dtype);
    switch (tt->t.dtype) {
    case SPA_INT32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    case SPA_INT64: memcpy(p, &v, 8); break;
    default: *p = (unsigned char)v; break;
    }
}

void tt_set_nonfinite(ttensor *tt, int64_t flat, double v)
{
    unsigned char *p = (unsigned char *)tt->t.data + tt_offset(tt, flat) * (int64_t)esize(tt->t.dtype);
    const int neg = signbit(v) != 0;
    if (tt->t.dtype == SPA_FLOAT64) {
        memcpy(p, &v, 8);
    } else if (tt->t.dtype == SPA_FLOAT32) {
        const float f = isnan(v) ? NAN : neg ? -INFINITY : INFINITY;
        memcpy(p, &f, 4);
    } else if (tt->t.dtype == SPA_FLOAT16 || tt->t.dtype == SPA_BFLOAT16) {
        const int bf = tt->t.dtype == SPA_BFLOAT16;
        uint16_t h = isnan(v) ? (bf ? 0x7FC0 : 0x7E00) : (bf ? 0x7F80 : 0x7C00);
        if (!isnan(v) && neg)
            h |= 0x8000;
        memcpy(p, &h, 2);
    }
}

int64_t tt_poison(ttensor *tt, rng *r, int count, bool infinities)
{
    const int64_t n = tt_numel(tt);
    int64_t first = -1;
    for (int i = 0; i < count && n > 0; i++) {
        const int64_t at = rng_int(r, 0, n - 1);
        const int kind = infinities ? (int)rng_int(r, 0, 2) : 0;
        tt_set_nonfinite(tt, at, kind == 0 ? NAN : kind == 1 ? INFINITY : -INFINITY);
        if (first < 0)
            first = at;
    }
    return first;
}

/* A random value of the dtype in [lo, hi), built from its bits or exactly
 * representable, so inputs need no rounding code of their own. */
static void store_random(unsigned char *p, int32_t dt, rng *r, double lo, double hi)
{
    double v = lo + (hi - lo) * rng_unit(r);
    if (dt == SPA_FLOAT64) {
        memcpy(p, &v, 8); /* all 53 bits random: no value the f32 path could hold */
    } else if (dt == SPA_FLOAT32) {
        float f = (float)v;
        memcpy(p, &f, 4);
    } else if (dt == SPA_BFLOAT16) {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        uint16_t h = (uint16_t)(u >> 16); /* truncation: still a bf16 value */
        memcpy(p, &h, 2);
    } else if (dt == SPA_FLOAT16) {
        /* the nearest f16 at or below |v| via its exponent and mantissa */
        double a = fabs(v);
        uint16_t h = 0;
        if (a >= 0x1p-14) {
            int e;
            double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
            h = (uint16_t)(((e + 14) << 10) | ((int)(m * 2048.0) - 1024));
        } else {
            h = (uint16_t)(a * 0x1p24);
        }
        if (v < 0)
            h |= 0x8000;
        memcpy(p, &h, 2);
    } else {
        *p = (unsigned char)rng_int(r, 0, 1);
    }
}

void tt_fill_random(ttensor *tt, rng *r, double lo, double hi)
{
    int64_t n = tt_numel(tt);
    for (int64_t i = 0; i < n; i++)
        store_random((unsigned char *)tt->t.data + tt_offset(tt, i) * (int64_t)esize(tt->t.dtype),
                     tt->t.dtype, r, lo, hi);
}

void tt_fill_canary(ttensor *tt)
{
    memset(tt->block, CANARY, tt->span + 2 * RED_ZONE);
}

bool tt_guard_ok(const ttensor *tt)
{
    size_t es = esize(tt->t.dtype);
    unsigned char *used = calloc(tt->span + 1, 1);
    int64_t n = tt_numel(tt);
    for (int64_t i = 0; i < n; i++)
        memset(used + tt_offset(tt, i) * (int64_t)es, 1, es);
    bool ok = true;
    for (size_t i = 0; i < RED_ZONE && ok; i++)
        ok = tt->block[i] == CANARY && tt->block[RED_ZONE + tt->span + i] == CANARY;
    for (size_t i = 0; i < tt->span && ok; i++)
        ok = used[i] || tt->block[RED_ZONE + i] == CANARY;
    free(used);
    return ok;
}

double *tt_to_doubles(const ttensor *tt)
{
    int64_t n = tt_numel(tt);
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = tt_get(tt, i);
    return v;
}

unsigned char *tt_snapshot(const ttensor *tt)
{
    unsigned char *s = malloc(tt->span + 2 * RED_ZONE);
    memcpy(s, tt->block, tt->span + 2 * RED_ZONE);
    return s;
}

bool tt_same_bytes(const ttensor *a, const unsigned char *snapshot)
{
    return memcmp(a->block, snapshot, a->span + 2 * RED_ZONE) == 0;
}

void tws_make(tws *w, uint64_t size, size_t skew)
{
    w->size = size;
    w->skew = skew;
    w->block = malloc((size_t)size + 2 * RED_ZONE + skew);
    if (w->block == NULL)
        out_of_memory((size_t)size + 2 * RED_ZONE + skew);
    memset(w->block, CANARY, (size_t)size + 2 * RED_ZONE + skew);
    w->ptr = w->block + RED_ZONE + skew;
}

bool tws_guard_ok(const tws *w)
{
    for (size_t i = 0; i < RED_ZONE + w->skew; i++)
        if (w->block[i] != CANARY)
            return false;
    for (size_t i = 0; i < RED_ZONE; i++)
        if (w->block[RED_ZONE + w->skew + w->size + i] != CANARY)
            return false;
    return true;
}

void tws_free(tws *w)
{
    free(w->block);
    w->block = NULL;
}

tol tol_for(spa_dtype dt, double f32_atol)
{
    tol t = {f32_atol, 0.0, 0x1p-150};
    if (dt == SPA_FLOAT64) {
        /* f64 sums against the fp64 reference: both near 2^-53 per term */
        t.atol = 1e-12;
        t.rtol = 1e-12;
        t.floor = 0x1p-1074;
    } else if (dt == SPA_FLOAT32) {
    } else if (dt == SPA_FLOAT16) {
        t.rtol = 0x1p-10; /* one RNE rounding: 2^-11, with margin */
        t.floor = 0x1p-25;
    } else {
        t.rtol = 0x1p-7; /* bf16: 2^-8, with margin */
        t.floor = 0x1p-134;
    }
    return t;
}

bool equal_or_nan(double a, double b)
{
    return a == b || (isnan(a) && isnan(b));
}

void max_unspecified_where_nan(double *got, const double *ref, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (isnan(ref[i]))
            got[i] = NAN;
}

int64_t check_close(const char *what, const double *got, const double *ref, const double *mag,
                    int64_t n, tol t)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        bool ok;
        if (isnan(ref[i])) /* NaN inputs: NaN exactly where the reference has it */
            ok = isnan(got[i]) != 0;
        else if (isinf(ref[i]))
            ok = got[i] == ref[i];
        else if (mag[i] == 0.0)
            ok = got[i] == 0.0 && !signbit(got[i]);
        else
            ok = fabs(got[i] - ref[i]) <= t.atol * mag[i] + t.rtol * fabs(ref[i]) + t.floor;
        if (!ok && bad++ < 5)
            fprintf(stderr, "  %s[%lld]: got %.9g want %.9g (mag %.3g)\n", what, (long long)i,
                    got[i], ref[i], mag[i]);
    }
    return bad;
}

#ifndef SPA_TEST_NO_THREADS
const unsigned runner_threads[N_RUNNERS] = {0, 1, 2, 7};
static spa_pool pools[N_RUNNERS];
static spa_runner runners[N_RUNNERS];

const spa_runner *test_runner(int which)
{
    if (which == 0)
        return NULL;
    if (pools[which].impl == NULL) {
        if (spa_pool_start(&pools[which], runner_threads[which]) != 0) {
            fprintf(stderr, "cannot start a pool of %u threads\n", runner_threads[which]);
            exit(2);
        }
        runners[which] = spa_pool_runner(&pools[which]);
    }
    return &runners[which];
}

void test_runners_stop(void)
{
    for (int i = 1; i < N_RUNNERS; i++)
        if (pools[i].impl)
            spa_pool_stop(&pools[i]);
}
#else
const unsigned runner_threads[N_RUNNERS] = {0, 1, 1, 1};

static uint32_t gcd_u32(uint32_t a, uint32_t b)
{
    while (b != 0) {
        uint32_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Task i runs as number (i * step + n - 1) mod n: a permutation whenever
 * gcd(step, n) == 1. ctx 1: reversed; 2 and 3: strides near n/2 and n*5/8. */
static void run_permuted(void *ctx, spa_task_fn task, void *arg, uint32_t n)
{
    const uintptr_t kind = (uintptr_t)ctx;
    if (kind == 1) {
        for (uint32_t i = n; i-- > 0;)
            task(arg, i);
        return;
    }
    uint32_t step = kind == 2 ? n / 2 + 1 : (uint32_t)((uint64_t)n * 5 / 8) + 1;
    while (gcd_u32(step, n) != 1)
        step++;
    for (uint32_t i = 0; i < n; i++)
        task(arg, (uint32_t)(((uint64_t)i * step + n - 1) % n));
}

static const spa_runner runners[N_RUNNERS] = {
    {NULL, NULL},
    {run_permuted, (void *)1},
    {run_permuted, (void *)2},
    {run_permuted, (void *)3},
};

const spa_runner *test_runner(int which)
{
    return which == 0 ? NULL : &runners[which];
}

void test_runners_stop(void)
{
}
#endif

void case_verdict(const char *label, int i, const char *desc, spa_status st, int64_t bad,
                  bool guards)
{
    if (st != SPA_OK || bad != 0 || !guards)
        fprintf(stderr, "  %s %d (%s): status %d, %lld bad, guards %s\n", label, i, desc, (int)st,
                (long long)bad, guards ? "ok" : "BROKEN");
    CU_ASSERT_EQUAL(st, SPA_OK);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(guards);
}

bool refusal_recorded(const spa_executor *ex, const spa_executor *before, spa_status st)
{
    const char *context;
    const char *why = spa_executor_reason(ex, &context);
    /* a NULL executor argument (161001) leaves nothing to record in */
    const bool untouched = memcmp(ex, before, sizeof *ex) == 0;
    const bool named = st == SPA_ERR_INVALID ? strncmp(why, "src/", 4) == 0 : why[0] != '\0' || untouched;
    /* whatever plan it held no longer runs: phase 2 refuses and says why */
    spa_executor copy = *ex;
    unsigned char ws[64];
    const bool disarmed =
        untouched || (spa_executor_run(ws, sizeof ws, &copy, NULL) == SPA_ERR_INVALID &&
                      strstr(spa_executor_reason(&copy, NULL), "was refused") != NULL);
    if (!disarmed || !named)
        fprintf(stderr, "  refusal %d: plan %s, reason '%s'\n", (int)st,
                disarmed ? "disarmed" : "STILL RUNNABLE", why);
    return disarmed && named;
}
