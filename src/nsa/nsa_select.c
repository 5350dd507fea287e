/* NsaSelectedAttention: phase 1 (validate, plan, size) and phase 2 (run the
 * blocks). Phase 2 runs the kv heads one after the other: the head's key and
 * value rows are made f32 (nsa_select_pack.h; bf16 pairs for the bf16 dot
 * product, where the layer has it), then its query tokens run in
 * contiguous blocks; each (kv head, token) unit writes only its own output
 * rows, so any split is deterministic. */
#include <string.h>

#include "nsa_select_pack.h"
#include "nsa_select_plan.h"
#include "attn_plan.h"
#include "f64.h"
#include "spa_kernels.h"
#include "spattn/nsa.h"

/* Blocks per call at most: the parallel grain (each block owns a scratch in
 * the workspace). A target with one core and little memory lowers it with
 * -DSPA_SELECT_BLOCKS_MAX in its target.mk. */
#ifndef SPA_SELECT_BLOCKS_MAX
#define SPA_SELECT_BLOCKS_MAX 64
#endif
#define NSAS_MAX_BLOCKS SPA_SELECT_BLOCKS_MAX

/* What the arguments determine. Phase 2 derives it again from the arguments
 * and the trusted copies; it is never read from executor bytes. */
typedef struct nsas_plan {
    spa_nsas_shape sh;
    int64_t per_block; /* query tokens per block */
    uint32_t blocks;   /* blocks per kv head */
    uint64_t scratch_floats;
    uint64_t kpack_floats, vpack_floats; /* widened copies (0: read in place) */
} nsas_plan;

/* The call's arguments, as phase 1 took them: all phase 2 reads of it. */
typedef struct nsas_exec {
    spa_exec_head head;
    spa_tensor q, k, v, topk, mask, mx, sm, o;
    spa_int_array sq, skv;
    double scale;
    int64_t head_num, sparse_mode, bs, kc;
    int32_t has_mask;
} nsas_exec;
_Static_assert(sizeof(nsas_exec) <= SPA_EXECUTOR_BYTES, "executor too small");

static spa_nsas_fwd_kernel *kernel_for(int32_t dtype)
{
    switch (dtype) {
    case SPA_FLOAT16:
        return SPA_K_NSA_SELECT_F16;
    case SPA_BFLOAT16:
        return SPA_K_NSA_SELECT_BF16;
    default:
        return SPA_K_NSA_SELECT_F32;
    }
}

/* spec/nsa.md 3.3 rule 2: all three outputs empty is a legal no-op. */
static spa_status outputs_empty(const spa_tensor *mx, const spa_tensor *sm, const spa_tensor *o,
                                bool *empty)
{
    SPA_TRY(spa_tensor_check(mx, 3));
    SPA_TRY(spa_tensor_check(sm, 3));
    SPA_TRY(spa_tensor_check(o, 3));
    *empty = spa_tensor_numel(mx) == 0 && spa_tensor_numel(sm) == 0 && spa_tensor_numel(o) == 0;
    return SPA_OK;
}

/* The rules of spec/nsa.md 3.3 that read no array contents (cheap, so a call
 * that will be refused is refused at once); *empty: nothing to do. */
static spa_status check_args(const nsas_exec *e, const char *layout, spa_nsas_shape *sh,
                             bool *empty)
{
    SPA_TRY(outputs_empty(&e->mx, &e->sm, &e->o, empty));
    if (*empty)
        return SPA_OK;
    SPA_TRY(spa_nsas_check_shapes(&e->q, &e->k, &e->v, &e->topk, e->has_mask ? &e->mask : NULL,
                                  &e->sq, &e->skv, e->head_num, layout, e->sparse_mode, e->bs,
                                  e->kc, sh));
    SPA_TRY(spa_tensor_check_output(&e->mx, 3));
    SPA_TRY(spa_tensor_check_output(&e->sm, 3));
    SPA_TRY(spa_tensor_check_output(&e->o, 3));
    SPA_REQUIRE(e->mx.dtype == spa_nsas_stat_dtype(e->q.dtype));
    SPA_REQUIRE(e->sm.dtype == spa_nsas_stat_dtype(e->q.dtype));
    SPA_REQUIRE(e->o.dtype == e->q.dtype);
    SPA_REQUIRE(e->q.dtype != SPA_FLOAT64 || SPA_FLOAT64_NSA_SELECT);
    const int64_t stat_dims[3] = {sh->t1, sh->n1, 8}, o_dims[3] = {sh->t1, sh->n1, sh->dv};
    SPA_REQUIRE(spa_tensor_dims_are(&e->mx, 3, stat_dims));
    SPA_REQUIRE(spa_tensor_dims_are(&e->sm, 3, stat_dims));
    SPA_REQUIRE(spa_tensor_dims_are(&e->o, 3, o_dims));
    return SPA_OK;
}

