/* NsaCompressGrad: phase 1 (validate, plan, size) and phase 2 (run).
 * Phase 2 has two parallel steps: token blocks (inputGrad and per-block
 * weightGrad partials), then the weightGrad rows, each summing the partials
 * in block order, so the result does not depend on the runner. */
#include <string.h>

#include "half.h"
#include "nsa_compress_plan.h"
#include "f64.h"
#include "spa_kernels.h"
#include "spattn/nsa.h"

typedef struct nsacg_exec {
    spa_exec_head head;
    spa_tensor output_grad, input, weight, input_grad, weight_grad;
    spa_int_array seq;
    int64_t bs, st, seq_type;
    spa_nsac_shape shape;
    int64_t per_block; /* tokens per block */
    uint32_t blocks;
    uint64_t scratch_floats;
} nsacg_exec;
_Static_assert(sizeof(nsacg_exec) <= SPA_EXECUTOR_BYTES, "executor too small");

typedef struct nsacg_kernel {
    spa_nsac_grad_kernel *fn;
    int64_t tt, tc;
} nsacg_kernel;

static nsacg_kernel kernel_for(int32_t dtype)
{
    switch (dtype) {
    case SPA_FLOAT16:
        return (nsacg_kernel){SPA_K_NSA_COMPRESS_GRAD_F16, SPA_NSACG_TT_F16, SPA_NSACG_TC_F16};
    case SPA_BFLOAT16:
        return (nsacg_kernel){SPA_K_NSA_COMPRESS_GRAD_BF16, SPA_NSACG_TT_BF16, SPA_NSACG_TC_BF16};
#if SPA_FLOAT64_NSA_COMPRESS_GRAD
    case SPA_FLOAT64: /* nsa_compress_f64.c: its own kernel type, no scratch */
        return (nsacg_kernel){NULL, SPA_NSACG_TT_F64, 0};
#endif
    default:
        return (nsacg_kernel){SPA_K_NSA_COMPRESS_GRAD_F32, SPA_NSACG_TT_F32, SPA_NSACG_TC_F32};
    }
}

/* The kernel's tile (spa_nsac_args tt, dy_rows, nw_max), from the shape:
 * TT tokens, fewer where the outputGrad rows touching them would pass the
 * rows the generation-time budget staged (TT / 16 + 8: st 16, bs 128), down
 * to one token, whose rows are its windows. With no window at all nothing
 * is staged (and bs may exceed T). */
static void tile_of(const nsacg_exec *e, int64_t tt_gen, spa_nsac_args *t)
{
    t->tt = tt_gen;
    t->dy_rows = t->nw_max = 0;
    if (e->shape.windows == 0)
        return;
    t->dy_rows = spa_nsacg_rows(t->tt, e->bs, e->st);
    while (t->tt > 1 && t->dy_rows > tt_gen / 16 + 8) {
        t->tt /= 2;
        t->dy_rows = spa_nsacg_rows(t->tt, e->bs, e->st);
    }
    t->nw_max = spa_nsacg_nw_max(e->bs, e->st);
}

static spa_status plan(const spa_tensor *output_grad, const spa_tensor *input,
                       const spa_tensor *weight, const spa_int_array *seq, int64_t bs, int64_t st,
                       int64_t seq_type, const char *layout, const spa_tensor *input_grad,
                       const spa_tensor *weight_grad, nsacg_exec *e)
{
    memset(e, 0, sizeof *e);
    SPA_TRY(spa_nsac_check_common(input, weight, seq, layout, bs, st, seq_type, &e->shape));
    SPA_TRY(spa_tensor_check(output_grad, 3));
    SPA_TRY(spa_tensor_check_output(input_grad, 3));
    SPA_TRY(spa_tensor_check_output(weight_grad, 2));
    const int32_t dt = input->dtype;
    SPA_REQUIRE(output_grad->dtype == dt);
    SPA_REQUIRE(input_grad->dtype == dt);
    SPA_REQUIRE(weight_grad->dtype == dt);
    SPA_REQUIRE(dt != SPA_FLOAT64 || SPA_FLOAT64_NSA_COMPRESS_GRAD);
    const int64_t dy_dims[3] = {e->shape.windows, e->shape.heads, e->shape.dim};
    SPA_REQUIRE(spa_tensor_dims_are(output_grad, 3, dy_dims));
    SPA_REQUIRE(spa_tensor_dims_are(input_grad, 3, input->dims));
    SPA_REQUIRE(spa_tensor_dims_are(weight_grad, 2, weight->dims));
    const nsacg_kernel k = kernel_for(dt);
    e->output_grad = *output_grad;
    e->input = *input;
    e->weight = *weight;
    e->input_grad = *input_grad;
    e->weight_grad = *weight_grad;
    e->seq = *seq;
    e->bs = bs;
    e->st = st;
    e->seq_type = seq_type;
    /* heads wider than the tile's channels run as slices of it (the kernel) */
    const int64_t slice = e->shape.dim < k.tc || k.tc == 0 ? e->shape.dim : k.tc; /* tc 0: float64 */
    spa_nsac_args t;
    tile_of(e, k.tt, &t);
    /* The scratch is about 1043 floats a window of a token at most (rows of
     * <= 1024 channels + lanes, weight, pointer): keep its arithmetic and the
     * workspace product (blocks x scratch x 4) within 64 bits. */
    SPA_REQUIRE(t.nw_max <= ((int64_t)1 << 40));
    e->per_block = spa_nsac_split(e->shape.tokens, t.tt, &e->blocks);
    e->scratch_floats = k.tc == 0 ? 0 : (uint64_t)spa_nsac_grad_scratch(e->shape.heads, slice, t.dy_rows, t.nw_max, k.tc);
    return SPA_OK;
}

