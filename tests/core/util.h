/* Test harness shared by the suites: deterministic random numbers, tensors
 * with red zones and stride gaps, dtype decoding, tolerance checks and the
 * runners (inline, 1, 2 and 7 threads) every result is compared across. */
#ifndef SPA_TEST_UTIL_H
#define SPA_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spattn/spattn.h"

/* ---- random numbers (xorshift64*), seeded per test ---- */
typedef struct rng {
    uint64_t s;
} rng;
rng rng_seed(uint64_t seed);
uint64_t rng_u64(rng *r);
int64_t rng_int(rng *r, int64_t lo, int64_t hi); /* inclusive */
double rng_unit(rng *r);                         /* [0, 1) */

/* ---- a tensor in its own heap block with red zones ----
 * The block holds the strided span plus RED_ZONE bytes each side. Fresh
 * tensors are filled with the canary byte (outputs) or random values of the
 * dtype (inputs); the elements of the span the view does not address ("gaps",
 * from padded strides) keep the canary, so writes there are caught too. */
#define RED_ZONE 64
#define CANARY 0xA5
typedef struct ttensor {
    spa_tensor t;
    unsigned char *block; /* RED_ZONE + span + RED_ZONE bytes */
    size_t span;          /* bytes addressed by the view's span */
} ttensor;

/* strided: 0 = contiguous; otherwise padded strides drawn from r. */
/* A build without f16 / bf16 (DTYPES=): the dtype a test's tensor of dt
 * gets, f32 where dt is not built (tt_make), so that every case still runs,
 * in f32, against its reference at dt's tolerance. float64 stays: the
 * suites test its refusal where it is not built. */
spa_dtype test_built_dtype(spa_dtype dt);
void tt_make(ttensor *tt, spa_dtype dt, int32_t rank, const int64_t *dims, bool strided, rng *r);
void tt_free(ttensor *tt);
void tt_fill_random(ttensor *tt, rng *r, double lo, double hi); /* values exact in the dtype */
void tt_fill_canary(ttensor *tt);
int64_t tt_offset(const ttensor *tt, int64_t flat); /* logical row-major index -> element offset */
double tt_get(const ttensor *tt, int64_t flat);
void tt_set_int(ttensor *tt, int64_t flat, int64_t v);  /* integer dtypes */
/* Float dtypes: element flat = v, which is NaN, +Inf or -Inf. */
void tt_set_nonfinite(ttensor *tt, int64_t flat, double v);
/* count random elements NaN (or, with infinities, NaN, +Inf or -Inf):
 * the never-silently-wrong tests. Returns the first element set. */
int64_t tt_poison(ttensor *tt, rng *r, int count, bool infinities);
int64_t tt_numel(const ttensor *tt);
/* Red zones and gaps still hold the canary. */
bool tt_guard_ok(const ttensor *tt);
/* Copy of all logical elements as doubles (malloc'd). */
double *tt_to_doubles(const ttensor *tt);
/* Bytes of the whole block equal (for determinism / untouched checks). */
bool tt_same_bytes(const ttensor *a, const unsigned char *snapshot);
unsigned char *tt_snapshot(const ttensor *tt);

/* ---- workspace with red zones, deliberately misaligned by `skew` bytes ---- */
typedef struct tws {
    unsigned char *block;
    void *ptr;
    uint64_t size;
    size_t skew;
} tws;
void tws_make(tws *w, uint64_t size, size_t skew);
bool tws_guard_ok(const tws *w);
void tws_free(tws *w);

/* ---- tolerances ----
 * |got - ref| <= atol * mag + rtol * |ref| + floor: mag (sum of |terms|) bounds
 * the f32 accumulation error, rtol the single rounding to the output dtype and
 * floor that rounding among the dtype's subnormals. */
typedef struct tol {
    double atol, rtol;
    double floor; /* half the spacing of the dtype's subnormals */
} tol;
/* SPA_FLOAT64: 1e-12 relative to mag and to |ref| (f32_atol unused). */
tol tol_for(spa_dtype dt, double f32_atol);
/* Compares n values; reports the first few mismatches under `what`.
 * Where mag is exactly 0 (no term at all) got must be exactly +0; where the
 * reference is NaN got must be NaN, where it is +-Inf the same infinity. */
int64_t check_close(const char *what, const double *got, const double *ref, const double *mag,
                    int64_t n, tol t);

