/* Streams: each owns a spa_pool (the pthread runner) that runs the blocks of
 * the operators launched on it. A launch holds the stream's lock for its whole
 * run, so launches from several host threads on one stream are serialised, as
 * on a real stream; the launch returns when its blocks are done. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "acl_internal.h"

typedef struct stream {
    spa_pool pool;
    spa_runner runner;
    pthread_mutex_t lock;
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
    pthread_mutex_init(&s->lock, NULL);
    if (!spa_acl_reg_add(s, sizeof *s, SPA_ACL_STREAM)) {
        pthread_mutex_destroy(&s->lock);
        spa_pool_stop(&s->pool);
        free(s);
        return ACL_ERROR_BAD_ALLOC;
    }
    *out = s;
    return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream handle)
{
    if (!spa_acl_reg_remove(handle, SPA_ACL_STREAM))
        return ACL_ERROR_INVALID_PARAM;
    stream *s = handle;
    pthread_mutex_lock(&s->lock); /* wait for a launch still running on it */
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_destroy(&s->lock);
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
    /* Take the stream's lock while the registry still vouches for it, so it
     * cannot be destroyed between the check and the launch. */
    spa_acl_lock();
    if (!spa_acl_reg_has_locked(handle, SPA_ACL_STREAM)) {
        spa_acl_unlock();
        return false;
    }
    stream *s = handle;
    pthread_mutex_lock(&s->lock);
    spa_acl_unlock();
    *result = fn(ctx, &s->runner);
    pthread_mutex_unlock(&s->lock);
    return true;
}
