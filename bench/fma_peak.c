/* fp32 FMA peak measured now, per thread count, with the benchmark's own
 * pool: the reference figures of machine.md belong to one machine, and the
 * host that runs the benchmark may be another model or a busy one. Twelve
 * independent accumulator chains per thread cover the FMA latency of every
 * x86 core we know of; the widest vectors the build allows are used. */
#include "bench.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

enum { PEAK_CHAINS = 12, PEAK_ITERS = 600000, PEAK_TASKS = 64 };

typedef struct peak_arg {
    volatile float sink[PEAK_TASKS];
    unsigned threads;
    double flops_per_task;
} peak_arg;

static void peak_task(void *arg, uint32_t task)
{
    peak_arg *p = arg;
    const long iters = PEAK_ITERS;
#if defined(__AVX512F__)
    __m512 acc[PEAK_CHAINS];
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < PEAK_CHAINS; i++)
        acc[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < PEAK_CHAINS; i++)
            acc[i] = _mm512_fmadd_ps(acc[i], m, c);
    float s = 0.0f;
    for (int i = 0; i < PEAK_CHAINS; i++)
        s += _mm512_reduce_add_ps(acc[i]);
    p->flops_per_task = 2.0 * 16 * PEAK_CHAINS * (double)iters;
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc[PEAK_CHAINS];
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < PEAK_CHAINS; i++)
        acc[i] = _mm256_set1_ps((float)i);
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < PEAK_CHAINS; i++)
            acc[i] = _mm256_fmadd_ps(acc[i], m, c);
    float lanes[8], s = 0.0f;
    for (int i = 0; i < PEAK_CHAINS; i++) {
        _mm256_storeu_ps(lanes, acc[i]);
        for (int l = 0; l < 8; l++)
            s += lanes[l];
    }
    p->flops_per_task = 2.0 * 8 * PEAK_CHAINS * (double)iters;
#else
    float acc[PEAK_CHAINS][8], s = 0.0f;
    for (int i = 0; i < PEAK_CHAINS; i++)
        for (int l = 0; l < 8; l++)
            acc[i][l] = (float)(i + l);
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < PEAK_CHAINS; i++)
            for (int l = 0; l < 8; l++)
                acc[i][l] = acc[i][l] * 0.999999f + 1e-7f;
    for (int i = 0; i < PEAK_CHAINS; i++)
        for (int l = 0; l < 8; l++)
            s += acc[i][l];
    p->flops_per_task = 2.0 * 8 * PEAK_CHAINS * (double)iters;
#endif
    p->sink[task] = s;
}

static void peak_run(void *arg)
{
    peak_arg *p = arg;
    const spa_runner *r = bench_runner(p->threads);
    r->run(r->ctx, peak_task, p, PEAK_TASKS);
}

double bench_fma_peak_gflops(unsigned threads)
{
    static peak_arg p; /* large enough to keep off the stack; bench only */
    p.threads = threads;
    const double ms = bench_time_ms(peak_run, &p);
    return p.flops_per_task * PEAK_TASKS / (ms * 1e6);
}
