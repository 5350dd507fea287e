/* Sliding-window attention: phase 1 (validate, plan, size) and phase 2 (run
 * the blocks). Phase 2 runs the kv heads one after the other: the head's key
 * and value rows are made f32 (swa_plan.h; float64 reads them in place),
 * then its query tokens run in contiguous blocks; each (kv head, token)
 * writes only its own output rows, so any split is deterministic. */
#include <string.h>

#include "swa_plan.h"
#include "spa_kernels.h"
#include "spattn/swa.h"

/* Blocks per call at most: the parallel grain (each block owns a scratch). */
#ifndef SPA_SWA_BLOCKS_MAX
#define SPA_SWA_BLOCKS_MAX 64
#endif

typedef struct swa_plan {
    spa_swa_shape sh;
    int64_t per_block; /* query tokens per block */
    uint32_t blocks;   /* blocks per kv head */
    uint64_t scratch_bytes; /* per block */
    uint64_t kpack_floats, vpack_floats;
} swa_plan;

/* The call's arguments, as phase 1 took them: all phase 2 reads of it. */
typedef struct swa_exec {
    spa_exec_head head;
    spa_tensor q, k, v, mx, sm, o;
    spa_int_array seq;
    double scale;
    int64_t seq_type, head_num, window, window_type;
} swa_exec;
_Static_assert(sizeof(swa_exec) <= SPA_EXECUTOR_BYTES, "executor too small");

typedef struct swa_kernel {
    spa_swa_fwd_kernel *fn;
    int64_t kt;
} swa_kernel;

static swa_kernel kernel_for(int32_t dtype)
{
    switch (dtype) {
    case SPA_FLOAT16:
        return (swa_kernel){SPA_K_SWA_F16, SPA_SWA_KT_F16};
    case SPA_BFLOAT16:
        return (swa_kernel){SPA_K_SWA_BF16, SPA_SWA_KT_BF16};
#if SPA_FLOAT64_SWA
    case SPA_FLOAT64:
        return (swa_kernel){SPA_K_SWA_F64, 0};
#endif
    default:
        return (swa_kernel){SPA_K_SWA_F32, SPA_SWA_KT_F32};
    }
}

static spa_status check_args(const swa_exec *e, const char *layout, spa_swa_shape *sh)
{
    SPA_TRY(spa_swa_check_shapes(&e->q, &e->k, &e->v, &e->mx, &e->sm, true, &e->seq, e->seq_type,
                                 e->scale, e->head_num, layout, e->window, e->window_type, sh));
    SPA_TRY(spa_tensor_check_output(&e->o, 3));
    SPA_REQUIRE(e->o.dtype == e->q.dtype);
    const int64_t o_dims[3] = {sh->t, sh->n1, sh->dv};
    SPA_REQUIRE(spa_tensor_dims_are(&e->o, 3, o_dims));
    return SPA_OK;
}

static void make_plan(const swa_exec *e, const spa_swa_shape *shape, swa_plan *p)
{
    const spa_swa_shape copy = *shape; /* shape may be &p->sh */
    memset(p, 0, sizeof *p);
    p->sh = copy;
    const spa_swa_shape *sh = &p->sh;
    const int64_t max = spa_exec_blocks_max(&e->head, SPA_SWA_BLOCKS_MAX); /* or the runner's */
    const int64_t per_head = max / sh->n2 > 1 ? max / sh->n2 : 1;
    p->per_block = (sh->t + per_head - 1) / per_head;
    if (p->per_block < 1)
        p->per_block = 1;
    p->blocks = (uint32_t)((sh->t + p->per_block - 1) / p->per_block);
    const int64_t gp = sh->gp, kt = kernel_for(e->q.dtype).kt;
    const int64_t dm = sh->dp > sh->dvp ? sh->dp : sh->dvp;
    /* qt [dp][gp], scores [kt][gp], out [dvp][gp], 4 rows of gp, a 16-row stage;
     * the head dims are element counts of tensors whose spans fit in int64 */
    p->scratch_bytes = 4 * ((uint64_t)sh->dp * (uint64_t)gp + (uint64_t)(kt * gp) +
                            (uint64_t)sh->dvp * (uint64_t)gp + (uint64_t)(4 * gp) + 16 * (uint64_t)dm);
    if (e->q.dtype == SPA_FLOAT64)
        p->scratch_bytes = 8 * (uint64_t)sh->dv; /* one output row */
    p->kpack_floats = spa_swa_pack_floats(&e->k, sh);
    p->vpack_floats = spa_swa_pack_floats(&e->v, sh);
}