/* The verdict on one case of a sweep: status SPA_OK, no value out of
 * tolerance (bad == 0) and every red zone intact. A failing case is named on
 * stderr with its description, so that it can be replayed. */
void case_verdict(const char *label, int i, const char *desc, spa_status st, int64_t bad,
                  bool guards);

/* Equal, or both NaN. */
bool equal_or_nan(double a, double b);
/* softmaxMax of a row with a NaN score is unspecified (the row's own
 * numbers or NaN; its softmaxSum is NaN): got[i] = NaN where ref[i] is. */
void max_unspecified_where_nan(double *got, const double *ref, int64_t n);

/* ---- problem sizes ----
 * Small targets (a Cortex-M board under QEMU: 15 MiB of heap, a slow CPU)
 * build the suites with -DSPA_TEST_SMALL=1 from their target.mk. Suites pick
 * their sizes through these, so the same tests run everywhere, just smaller. */
#ifndef SPA_TEST_SMALL
#define SPA_TEST_SMALL 0
#endif
/* The quick case set (spattn_tests --cases=quick; make test TEST_CASES=quick):
 * the sizes of a small target on any target, for the runs that pay 10-50x per
 * operation (emulators, valgrind): shorter sequences, fewer batches and heads,
 * every random draw and named case kept. What only the memory of a small target rules out
 * (SPA_TEST_SMALL alone) still runs. */
extern bool test_quick;
/* The thin case set (--cases=thin): the quick set with a small target's
 * number of random draws, for the runs whose layer another run covers with
 * every draw (valgrind, whose AVX2 layer the clang sanitizer build runs
 * quick; the gcc sanitizer builds of the layers clang's run quick; the
 * scalar RISC-V and the BF16 NEON targets, whose layers run quick on
 * x86-64, Cortex-M7 and aarch64). */
extern bool test_thin;
#define TEST_SMALL_SIZES (SPA_TEST_SMALL || test_quick)
/* full on ordinary targets, small on small ones and in the quick set. */
#define TEST_SIZE(full, small) (TEST_SMALL_SIZES ? (small) : (full))
/* v, capped at cap on small targets and in the quick set. */
#define TEST_CAP(v, cap) (TEST_SMALL_SIZES && (v) > (cap) ? (cap) : (v))
/* How many random cases a sweep draws: fewer on small targets only. The quick
 * set keeps them all (smaller each), since every draw may be the one that
 * picks a kernel's rarer tile (tools/case_coverage.sh shows which). */
#define TEST_COUNT(full, small) (SPA_TEST_SMALL || test_thin ? (small) : (full))
/* Whether a named case i runs in the k-th of its n dtypes: in every one, but
 * in the thin set in one of them, turning with the case (so that each dtype
 * still meets several cases; the quick set, which runs the same layers, has
 * every pair). */
#define TEST_THIN_DTYPE(i, k, n) (!test_thin || (k) == (i) % (n))
/* Sizes the quick set keeps in full, small on small targets only: the
 * NsaCompress(Grad) suites, whose kernels pick their tiles from heads x D and
 * the windows of a run (their full sizes cost seconds under an emulator). */
#define TEST_BOARD_SIZE(full, small) (SPA_TEST_SMALL ? (small) : (full))
#define TEST_BOARD_CAP(v, cap) (SPA_TEST_SMALL && (v) > (cap) ? (cap) : (v))

/* ---- runners ---- */
/* index 0: NULL runner (inline); 1, 2, 3: pools of 1, 2 and 7 threads.
 * Targets without threads (-DSPA_TEST_NO_THREADS: bare metal) get in-process
 * runners instead that run the tasks in other orders (reversed, and two
 * strided permutations), so order-dependent results still show up. */
#define N_RUNNERS 4
extern const unsigned runner_threads[N_RUNNERS];
const spa_runner *test_runner(int which);
void test_runners_stop(void);

const char *dtype_name(spa_dtype dt);

/* After a refused phase 1 on ex (a copy of which is before): whatever plan
 * the executor held no longer runs (phase 2 refuses, saying that the last
 * phase 1 was refused) and the refusal record names a reason (a rule site,
 * "src/...", for 161002), unless a NULL executor was the 161001; a failure
 * is reported on stderr. */
bool refusal_recorded(const spa_executor *ex, const spa_executor *before, spa_status st);

#endif
