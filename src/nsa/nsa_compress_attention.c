/* NsaCompressAttention: phase 1 (validate, plan, size) and phase 2 (run
 * the blocks). Phase 2 runs the kv heads one after the other: the head's
 * compressed key and value rows are made f32 (as selected attention's,
 * nsa_select_pack.h), then its query tokens run in contiguous blocks; each
 * (kv head, token) writes only its own output rows and top-K slots, so any
 * split is deterministic. float64 reads key and value in place. */
#include <string.h>

#include "attn_plan.h"
#include "f64.h"
#include "nsa_cattn_plan.h"
#include "spa_kernels.h"
#include "nsa_cattn_acl.h"
#include "spattn/nsa_compress_attention.h"

/* Blocks per call at most (each owns a scratch in the workspace); a target
 * with little memory lowers it with -DSPA_CATTN_BLOCKS_MAX. */
#ifndef SPA_CATTN_BLOCKS_MAX
#define SPA_CATTN_BLOCKS_MAX 64
#endif

typedef struct nsca_plan {
    spa_nsca_shape sh;
    int64_t per_block; /* query tokens per block */
    uint32_t blocks;   /* blocks per kv head */
    uint64_t scratch_floats;
    uint64_t kpack_floats, vpack_floats;
} nsca_plan;

/* The call's arguments, as phase 1 took them: all phase 2 reads of it. */
typedef struct nsca_exec {
    spa_exec_head head;
    spa_tensor q, k, v, mask, tmask, mx, sm, o, topk;
    spa_int_array sq, scmp, ssel;
    double scale;
    int64_t head_num, sparse_mode, l, st, ls, kc;
    int32_t has_mask, has_tmask, has_sel;
    int32_t stats_batch_major; /* the aclnn entry: CANN's physical order (docs 6, erratum 4) */
} nsca_exec;
_Static_assert(sizeof(nsca_exec) <= SPA_EXECUTOR_BYTES - SPA_REFUSAL_BYTES, "executor too small");

static spa_nsca_fwd_kernel *kernel_for(int32_t dtype)
{
    switch (dtype) {
    case SPA_FLOAT16:
        return SPA_K_NSA_COMPRESS_ATTENTION_F16;
    case SPA_BFLOAT16:
        return SPA_K_NSA_COMPRESS_ATTENTION_BF16;
#if SPA_HAVE_F64
    case SPA_FLOAT64:
        return SPA_K_NSA_COMPRESS_ATTENTION_F64;
#endif
    default:
        return SPA_K_NSA_COMPRESS_ATTENTION_F32;
    }
}

