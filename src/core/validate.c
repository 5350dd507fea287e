/* Shared argument rules: sequence-length arrays (spec/nsa.md 0.2, 0.3a). */
#include "internal.h"

spa_status spa_seq_check_size(const spa_int_array *a)
{
    if (a == NULL)
        return SPA_ERR_NULLPTR;
    /* No real array has more int64 entries than this; the bound keeps the
     * batch count (and count + 1) representable as int64 for every op. */
    if (a->size == 0 || a->size > SPA_SEQ_MAX_SIZE)
        return SPA_ERR_INVALID;
    if (a->data == NULL)
        return SPA_ERR_NULLPTR;
    return SPA_OK;
}

spa_status spa_seq_check_copy(const spa_int_array *a, int64_t type, int64_t *total, int64_t *copy)
{
    if (a == NULL)
        return SPA_ERR_NULLPTR;
    if (type != 0 && type != 1)
        return SPA_ERR_INVALID;
    SPA_TRY(spa_seq_check_size(a));
    const volatile int64_t *src = a->data; /* one read per element, whatever the compiler */
    const uint64_t n = a->size;
    int64_t end = 0;
    for (uint64_t b = 0; b < n; b++) {
        const int64_t v = src[b];
        if (v < 0)
            return SPA_ERR_INVALID;
        if (type == 0) {
            if (v < end) /* cumulative ends must not decrease */
                return SPA_ERR_INVALID;
            end = v;
        } else if (!spa_add_ok(end, v, &end)) {
            return SPA_ERR_INVALID;
        }
        if (copy != NULL)
            copy[b] = end;
    }
    *total = end;
    return SPA_OK;
}

spa_status spa_seq_check(const spa_int_array *a, int64_t type, int64_t *total)
{
    return spa_seq_check_copy(a, type, total, NULL);
}

/* Compared by hand: the core imports no string functions beyond memcpy/memset. */
bool spa_layout_is_tnd(const char *layout)
{
    return layout[0] == 'T' && layout[1] == 'N' && layout[2] == 'D' && layout[3] == '\0';
}
