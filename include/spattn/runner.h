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

typedef struct spa_pool spa_pool_impl;
typedef struct spa_pool_handle {
    spa_pool_impl *impl;
} spa_pool;

/* Starts threads-1 workers (the calling thread is the last one). 0 on success. */
int spa_pool_start(spa_pool *pool, unsigned threads);
void spa_pool_stop(spa_pool *pool);
unsigned spa_pool_threads(const spa_pool *pool);
spa_runner spa_pool_runner(spa_pool *pool);

#ifdef __cplusplus
}
#endif
#endif
