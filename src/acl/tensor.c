/* aclTensor and aclIntArray: creation, destruction and the conversion of a
 * tensor's view (shape, strides, offset, storage) into a spa_tensor. */
#include <stdlib.h>
#include <string.h>

#include "acl_internal.h"

/* CANN's limit on dimensions; views above SPA_MAX_RANK are kept so that the
 * operators refuse them (161002) like the native API, instead of failing here. */
#define SPA_ACL_MAX_DIMS 25

struct aclTensor {
    int32_t dtype;
    int32_t format;
    uint64_t rank;
    int64_t dims[SPA_ACL_MAX_DIMS];
    int64_t strides[SPA_ACL_MAX_DIMS];
    int64_t offset;
    uint64_t storage_rank;
    int64_t storage[SPA_ACL_MAX_DIMS];
    void *data; /* start of the storage */
};

struct aclIntArray {
    uint64_t size;
    int64_t values[]; /* a copy, as in CANN */
};

aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t *stride, int64_t offset, aclFormat format,
                           const int64_t *storageDims, uint64_t storageDimsNum, void *tensorData)
{
    if (viewDimsNum > SPA_ACL_MAX_DIMS || storageDimsNum > SPA_ACL_MAX_DIMS ||
        (viewDimsNum > 0 && viewDims == NULL) || (storageDimsNum > 0 && storageDims == NULL))
        return NULL;
    aclTensor *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->dtype = (int32_t)dataType;
    t->format = (int32_t)format;
    t->rank = viewDimsNum;
    t->offset = offset;
    t->storage_rank = storageDimsNum;
    t->data = tensorData;
    if (viewDimsNum > 0)
        memcpy(t->dims, viewDims, viewDimsNum * sizeof *viewDims);
    if (storageDimsNum > 0)
        memcpy(t->storage, storageDims, storageDimsNum * sizeof *storageDims);
    if (stride != NULL) {
        if (viewDimsNum > 0)
            memcpy(t->strides, stride, viewDimsNum * sizeof *stride);
    } else {
        /* Contiguous row-major; an overflowing product leaves -1, which the
         * operators refuse. */
        int64_t s = 1;
        for (uint64_t k = viewDimsNum; k-- > 0;) {
            t->strides[k] = s;
            int64_t d = t->dims[k] > 0 ? t->dims[k] : 1;
            s = (s >= 0 && s <= INT64_MAX / d) ? s * d : -1;
        }
    }
    if (!spa_acl_reg_add(t, sizeof *t, SPA_ACL_TENSOR)) {
        free(t);
        return NULL;
    }
    return t;
}

aclnnStatus aclDestroyTensor(const aclTensor *tensor)
{
    if (tensor == NULL)
        return ACLNN_ERR_PARAM_NULLPTR;
    if (!spa_acl_reg_remove(tensor, SPA_ACL_TENSOR))
        return ACLNN_ERR_PARAM_INVALID;
    free((void *)tensor);
    return ACLNN_SUCCESS;
}

aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size)
{
    if ((size > 0 && value == NULL) || size > (SIZE_MAX - sizeof(aclIntArray)) / sizeof(int64_t))
        return NULL;
    aclIntArray *a = malloc(sizeof *a + (size_t)size * sizeof(int64_t));
    if (a == NULL)
        return NULL;
    a->size = size;
    if (size > 0)
        memcpy(a->values, value, (size_t)size * sizeof(int64_t));
    if (!spa_acl_reg_add(a, sizeof *a, SPA_ACL_INT_ARRAY)) {
        free(a);
        return NULL;
    }
    return a;
}

