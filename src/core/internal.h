/* Internal helpers shared by the operators: checked 64-bit arithmetic, tensor
 * checks, executor sealing, workspace carving and the block runner. */
#ifndef SPA_INTERNAL_H
#define SPA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spattn/executor.h"
#include "spattn/types.h"

/* ---- refusals (refusal.c) ----
 * Inside the library a refusal carries where it happened, as a negative
 * status, until the public entry point turns it into the code the caller
 * sees (spa_public_status) and, in phase 1, records it in the executor
 * (spa_refusal_record). A site is this file's number (SPA_SRC_ID, given by
 * the Makefile) and the line; the table tools/reasons.awk generates maps it
 * back to the text of the SPA_REQUIRE condition or SPA_TRY call there
 * (spa_executor_reason). Two sites travel: the rule (the innermost one) and
 * its context (the first call to it from another file, which names the
 * argument a shared check was given). So no rule needs a message of its
 * own, and the core keeps no state. */
#ifndef SPA_SRC_ID
#define SPA_SRC_ID 0 /* built outside the Makefile: the reason names no rule */
#endif
#define SPA_SITE_LINE_BITS 10
#define SPA_SITE (((uint32_t)SPA_SRC_ID << SPA_SITE_LINE_BITS) | (uint32_t)__LINE__)
#define SPA_SITE_CHECK_                                                                      \
    _Static_assert(SPA_SRC_ID < 32 && __LINE__ < (1 << SPA_SITE_LINE_BITS),                 \
                   "refusal sites: 31 files of 1023 lines at most (see SPA_SITE_LINE_BITS)")
/* A failing status st seen at site (0: none): a plain 161001 or 161002 gets
 * the site as its rule; one that has a rule gets the site as its context if
 * it has none and the rule lies in another file. 161003 stays plain. */
spa_status spa_refuse(spa_status st, uint32_t site);
/* The public status of an internal one (161001, 161002, 161003 or 0). */
spa_status spa_public_status(spa_status st);
/* Phase 1's exit: the public status of st; on a refusal, the sites are
 * recorded in the executor's last SPA_REFUSAL_BYTES (never part of a plan,
 * so an executor planned before stays runnable). */
spa_status spa_refusal_record(spa_status st, spa_executor *ex, uint32_t op, uint32_t phase);

/* Return on the first failing status. */
#define SPA_TRY(expr)                                   \
    do {                                                \
        SPA_SITE_CHECK_;                                \
        spa_status spa_try_st_ = (expr);                \
        if (spa_try_st_ != SPA_OK)                      \
            return spa_refuse(spa_try_st_, SPA_SITE);   \
    } while (0)

/* Refuse with 161002 unless cond holds; the reason is cond's text. */
#define SPA_REQUIRE(cond)                                   \
    do {                                                    \
        SPA_SITE_CHECK_;                                    \
        if (!(cond))                                        \
            return spa_refuse(SPA_ERR_INVALID, SPA_SITE);   \
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
    /* The parallel blocks phase 1 planned at most (0: the build's limit),
     * from the workers a *_get_workspace_size_for call named; phase 2 plans
     * with it again (spa_exec_blocks_max: any value gives a valid plan, and
     * one that differs from phase 1's no longer matches ws_size). */
    uint32_t max_blocks;
    uint32_t reserved;
} spa_exec_head;

/* The block limit of a plan for a runner of `workers` threads: four blocks
 * each (blocks of unequal cost still keep every thread busy); 0: none. */
static inline uint32_t spa_exec_blocks_for(uint32_t workers)
{
    return workers > UINT32_MAX / 4 ? UINT32_MAX : 4u * workers;
}

/* The blocks a plan of head may use at most: the build's limit, or the
 * smaller one phase 1 was asked for (at least 1). */
static inline int64_t spa_exec_blocks_max(const spa_exec_head *head, int64_t build_max)
{
    return head->max_blocks == 0 || (int64_t)head->max_blocks > build_max ? build_max : (int64_t)head->max_blocks;
}

enum spa_op_id {
    SPA_OP_NSA_COMPRESS = 1,
    SPA_OP_NSA_COMPRESS_GRAD = 2,
    SPA_OP_NSA_SELECT = 3,
    SPA_OP_NSA_SELECT_GRAD = 4,
    SPA_OP_MSDA = 5,
    SPA_OP_MSDA_GRAD = 6,
    SPA_OP_NSA_CATTN = 7,
    SPA_OP_NSA_CATTN_GRAD = 8,
    SPA_OP_SWA = 9, /* sliding-window attention (spattn/swa.h) */
    SPA_OP_SWA_GRAD = 10,
    SPA_OP_NSA_SELECT_INFER = 11, /* spattn/nsa_infer.h */
    SPA_OP_NSA_COMPRESS_CACHE = 12,
    SPA_OP_NSA_CATTN_INFER = 13,
    SPA_OP_DSA_LIGHTNING_INDEXER = 14, /* spattn/dsa.h */
    SPA_OP_DSA_SPARSE_ATTENTION = 15,
    SPA_OP_DSA_SPARSE_ATTENTION_GRAD = 16,
    SPA_OP_DSA_LIGHTNING_INDEXER_GRAD = 17
};

/* Phase 2 of each op with the internal status (its public entry point is
 * spa_public_status of it); spa_executor_run dispatches to them. */
typedef spa_status spa_phase2_fn(void *workspace, uint64_t workspace_size,
                                 const spa_executor *executor, const spa_runner *runner);
spa_phase2_fn spa_nsa_compress_phase2, spa_nsa_compress_grad_phase2, spa_nsa_select_phase2,
    spa_nsa_select_grad_phase2, spa_msda_phase2, spa_msda_grad_phase2;
spa_phase2_fn spa_nsa_cattn_phase2, spa_nsa_cattn_grad_phase2;
spa_phase2_fn spa_swa_phase2, spa_swa_grad_phase2;
spa_phase2_fn spa_nsa_select_infer_phase2, spa_nsa_compress_cache_phase2, spa_nsa_cattn_infer_phase2;
spa_phase2_fn spa_dsa_lightning_indexer_phase2, spa_dsa_sparse_attention_phase2,
    spa_dsa_sparse_attention_grad_phase2, spa_dsa_lightning_indexer_grad_phase2;

void spa_exec_seal(spa_executor *ex, void *internal, uint32_t bytes, uint32_t op);
/* Copies the internal struct out of ex after checking magic, op, size and checksum. */
spa_status spa_exec_open(const spa_executor *ex, void *internal, uint32_t bytes, uint32_t op);
/* A refused phase 1 of op: whatever plan ex held can no longer run (phase 2
 * refuses it, naming why, until a phase 1 succeeds into it again). */
void spa_exec_disarm(spa_executor *ex, uint32_t op);

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
