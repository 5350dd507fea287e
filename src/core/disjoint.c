/* Phase 2's guard on caller memory: the workspace must not overlap any
 * tensor or array of the call. Kernels trust what phase 2 put in the
 * workspace (validated copies of index and length arrays, batch tables,
 * kernel arguments); an output laid over it would overwrite them while the
 * kernels run, and an input laid over it would be overwritten by them. The
 * test is on byte ranges, so it costs a few comparisons per tensor. */
#include "internal.h"

/* [lo, lo + n) and [p, p + bytes) share a byte; ranges that would wrap the
 * address space count as overlapping. */
static bool ranges_meet(uintptr_t lo, uint64_t n, uintptr_t p, uint64_t bytes)
{
    if (n == 0 || bytes == 0)
        return false;
    if (n > UINTPTR_MAX - lo || bytes > UINTPTR_MAX - p)
        return true;
    return lo < p + bytes && p < lo + n;
}

spa_status spa_ws_check_disjoint(const void *ws, uint64_t bytes, const spa_tensor *const *tensors,
                                 size_t ntensors, const spa_int_array *const *arrays,
                                 size_t narrays)
{
    if (ws == NULL || bytes == 0)
        return SPA_OK;
    const uintptr_t p = (uintptr_t)ws;
    for (size_t i = 0; i < ntensors; i++) {
        const spa_tensor *t = tensors[i];
        if (t != NULL && ranges_meet((uintptr_t)t->data, spa_tensor_span_bytes(t), p, bytes))
            return SPA_ERR_INVALID;
    }
    for (size_t i = 0; i < narrays; i++) {
        const spa_int_array *a = arrays[i];
        /* size <= SPA_SEQ_MAX_SIZE (checked): the byte count fits */
        if (a != NULL && ranges_meet((uintptr_t)a->data, a->size * sizeof(int64_t), p, bytes))
            return SPA_ERR_INVALID;
    }
    return SPA_OK;
}
