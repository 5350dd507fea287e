/* Benchmark driver: runs every registered op (or the one named on the
 * command line) and frees what it allocated. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SPA_BENCH(name) void bench_##name(void);
#include "bench_ops.inc"
#undef SPA_BENCH

static spa_pool pools[65];
static spa_runner runners[65];

const spa_runner *bench_runner(unsigned threads)
{
    if (threads > 64)
        threads = 64;
    if (pools[threads].impl == NULL) {
        if (spa_pool_start(&pools[threads], threads) != 0) {
            fprintf(stderr, "cannot start %u threads\n", threads);
            exit(1);
        }
        runners[threads] = spa_pool_runner(&pools[threads]);
    }
    return &runners[threads];
}

int bench_thread_counts(unsigned *out, int max)
{
    const char *env = getenv("BENCH_THREADS");
    if (env == NULL || *env == '\0')
        env = "1 2";
    int n = 0;
    char *end;
    for (const char *p = env; n < max;) {
        unsigned long v = strtoul(p, &end, 10);
        if (end == p)
            break;
        if (v >= 1 && v <= 64)
            out[n++] = (unsigned)v;
        p = end;
    }
    return n;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_time_ms(void (*fn)(void *), void *arg)
{
    double t[BENCH_RUNS];
    fn(arg); /* warm-up: caches, page tables, pool threads */
    for (int i = 0; i < BENCH_RUNS; i++) {
        double t0 = now_ms();
        fn(arg);
        t[i] = now_ms() - t0;
    }
    qsort(t, BENCH_RUNS, sizeof t[0], cmp_double);
    return t[BENCH_RUNS / 2];
}

/* Whether word occurs as a blank-separated item of list. */
static int in_list(const char *list, const char *word)
{
    const size_t n = strlen(word);
    for (const char *p = list; *p;) {
        while (*p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ' ')
            e++;
        if ((size_t)(e - p) == n && strncmp(p, word, n) == 0)
            return 1;
        p = e;
    }
    return 0;
}

int bench_wanted(spa_dtype dt, const char *shape)
{
    const char *d = getenv("BENCH_DTYPE"), *s = getenv("BENCH_SHAPE");
    /* f64 only when asked for by name: the default run keeps its figures */
    return (d == NULL || *d == '\0' ? dt != SPA_FLOAT64 : in_list(d, bench_dtype_name(dt))) &&
           (s == NULL || *s == '\0' || in_list(s, shape));
}

const char *bench_dtype_name(spa_dtype dt)
{
    return dt == SPA_FLOAT32 ? "f32" : dt == SPA_FLOAT16 ? "f16" : dt == SPA_BFLOAT16 ? "bf16" : dt == SPA_FLOAT64 ? "f64" : "?";
}

size_t bench_dtype_size(spa_dtype dt)
{
    return dt == SPA_FLOAT32 || dt == SPA_INT32 ? 4 : dt == SPA_INT64 || dt == SPA_FLOAT64 ? 8 : dt == SPA_UINT8 || dt == SPA_BOOL ? 1 : 2;
}

/* STREAM triad measured now with the same pool, so that a figure taken on a
 * busy or slower host can be read against what the memory gives today. */
static double live_triad[3], live_fma[3];
enum { TRIAD_N = 1 << 24, TRIAD_CHUNK = 1 << 16 };
typedef struct triad_arg {
    float *a, *b, *c;
} triad_arg;

static void triad_task(void *arg, uint32_t i)
{
    triad_arg *t = arg;
    size_t lo = (size_t)i * TRIAD_CHUNK;
    for (size_t k = lo; k < lo + TRIAD_CHUNK; k++)
        t->a[k] = t->b[k] + 3.0f * t->c[k];
}

static void triad_run(void *arg)
{
    triad_arg *t = arg;
    const spa_runner *r = bench_runner((unsigned)(uintptr_t)t[1].a);
    r->run(r->ctx, triad_task, t, TRIAD_N / TRIAD_CHUNK);
}

static void measure_triad(void)
{
    triad_arg t[2];
    t[0].a = bench_alloc_zero(sizeof(float) * TRIAD_N);
    t[0].b = bench_alloc_random(SPA_FLOAT32, TRIAD_N, 11);
    t[0].c = bench_alloc_random(SPA_FLOAT32, TRIAD_N, 12);
    for (unsigned th = 1; th <= 2; th++) {
        t[1].a = (float *)(uintptr_t)th;
        live_triad[th] = 3.0 * sizeof(float) * TRIAD_N / (bench_time_ms(triad_run, t) * 1e6);
    }
    free(t[0].a);
    free(t[0].b);
    free(t[0].c);
}

double bench_live_triad_gbps(unsigned threads)
{
    return live_triad[threads >= 2 ? 2 : 1];
}

double bench_live_fma_gflops(unsigned threads)
{
    return live_fma[threads >= 2 ? 2 : 1];
}