typedef struct nsacg_slices {
    spa_nsac_table tab;
    float *scratch; /* [blocks][scratch_floats] */
    float *wpart;   /* [blocks][bs * N] */
} nsacg_slices;

static void carve(spa_ws *ws, const nsacg_exec *e, nsacg_slices *s)
{
    spa_nsac_table_take(ws, e->shape.batches, &s->tab);
    s->scratch = spa_ws_take(ws, (uint64_t)e->blocks * e->scratch_floats, sizeof(float));
    s->wpart = spa_ws_take(ws, (uint64_t)e->blocks * (uint64_t)(e->bs * e->shape.heads),
                           e->input.dtype == SPA_FLOAT64 ? sizeof(double) : sizeof(float));
}

static spa_status phase1(
    const spa_tensor *output_grad, const spa_tensor *input, const spa_tensor *weight,
    const spa_int_array *act_seq_len, int64_t compress_block_size, int64_t compress_stride,
    int64_t act_seq_len_type, const char *layout, const spa_tensor *input_grad,
    const spa_tensor *weight_grad, uint64_t *workspace_size, spa_executor *executor)
{
    if (output_grad == NULL || input == NULL || weight == NULL || act_seq_len == NULL ||
        input_grad == NULL || weight_grad == NULL || workspace_size == NULL || executor == NULL)
        return SPA_ERR_NULLPTR;
    nsacg_exec e;
    SPA_TRY(plan(output_grad, input, weight, act_seq_len, compress_block_size, compress_stride,
                 act_seq_len_type, layout, input_grad, weight_grad, &e));
    spa_ws ws;
    nsacg_slices s;
    spa_ws_plan(&ws);
    carve(&ws, &e, &s);
    SPA_REQUIRE(!ws.overflow);
    e.head.ws_size = spa_ws_planned_bytes(&ws);
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_NSA_COMPRESS_GRAD);
    return SPA_OK;
}

typedef struct nsacg_run {
    const nsacg_exec *e;
    spa_nsac_args args;
    nsacg_slices s;
    spa_nsac_grad_kernel *kernel;
} nsacg_run;

/* Step 1, one block of tokens, split where it crosses a batch boundary. */
static void run_token_block(void *arg, uint32_t blk)
{
    const nsacg_run *r = arg;
    const nsacg_exec *e = r->e;
    const int64_t wlen = e->bs * e->shape.heads;
    float *scratch = r->s.scratch + (uint64_t)blk * e->scratch_floats;
    float *wpart = r->s.wpart + (uint64_t)blk * (uint64_t)wlen;
    for (int64_t i = 0; i < wlen; i++)
        wpart[i] = 0.0f;
    int64_t t = (int64_t)blk * e->per_block;
    const int64_t end = t + e->per_block < e->shape.tokens ? t + e->per_block : e->shape.tokens;
    int64_t b = spa_nsac_batch_of(r->s.tab.start + 1, e->shape.batches, t);
    while (t < end) {
        const int64_t batch_end = r->s.tab.start[b + 1] < end ? r->s.tab.start[b + 1] : end;
        if (batch_end > t)
            r->kernel(&r->args, r->s.tab.start[b], r->s.tab.row[b],
                      r->s.tab.row[b + 1] - r->s.tab.row[b], t, batch_end, wpart, scratch);
        t = batch_end;
        b++;
    }
}

