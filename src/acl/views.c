/* The native views of CANN's layouts: dims merged (BSND's B and S as one T)
 * or split (BSH's H as N and D), on the same memory without a copy. */
#include "acl_internal.h"

bool spa_acl_merge_dims(spa_tensor *t, int32_t a)
{
    if (t->rank <= a + 1 || t->strides[a] != t->dims[a + 1] * t->strides[a + 1])
        return false;
    t->dims[a] *= t->dims[a + 1];
    t->strides[a] = t->strides[a + 1];
    for (int32_t i = a + 1; i + 1 < t->rank; i++)
        t->dims[i] = t->dims[i + 1], t->strides[i] = t->strides[i + 1];
    t->rank--;
    return true;
}

bool spa_acl_split_last(spa_tensor *t, int64_t n)
{
    const int32_t r = t->rank;
    if (n <= 0 || r < 1 || r >= SPA_MAX_RANK || t->dims[r - 1] % n != 0)
        return false;
    const int64_t d = t->dims[r - 1] / n, s = t->strides[r - 1];
    t->dims[r - 1] = n, t->strides[r - 1] = d * s;
    t->dims[r] = d, t->strides[r] = s;
    t->rank = r + 1;
    return true;
}

bool spa_acl_dims_lead(const spa_tensor *x, const spa_tensor *ref, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        if (x->dims[i] != ref->dims[i])
            return false;
    return true;
}