void bench_report(const char *op, spa_dtype dt, const char *shape, unsigned threads,
                  double median_ms, double bytes, double flops)
{
    double gbps = bytes / (median_ms * 1e6), gflops = flops / (median_ms * 1e6);
    printf("bench op=%s dtype=%s shape=%s threads=%u median_ms=%.3f gbps=%.2f gflops=%.2f\n", op,
           bench_dtype_name(dt), shape, threads, median_ms, gbps, gflops);
    double triad = threads >= 2 ? BENCH_TRIAD_GBPS_2T : BENCH_TRIAD_GBPS_1T;
    double live = live_triad[threads >= 2 ? 2 : 1];
    double peak = BENCH_FMA_GFLOPS_PER_CORE * (threads > 2 ? 2 : threads);
    double live_peak = live_fma[threads >= 2 ? 2 : 1];
    printf("#   %.0f%% of STREAM triad (%.0f GB/s; %.0f%% of the %.1f GB/s measured now), "
           "%.1f%% of fp32 FMA peak (%.0f GFLOP/s; %.1f%% of the %.0f measured now)\n",
           100.0 * gbps / triad, triad, 100.0 * gbps / live, live, 100.0 * gflops / peak, peak,
           100.0 * gflops / live_peak, live_peak);
    fflush(stdout);
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void *bench_alloc_zero(size_t bytes)
{
    size_t rounded = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (p == NULL) {
        fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    memset(p, 0, rounded);
    return p;
}

uint64_t bench_lcg(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return *state >> 33;
}

void bench_shuffled_pages(int32_t *table, int64_t pages, uint64_t *state)
{
    for (int64_t i = 0; i < pages; i++)
        table[i] = (int32_t)i;
    for (int64_t i = pages - 1; i > 0; i--) {
        const int64_t j = (int64_t)(bench_lcg(state) % (uint64_t)(i + 1));
        const int32_t x = table[i];
        table[i] = table[j], table[j] = x;
    }
}

void bench_causal_topk(int32_t *idx, int64_t t, int64_t k, int64_t ctx, uint64_t *state)
{
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)ctx);
    for (int64_t i = 0; i < t; i++) {
        const int64_t seen = ctx - t + i + 1;
        for (int64_t s = 0; s < seen; s++)
            perm[s] = (int32_t)s;
        for (int64_t j = 0; j < k; j++) {
            const int64_t r = j + (int64_t)(bench_lcg(state) % (uint64_t)(seen - j));
            const int32_t x = perm[j];
            perm[j] = perm[r], perm[r] = x;
            idx[i * k + j] = perm[j];
        }
    }
    free(perm);
}

void *bench_alloc_random(spa_dtype dt, size_t count, uint64_t seed)
{
    size_t es = bench_dtype_size(dt);
    unsigned char *p = bench_alloc_zero(count * es);
    for (size_t i = 0; i < count; i++) {
        float v = (float)((double)(splitmix(&seed) >> 11) * 0x1p-52 - 1.0);
        uint32_t u;
        memcpy(&u, &v, 4);
        if (dt == SPA_FLOAT64) {
            const double dv = (double)(splitmix(&seed) >> 11) * 0x1p-52 - 1.0;
            memcpy(p + i * 8, &dv, 8);
        } else if (dt == SPA_FLOAT32) {
            memcpy(p + i * 4, &v, 4);
        } else if (dt == SPA_BFLOAT16) {
            uint16_t h = (uint16_t)(u >> 16);
            memcpy(p + i * 2, &h, 2);
        } else {
            /* f16 with the same sign and a mantissa from the f32: 2^-1..2^0 range */
            uint16_t h = (uint16_t)(((u >> 16) & 0x8000u) | 0x3800u | ((u >> 13) & 0x3FFu));
            memcpy(p + i * 2, &h, 2);
        }
    }
    return p;
}

spa_tensor bench_tensor(spa_dtype dt, int32_t rank, const int64_t *dims, void *data)
{
    spa_tensor t;
    spa_tensor_init(&t, dt, rank, dims, data);
    return t;
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 && argv[1][0] ? argv[1] : NULL;
    printf("# spattn benchmark: median of %d runs after a warm-up; limits of the reference machine:\n"
           "#   STREAM triad %.0f GB/s (1 thread) / %.0f GB/s (2 threads), fp32 FMA %.0f GFLOP/s per core\n",
           BENCH_RUNS, BENCH_TRIAD_GBPS_1T, BENCH_TRIAD_GBPS_2T, BENCH_FMA_GFLOPS_PER_CORE);
    measure_triad();
    live_fma[1] = bench_fma_peak_gflops(1);
    live_fma[2] = bench_fma_peak_gflops(2);
    printf("#   measured now: triad %.1f GB/s (1 thread) / %.1f GB/s (2 threads), "
           "fp32 FMA %.0f GFLOP/s (1 thread) / %.0f GFLOP/s (2 threads)\n",
           live_triad[1], live_triad[2], live_fma[1], live_fma[2]);
    int ran = 0;
#define SPA_BENCH(name)                            \
    if (only == NULL || strcmp(only, #name) == 0) { \
        bench_##name();                            \
        ran++;                                     \
    }
#include "bench_ops.inc"
#undef SPA_BENCH
    for (int i = 0; i < 65; i++)
        if (pools[i].impl)
            spa_pool_stop(&pools[i]);
    if (ran == 0) {
        fprintf(stderr, "no benchmark named %s\n", only ? only : "");
        return 1;
    }
    return 0;
}