/* The rules that read no array contents; *empty: T1 == 0, nothing to do. */
static spa_status check_args(const nsca_exec *e, const char *layout, spa_nsca_shape *sh,
                             bool *empty)
{
    SPA_TRY(spa_nsca_check_shapes(&e->q, &e->k, &e->v, e->has_mask ? &e->mask : NULL, &e->sq,
                                  &e->scmp, e->head_num, layout, e->sparse_mode, e->l, e->st,
                                  e->ls, e->kc, sh));
    SPA_REQUIRE(e->ls >= e->st);
    SPA_REQUIRE(e->ls % e->st == 0);
    SPA_REQUIRE(e->kc >= 1);
    SPA_TRY(spa_tensor_check_output(&e->mx, 3));
    SPA_TRY(spa_tensor_check_output(&e->sm, 3));
    SPA_TRY(spa_tensor_check_output(&e->o, 3));
    SPA_TRY(spa_tensor_check_output(&e->topk, 3));
    SPA_REQUIRE(e->mx.dtype == spa_nsas_stat_dtype(e->q.dtype));
    SPA_REQUIRE(e->sm.dtype == spa_nsas_stat_dtype(e->q.dtype));
    SPA_REQUIRE(e->o.dtype == e->q.dtype);
    SPA_REQUIRE(e->topk.dtype == SPA_INT32);
    const int64_t stat_dims[3] = {sh->t1, sh->n1, 8}, o_dims[3] = {sh->t1, sh->n1, sh->dv},
                  topk_dims[3] = {sh->t1, sh->n2, sh->kc};
    SPA_REQUIRE(spa_tensor_dims_are(&e->mx, 3, stat_dims));
    SPA_REQUIRE(spa_tensor_dims_are(&e->sm, 3, stat_dims));
    SPA_REQUIRE(spa_tensor_dims_are(&e->o, 3, o_dims));
    SPA_REQUIRE(spa_tensor_dims_are(&e->topk, 3, topk_dims));
    if (e->stats_batch_major) { /* written as one dense buffer */
        SPA_REQUIRE(e->mx.strides[0] == 8 * sh->n1 && e->mx.strides[1] == 8 && e->mx.strides[2] == 1);
        SPA_REQUIRE(e->sm.strides[0] == 8 * sh->n1 && e->sm.strides[1] == 8 && e->sm.strides[2] == 1);
    }
    if (e->has_tmask) {
        SPA_TRY(spa_tensor_check(&e->tmask, 2));
        SPA_REQUIRE(e->tmask.dtype == SPA_BOOL || e->tmask.dtype == SPA_UINT8);
    }
    if (e->has_sel) {
        SPA_TRY(spa_seq_check_size(&e->ssel));
        SPA_REQUIRE(e->ssel.size == e->sq.size);
    }
    sh->has_tmask = e->has_tmask;
    *empty = sh->t1 == 0;
    return SPA_OK;
}

/* The rules on array contents (copies when given, phase 2). */
static spa_status check_arrays(const nsca_exec *e, spa_nsca_shape *sh)
{
    SPA_TRY(spa_nsca_check_seq(e->has_mask ? &e->mask : NULL, &e->sq, &e->scmp, NULL, NULL, sh));
    if (e->has_tmask) {
        SPA_REQUIRE(e->tmask.dims[0] >= sh->max_sq);
        SPA_REQUIRE(e->tmask.dims[1] >= sh->max_sel);
    }
    if (e->has_sel) { /* checked, otherwise unused (docs 6, erratum 5) */
        int64_t total;
        SPA_TRY(spa_seq_check(&e->ssel, 0, &total));
    }
    return SPA_OK;
}

static void make_plan(const nsca_exec *e, const spa_nsca_shape *shape, nsca_plan *p)
{
    const spa_nsca_shape *sh = &p->sh;
    if (shape != sh) /* phase 2 plans in place */
        p->sh = *shape;
    p->per_block = 0, p->blocks = 0, p->scratch_floats = 0, p->kpack_floats = p->vpack_floats = 0;
    const int64_t max = spa_exec_blocks_max(&e->head, SPA_CATTN_BLOCKS_MAX); /* or the runner's */
    const int64_t per_head = max / sh->n2 > 1 ? max / sh->n2 : 1;
    p->per_block = (sh->t1 + per_head - 1) / per_head;
    if (p->per_block < 1)
        p->per_block = 1;
    p->blocks = (uint32_t)((sh->t1 + p->per_block - 1) / p->per_block);
    const uint64_t rmax = (uint64_t)spa_nsca_rows16(sh->max_cmp), gp = (uint64_t)sh->gp;
    /* qt [dp][gp], st [rmax][gp], ot [dvp][gp], max, sum, 1/sum [gp],
     * selector [32][tqp] and colsum [rmax][tqp] (tqp: tq rounded up to 16 or 32), importance [max_sel] and top-K values [K] in
     * doubles, top-K blocks [K] int32 */
    p->scratch_floats = (uint64_t)sh->dp * gp + rmax * gp + (uint64_t)sh->dvp * gp + 3 * gp +
                        (sh->tq <= 16 ? 16u : 32u) * (rmax + 32) + 2 * (uint64_t)sh->max_sel +
                        3 * (uint64_t)sh->kc + 2;
    p->kpack_floats = spa_nsca_pack_floats(&e->k, sh);
    p->vpack_floats = spa_nsca_pack_floats(&e->v, sh);
    if (e->q.dtype == SPA_FLOAT64) { /* in place; scores, colsum in doubles (+ the row of O) */
        p->scratch_floats = 2 * (2 * rmax + (uint64_t)sh->max_sel +
                                 2 * (uint64_t)sh->kc + (uint64_t)sh->dv + 1);
        p->kpack_floats = p->vpack_floats = 0;
    }
    /* each block's scratch 64-byte aligned: its doubles and vectors stay aligned */
    p->scratch_floats = (p->scratch_floats + 15) / 16 * 16;
}

