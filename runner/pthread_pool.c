/* A small pthread pool implementing spa_runner: the calling thread and
 * threads-1 workers take task indices from a shared counter. Lives outside the
 * core archive (it allocates and owns threads).
 *
 * One job at a time: a caller takes the job lock for the whole job. A second
 * caller that finds it held (another thread's op, or an op started from inside
 * a task) runs its own tasks inline on its thread instead of waiting, so a
 * shared pool never mixes two jobs' records and never deadlocks; results are
 * the same either way, since they never depend on the runner.
 *
 * Waking a sleeping thread costs tens of microseconds (more on a virtual
 * machine), as much as a decode step's whole work: so a worker that finished
 * a job, and a caller waiting for the workers, first spin on the job's
 * counters for up to SPA_POOL_SPIN_US before they sleep. */

#ifndef SPA_POOL_SPIN_US
#define SPA_POOL_SPIN_US 200
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "spattn/runner.h"

struct spa_pool_state {
    pthread_mutex_t job;  /* held by the caller whose job the record below is */
    pthread_mutex_t lock;
    pthread_cond_t wake;    /* workers: a new job or stop */
    pthread_cond_t settled; /* caller: all workers left the job */
    pthread_t *workers;
    unsigned nworkers;
    unsigned long generation;
    atomic_ulong published; /* generation, readable without the lock (spinning) */
    atomic_ulong busy; /* workers still inside the current job */
    int stop;
    /* the current job */
    spa_task_fn task;
    void *arg;
    uint32_t n;
    atomic_uint next;
};

static void take_tasks(spa_pool_impl *p)
{
    for (;;) {
        unsigned i = atomic_fetch_add_explicit(&p->next, 1u, memory_order_relaxed);
        if (i >= p->n)
            return;
        p->task(p->arg, (uint32_t)i);
    }
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* Spins up to SPA_POOL_SPIN_US until (*word == value) == equal: a new
 * job's generation (equal 0: until it differs from the last seen), or no
 * worker left in the job (busy, equal 1: until 0). */
static void spin_until(atomic_ulong *word, unsigned long value, int equal)
{
    const double end = now_us() + SPA_POOL_SPIN_US;
    for (;;) {
        for (int i = 0; i < 256; i++)
            if ((atomic_load_explicit(word, memory_order_acquire) == value) == equal)
                return;
        if (now_us() > end)
            return;
    }
}

static void *worker_main(void *arg)
{
    spa_pool_impl *p = arg;
    unsigned long seen = 0;
    for (;;) {
        spin_until(&p->published, seen, 0);
        pthread_mutex_lock(&p->lock);
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->wake, &p->lock);
        if (p->stop)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->lock);
        take_tasks(p);
        pthread_mutex_lock(&p->lock);
        if (atomic_fetch_sub(&p->busy, 1ul) == 1ul)
            pthread_cond_signal(&p->settled);
        pthread_mutex_unlock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void run_inline(spa_task_fn task, void *arg, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        task(arg, i);
}

static void pool_run(void *ctx, spa_task_fn task, void *arg, uint32_t n)
{
    spa_pool_impl *p = ctx;
    /* no pool (start failed, or the runner of a stopped pool handle), nothing
     * to share, or the pool busy with another caller's job: this thread alone */
    if (p == NULL || p->nworkers == 0 || n <= 1 || pthread_mutex_trylock(&p->job) != 0) {
        run_inline(task, arg, n);
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->task = task;
    p->arg = arg;
    p->n = n;
    atomic_store(&p->next, 0u);
    atomic_store(&p->busy, (unsigned long)p->nworkers);
    p->generation++;
    atomic_store_explicit(&p->published, p->generation, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    take_tasks(p);
    spin_until(&p->busy, 0, 1);
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->busy) > 0)
        pthread_cond_wait(&p->settled, &p->lock);
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_unlock(&p->job);
}

int spa_pool_start(spa_pool *pool, unsigned threads)
{
    pool->impl = NULL;
    spa_pool_impl *p = calloc(1, sizeof *p);
    if (p == NULL)
        return -1;
    p->nworkers = threads > 1 ? threads - 1 : 0;
    p->workers = p->nworkers ? calloc(p->nworkers, sizeof *p->workers) : NULL;
    if (p->nworkers && p->workers == NULL) {
        free(p);
        return -1;
    }
    pthread_mutex_init(&p->job, NULL);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->settled, NULL);
    atomic_init(&p->next, 0u);
    atomic_init(&p->published, 0ul);
    atomic_init(&p->busy, 0ul);
    for (unsigned i = 0; i < p->nworkers; i++) {
        if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) {
            p->nworkers = i;
            pool->impl = p;
            spa_pool_stop(pool);
            return -1;
        }
    }
    pool->impl = p;
    return 0;
}

void spa_pool_stop(spa_pool *pool)
{
    spa_pool_impl *p = pool != NULL ? pool->impl : NULL;
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->nworkers; i++)
        pthread_join(p->workers[i], NULL);
    pthread_cond_destroy(&p->settled);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->job);
    free(p->workers);
    free(p);
    pool->impl = NULL;
}

unsigned spa_pool_threads(const spa_pool *pool)
{
    return pool != NULL && pool->impl != NULL ? pool->impl->nworkers + 1 : 1;
}

spa_runner spa_pool_runner(spa_pool *pool)
{
    /* a pool that failed to start or was stopped gives the inline runner */
    spa_runner r = {NULL, NULL};
    if (pool != NULL && pool->impl != NULL)
        r = (spa_runner){pool_run, pool->impl};
    return r;
}
