/* Executor handles that are never reused. A handle is the address of one
 * byte of a handle chunk that is never freed, so no later executor can get
 * the address of an earlier one: a stale handle is unknown to the registry
 * and refused, and can never run another executor's plan (heap addresses of
 * freed records would come back). One byte per executor ever created. */
#include <stdlib.h>
#include <string.h>

#include "acl_internal.h"

#define SPA_ACL_HANDLE_CHUNK 65536u

/* The newest chunk; each chunk starts with a pointer to the one before, so
 * all stay reachable (leak checkers see them as kept, which they are). */
static unsigned char *chunk;
static size_t chunk_used = SPA_ACL_HANDLE_CHUNK;

void *spa_acl_handle_new_locked(void)
{
    if (chunk_used == SPA_ACL_HANDLE_CHUNK) {
        unsigned char *fresh = malloc(SPA_ACL_HANDLE_CHUNK); /* never freed, by design */
        if (fresh == NULL)
            return NULL;
        memcpy(fresh, &chunk, sizeof chunk);
        chunk = fresh;
        chunk_used = sizeof chunk;
    }
    return chunk + chunk_used++;
}
