/* Internal helpers shared by the operators: checked 64-bit arithmetic, tensor
 * checks, executor sealing, workspace carving and the block runner. */
#ifndef SPA_INTERNAL_H
#define SPA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spattn/types.h"

/* Return on the first failing status. */
#define SPA_TRY(expr)                    \
    do {                                 \
        spa_status spa_try_st_ = (expr); \
        if (spa_try_st_ != SPA_OK)       \
            return spa_try_st_;          \
    } while (0)

#define SPA_REQUIRE(cond)                \
    do {                                 \
        if (!(cond))                     \
            return SPA_ERR_INVALID;      \
    } while (0)

/* ---- checked arithmetic (tensor.c) ---- */
bool spa_mul_ok(int64_t a, int64_t b, int64_t *out); /* a, b >= 0 */
bool spa_add_ok(int64_t a, int64_t b, int64_t *out); /* a, b >= 0 */

/* ---- tensors (tensor.c) ---- */
size_t spa_dtype_size(int32_t dtype); /* 0 for unknown */
bool spa_is_float_dtype(int32_t dtype);
/* Descriptor sanity: known dtype, rank in range, dims and strides >= 0, data
 * non-NULL unless empty, and the addressed byte span fits in int64. */
spa_status spa_tensor_check(const spa_tensor *t, int32_t rank);
/* spa_tensor_check, plus: an output view reaches no element twice (a
 * stride-0 or interleaved output would make results depend on write order). */
spa_status spa_tensor_check_output(const spa_tensor *t, int32_t rank);
/* dims[k] == want[k] for every k < rank. */
bool spa_tensor_dims_are(const spa_tensor *t, int32_t rank, const int64_t *want);
int64_t spa_tensor_numel(const spa_tensor *t); /* after spa_tensor_check */
/* Bytes from data to the end of the last addressed element (0 when empty),
 * after spa_tensor_check. */
uint64_t spa_tensor_span_bytes(const spa_tensor *t);

/* ---- sequence arrays (validate.c) ---- */
/* Checks a sequence-length array (type 0: cumulative ends, type 1: per-batch
 * lengths) and returns the end of the last batch in *total. */
spa_status spa_seq_check(const spa_int_array *a, int64_t type, int64_t *total);
/* spa_seq_check that reads each element of a once and, when copy is not
 * NULL, writes the cumulative end of batch b to copy[b] as it is checked:
 * phase 2 uses the copy, so a caller changing (or an output overwriting) the
 * array cannot make it differ from what was checked. */
spa_status spa_seq_check_copy(const spa_int_array *a, int64_t type, int64_t *total, int64_t *copy);
/* The caller's array limits that need no content read: size in
 * [1, SPA_SEQ_MAX_SIZE] (161002), data non-NULL (161001). */
spa_status spa_seq_check_size(const spa_int_array *a);
#define SPA_SEQ_MAX_SIZE ((uint64_t)(INT64_MAX / (int64_t)sizeof(int64_t)))
/* The layout string is exactly "TND" (layout non-NULL). */
bool spa_layout_is_tnd(const char *layout);

/* ---- executor (executor.c) ---- */
/* Every internal executor starts with this header; the checksum covers the
 * whole internal struct, so phase 2 rejects a corrupted or foreign executor. */
typedef struct spa_exec_head {
    uint32_t magic;
    uint32_t op;
    uint32_t bytes; /* size of the internal struct */
    uint32_t checksum;
    uint64_t ws_size;
} spa_exec_head;

enum spa_op_id {
    SPA_OP_NSA_COMPRESS = 1,
    SPA_OP_NSA_COMPRESS_GRAD = 2,
    SPA_OP_NSA_SELECT = 3,
    SPA_OP_NSA_SELECT_GRAD = 4,
    SPA_OP_MSDA = 5,
    SPA_OP_MSDA_GRAD = 6
};

void spa_exec_seal(spa_executor *ex, void *internal, uint32_t bytes, uint32_t op);
/* Copies the internal struct out of ex after checking magic, op, size and checksum. */
spa_status spa_exec_open(const spa_executor *ex, void *internal, uint32_t bytes, uint32_t op);

/* ---- workspace (workspace.c) ---- */
/* Bump allocator over caller memory. Every slice is 64-byte aligned; phase 1
 * sizes with the same calls on a NULL base (spa_ws_plan), so the two agree. */
typedef struct spa_ws {
    unsigned char *base; /* NULL while planning */
    uint64_t used;
    uint64_t size;
    bool overflow;
} spa_ws;
#define SPA_WS_ALIGN 64u
void spa_ws_plan(spa_ws *ws);
void spa_ws_attach(spa_ws *ws, void *base, uint64_t size);
/* n elements of elem bytes; NULL while planning or on overflow. */
void *spa_ws_take(spa_ws *ws, uint64_t n, uint64_t elem);
/* Bytes phase 1 must ask for after its spa_ws_take calls (0 if none). */
uint64_t spa_ws_planned_bytes(const spa_ws *ws);
/* Phase-2 workspace check shared by every op. */
spa_status spa_ws_check_args(const void *ws, uint64_t ws_size, uint64_t need);

/* Phase 2, before anything is written: the workspace bytes the plan may use,
 * [ws, ws + bytes), overlap none of the call's tensors (NULL entries
 * skipped) and arrays. The workspace holds what the kernels trust (copies of
 * the index and length arrays, tables, kernel arguments): no caller tensor
 * may write it, or change under it. */
spa_status spa_ws_check_disjoint(const void *ws, uint64_t bytes, const spa_tensor *const *tensors,
                                 size_t ntensors, const spa_int_array *const *arrays,
                                 size_t narrays);

/* ---- blocks (runner.c) ---- */
void spa_run_blocks(const spa_runner *r, spa_task_fn task, void *arg, uint32_t n);
/* The caller's runner copied at phase-2 entry (NULL: run inline), so that an
 * output written by the blocks cannot change which runner runs the next step. */
spa_runner spa_runner_copy(const spa_runner *r);

#endif
