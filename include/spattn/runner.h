/* spattn: a small pthread runner for hosted users, tests and the benchmark.
 * It lives in its own archive (libspattn_runner.a); the core never links it.
 *
 *   spa_pool pool;
 *   spa_pool_start(&pool, 4);               // 4 threads including the caller
 *   spa_runner r = spa_pool_runner(&pool);
 *   spa_nsa_compress(ws, ws_size, &ex, &r);
 *   spa_pool_stop(&pool);
 */
#ifndef SPATTN_RUNNER_H
#define SPATTN_RUNNER_H

#include "spattn/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The pool's state (runner/pthread_pool.c); its tag is not spa_pool, which
 * C++ would take for the handle's name. */
typedef struct spa_pool_state spa_pool_impl;
typedef struct spa_pool_handle {
    spa_pool_impl *impl;
} spa_pool;

/* What may be shared: one pool may serve any number of threads at once. A
 * pool runs one job at a time; an op that finds it busy (another thread's op,
 * or an op called from inside a task) runs its blocks inline on its own
 * thread, with the same results. spa_pool_runner of a pool whose start failed
 * or that was stopped is the inline runner. Not allowed: spa_pool_stop while
 * an op runs on the pool, or using a runner obtained before the pool was
 * stopped. */

/* Starts threads-1 workers (the calling thread is the last one). 0 on success;
 * on failure pool->impl is NULL and the pool's runner runs inline. */
int spa_pool_start(spa_pool *pool, unsigned threads);
void spa_pool_stop(spa_pool *pool);
unsigned spa_pool_threads(const spa_pool *pool);
spa_runner spa_pool_runner(spa_pool *pool);

#ifdef __cplusplus
}
#endif
#endif
