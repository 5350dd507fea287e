/* Tensor descriptors: 64-bit, overflow-checked sizes and spans. */
#include "internal.h"
#include "spa_dtypes.h"

bool spa_mul_ok(int64_t a, int64_t b, int64_t *out)
{
    if (a < 0 || b < 0)
        return false;
    if (a != 0 && b > INT64_MAX / a)
        return false;
    *out = a * b;
    return true;
}

bool spa_add_ok(int64_t a, int64_t b, int64_t *out)
{
    if (a < 0 || b < 0 || a > INT64_MAX - b)
        return false;
    *out = a + b;
    return true;
}

size_t spa_dtype_size(int32_t dtype)
{
    switch (dtype) {
    case SPA_FLOAT32:
    case SPA_INT32:
        return 4;
    case SPA_FLOAT16:
    case SPA_BFLOAT16:
        return 2;
    case SPA_UINT8:
    case SPA_BOOL:
        return 1;
    case SPA_INT64:
    case SPA_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

/* A float dtype this build has kernels for: f16 / bf16 only where DTYPES
 * names them (a firmware build of f32 alone refuses them in phase 1);
 * float64 is checked by each op against its SPA_FLOAT64_<OP> flag. */
bool spa_is_float_dtype(int32_t dtype)
{
    return dtype == SPA_FLOAT32 || (dtype == SPA_FLOAT16 && SPA_HAVE_F16) ||
           (dtype == SPA_BFLOAT16 && SPA_HAVE_BF16) || dtype == SPA_FLOAT64;
}

/* Largest element offset addressed, or -1 when the tensor is empty. */
static bool tensor_last_offset(const spa_tensor *t, int64_t *last)
{
    int64_t off = 0;
    for (int32_t k = 0; k < t->rank; k++) {
        if (t->dims[k] == 0) {
            *last = -1;
            return true;
        }
    }
    for (int32_t k = 0; k < t->rank; k++) {
        int64_t step;
        if (!spa_mul_ok(t->dims[k] - 1, t->strides[k], &step) || !spa_add_ok(off, step, &off))
            return false;
    }
    *last = off;
    return true;
}

spa_status spa_tensor_check(const spa_tensor *t, int32_t rank)
{
    if (t->rank != rank || rank < 0 || rank > SPA_MAX_RANK)
        return SPA_ERR_INVALID;
    size_t esz = spa_dtype_size(t->dtype);
    if (esz == 0)
        return SPA_ERR_INVALID;
    int64_t numel = 1;
    for (int32_t k = 0; k < rank; k++) {
        if (t->dims[k] < 0 || t->strides[k] < 0)
            return SPA_ERR_INVALID;
        if (!spa_mul_ok(numel, t->dims[k], &numel))
            return SPA_ERR_INVALID;
    }
    int64_t last, count, bytes = 0;
    if (!tensor_last_offset(t, &last))
        return SPA_ERR_INVALID;
    /* The addressed span (in bytes) must be representable, so that every
     * pointer computation of the kernels stays in range. last may be
     * INT64_MAX itself, so the element count is a checked add too. */
    if (last >= 0 && (!spa_add_ok(last, 1, &count) || !spa_mul_ok(count, (int64_t)esz, &bytes) ||
                      bytes > INT64_MAX / 2))
        return SPA_ERR_INVALID;
    if (numel > 0 && t->data == NULL)
        return SPA_ERR_NULLPTR;
    /* ... and it must name memory: on a 32-bit target a span of 4 GiB or
     * more (or one running past the top of memory from data) fits 64 bits
     * but no address space, and every later check would misread it. */
    if (numel > 0 && last >= 0)
        SPA_REQUIRE((uint64_t)bytes <= (uint64_t)(UINTPTR_MAX - (uintptr_t)t->data) /* the view's
                    bytes fit the address space from its data pointer */);
    return SPA_OK;
}

/* Sufficient for no self-overlap: with the dims of size > 1 taken by
 * increasing stride, each stride exceeds the largest offset the dims before
 * it reach. Every padded or permuted row-major view passes; views failing it
 * may alias. Runs after spa_tensor_check, which bounds the offsets of a
 * non-empty view (an empty one, whose strides it does not bound, has nothing
 * to overlap), so the sums cannot overflow. */
static bool tensor_no_overlap(const spa_tensor *t)
{
    int32_t order[SPA_MAX_RANK];
    int32_t m = 0;
    for (int32_t k = 0; k < t->rank; k++)
        if (t->dims[k] == 0)
            return true;
    for (int32_t k = 0; k < t->rank; k++) {
        if (t->dims[k] <= 1)
            continue;
        int32_t i = m++;
        for (; i > 0 && t->strides[order[i - 1]] > t->strides[k]; i--)
            order[i] = order[i - 1];
        order[i] = k;
    }
    int64_t reach = 0; /* largest offset of the dims taken so far */
    for (int32_t i = 0; i < m; i++) {
        const int32_t k = order[i];
        if (t->strides[k] <= reach)
            return false;
        reach += (t->dims[k] - 1) * t->strides[k];
    }
    return true;
}

spa_status spa_tensor_check_output(const spa_tensor *t, int32_t rank)
{
    SPA_TRY(spa_tensor_check(t, rank));
    if (!tensor_no_overlap(t))
        return SPA_ERR_INVALID;
    return SPA_OK;
}

bool spa_tensor_dims_are(const spa_tensor *t, int32_t rank, const int64_t *want)
{
    if (t->rank != rank)
        return false;
    for (int32_t k = 0; k < rank; k++)
        if (t->dims[k] != want[k])
            return false;
    return true;
}

int64_t spa_tensor_numel(const spa_tensor *t)
{
    int64_t n = 1;
    for (int32_t k = 0; k < t->rank; k++)
        n *= t->dims[k];
    return n;
}

uint64_t spa_tensor_span_bytes(const spa_tensor *t)
{
    int64_t last;
    if (!tensor_last_offset(t, &last) || last < 0)
        return 0;
    /* spa_tensor_check bounded (last + 1) * esz by INT64_MAX / 2 */
    return (uint64_t)(last + 1) * (uint64_t)spa_dtype_size(t->dtype);
}

void spa_tensor_init(spa_tensor *t, spa_dtype dtype, int32_t rank, const int64_t *dims, void *data)
{
    t->dtype = (int32_t)dtype;
    t->rank = rank;
    t->data = data;
    /* An overflowing product leaves stride -1, which spa_tensor_check rejects. */
    int64_t stride = 1;
    for (int32_t k = SPA_MAX_RANK - 1; k >= 0; k--) {
        bool used = k < rank && rank <= SPA_MAX_RANK;
        t->dims[k] = used ? dims[k] : 0;
        t->strides[k] = used ? stride : 0;
        if (used && stride >= 0 && !spa_mul_ok(stride, dims[k] > 0 ? dims[k] : 1, &stride))
            stride = -1;
    }
}
