/* Divisions of non-negative indices and counts that fit ptrdiff_t (sizes,
 * offsets and unit numbers of tensors in memory, as phase 1 validated them)
 * in the native width: one instruction on 32-bit cores, where an int64_t
 * division is a runtime call. */
#ifndef SPA_NATIVE_DIV_H
#define SPA_NATIVE_DIV_H

#include <stddef.h>
#include <stdint.h>

static inline int64_t spa_div_nat(int64_t a, int64_t b)
{
    return (ptrdiff_t)a / (ptrdiff_t)b;
}
static inline int64_t spa_mod_nat(int64_t a, int64_t b)
{
    return (ptrdiff_t)a % (ptrdiff_t)b;
}

#endif