/* The plan of checked arguments whose sequence arrays are checked (sh complete). */
static void make_plan(const nsas_exec *e, const spa_nsas_shape *sh, nsas_plan *p)
{
    memset(p, 0, sizeof *p);
    p->sh = *sh;
    /* NSAS_MAX_BLOCKS blocks (or the runner's, spa_exec_blocks_max) over all
     * kv heads, at least one per head */
    const int64_t max = spa_exec_blocks_max(&e->head, NSAS_MAX_BLOCKS);
    const int64_t per_head = max / sh->n2 > 1 ? max / sh->n2 : 1;
    p->per_block = (sh->t1 + per_head - 1) / per_head;
    if (p->per_block < 1)
        p->per_block = 1;
    p->blocks = (uint32_t)((sh->t1 + p->per_block - 1) / p->per_block);
    /* qt [dp][GP], scores [K*bs][GP], out [dvp][GP], max and sum [GP] */
    const int64_t gp = sh->gp;
    p->scratch_floats = (uint64_t)(sh->dp * gp + sh->kc * sh->bs * gp + sh->dvp * gp + 2 * gp);
    p->kpack_floats = spa_nsas_pack_floats(&e->k, sh);
    p->vpack_floats = spa_nsas_pack_floats(&e->v, sh);
#if SPA_FLOAT64_NSA_SELECT
    if (e->q.dtype == SPA_FLOAT64) { /* nsa_select_f64.c: k and v in place, 8-byte scratch words */
        p->scratch_floats = 2 * (uint64_t)SPA_NSAS_F64_FWD_SCRATCH(sh->g, sh->d, sh->dv, sh->kc, sh->bs);
        p->kpack_floats = p->vpack_floats = 0;
    }
#endif
}

/* After spa_nsas_trusted_take, in both phases. */
static void carve(spa_ws *ws, const nsas_plan *p, spa_attn_slices *s)
{
    spa_attn_carve(ws, p->blocks, p->scratch_floats, p->kpack_floats, p->vpack_floats, s);
}

/* Workspace bytes of a plan (0 on overflow: no plan needs 0). */
static uint64_t planned_bytes(const nsas_plan *p)
{
    spa_ws ws;
    spa_nsas_trusted tr;
    spa_attn_slices sl;
    spa_ws_plan(&ws);
    spa_nsas_trusted_take(&ws, &p->sh, &tr);
    carve(&ws, p, &sl);
    return ws.overflow ? 0 : spa_ws_planned_bytes(&ws);
}