aclnnStatus aclDestroyIntArray(const aclIntArray *array)
{
    if (array == NULL)
        return ACLNN_ERR_PARAM_NULLPTR;
    if (!spa_acl_reg_remove(array, SPA_ACL_INT_ARRAY))
        return ACLNN_ERR_PARAM_INVALID;
    free((void *)array);
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetIntArraySize(const aclIntArray *array, uint64_t *size)
{
    if (array == NULL || size == NULL)
        return ACLNN_ERR_PARAM_NULLPTR;
    spa_acl_lock(); /* held while reading: aclDestroyIntArray may run beside */
    const bool known = spa_acl_reg_has_locked(array, SPA_ACL_INT_ARRAY);
    if (known)
        *size = array->size;
    spa_acl_unlock();
    return known ? ACLNN_SUCCESS : ACLNN_ERR_PARAM_INVALID;
}

bool spa_acl_int_array_copy(const aclIntArray *a, int64_t **values, uint64_t *size)
{
    spa_acl_lock();
    if (!spa_acl_reg_has_locked(a, SPA_ACL_INT_ARRAY)) {
        spa_acl_unlock();
        *values = NULL;
        *size = 0;
        return true; /* unknown handle: an empty array, which is invalid */
    }
    uint64_t n = a->size;
    int64_t *copy = n > 0 ? malloc((size_t)n * sizeof(int64_t)) : NULL;
    if (n > 0 && copy == NULL) {
        spa_acl_unlock();
        return false;
    }
    if (n > 0)
        memcpy(copy, a->values, (size_t)n * sizeof(int64_t));
    spa_acl_unlock();
    *values = copy;
    *size = n;
    return true;
}

/* Plain row-major layouts; the private (fractal, C0-blocked) formats are not
 * strided views and are refused. */
static bool format_is_plain(int32_t f)
{
    switch (f) {
    case ACL_FORMAT_ND:
    case ACL_FORMAT_NCHW:
    case ACL_FORMAT_NHWC:
    case ACL_FORMAT_HWCN:
    case ACL_FORMAT_NDHWC:
    case ACL_FORMAT_NCDHW:
    case ACL_FORMAT_NC:
    case ACL_FORMAT_NCL:
        return true;
    default:
        return false;
    }
}

/* Largest element offset of the view (relative to its first element), -1 if
 * it is empty; false on overflow or a negative size. */
static bool view_last(const aclTensor *t, int64_t *last)
{
    int64_t off = 0;
    for (uint64_t k = 0; k < t->rank; k++) {
        if (t->dims[k] < 0 || t->strides[k] < 0)
            return false;
        if (t->dims[k] == 0) {
            *last = -1;
            return true;
        }
    }
    for (uint64_t k = 0; k < t->rank; k++) {
        int64_t d = t->dims[k] - 1, s = t->strides[k];
        if (d != 0 && s > (INT64_MAX - off) / d)
            return false;
        off += d * s;
    }
    *last = off;
    return true;
}

static bool storage_numel(const aclTensor *t, int64_t *n)
{
    int64_t p = 1;
    for (uint64_t k = 0; k < t->storage_rank; k++) {
        int64_t d = t->storage[k];
        if (d < 0 || (d != 0 && p > INT64_MAX / d))
            return false;
        p *= d;
    }
    *n = p;
    return true;
}

/* Everything the native descriptor cannot express, checked here. */
static bool view_usable(const aclTensor *t, size_t esz)
{
    int64_t last, numel;
    if (!format_is_plain(t->format) || t->offset < 0 || esz == 0 || t->rank > SPA_MAX_RANK)
        return false;
    if (!view_last(t, &last))
        return true; /* negative or overflowing sizes: the native checks refuse them */
    if (last < 0)
        return true; /* empty view: touches no memory */
    if (!storage_numel(t, &numel) || t->offset > numel || last >= numel - t->offset)
        return false; /* the view leaves its storage */
    if (t->data == NULL)
        return true; /* the native checks answer NULL data */
    /* Memory handed out here (aclrtMalloc, aclrtMallocHost) must hold the
     * storage up to the view's last element; other memory (host buffers
     * used directly) is the caller's to size. */
    uint64_t end = (uint64_t)(t->offset + last) + 1;
    if (end > UINT64_MAX / esz)
        return false;
    int where = spa_acl_alloc_range(t->data, end * esz);
    return where != SPA_ACL_RANGE_OVERRUN;
}

const spa_tensor *spa_acl_tensor(const aclTensor *t, spa_tensor *out)
{
    if (t == NULL)
        return NULL;
    memset(out, 0, sizeof *out);
    /* A descriptor every native check refuses as invalid (never as NULL). */
    out->dtype = -1;
    out->rank = -1;
    for (int k = 0; k < SPA_MAX_RANK; k++)
        out->dims[k] = out->strides[k] = 1;
    spa_acl_lock();
    bool known = spa_acl_reg_has_locked(t, SPA_ACL_TENSOR);
    aclTensor copy;
    if (known)
        copy = *t;
    spa_acl_unlock();
    if (!known)
        return out;
    size_t esz = aclDataTypeSize((aclDataType)copy.dtype);
    if (!view_usable(&copy, esz))
        return out;
    out->dtype = copy.dtype;
    out->rank = (int32_t)copy.rank;
    for (uint64_t k = 0; k < copy.rank; k++) {
        out->dims[k] = copy.dims[k];
        out->strides[k] = copy.strides[k];
    }
    out->data = copy.data == NULL ? NULL
                                  : (unsigned char *)copy.data + (uint64_t)copy.offset * esz;
    return out;
}

bool spa_acl_dtype_or_null(const aclTensor *t, int32_t dt)
{
    spa_tensor v;
    return t == NULL || spa_acl_tensor(t, &v)->dtype == dt;
}
