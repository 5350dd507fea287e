/* spattn: shared types of the public API.
 *
 * Everything here is plain data the caller owns: tensor descriptors, int64 array
 * views, the fixed-size executor and the parallel-for runner. The library never
 * allocates, never starts threads and keeps no state between calls. */
#ifndef SPATTN_TYPES_H
#define SPATTN_TYPES_H

#include <inttypes.h> /* PRId32 */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. The first three carry the aclnn numbers so that a compat layer
 * can pass them through unchanged. */
typedef int32_t spa_status;
#define SPA_OK 0
#define SPA_ERR_NULLPTR 161001   /* a required pointer is NULL */
#define SPA_ERR_INVALID 161002   /* bad dtype, shape, attribute, index or executor */
#define SPA_ERR_WORKSPACE 161003 /* phase 2: workspace smaller than phase 1 asked */
/* printf's conversion of a spa_status: int32_t is long on some targets
 * (arm-none-eabi), so "%d" is not portable:
 *   printf("status %" SPA_PRI_STATUS "\n", st); */
#define SPA_PRI_STATUS PRId32

/* Element types. The values are those of aclDataType, for the compat layer. */
typedef enum spa_dtype {
    SPA_FLOAT32 = 0,
    SPA_FLOAT16 = 1,
    SPA_INT32 = 3,
    SPA_UINT8 = 4,
    SPA_INT64 = 9,
    SPA_FLOAT64 = 11, /* ACL_DOUBLE; built unless the target's DTYPES leaves f64 out */
    SPA_BOOL = 12,
    SPA_BFLOAT16 = 27
} spa_dtype;

#define SPA_MAX_RANK 8

/* A strided view of caller memory. Element (i0, ..., i{rank-1}) lives at
 * data + sum(ik * strides[k]) elements. Strides are in elements and must be
 * >= 0; any shape whose addressed span overflows 64 bits is rejected. */
typedef struct spa_tensor {
    int32_t dtype; /* a spa_dtype value */
    int32_t rank;  /* 0..SPA_MAX_RANK */
    int64_t dims[SPA_MAX_RANK];
    int64_t strides[SPA_MAX_RANK];
    void *data;
} spa_tensor;

/* A host array of int64 (sequence lengths). */
typedef struct spa_int_array {
    const int64_t *data;
    uint64_t size;
} spa_int_array;

/* What phase 1 hands to phase 2: the validated arguments and the plan.
 * Caller-owned, any storage duration; opaque. Native executors may be run any
 * number of times. The tensors and arrays it refers to must stay alive (and
 * valid: phase 2 checks them again) until the last run. */
#define SPA_EXECUTOR_BYTES 3072
typedef struct spa_executor {
    union {
        unsigned char bytes[SPA_EXECUTOR_BYTES];
        uint64_t align_u64;
        double align_f64;
        void *align_ptr;
    } u;
} spa_executor;

/* The parallel-for of phase 2: run() must call task(arg, i) once for every
 * i in [0, n), in any order and on any threads, and return when all calls have
 * returned. Results do not depend on how the tasks are scheduled. A NULL runner
 * (or a NULL run) runs the tasks in order on the calling thread. */
typedef void (*spa_task_fn)(void *arg, uint32_t i);
typedef struct spa_runner {
    void (*run)(void *ctx, spa_task_fn task, void *arg, uint32_t n);
    void *ctx;
} spa_runner;

/* Helpers to fill a descriptor: contiguous row-major strides. */
void spa_tensor_init(spa_tensor *t, spa_dtype dtype, int32_t rank, const int64_t *dims, void *data);

#ifdef __cplusplus
}
#endif
#endif