typedef struct swa_slices {
    int64_t *seq; /* [batches] trusted cumulative ends */
    unsigned char *scratch; /* [blocks][scratch_bytes] */
    float *kpack, *vpack;
} swa_slices;

static void carve(spa_ws *ws, const swa_plan *p, swa_slices *s)
{
    s->seq = spa_ws_take(ws, (uint64_t)p->sh.batches, sizeof(int64_t));
    s->scratch = spa_ws_take(ws, p->blocks, p->scratch_bytes);
    s->kpack = spa_ws_take(ws, p->kpack_floats, sizeof(float));
    s->vpack = spa_ws_take(ws, p->vpack_floats, sizeof(float));
}

static uint64_t planned_bytes(const swa_plan *p)
{
    spa_ws ws;
    swa_slices sl;
    spa_ws_plan(&ws);
    carve(&ws, p, &sl);
    return ws.overflow ? 0 : spa_ws_planned_bytes(&ws);
}

static spa_status phase1(const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
                         const spa_int_array *seq_len, int64_t seq_len_type, double scale_value,
                         int64_t head_num, const char *input_layout, int64_t window,
                         int64_t window_type, const spa_tensor *softmax_max_out,
                         const spa_tensor *softmax_sum_out, const spa_tensor *attention_out,
                         uint32_t workers, uint64_t *workspace_size, spa_executor *executor)
{
    if (query == NULL || key == NULL || value == NULL || seq_len == NULL ||
        softmax_max_out == NULL || softmax_sum_out == NULL || attention_out == NULL ||
        workspace_size == NULL || executor == NULL)
        return SPA_ERR_NULLPTR;
    swa_exec e;
    memset(&e, 0, sizeof e);
    e.head.max_blocks = spa_exec_blocks_for(workers);
    e.q = *query, e.k = *key, e.v = *value;
    e.mx = *softmax_max_out, e.sm = *softmax_sum_out, e.o = *attention_out;
    e.seq = *seq_len;
    e.scale = scale_value, e.seq_type = seq_len_type, e.head_num = head_num;
    e.window = window, e.window_type = window_type;
    spa_swa_shape sh;
    SPA_TRY(check_args(&e, input_layout, &sh));
    SPA_TRY(spa_swa_check_seq(&e.seq, &sh, NULL));
    e.head.ws_size = 0;
    if (sh.t > 0) {
        swa_plan p;
        make_plan(&e, &sh, &p);
        e.head.ws_size = planned_bytes(&p);
        SPA_REQUIRE(e.head.ws_size > 0);
    }
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_SWA);
    return SPA_OK;
}

typedef struct swa_run {
    const swa_plan *p;
    const int64_t *seq; /* trusted cumulative ends */
    spa_swa_args args;
    unsigned char *scratch;
    spa_swa_fwd_kernel *kernel;
    int64_t h2;
} swa_run;

/* One block of query tokens of kv head r->h2, split where it crosses a batch. */
static void run_block(void *arg, uint32_t blk)
{
    const swa_run *r = arg;
    const swa_plan *p = r->p;
    void *scratch = r->scratch + (uint64_t)blk * p->scratch_bytes;
    int64_t t = (int64_t)blk * p->per_block;
    const int64_t end = t + p->per_block < p->sh.t ? t + p->per_block : p->sh.t;
    while (t < end) {
        const int64_t b = spa_swa_batch_of(r->seq, p->sh.batches, t);
        const int64_t stop = r->seq[b] < end ? r->seq[b] : end;
        r->kernel(&r->args, r->h2, t, stop, spa_swa_batch_start(r->seq, b), scratch);
        t = stop;
    }
}