static spa_status phase1(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *topk_indices, const spa_tensor *atten_mask,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
    double scale_value, int64_t head_num, const char *input_layout, int64_t sparse_mode,
    int64_t selected_block_size, int64_t selected_block_count, const spa_tensor *softmax_max_out,
    const spa_tensor *softmax_sum_out, const spa_tensor *attention_out, uint32_t workers,
    uint64_t *workspace_size, spa_executor *executor)
{
    if (query == NULL || key == NULL || value == NULL || topk_indices == NULL ||
        actual_seq_q_len == NULL || actual_seq_kv_len == NULL || input_layout == NULL ||
        softmax_max_out == NULL || softmax_sum_out == NULL || attention_out == NULL ||
        workspace_size == NULL || executor == NULL)
        return SPA_ERR_NULLPTR;
    nsas_exec e;
    memset(&e, 0, sizeof e);
    e.q = *query, e.k = *key, e.v = *value, e.topk = *topk_indices;
    e.mx = *softmax_max_out, e.sm = *softmax_sum_out, e.o = *attention_out;
    if (atten_mask != NULL)
        e.mask = *atten_mask, e.has_mask = 1;
    e.sq = *actual_seq_q_len, e.skv = *actual_seq_kv_len;
    e.scale = scale_value, e.head_num = head_num, e.sparse_mode = sparse_mode;
    e.bs = selected_block_size, e.kc = selected_block_count;
    e.head.max_blocks = spa_exec_blocks_for(workers);
    spa_nsas_shape sh;
    bool empty;
    SPA_TRY(check_args(&e, input_layout, &sh, &empty));
    e.head.ws_size = 0;
    if (!empty) {
        nsas_plan p;
        SPA_TRY(spa_nsas_check_seq(&e.sq, &e.skv, NULL, NULL, &sh));
        make_plan(&e, &sh, &p);
        e.head.ws_size = planned_bytes(&p);
        SPA_REQUIRE(e.head.ws_size > 0);
        /* last: the one rule whose cost grows with T1 */
        SPA_TRY(spa_nsas_check_indices(&e.topk, &e.sq, &e.skv, &sh, NULL));
    }
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_NSA_SELECT);
    return SPA_OK;
}

typedef struct nsas_run {
    const nsas_plan *p;        /* derived in phase 2 */
    const spa_nsas_trusted *tr; /* sequence arrays and indices, checked copies */
    spa_nsas_args args;
    float *scratch;
    spa_nsas_fwd_kernel *kernel;
    int64_t h2; /* the kv head being run */
} nsas_run;

/* One block of query tokens of kv head r->h2, split where it crosses a batch. */
static void run_block(void *arg, uint32_t blk)
{
    const nsas_run *r = arg;
    const nsas_plan *p = r->p;
    float *scratch = r->scratch + (uint64_t)blk * p->scratch_floats;
    int64_t t = (int64_t)blk * p->per_block;
    const int64_t end = t + p->per_block < p->sh.t1 ? t + p->per_block : p->sh.t1;
    while (t < end) {
        const int64_t b = spa_nsas_batch_of(&r->tr->sqa, t);
        int64_t qs, qe, ks, ke;
        spa_nsas_batch(&r->tr->sqa, b, &qs, &qe);
        spa_nsas_batch(&r->tr->skva, b, &ks, &ke);
        const int64_t kernel_start = b == 0 ? 0 : r->tr->kend[b - 1];
        const int64_t stop = qe < end ? qe : end;
        r->kernel(&r->args, r->h2, t, stop, qs, kernel_start, ke - ks, scratch);
        t = stop;
    }
}

spa_status spa_nsa_select_phase2(void *workspace, uint64_t workspace_size,
                                 const spa_executor *executor, const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    nsas_exec e;
    SPA_TRY(spa_exec_open(executor, &e, sizeof e, SPA_OP_NSA_SELECT));
    /* Every argument again (the caller's may have changed since phase 1), and
     * the plan derived again: no executor byte is trusted but the arguments. */
    spa_nsas_shape sh;
    bool empty;
    SPA_TRY(check_args(&e, "TND", &sh, &empty));
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, e.head.ws_size));
    if (empty)
        return SPA_OK;
    const spa_tensor *tensors[] = {&e.q, &e.k, &e.v, &e.topk, &e.mx, &e.sm, &e.o,
                                   e.has_mask ? &e.mask : NULL};
    const spa_int_array *arrays[] = {&e.sq, &e.skv};
    SPA_TRY(spa_ws_check_disjoint(workspace, e.head.ws_size, tensors, 8, arrays, 2));
    spa_ws ws;
    spa_nsas_trusted tr;
    spa_ws_attach(&ws, workspace, e.head.ws_size);
    spa_nsas_trusted_take(&ws, &sh, &tr);
    SPA_REQUIRE(!ws.overflow);
    SPA_TRY(spa_nsas_trusted_fill(&e.topk, &e.sq, &e.skv, &sh, &tr));
    nsas_plan p;
    spa_attn_slices slices;
    make_plan(&e, &sh, &p);
    SPA_REQUIRE(planned_bytes(&p) == e.head.ws_size);
    carve(&ws, &p, &slices);
    SPA_REQUIRE(!ws.overflow);
    nsas_run r;
    r.p = &p;
    r.tr = &tr;
    r.scratch = slices.scratch;
    r.args = spa_nsas_args_of(&p.sh, &e.q, tr.idx, &e.o, &e.mx, &e.sm, NULL, NULL, e.scale);
    r.kernel = kernel_for(e.q.dtype);
