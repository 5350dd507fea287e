/* Carving the caller's workspace: one bump allocator used twice, once without
 * memory in phase 1 to size the plan and once on the real memory in phase 2,
 * so the two can never disagree. Slices are SPA_WS_ALIGN-aligned whatever the
 * alignment of the caller's pointer. */
#include "internal.h"

void spa_ws_plan(spa_ws *ws)
{
    ws->base = NULL;
    /* Room to align an arbitrary caller pointer: the worst-case padding. */
    ws->used = SPA_WS_ALIGN;
    ws->size = UINT64_MAX;
    ws->overflow = false;
}

void spa_ws_attach(spa_ws *ws, void *base, uint64_t size)
{
    uintptr_t p = (uintptr_t)base;
    ws->base = base;
    ws->used = (SPA_WS_ALIGN - (p % SPA_WS_ALIGN)) % SPA_WS_ALIGN;
    ws->size = size;
    ws->overflow = false;
}

void *spa_ws_take(spa_ws *ws, uint64_t n, uint64_t elem)
{
    if (ws->overflow || (elem != 0 && n > (UINT64_MAX / 4) / elem)) {
        ws->overflow = true;
        return NULL;
    }
    uint64_t bytes = (n * elem + SPA_WS_ALIGN - 1) / SPA_WS_ALIGN * SPA_WS_ALIGN;
    if (bytes > ws->size || ws->used > ws->size - bytes) {
        ws->overflow = true;
        return NULL;
    }
    void *slice = ws->base ? ws->base + ws->used : NULL;
    ws->used += bytes;
    return slice;
}

uint64_t spa_ws_planned_bytes(const spa_ws *ws)
{
    /* A plan that took nothing needs no workspace at all. */
    return ws->used == SPA_WS_ALIGN ? 0 : ws->used;
}

spa_status spa_ws_check_args(const void *ws, uint64_t ws_size, uint64_t need)
{
    if (need > 0 && ws == NULL)
        return SPA_ERR_NULLPTR;
    if (ws_size < need)
        return SPA_ERR_WORKSPACE;
    return SPA_OK;
}
