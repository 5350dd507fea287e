/* Benchmark harness: every op registers a bench/op_<name>.c that times its
 * shapes through bench_time() and prints one bench_report() line each:
 *   bench op=<op> dtype=<dt> shape=<shape> threads=<n> median_ms=... gbps=... gflops=...
 * gbps counts the minimal bytes the op must move, gflops each multiply-add as 2. */
#ifndef SPA_BENCH_H
#define SPA_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "spattn/runner.h"
#include "spattn/spattn.h"

/* This machine's measured limits (shared/reference/machine.md). */
#define BENCH_TRIAD_GBPS_1T 42.0
#define BENCH_TRIAD_GBPS_2T 47.0
#define BENCH_FMA_GFLOPS_PER_CORE 264.0

#ifndef BENCH_RUNS
#define BENCH_RUNS 7
#endif

/* The runner for a thread count (1 and 2 are kept alive across ops). */
const spa_runner *bench_runner(unsigned threads);
/* Thread counts to time (default 1 and 2; BENCH_THREADS="1 2 4 8" overrides). */
int bench_thread_counts(unsigned *out, int max);

/* Median wall time in ms of BENCH_RUNS calls of fn(arg) after one warm-up. */
double bench_time_ms(void (*fn)(void *), void *arg);

/* fp32 FMA GFLOP/s this host gives now with that many threads (fma_peak.c). */
double bench_fma_peak_gflops(unsigned threads);

/* Whether a (dtype, shape) is to be timed: BENCH_DTYPE="f32 bf16" and
 * BENCH_SHAPE="bench" narrow a run to those (unset: all). */
int bench_wanted(spa_dtype dt, const char *shape);

/* The STREAM triad GB/s and fp32 FMA GFLOP/s measured at the start of this
 * run, for 1 or 2 threads (more: the 2-thread figures). */
double bench_live_triad_gbps(unsigned threads);
double bench_live_fma_gflops(unsigned threads);

void bench_report(const char *op, spa_dtype dt, const char *shape, unsigned threads,
                  double median_ms, double bytes, double flops);

/* Page-touched, 64-byte aligned memory filled with random values of dt
 * in [-1, 1) (floats) so no timing pays first-touch faults. */
void *bench_alloc_random(spa_dtype dt, size_t count, uint64_t seed);
void *bench_alloc_zero(size_t bytes);

/* The benches' reproducible draws: a 64-bit LCG step (its high bits), a
 * paged cache's block table as pages 0 .. pages-1 in shuffled order, and
 * for each of the t newest of ctx tokens k distinct tokens it sees
 * causally (idx [t][k], a partial shuffle of 0 .. seen - 1). */
uint64_t bench_lcg(uint64_t *state);
void bench_shuffled_pages(int32_t *table, int64_t pages, uint64_t *state);
void bench_causal_topk(int32_t *idx, int64_t t, int64_t k, int64_t ctx, uint64_t *state);
size_t bench_dtype_size(spa_dtype dt);
const char *bench_dtype_name(spa_dtype dt);

/* Prints the block overlap of a selection (block_overlap.c): idx
 * [tokens][n2][kc] over nb batches of lens[b] tokens, blocks below blocks. */
void bench_block_overlap(const char *what, const int32_t *idx, int64_t n2, int64_t kc, const int64_t *lens,
                         int64_t nb, int64_t blocks);

/* A contiguous descriptor over data. */
spa_tensor bench_tensor(spa_dtype dt, int32_t rank, const int64_t *dims, void *data);

#endif
