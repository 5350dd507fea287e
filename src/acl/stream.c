/* Streams: each owns a spa_pool (the pthread runner) that runs the blocks of
 * the operators launched on it. Launches on one stream run one at a time, as
 * on a real stream, and return when their blocks are done. A stream counts
 * the launches using it, so destroying it waits for them instead of pulling
 * the pool away under a running operator. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "acl_internal.h"

typedef struct stream {
    spa_pool pool;
    spa_runner runner;
    pthread_mutex_t run_lock; /* one launch at a time */
    pthread_cond_t idle;      /* users dropped to 0; waited on with the registry lock */
    unsigned users;           /* launches holding the stream; guarded by the registry lock */
} stream;

/* SPATTN_STREAM_THREADS (1..256) or min(4, online CPUs). */
static unsigned stream_threads(void)
{
    const char *env = getenv("SPATTN_STREAM_THREADS");
    if (env != NULL) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v >= 1 && v <= 256)
            return (unsigned)v;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus >= 4 ? 4u : cpus >= 1 ? (unsigned)cpus : 1u;
}

aclError aclrtCreateStream(aclrtStream *out)
{
    if (out == NULL)
        return ACL_ERROR_INVALID_PARAM;
    stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return ACL_ERROR_BAD_ALLOC;
    if (spa_pool_start(&s->pool, stream_threads()) != 0) {
        free(s);
        return ACL_ERROR_BAD_ALLOC;
    }
    s->runner = spa_pool_runner(&s->pool);
    pthread_mutex_init(&s->run_lock, NULL);
    pthread_cond_init(&s->idle, NULL);
    if (!spa_acl_reg_add(s, sizeof *s, SPA_ACL_STREAM)) {
        pthread_cond_destroy(&s->idle);
        pthread_mutex_destroy(&s->run_lock);
        spa_pool_stop(&s->pool);
        free(s);
        return ACL_ERROR_BAD_ALLOC;
    }
    *out = s;
    return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream handle)
{
    stream *s = handle;
    spa_acl_lock();
    if (!spa_acl_reg_remove_locked(handle, SPA_ACL_STREAM)) {
        spa_acl_unlock();
        return ACL_ERROR_INVALID_PARAM;
    }
    while (s->users > 0) /* launches already holding it finish first */
        spa_acl_wait_locked(&s->idle);
    spa_acl_unlock();
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->run_lock);
    spa_pool_stop(&s->pool);
    free(s);
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream handle)
{
    if (handle != NULL && !spa_acl_reg_has(handle, SPA_ACL_STREAM))
        return ACL_ERROR_INVALID_PARAM;
    return ACL_SUCCESS; /* launches complete before they return */
}

bool spa_acl_stream_launch(aclrtStream handle, spa_status (*fn)(void *ctx, const spa_runner *r),
                           void *ctx, spa_status *result)
{
    if (handle == NULL) {
        *result = fn(ctx, NULL);
        return true;
    }
    stream *s = handle;
    spa_acl_lock();
    if (!spa_acl_reg_has_locked(handle, SPA_ACL_STREAM)) {
        spa_acl_unlock();
        return false;
    }
    s->users++;
    spa_acl_unlock();

    pthread_mutex_lock(&s->run_lock);
    *result = fn(ctx, &s->runner);
    pthread_mutex_unlock(&s->run_lock);

    spa_acl_lock();
    if (--s->users == 0)
        pthread_cond_broadcast(&s->idle);
    spa_acl_unlock();
    return true;
}