#if SPA_FLOAT64_NSA_SELECT
    if (e.q.dtype == SPA_FLOAT64) {
        const spa_nsas_f64_args f = spa_nsas_f64_args_of(&r.args, &e.k, &e.v, e.scale);
        spa_nsas_f64_forward(&rn, &f, &tr, p.sh.t1, p.per_block, p.blocks, (double *)(void *)slices.scratch);
        return SPA_OK;
    }
#endif
    /* bf16 on a layer with the bf16 dot product: the rows as bf16 pairs, which
     * the kernel's dot-product path reads (nsa_select_pack.h) */
    const bool dot = SPA_ISA_BF16_DOT && e.q.dtype == SPA_BFLOAT16;
    for (r.h2 = 0; r.h2 < p.sh.n2 && p.sh.t1 > 0; r.h2++) {
        if (dot)
            spa_nsas_attach_head_bf16(&r.args, &p.sh, &tr, &e.k, &e.v, slices.kpack, slices.vpack,
                                      r.h2, &rn);
        else
            spa_nsas_attach_head(&r.args, &p.sh, &tr, &e.k, &e.v, slices.kpack, slices.vpack,
                                 r.h2, &rn);
        spa_run_blocks(&rn, run_block, &r, p.blocks);
    }
    return SPA_OK;
}

/* The public entry points: the internal status made public, and phase 1's
 * refusal recorded in the executor (spa_executor_reason). */
spa_status spa_nsa_select_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *topk_indices, const spa_tensor *atten_mask,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
    double scale_value, int64_t head_num, const char *input_layout, int64_t sparse_mode,
    int64_t selected_block_size, int64_t selected_block_count, const spa_tensor *softmax_max_out,
    const spa_tensor *softmax_sum_out, const spa_tensor *attention_out, uint64_t *workspace_size,
    spa_executor *executor)
{
    return spa_nsa_select_get_workspace_size_for(query, key, value, topk_indices, atten_mask, actual_seq_q_len,
                                                 actual_seq_kv_len, scale_value, head_num, input_layout,
                                                 sparse_mode, selected_block_size, selected_block_count,
                                                 softmax_max_out, softmax_sum_out, attention_out, 0,
                                                 workspace_size, executor);
}

spa_status spa_nsa_select_get_workspace_size_for(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *topk_indices, const spa_tensor *atten_mask,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
    double scale_value, int64_t head_num, const char *input_layout, int64_t sparse_mode,
    int64_t selected_block_size, int64_t selected_block_count, const spa_tensor *softmax_max_out,
    const spa_tensor *softmax_sum_out, const spa_tensor *attention_out, uint32_t workers,
    uint64_t *workspace_size, spa_executor *executor)
{
    return spa_refusal_record(phase1(query, key, value, topk_indices, atten_mask, actual_seq_q_len,
                                     actual_seq_kv_len, scale_value, head_num, input_layout,
                                     sparse_mode, selected_block_size, selected_block_count,
                                     softmax_max_out, softmax_sum_out, attention_out, workers,
                                     workspace_size, executor),
                              executor, SPA_OP_NSA_SELECT, 1);
}

spa_status spa_nsa_select(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                          const spa_runner *runner)
{
    return spa_public_status(spa_nsa_select_phase2(workspace, workspace_size, executor, runner));
}
