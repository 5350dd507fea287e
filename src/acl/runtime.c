/* The host runtime on the CPU: initialisation, the one device, contexts,
 * device memory (heap blocks recorded in the registry so that copies can be
 * bounds-checked) and the fp16 helpers. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "acl_internal.h"
#include "half.h"

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
static _Thread_local aclrtContext current_context;

aclError aclInit(const char *configPath)
{
    (void)configPath; /* no configuration is needed on the CPU */
    aclError r = ACL_SUCCESS;
    pthread_mutex_lock(&init_lock);
    if (initialized)
        r = ACL_ERROR_REPEAT_INITIALIZE;
    initialized = 1;
    pthread_mutex_unlock(&init_lock);
    return r;
}

aclError aclFinalize(void)
{
    aclError r = ACL_SUCCESS;
    pthread_mutex_lock(&init_lock);
    if (!initialized)
        r = ACL_ERROR_REPEAT_FINALIZE;
    initialized = 0;
    pthread_mutex_unlock(&init_lock);
    return r;
}

aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t *patchVersion)
{
    if (majorVersion == NULL || minorVersion == NULL || patchVersion == NULL)
        return ACL_ERROR_INVALID_PARAM;
    *majorVersion = ACL_MAJOR_VERSION;
    *minorVersion = ACL_MINOR_VERSION;
    *patchVersion = ACL_PATCH_VERSION;
    return ACL_SUCCESS;
}