/* Step 2, weightGrad row j: partials summed in block order, one rounding. */
static void run_weight_row(void *arg, uint32_t j)
{
    const nsacg_run *r = arg;
    const nsacg_exec *e = r->e;
    const int64_t heads = e->shape.heads, wlen = e->bs * heads;
    const spa_tensor *wg = &e->weight_grad;
    for (int64_t h = 0; h < heads; h++) {
        float sum = 0.0f;
        for (uint32_t blk = 0; blk < e->blocks; blk++)
            sum += r->s.wpart[(uint64_t)blk * (uint64_t)wlen + (uint64_t)j * (uint64_t)heads + (uint64_t)h];
        const int64_t off = (int64_t)j * wg->strides[0] + h * wg->strides[1];
        switch (wg->dtype) {
        case SPA_FLOAT16:
            ((uint16_t *)wg->data)[off] = spa_f32_to_f16(sum);
            break;
        case SPA_BFLOAT16:
            ((uint16_t *)wg->data)[off] = spa_f32_to_bf16(sum);
            break;
        default:
            ((float *)wg->data)[off] = sum;
            break;
        }
    }
}

spa_status spa_nsa_compress_grad_phase2(void *workspace, uint64_t workspace_size,
                                        const spa_executor *executor, const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    nsacg_exec saved, e;
    SPA_TRY(spa_exec_open(executor, &saved, sizeof saved, SPA_OP_NSA_COMPRESS_GRAD));
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, saved.head.ws_size));
    /* The caller's tensors and lengths may have changed since phase 1: check again. */
    SPA_TRY(plan(&saved.output_grad, &saved.input, &saved.weight, &saved.seq, saved.bs, saved.st,
                 saved.seq_type, "TND", &saved.input_grad, &saved.weight_grad, &e));
    SPA_REQUIRE(e.blocks == saved.blocks);
    SPA_REQUIRE(e.per_block == saved.per_block);
    nsacg_run r;
    spa_ws ws;
    const spa_tensor *tensors[] = {&e.output_grad, &e.input, &e.weight, &e.input_grad, &e.weight_grad};
    const spa_int_array *arrays[] = {&e.seq};
    SPA_TRY(spa_ws_check_disjoint(workspace, saved.head.ws_size, tensors, 5, arrays, 1));
    spa_ws_attach(&ws, workspace, saved.head.ws_size);
    carve(&ws, &e, &r.s);
    SPA_REQUIRE(!ws.overflow);
    SPA_TRY(spa_nsac_table_fill(&e.seq, e.seq_type, e.bs, e.st, &e.shape, &r.s.tab));
    r.e = &e;
    r.args = spa_nsac_args_of(&e.input, &e.weight, &e.output_grad, &e.input_grad, e.bs, e.st);
    tile_of(&e, kernel_for(e.input.dtype).tt, &r.args);
    r.kernel = kernel_for(e.input.dtype).fn;
#if SPA_FLOAT64_NSA_COMPRESS_GRAD
    if (e.input.dtype == SPA_FLOAT64) {
        spa_nsac_grad_f64_run(&rn, &r.args, &r.s.tab, &e.shape, e.per_block, e.blocks,
                              (double *)(void *)r.s.wpart, &e.weight_grad);
        return SPA_OK;
    }
#endif
    spa_run_blocks(&rn, run_token_block, &r, e.blocks);
    spa_run_blocks(&rn, run_weight_row, &r, (uint32_t)e.bs);
    return SPA_OK;
}

/* The public entry points: the internal status made public, and phase 1's
 * refusal recorded in the executor (spa_executor_reason). */
spa_status spa_nsa_compress_grad_get_workspace_size(
    const spa_tensor *output_grad, const spa_tensor *input, const spa_tensor *weight,
    const spa_int_array *act_seq_len, int64_t compress_block_size, int64_t compress_stride,
    int64_t act_seq_len_type, const char *layout, const spa_tensor *input_grad,
    const spa_tensor *weight_grad, uint64_t *workspace_size, spa_executor *executor)
{
    return spa_refusal_record(phase1(output_grad, input, weight, act_seq_len, compress_block_size,
                                     compress_stride, act_seq_len_type, layout, input_grad,
                                     weight_grad, workspace_size, executor),
                              executor, SPA_OP_NSA_COMPRESS_GRAD, 1);
}

spa_status spa_nsa_compress_grad(void *workspace, uint64_t workspace_size,
                                 const spa_executor *executor, const spa_runner *runner)
{
    return spa_public_status(
        spa_nsa_compress_grad_phase2(workspace, workspace_size, executor, runner));
}