static void carve(spa_ws *ws, const nsca_plan *p, spa_attn_slices *s)
{
    spa_attn_carve(ws, p->blocks, p->scratch_floats, p->kpack_floats, p->vpack_floats, s);
}

static uint64_t planned_bytes(const nsca_plan *p)
{
    spa_ws ws;
    spa_nsca_trusted tr;
    spa_attn_slices sl;
    spa_ws_plan(&ws);
    spa_nsca_trusted_take(&ws, &p->sh, &tr);
    carve(&ws, p, &sl);
    return ws.overflow ? 0 : spa_ws_planned_bytes(&ws);
}

static spa_status phase1(const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
                         const spa_tensor *atten_mask, const spa_tensor *topk_mask,
                         const spa_int_array *sq, const spa_int_array *scmp,
                         const spa_int_array *ssel, double scale_value, int64_t head_num,
                         const char *input_layout, int64_t sparse_mode, int64_t l, int64_t st,
                         int64_t ls, int64_t kc, const spa_tensor *mx, const spa_tensor *sm,
                         const spa_tensor *o, const spa_tensor *topk, uint64_t *workspace_size,
                         spa_executor *executor, int32_t stats_batch_major, uint32_t workers)
{
    if (query == NULL || key == NULL || value == NULL || sq == NULL || scmp == NULL ||
        input_layout == NULL || mx == NULL || sm == NULL || o == NULL || topk == NULL ||
        workspace_size == NULL || executor == NULL)
        return SPA_ERR_NULLPTR;
    nsca_exec e;
    memset(&e, 0, sizeof e);
    e.head.max_blocks = spa_exec_blocks_for(workers);
    e.q = *query, e.k = *key, e.v = *value;
    e.mx = *mx, e.sm = *sm, e.o = *o, e.topk = *topk;
    if (atten_mask != NULL)
        e.mask = *atten_mask, e.has_mask = 1;
    if (topk_mask != NULL)
        e.tmask = *topk_mask, e.has_tmask = 1;
    if (ssel != NULL)
        e.ssel = *ssel, e.has_sel = 1;
    e.sq = *sq, e.scmp = *scmp;
    e.scale = scale_value, e.head_num = head_num, e.sparse_mode = sparse_mode;
    e.l = l, e.st = st, e.ls = ls, e.kc = kc;
    e.stats_batch_major = stats_batch_major;
    spa_nsca_shape sh;
    bool empty;
    SPA_TRY(check_args(&e, input_layout, &sh, &empty));
    e.head.ws_size = 0;
    if (!empty) {
        nsca_plan p;
        SPA_TRY(check_arrays(&e, &sh));
        make_plan(&e, &sh, &p);
        e.head.ws_size = planned_bytes(&p);
        SPA_REQUIRE(e.head.ws_size > 0);
    }
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_NSA_CATTN);
    return SPA_OK;
}

#if defined(__GNUC__)
#define NSCA_NOINLINE __attribute__((noinline))
#else
#define NSCA_NOINLINE
#endif

/* What the blocks of phase 2 read: derived there from the checked
 * arguments, never from executor bytes. The arguments themselves (the
 * executor's record) stay in prepare()'s frame, which is gone before any
 * kernel runs (the Cortex-M phase-2 stack budget). */