aclnnStatus aclnnInit(const char *configPath)
{
    (void)configPath;
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnFinalize(void)
{
    return ACLNN_SUCCESS;
}

/* ---- the device: id 0 is the CPU ---- */
aclError aclrtSetDevice(int32_t deviceId)
{
    return deviceId == 0 ? ACL_SUCCESS : ACL_ERROR_RT_INVALID_DEVICEID;
}

aclError aclrtResetDevice(int32_t deviceId)
{
    return deviceId == 0 ? ACL_SUCCESS : ACL_ERROR_RT_INVALID_DEVICEID;
}

aclError aclrtGetDevice(int32_t *deviceId)
{
    if (deviceId == NULL)
        return ACL_ERROR_INVALID_PARAM;
    *deviceId = 0;
    return ACL_SUCCESS;
}

aclError aclrtGetDeviceCount(uint32_t *count)
{
    if (count == NULL)
        return ACL_ERROR_INVALID_PARAM;
    *count = 1;
    return ACL_SUCCESS;
}

aclError aclrtGetRunMode(aclrtRunMode *runMode)
{
    if (runMode == NULL)
        return ACL_ERROR_INVALID_PARAM;
    *runMode = ACL_HOST;
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeDevice(void)
{
    return ACL_SUCCESS; /* every launch completes before it returns */
}

/* ---- contexts: tokens, current per thread ---- */
aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId)
{
    if (context == NULL)
        return ACL_ERROR_INVALID_PARAM;
    if (deviceId != 0)
        return ACL_ERROR_RT_INVALID_DEVICEID;
    void *ctx = calloc(1, 16);
    if (ctx == NULL)
        return ACL_ERROR_BAD_ALLOC;
    if (!spa_acl_reg_add(ctx, 16, SPA_ACL_CONTEXT)) {
        free(ctx);
        return ACL_ERROR_BAD_ALLOC;
    }
    *context = ctx;
    current_context = ctx; /* as in CANN, a new context becomes current */
    return ACL_SUCCESS;
}

aclError aclrtDestroyContext(aclrtContext context)
{
    if (!spa_acl_reg_remove(context, SPA_ACL_CONTEXT))
        return ACL_ERROR_INVALID_PARAM;
    if (current_context == context)
        current_context = NULL;
    free(context);
    return ACL_SUCCESS;
}

aclError aclrtSetCurrentContext(aclrtContext context)
{
    if (!spa_acl_reg_has(context, SPA_ACL_CONTEXT))
        return ACL_ERROR_INVALID_PARAM;
    current_context = context;
    return ACL_SUCCESS;
}

aclError aclrtGetCurrentContext(aclrtContext *context)
{
    if (context == NULL)
        return ACL_ERROR_INVALID_PARAM;
    if (current_context == NULL)
        return ACL_ERROR_RT_CONTEXT_NULL;
    *context = current_context;
    return ACL_SUCCESS;
}

/* ---- memory ---- */
#define SPA_ACL_MEM_ALIGN 64u /* CANN promises 32-byte aligned device memory */

static aclError mem_alloc(void **ptr, size_t size, int kind)
{
    if (ptr == NULL || size == 0)
        return ACL_ERROR_INVALID_PARAM;
    if (size > SIZE_MAX - SPA_ACL_MEM_ALIGN)
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    size_t rounded = (size + SPA_ACL_MEM_ALIGN - 1) / SPA_ACL_MEM_ALIGN * SPA_ACL_MEM_ALIGN;
    void *p = aligned_alloc(SPA_ACL_MEM_ALIGN, rounded);
    if (p == NULL)
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    /* The registry keeps the size asked for: copies and tensor views are
     * checked against it, not against the rounding. */
    if (!spa_acl_reg_add(p, size, kind)) {
        free(p);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    *ptr = p;
    return ACL_SUCCESS;
}

static aclError mem_free(void *ptr, int kind)
{
    if (ptr == NULL)
        return ACL_ERROR_INVALID_PARAM;
    spa_acl_lock();
    /* a block a live executor or a running op uses stays: freeing it would
     * let phase 2 write freed memory */
    bool ok = !spa_acl_reg_pinned_locked(ptr, kind) && spa_acl_reg_remove_locked(ptr, kind);
    spa_acl_unlock();
    if (!ok)
        return ACL_ERROR_RT_MEMORY_FREE;
    free(ptr);
    return ACL_SUCCESS;
}

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    (void)policy; /* page policies have no meaning on the CPU */
    return mem_alloc(devPtr, size, SPA_ACL_DEVICE_MEM);
}

aclError aclrtFree(void *devPtr)
{
    return mem_free(devPtr, SPA_ACL_DEVICE_MEM);
}

aclError aclrtMallocHost(void **hostPtr, size_t size)
{
    return mem_alloc(hostPtr, size, SPA_ACL_HOST_MEM);
}

aclError aclrtFreeHost(void *hostPtr)
{
    return mem_free(hostPtr, SPA_ACL_HOST_MEM);
}

/* A device-side range must lie inside one aclrtMalloc allocation. */
static bool device_ok(const void *p, size_t n)
{
    return spa_acl_device_range(p, n) == SPA_ACL_RANGE_INSIDE;
}

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                     aclrtMemcpyKind kind)
{
    if (dst == NULL || src == NULL || count > destMax)
        return ACL_ERROR_INVALID_PARAM;
    if (count == 0)
        return ACL_SUCCESS;
    bool dst_dev, src_dev;
    switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST:
        dst_dev = src_dev = false;
        break;
    case ACL_MEMCPY_HOST_TO_DEVICE:
        dst_dev = true;
        src_dev = false;
        break;
    case ACL_MEMCPY_DEVICE_TO_HOST:
        dst_dev = false;
        src_dev = true;
        break;
    case ACL_MEMCPY_DEVICE_TO_DEVICE:
        dst_dev = src_dev = true;
        break;
    case ACL_MEMCPY_DEFAULT: /* the direction follows from the addresses */
        dst_dev = spa_acl_device_range(dst, 1) != SPA_ACL_RANGE_UNTRACKED;
        src_dev = spa_acl_device_range(src, 1) != SPA_ACL_RANGE_UNTRACKED;
        break;
    default:
        return ACL_ERROR_INVALID_PARAM;
    }
    if ((dst_dev && !device_ok(dst, count)) || (src_dev && !device_ok(src, count)))
        return ACL_ERROR_INVALID_PARAM;
    memmove(dst, src, count);
    return ACL_SUCCESS;
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
    if (devPtr == NULL || count > maxCount)
        return ACL_ERROR_INVALID_PARAM;
    if (count == 0)
        return ACL_SUCCESS;
    if (!device_ok(devPtr, count))
        return ACL_ERROR_INVALID_PARAM;
    memset(devPtr, value, count);
    return ACL_SUCCESS;
}

/* ---- element helpers ---- */
float aclFloat16ToFloat(aclFloat16 value)
{
    return spa_f16_to_f32(value);
}

aclFloat16 aclFloatToFloat16(float value)
{
    return spa_f32_to_f16(value);
}

size_t aclDataTypeSize(aclDataType dataType)
{
    switch (dataType) {
    case ACL_INT8:
    case ACL_UINT8:
    case ACL_BOOL:
        return 1;
    case ACL_FLOAT16:
    case ACL_BF16:
    case ACL_INT16:
    case ACL_UINT16:
        return 2;
    case ACL_FLOAT:
    case ACL_INT32:
    case ACL_UINT32:
    case ACL_COMPLEX32:
        return 4;
    case ACL_INT64:
    case ACL_UINT64:
    case ACL_DOUBLE:
    case ACL_COMPLEX64:
        return 8;
    case ACL_COMPLEX128:
        return 16;
    default:
        return 0;
    }
}