spa_status spa_swa_phase2(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                          const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    swa_exec e;
    SPA_TRY(spa_exec_open(executor, &e, sizeof e, SPA_OP_SWA));
    /* every argument again, and the plan derived again */
    swa_plan p;
    SPA_TRY(check_args(&e, "TND", &p.sh));
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, e.head.ws_size));
    if (e.head.ws_size == 0) { /* T == 0 in phase 1: still, if the total is 0 */
        SPA_TRY(spa_swa_check_seq(&e.seq, &p.sh, NULL));
        SPA_REQUIRE(p.sh.t == 0);
        return SPA_OK;
    }
    const spa_tensor *tensors[] = {&e.q, &e.k, &e.v, &e.mx, &e.sm, &e.o};
    const spa_int_array *arrays[] = {&e.seq};
    SPA_TRY(spa_ws_check_disjoint(workspace, e.head.ws_size, tensors, 6, arrays, 1));
    make_plan(&e, &p.sh, &p); /* the shape lives in the plan only: less stack under the kernels */
    SPA_REQUIRE(planned_bytes(&p) == e.head.ws_size);
    spa_ws ws;
    swa_slices s;
    spa_ws_attach(&ws, workspace, e.head.ws_size);
    carve(&ws, &p, &s);
    SPA_REQUIRE(!ws.overflow);
    SPA_TRY(spa_swa_check_seq(&e.seq, &p.sh, s.seq));
    swa_run r;
    r.p = &p;
    r.seq = s.seq;
    r.scratch = s.scratch;
    r.args = spa_swa_args_of(&p.sh, &e.q, &e.k, &e.v, &e.o, &e.mx, &e.sm, NULL, NULL);
    r.kernel = kernel_for(e.q.dtype).fn;
    for (r.h2 = 0; r.h2 < p.sh.n2; r.h2++) {
        if (e.q.dtype != SPA_FLOAT64)
            spa_swa_attach_head(&r.args, &p.sh, &e.k, &e.v, s.kpack, s.vpack, r.h2, &rn);
        spa_run_blocks(&rn, run_block, &r, p.blocks);
    }
    return SPA_OK;
}

spa_status spa_swa_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_int_array *seq_len, int64_t seq_len_type, double scale_value, int64_t head_num,
    const char *input_layout, int64_t window, int64_t window_type,
    const spa_tensor *softmax_max_out, const spa_tensor *softmax_sum_out,
    const spa_tensor *attention_out, uint64_t *workspace_size, spa_executor *executor)
{
    return spa_swa_get_workspace_size_for(query, key, value, seq_len, seq_len_type, scale_value, head_num,
                                          input_layout, window, window_type, softmax_max_out, softmax_sum_out,
                                          attention_out, 0, workspace_size, executor);
}

spa_status spa_swa_get_workspace_size_for(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_int_array *seq_len, int64_t seq_len_type, double scale_value, int64_t head_num,
    const char *input_layout, int64_t window, int64_t window_type,
    const spa_tensor *softmax_max_out, const spa_tensor *softmax_sum_out,
    const spa_tensor *attention_out, uint32_t workers, uint64_t *workspace_size, spa_executor *executor)
{
    return spa_refusal_record(phase1(query, key, value, seq_len, seq_len_type, scale_value,
                                     head_num, input_layout, window, window_type, softmax_max_out,
                                     softmax_sum_out, attention_out, workers, workspace_size, executor),
                              executor, SPA_OP_SWA, 1);
}

spa_status spa_swa(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                   const spa_runner *runner)
{
    return spa_public_status(spa_swa_phase2(workspace, workspace_size, executor, runner));
}