typedef struct nsca_run {
    nsca_plan p;
    spa_nsca_trusted tr;
    spa_attn_slices slices;
    spa_nsca_args args;
    spa_tensor k, v; /* for the packing of each head */
    spa_nsca_fwd_kernel *kernel;
    int64_t h2;
    bool in_place; /* float64: key / value rows of the caller */
    bool dot;      /* bf16 on the layer's bf16 dot product: the rows as pairs */
    bool empty;
} nsca_run;

static void run_block(void *arg, uint32_t blk)
{
    const nsca_run *r = arg;
    const nsca_plan *p = &r->p;
    float *scratch = r->slices.scratch + (uint64_t)blk * p->scratch_floats;
    int64_t t = (int64_t)blk * p->per_block;
    const int64_t end = t + p->per_block < p->sh.t1 ? t + p->per_block : p->sh.t1;
    while (t < end) {
        const int64_t b = spa_nsca_batch_of(&r->tr.sqa, t);
        int64_t qs, qe, cs, ce;
        spa_nsca_batch(&r->tr.sqa, b, &qs, &qe);
        spa_nsca_batch(&r->tr.scmpa, b, &cs, &ce);
        const int64_t kstart = r->in_place ? cs : b == 0 ? 0 : r->tr.kend[b - 1];
        const int64_t stop = qe < end ? qe : end;
        r->kernel(&r->args, r->h2, t, stop, qs, qe, kstart, ce - cs, scratch);
        t = stop;
    }
}

/* Phase 2 up to the kernels: the executor opened, every argument checked
 * again, the workspace checked, the trusted copies made, the plan derived
 * again and the kernel arguments filled in r. */
static NSCA_NOINLINE spa_status prepare(void *workspace, uint64_t workspace_size,
                                        const spa_executor *executor, nsca_run *r)
{
    nsca_exec e;
    SPA_TRY(spa_exec_open(executor, &e, sizeof e, SPA_OP_NSA_CATTN));
    spa_nsca_shape *const sh = &r->p.sh;
    bool empty;
    SPA_TRY(check_args(&e, "TND", sh, &empty));
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, e.head.ws_size));
    r->empty = empty;
    if (empty)
        return SPA_OK;
    SPA_TRY(check_arrays(&e, sh));
    const spa_tensor *tensors[] = {&e.q, &e.k, &e.v, &e.mx, &e.sm, &e.o, &e.topk,
                                   e.has_mask ? &e.mask : NULL, e.has_tmask ? &e.tmask : NULL};
    const spa_int_array *arrays[] = {&e.sq, &e.scmp, e.has_sel ? &e.ssel : NULL};
    SPA_TRY(spa_ws_check_disjoint(workspace, e.head.ws_size, tensors, 9, arrays, 3));
    spa_ws ws;
    spa_ws_attach(&ws, workspace, e.head.ws_size);
    spa_nsca_trusted_take(&ws, sh, &r->tr);
    SPA_REQUIRE(!ws.overflow);
    SPA_TRY(spa_nsca_trusted_fill(e.has_mask ? &e.mask : NULL, e.has_tmask ? &e.tmask : NULL,
                                  &e.sq, &e.scmp, sh, &r->tr));
    make_plan(&e, sh, &r->p);
    SPA_REQUIRE(planned_bytes(&r->p) == e.head.ws_size);
    carve(&ws, &r->p, &r->slices);
    SPA_REQUIRE(!ws.overflow);
    spa_nsca_args_fill(&r->args, sh, &r->tr, &e.q, &e.k, &e.v, &e.o, &e.mx, &e.sm, &e.topk, NULL,
                       NULL, e.scale);
    r->args.stats_batch_major = e.stats_batch_major;
    r->kernel = kernel_for(e.q.dtype);
    r->in_place = e.q.dtype == SPA_FLOAT64;
    r->dot = SPA_ISA_BF16_DOT && e.q.dtype == SPA_BFLOAT16;
    r->k = e.k, r->v = e.v;
    return SPA_OK;
}

spa_status spa_nsa_cattn_phase2(void *workspace, uint64_t workspace_size,
                                const spa_executor *executor, const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    nsca_run r;
    SPA_TRY(prepare(workspace, workspace_size, executor, &r));
    if (r.empty)
        return SPA_OK;
    for (r.h2 = 0; r.h2 < r.p.sh.n2; r.h2++) {
        if (!r.in_place)
            spa_nsca_attach_head(&r.args, &r.p.sh, &r.tr, &r.k, &r.v, r.slices.kpack,
                                 r.slices.vpack, r.h2, r.dot, &rn);
        spa_run_blocks(&rn, run_block, &r, r.p.blocks);
    }
    return SPA_OK;
}

spa_status spa_nsa_compress_attention_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *atten_mask, const spa_tensor *topk_mask,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_cmp_seq_kv_len,
    const spa_int_array *actual_sel_seq_kv_len, double scale_value, int64_t head_num,
    const char *input_layout, int64_t sparse_mode, int64_t compress_block_size,
    int64_t compress_stride, int64_t select_block_size, int64_t select_block_count,
    const spa_tensor *softmax_max_out, const spa_tensor *softmax_sum_out,
    const spa_tensor *attention_out, const spa_tensor *topk_indices_out,
    uint64_t *workspace_size, spa_executor *executor)
{
    return spa_nsa_compress_attention_get_workspace_size_for(
        query, key, value, atten_mask, topk_mask, actual_seq_q_len, actual_cmp_seq_kv_len, actual_sel_seq_kv_len,
        scale_value, head_num, input_layout, sparse_mode, compress_block_size, compress_stride, select_block_size,
        select_block_count, softmax_max_out, softmax_sum_out, attention_out, topk_indices_out, 0, workspace_size,
        executor);
}

spa_status spa_nsa_compress_attention_get_workspace_size_for(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *atten_mask, const spa_tensor *topk_mask,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_cmp_seq_kv_len,
    const spa_int_array *actual_sel_seq_kv_len, double scale_value, int64_t head_num,
    const char *input_layout, int64_t sparse_mode, int64_t compress_block_size,
    int64_t compress_stride, int64_t select_block_size, int64_t select_block_count,
    const spa_tensor *softmax_max_out, const spa_tensor *softmax_sum_out,
    const spa_tensor *attention_out, const spa_tensor *topk_indices_out, uint32_t workers,
    uint64_t *workspace_size, spa_executor *executor)
{
    return spa_refusal_record(
        phase1(query, key, value, atten_mask, topk_mask, actual_seq_q_len, actual_cmp_seq_kv_len,
               actual_sel_seq_kv_len, scale_value, head_num, input_layout, sparse_mode,
               compress_block_size, compress_stride, select_block_size, select_block_count,
               softmax_max_out, softmax_sum_out, attention_out, topk_indices_out, workspace_size,
               executor, 0, workers),
        executor, SPA_OP_NSA_CATTN, 1);
}

spa_status spa_nsa_cattn_acl_phase1(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *atten_mask, const spa_tensor *topk_mask, const spa_int_array *sq,
    const spa_int_array *scmp, const spa_int_array *ssel, double scale_value, int64_t head_num,
    const char *input_layout, int64_t sparse_mode, int64_t l, int64_t st, int64_t ls, int64_t kc,
    const spa_tensor *mx, const spa_tensor *sm, const spa_tensor *o, const spa_tensor *topk,
    uint64_t *workspace_size, spa_executor *executor)
{
    return spa_refusal_record(phase1(query, key, value, atten_mask, topk_mask, sq, scmp, ssel,
                                     scale_value, head_num, input_layout, sparse_mode, l, st, ls,
                                     kc, mx, sm, o, topk, workspace_size, executor, 1, 0),
                              executor, SPA_OP_NSA_CATTN, 1);
}

spa_status spa_nsa_compress_attention(void *workspace, uint64_t workspace_size,
                                      const spa_executor *executor, const spa_runner *runner)
{
    return spa_public_status(spa_nsa_cattn_phase2(workspace, workspace_size, executor, runner));
}
